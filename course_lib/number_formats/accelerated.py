"""Number formats, rounding, low-precision sums and quantisation in PyTorch (Chapter 12).

Same names and signatures as :mod:`course_lib.number_formats.reference`. Where the reference
works on bit fields with integer arithmetic, this side uses PyTorch's own dtypes
(``torch.float16``, ``torch.bfloat16``, ``torch.float8_e4m3fn``, ``torch.float8_e5m2``) and
reinterprets their bits with ``Tensor.view``; the test suite checks that the two agree on every
16-bit and 8-bit pattern.

Two places where PyTorch's casts need help to match the rule of the chapter:

* a cast from float64 to a 16- or 8-bit type goes through float32 and can round twice; we round
  to float32 *to odd* first, which makes the second rounding correct (Boldo and Melquiond, 2008);
* PyTorch saturates when it casts to ``float8_e4m3fn`` (even infinity becomes 448); without
  ``saturate=True`` we turn overflow into NaN, as the OCP specification's non-saturating mode
  and ml_dtypes do.

Everything is batched over leading dimensions and runs on any device with these dtypes (CPU and
CUDA; Apple MPS has no float64 or float8). Rounding is not differentiable; the dequantisers are
(with respect to their scales).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from course_lib.checks import as_tensor, check_bool, check_int
from course_lib.number_formats.formats import (
    FloatFormat,
    check_bit_patterns,
    get_format,
)
from course_lib.number_formats.reference import NF4_OFFSET

__all__ = [
    "absmax_dequantize",
    "absmax_quantize",
    "decode",
    "encode",
    "kahan_sum",
    "naive_sum",
    "nf4_codebook",
    "nf4_dequantize",
    "nf4_quantize",
    "pack_4bit",
    "pairwise_sum",
    "round_to_format",
    "stochastic_round",
    "unpack_4bit",
]

#: The PyTorch dtype of each format and the integer dtype of the same width (for ``view``).
TORCH_FORMATS: dict[str, tuple[torch.dtype, torch.dtype]] = {
    "float32": (torch.float32, torch.int32),
    "float16": (torch.float16, torch.int16),
    "bfloat16": (torch.bfloat16, torch.int16),
    "float8_e4m3fn": (torch.float8_e4m3fn, torch.uint8),
    "float8_e5m2": (torch.float8_e5m2, torch.uint8),
}


# ---------------------------------------------------------------------------- helpers
def _int_tensor(x: Any, name: str, low: int, high: int) -> torch.Tensor:
    """An integer tensor with values in [low, high] (floats are refused)."""
    if isinstance(x, torch.Tensor):
        if x.is_floating_point() or x.is_complex() or x.dtype == torch.bool:
            raise TypeError(f"{name} must hold integers, got a tensor of dtype {x.dtype}")
        t = x
    else:
        arr = np.asarray(x)
        if arr.dtype == bool or arr.dtype.kind not in "iu":
            raise TypeError(f"{name} must hold integers, got an array of dtype {arr.dtype}")
        t = torch.from_numpy(arr.astype(np.int64))
    if t.numel() == 0:
        raise ValueError(f"{name} is empty (shape {tuple(t.shape)})")
    if int(t.min()) < low or int(t.max()) > high:
        raise ValueError(
            f"{name} must hold values from {low} to {high}, got values from {int(t.min())} "
            f"to {int(t.max())}"
        )
    return t


def _bits(bits: Any, f: FloatFormat) -> torch.Tensor:
    if isinstance(bits, torch.Tensor) and not bits.is_floating_point() and bits.dtype != torch.bool:
        if bits.numel() and (int(bits.min()) < 0 or int(bits.max()) > f.max_pattern):
            check_bit_patterns(bits, f)  # raises the reference's message
        return bits.to(torch.int64)
    return torch.from_numpy(check_bit_patterns(bits, f))


def _round_to_odd_float32(x: torch.Tensor) -> torch.Tensor:
    """float64 -> float32, rounding an inexact value to the neighbour with an odd last bit."""
    y = x.to(torch.float32)  # round to nearest even
    back = y.to(torch.float64)
    inexact = (back != x) & torch.isfinite(x)
    away = back.abs() > x.abs()  # rounding went away from zero: step back by one unit
    bits = y.view(torch.int32) - away.to(torch.int32)
    bits = bits | inexact.to(torch.int32)
    return torch.where(inexact, bits.view(torch.float32), y)


def _overflow_threshold(f: FloatFormat) -> float:
    """Magnitudes above this round beyond the largest finite value (the tie goes to even)."""
    half_step = math.ldexp(0.5, f.emax - f.mantissa_bits)
    return f.max_finite + half_step


def _cast(x: torch.Tensor, f: FloatFormat, saturate: bool) -> torch.Tensor:
    """``x`` rounded to ``f`` (ties to even) as a tensor of ``f``'s PyTorch dtype."""
    dtype, _ = TORCH_FORMATS[f.name]
    saturate = check_bool(saturate, "saturate")
    if saturate:  # (in float32 at least, which holds every format's largest value exactly)
        x = x.to(_compute_dtype(x)).clamp(-f.max_finite, f.max_finite)  # NaN stays NaN
    if x.dtype == torch.float64 and f.name != "float32":
        x = _round_to_odd_float32(x)
    return x.to(dtype)


def _e4m3fn_overflow(x: torch.Tensor, f: FloatFormat, saturate: bool) -> torch.Tensor | None:
    """Where a non-saturating cast to float8_e4m3fn must give NaN (PyTorch saturates)."""
    if f.ieee_specials or saturate:
        return None
    return x.abs() > _overflow_threshold(f)


def _round(x: torch.Tensor, f: FloatFormat, saturate: bool = False) -> torch.Tensor:
    """``x`` rounded to ``f``, returned in ``x``'s dtype."""
    y = _cast(x, f, saturate).to(x.dtype)
    over = _e4m3fn_overflow(x, f, saturate)
    if over is not None:
        y = torch.where(over, torch.full_like(y, math.nan), y)
    return y


# ---------------------------------------------------------------------------- decode / encode
def decode(bits: Any, fmt: str) -> torch.Tensor:
    """The value of each bit pattern, read by PyTorch's own dtype: ``bits.view(dtype)``.

    Returns float32 (every value of the five formats is exactly a float32), on ``bits``' device.

    >>> decode(torch.tensor([0x3E200000]), "float32")
    tensor([0.1562])
    >>> decode(torch.tensor([0x7E, 0x7F]), "float8_e4m3fn")
    tensor([448.,  nan])
    """
    f = get_format(fmt)
    b = _bits(bits, f)
    dtype, container = TORCH_FORMATS[f.name]
    if container == torch.uint8:
        stored = b.to(torch.uint8)
    else:  # the signed integer with the same bits: subtract 2**bits when the top bit is set
        stored = (b - ((b >> (f.bits - 1)) << f.bits)).to(container)
    return stored.view(dtype).to(torch.float32)


def encode(x: Any, fmt: str, saturate: bool = False) -> torch.Tensor:
    """The bit pattern (int64, unsigned) of each ``x`` cast to ``fmt`` by PyTorch.

    NaNs get the canonical quiet NaN with the input's sign (PyTorch's own NaN bits vary).

    >>> encode(torch.tensor([0.15625]), "float32")
    tensor([1042284544])
    >>> encode(torch.tensor([1 + 2**-8, 1 + 3 * 2**-8]), "bfloat16")
    tensor([16256, 16258])
    >>> encode(torch.tensor([500.0]), "float8_e4m3fn"), encode(torch.tensor([500.0]), "float8_e4m3fn", True)
    (tensor([127]), tensor([126]))
    """
    f = get_format(fmt)
    x = as_tensor(x, "x", allow_empty=True)
    _, container = TORCH_FORMATS[f.name]
    bits = _cast(x, f, saturate).view(container).to(torch.int64) & f.max_pattern
    nan = torch.isnan(x)
    over = _e4m3fn_overflow(x, f, saturate)
    if over is not None:
        nan = nan | over
    canonical = f.nan_pattern | (torch.signbit(x).to(torch.int64) << f.sign_shift)
    return torch.where(nan, canonical, bits)


def round_to_format(x: Any, fmt: str, saturate: bool = False) -> torch.Tensor:
    """Round each ``x`` to the nearest number of ``fmt`` (ties to even), returned in ``x``'s dtype.

    Choose a format no wider than ``x``'s dtype, or the result is rounded again to store it.

    >>> round_to_format(torch.tensor([0.1, 1e-8, 70000.0]), "float16")
    tensor([0.1000,    0.0000,    inf])
    """
    f = get_format(fmt)
    return _round(as_tensor(x, "x", allow_empty=True), f, saturate)


def _compute_dtype(x: torch.Tensor) -> torch.dtype:
    """float64 stays float64; narrower inputs are computed in float32."""
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def stochastic_round(x: Any, fmt: str, u: Any) -> torch.Tensor:
    """Round each ``x`` down or up to a neighbour in ``fmt``: up when ``u < (x - lo)/(hi - lo)``.

    >>> stochastic_round(torch.tensor([1 + 2**-10, 1 + 2**-10]), "bfloat16", torch.tensor([0.1, 0.2]))
    tensor([1.0078, 1.0000])
    """
    f = get_format(fmt)
    x = as_tensor(x, "x", allow_empty=True)
    c = _compute_dtype(x)
    u = as_tensor(u, "u", allow_empty=True).to(device=x.device, dtype=c)
    try:
        u = u.expand(x.shape)
    except RuntimeError:
        raise ValueError(
            f"u must have the shape of x {tuple(x.shape)} (or broadcast to it), got shape "
            f"{tuple(u.shape)}"
        ) from None
    if u.numel() and not bool(((u >= 0) & (u < 1)).all()):
        raise ValueError(
            f"u must hold uniform numbers in [0, 1), got values from {u.min().item()} to "
            f"{u.max().item()}"
        )
    xc = x.to(c)
    _, ex = torch.frexp(xc)
    k = torch.clamp(ex - 1, f.emin, f.emax + 1) - f.mantissa_bits
    step = torch.ldexp(torch.ones_like(xc), k)  # hi - lo, a power of two
    scaled = xc / step
    lo = torch.floor(scaled)
    y = (lo + (u < scaled - lo).to(c)) * step
    y = torch.where(torch.isfinite(xc), y, xc)
    return _round(y, f).to(x.dtype)


# ---------------------------------------------------------------------------- sums
def _addends(x: Any, f: FloatFormat) -> tuple[torch.Tensor, torch.dtype]:
    x = as_tensor(x, "x", min_ndim=1)
    return _round(x.to(_compute_dtype(x)), f), x.dtype


def naive_sum(x: Any, fmt: str) -> torch.Tensor:
    """Left-to-right sum over the last dimension, every partial sum rounded to ``fmt``.

    >>> naive_sum(torch.full((512,), 0.01), "bfloat16")
    tensor(4.)
    """
    f = get_format(fmt)
    xs, dtype = _addends(x, f)
    total = torch.zeros(xs.shape[:-1], dtype=xs.dtype, device=xs.device)
    for i in range(xs.shape[-1]):
        total = _round(total + xs[..., i], f)
    return total.to(dtype)


def pairwise_sum(x: Any, fmt: str) -> torch.Tensor:
    """Sum over the last dimension as a balanced tree, each addition rounded to ``fmt``.

    >>> pairwise_sum(torch.full((512,), 0.01), "bfloat16")
    tensor(5.1250)
    """
    f = get_format(fmt)
    level, dtype = _addends(x, f)
    while level.shape[-1] > 1:
        n = level.shape[-1]
        pairs = _round(level[..., 0 : n - 1 : 2] + level[..., 1:n:2], f)
        if n % 2:
            pairs = torch.cat([pairs, level[..., -1:]], dim=-1)
        level = pairs
    return level[..., 0].to(dtype)


def kahan_sum(x: Any, fmt: str) -> torch.Tensor:
    """Compensated (Kahan) summation over the last dimension, every operation rounded to ``fmt``.

    >>> kahan_sum(torch.full((512,), 0.01), "bfloat16")
    tensor(5.1250)
    """
    f = get_format(fmt)
    xs, dtype = _addends(x, f)
    total = torch.zeros(xs.shape[:-1], dtype=xs.dtype, device=xs.device)
    c = torch.zeros_like(total)
    for i in range(xs.shape[-1]):
        y = _round(xs[..., i] - c, f)
        t = _round(total + y, f)
        c = _round(_round(t - total, f) - y, f)
        total = t
    return total.to(dtype)


# ---------------------------------------------------------------------------- quantisation
def _finite(W: torch.Tensor, name: str, absmax: torch.Tensor) -> None:
    """Raise if W holds NaN or inf: then some block's absmax is NaN or inf (no extra pass)."""
    if not bool(torch.isfinite(absmax).all()):
        i = int(torch.nonzero(~torch.isfinite(W.reshape(-1)))[0])
        raise ValueError(
            f"{name} contains {W.reshape(-1)[i].item()} (first at flat index {i}): absmax "
            "quantisation needs finite values (a NaN or inf would become the scale of its whole "
            "block)"
        )


def _blocks(W: torch.Tensor, block_size: int | None) -> tuple[torch.Tensor, int]:
    n = W.numel()
    B = n if block_size is None else check_int(block_size, "block_size", low=1)
    flat = W.reshape(-1)
    pad = (-n) % B
    if pad:
        flat = torch.nn.functional.pad(flat, (0, pad))
    return flat.view(-1, B), B


def absmax_quantize(
    W: Any, block_size: int | None = None, bits: int = 8
) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric absmax quantisation per block: ``q = round(W / scale)``, ``scale = absmax/127``.

    float16 and bfloat16 inputs are computed in float32 and their scales kept in float32, as
    bitsandbytes does: a 16-bit division rounds ``W / scale`` before ``round`` sees it (codes
    off by one or more), and a 16-bit scale would move every dequantised value. float32 and
    float64 stay in their own dtype.

    >>> q, scale = absmax_quantize(torch.tensor([[0.5, -1.0], [0.25, 0.0]]))
    >>> q
    tensor([[  64, -127],
            [  32,    0]], dtype=torch.int8)
    >>> absmax_quantize(torch.tensor([0.3, -1.0], dtype=torch.bfloat16))[1].dtype
    torch.float32
    """
    W = as_tensor(W, "W")
    levels = 2 ** (check_int(bits, "bits", low=2, high=8) - 1) - 1
    blocks, _ = _blocks(W.to(_compute_dtype(W)), block_size)  # (n_blocks, B), float32 at least
    absmax = blocks.abs().amax(dim=1)  # (n_blocks,)
    _finite(W, "W", absmax)
    scale = absmax / levels
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))
    q = torch.round(blocks / safe[:, None]).clamp_(-levels, levels).to(torch.int8)
    return q.reshape(-1)[: W.numel()].view(W.shape), scale


def _per_block(
    codes: torch.Tensor, scale: Any, name: str, block_size: int | None
) -> tuple[torch.Tensor, int, int]:
    n = codes.numel()
    B = n if block_size is None else check_int(block_size, "block_size", low=1)
    nb = math.ceil(n / B)
    scale = as_tensor(scale, name, ndim=1)
    if scale.shape != (nb,):
        raise ValueError(
            f"{name} must have one value per block: {n} codes in blocks of {B} make {nb} "
            f"blocks, but {name} has shape {tuple(scale.shape)}"
        )
    if scale.device != codes.device:
        raise ValueError(
            f"the codes and {name} must be on the same device, got {codes.device} and "
            f"{scale.device}"
        )
    return scale, B, nb


def _expand(values: torch.Tensor, scale: torch.Tensor, B: int, nb: int, shape) -> torch.Tensor:
    """``values`` (flat) times the scale of each one's block, reshaped to ``shape``."""
    n = values.numel()
    pad = nb * B - n
    if pad:
        values = torch.nn.functional.pad(values, (0, pad))
    return (values.view(nb, B) * scale[:, None]).reshape(-1)[:n].view(shape)


def absmax_dequantize(q: Any, scale: Any, block_size: int | None = None) -> torch.Tensor:
    """Undo :func:`absmax_quantize`: ``q * scale`` of each value's block (in ``scale``'s dtype).

    >>> absmax_dequantize(torch.tensor([64, -127], dtype=torch.int8), torch.tensor([1 / 127]))
    tensor([ 0.5039, -1.0000])
    """
    q = _int_tensor(q, "q", -128, 127)
    scale, B, nb = _per_block(q, scale, "scale", block_size)
    return _expand(q.reshape(-1).to(scale.dtype), scale, B, nb, q.shape)


def nf4_codebook() -> torch.Tensor:
    """The 16 NF4 levels as bitsandbytes computes them: probabilities in float32, float32 levels.

    Returned on the CPU in float32; this reproduces the published values bit for bit.

    >>> nf4_codebook()[[0, 7, 15]]
    tensor([-1.,  0.,  1.])
    """
    p_pos = torch.linspace(NF4_OFFSET, 0.5, 9)[:-1]  # float32, as in create_normal_map
    p_neg = torch.linspace(NF4_OFFSET, 0.5, 8)[:-1]
    positive = torch.special.ndtri(p_pos.double()).float()
    negative = -torch.special.ndtri(p_neg.double()).float()
    levels = torch.cat([negative, torch.zeros(1), positive]).sort().values
    return levels / levels.max()


def nf4_quantize(W: Any, block_size: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """Blockwise NF4 quantisation: code = number of level midpoints below ``W / absmax``.

    Counting the midpoints a value exceeds is the same as choosing the nearest level (a value
    exactly on a midpoint goes to the lower level); it needs no search and no gather. float16 and
    bfloat16 inputs are computed in float32 against the float32 levels, and ``absmax`` is
    returned in float32, as bitsandbytes does.

    >>> codes, absmax = nf4_quantize(torch.tensor([0.0, 0.6, -1.0, 0.08]), block_size=4)
    >>> codes
    tensor([ 7, 13,  0,  8], dtype=torch.uint8)
    """
    W = as_tensor(W, "W")
    work = W.to(_compute_dtype(W))  # float32 at least
    blocks, _ = _blocks(work, check_int(block_size, "block_size", low=1))
    absmax = blocks.abs().amax(dim=1)  # (n_blocks,)
    _finite(W, "W", absmax)
    x = blocks / torch.where(absmax > 0, absmax, torch.ones_like(absmax))[:, None]
    levels = nf4_codebook().to(dtype=work.dtype)
    midpoints = ((levels[1:] + levels[:-1]) / 2).tolist()  # 15 Python floats
    codes = torch.zeros(x.shape, dtype=torch.uint8, device=W.device)
    above = torch.empty(x.shape, dtype=torch.bool, device=W.device)
    for m in midpoints:  # code = number of midpoints below x
        codes.add_(torch.gt(x, m, out=above))
    return codes.reshape(-1)[: W.numel()].view(W.shape), absmax


def nf4_dequantize(codes: Any, absmax: Any, block_size: int = 64) -> torch.Tensor:
    """Undo :func:`nf4_quantize`: ``level[code] * absmax`` of each value's block.

    >>> nf4_dequantize(torch.tensor([7, 0], dtype=torch.uint8), torch.tensor([2.0]), block_size=2)
    tensor([ 0., -2.])
    """
    codes = _int_tensor(codes, "codes", 0, 15)
    absmax, B, nb = _per_block(codes, absmax, "absmax", check_int(block_size, "block_size", low=1))
    levels = nf4_codebook().to(device=absmax.device, dtype=absmax.dtype)
    values = torch.nn.functional.embedding(codes.reshape(-1).to(torch.int32), levels[:, None])
    return _expand(values.reshape(-1), absmax, B, nb, codes.shape)


def pack_4bit(codes: Any) -> torch.Tensor:
    """Pack pairs of 4-bit codes along the last dimension into uint8, the first in the high nibble.

    >>> pack_4bit(torch.tensor([[1, 2, 15, 0]], dtype=torch.uint8))
    tensor([[ 18, 240]], dtype=torch.uint8)
    """
    codes = _int_tensor(codes, "codes", 0, 15)
    if codes.ndim == 0 or codes.shape[-1] % 2:
        raise ValueError(
            f"codes must have an even length along the last axis to be packed in pairs, got "
            f"shape {tuple(codes.shape)}"
        )
    codes = codes.to(torch.uint8)
    return (codes[..., 0::2] << 4) | codes[..., 1::2]


def unpack_4bit(packed: Any) -> torch.Tensor:
    """Undo :func:`pack_4bit`: each byte gives two codes, high nibble first.

    >>> unpack_4bit(torch.tensor([18, 240], dtype=torch.uint8))
    tensor([ 1,  2, 15,  0], dtype=torch.uint8)
    """
    packed = _int_tensor(packed, "packed", 0, 255).to(torch.uint8)
    if packed.ndim == 0:
        packed = packed[None]
    pairs = torch.stack([packed >> 4, packed & 0xF], dim=-1)  # (..., m, 2)
    return pairs.reshape(*packed.shape[:-1], 2 * packed.shape[-1])
