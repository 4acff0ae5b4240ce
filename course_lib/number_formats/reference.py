"""Number formats, rounding, low-precision sums and quantisation (Chapter 12; notes ``002`` s. 15).

Equation numbers are the chapter's (``notebooks/12_number_formats.py``):

* (12.1) a normal number, the notes' binary32 formula for any width:
  ``value = (-1)**s * 2**(e - bias) * (1 + f / 2**M)`` for ``0 < e < all ones``;
* (12.2) a subnormal number (``e = 0``): ``value = (-1)**s * 2**(1 - bias) * (f / 2**M)``;
* (12.3) the all-ones exponent: infinities and NaNs (IEEE), or normals plus one NaN (E4M3FN);
* (12.4) round to nearest, ties to even; (12.5) stochastic rounding;
* (12.6) absmax quantisation ``q = round(x * (2**(b-1) - 1) / absmax)`` per block;
* (12.7) the NF4 code book built from normal quantiles (Dettmers et al., 2023).

Decoding and encoding work on the bit fields with integer operations, never by casting to the
target type, so that they can be checked against NumPy/ml_dtypes/PyTorch, which do cast. Bit
patterns are unsigned integers (``0x3E200000``, not a negative int32). Every value is float64.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.special import ndtri

from course_lib.checks import as_array, check_bool, check_int
from course_lib.number_formats.formats import (
    FloatFormat,
    check_bit_patterns,
    get_format,
)

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

#: The probability of the largest NF4 level, as bitsandbytes' ``create_normal_map`` uses it.
#: It equals 1 - (1/30 + 1/32) / 2 rounded to 7 decimals.
NF4_OFFSET = 0.9677083


# ---------------------------------------------------------------------------- decode / encode
def decode(bits: Any, fmt: str) -> np.ndarray:
    """The value of each bit pattern in format ``fmt``, from its three fields, eqs. (12.1)-(12.3).

    >>> decode(0x3E200000, "float32")  # the notes' example: s=0, e=124, f=2**21
    array(0.15625)
    >>> decode([0x3F80, 0x0001, 0x7F80, 0x7FC0], "bfloat16")
    array([1.00000000e+000, 9.18354962e-041,             inf,             nan])
    >>> decode([0x7E, 0x7F], "float8_e4m3fn")  # no infinities: 0x7E is the largest value
    array([448.,  nan])
    """
    f = get_format(fmt)
    b = check_bit_patterns(bits, f)
    M = f.mantissa_bits
    s = b >> f.sign_shift  # sign bit
    e = (b >> M) & f.exponent_all_ones  # biased exponent field
    frac = b & (2**M - 1)  # fraction field
    sign = np.where(s == 1, -1.0, 1.0)
    with np.errstate(over="ignore"):
        normal = sign * np.ldexp(1.0 + frac / 2**M, e - f.bias)  # eq. (12.1)
    subnormal = sign * np.ldexp(frac / 2**M, f.emin)  # eq. (12.2): no hidden 1, exponent emin
    value = np.where(e == 0, subnormal, normal)
    top = e == f.exponent_all_ones  # eq. (12.3)
    if f.ieee_specials:
        value = np.where(top & (frac == 0), sign * np.inf, value)
        value = np.where(top & (frac != 0), np.copysign(np.nan, sign), value)
    else:  # E4M3FN: only S.1111.111 is NaN; the rest of the top binade is normal
        value = np.where(top & (frac == 2**M - 1), np.copysign(np.nan, sign), value)
    return value


def _float64_fields(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sign, biased exponent and fraction of float64 numbers (reading their bits)."""
    u = np.array(x, dtype=np.float64, copy=True).view(np.uint64)
    sign = (u >> np.uint64(63)).astype(np.int64)
    e = ((u >> np.uint64(52)) & np.uint64(0x7FF)).astype(np.int64)
    frac = (u & np.uint64(2**52 - 1)).astype(np.int64)
    return sign, e, frac


def encode(x: Any, fmt: str, saturate: bool = False) -> np.ndarray:
    """The bit pattern of the number of ``fmt`` nearest to each ``x`` (ties to even), eq. (12.4).

    Integer arithmetic on the float64 fields of ``x``: the significand is shifted right until it
    has the target's number of fraction bits; the bits shifted out decide the rounding (more than
    half a unit: up; less: down; exactly half: to the even neighbour). Below the smallest normal
    number the shift is longer (gradual underflow to subnormals, then zero). Values that round
    beyond the largest finite number become infinity, or NaN for ``float8_e4m3fn``, which has no
    infinity; with ``saturate=True`` they (and infinities) become the largest finite value.
    NaN encodes to the canonical quiet NaN with the sign of the input.

    >>> hex(int(encode(0.15625, "float32")))
    '0x3e200000'
    >>> encode([1 + 2**-8, 1 + 3 * 2**-8], "bfloat16").tolist()  # two ties: both to even
    [16256, 16258]
    >>> encode([65519.0, 65520.0], "float16").tolist()  # 65520 is a tie above the largest value
    [31743, 31744]
    >>> encode([500.0, 500.0], "float8_e4m3fn").tolist(), int(encode(500.0, "float8_e4m3fn", True))
    ([127, 127], 126)
    """
    f = get_format(fmt)
    x = as_array(x, "x", allow_empty=True)
    saturate = check_bool(saturate, "saturate")
    M = f.mantissa_bits
    s, e64, f64 = _float64_fields(x)
    # x = sig * 2**q exactly, with sig < 2**53
    sig = np.where(e64 == 0, f64, f64 | (1 << 52))
    q = np.where(e64 == 0, -1074, e64 - 1075)
    lead = np.where(e64 == 0, -1023, e64 - 1023)  # exponent of the leading bit (bound if tiny)
    # t: exponent of the target's last fraction bit; below the smallest normal it stays at emin-M
    t = np.maximum(lead, f.emin) - M
    shift = np.minimum(t - q, 60)  # at least 29 here; beyond 54 every bit is shifted out anyway
    n = sig >> shift  # the kept significand
    rem = sig & ((1 << shift) - 1)  # the bits shifted out
    half = 1 << (shift - 1)
    n = n + ((rem > half) | ((rem == half) & (n % 2 == 1)))  # round to nearest, ties to even
    carry = n == 1 << (M + 1)  # rounding up overflowed into the next binade
    n = np.where(carry, n >> 1, n)
    t = t + carry
    normal = n >= 1 << M
    biased = np.where(normal, t + M + f.bias, 0)  # subnormals (and zero) have exponent field 0
    fraction = np.where(normal, n - (1 << M), n)
    magnitude = (biased << M) | fraction
    is_nan = (e64 == 0x7FF) & (f64 != 0)
    is_inf = (e64 == 0x7FF) & (f64 == 0)
    too_big = is_inf | (~is_nan & (magnitude > f.max_finite_pattern))
    if saturate:
        magnitude = np.where(too_big, f.max_finite_pattern, magnitude)
    elif f.ieee_specials:
        magnitude = np.where(too_big, f.inf_pattern, magnitude)
    else:
        is_nan = is_nan | too_big  # E4M3FN without saturation: overflow is NaN
    magnitude = np.where(is_nan, f.nan_pattern, magnitude)
    return (s << f.sign_shift) | magnitude


def round_to_format(x: Any, fmt: str, saturate: bool = False) -> np.ndarray:
    """Round each ``x`` to the nearest number of ``fmt`` (ties to even) and return its value.

    ``decode(encode(x))``: the error a value makes when it is stored in ``fmt``.

    >>> round_to_format([0.1, 1e-8, 70000.0], "float16")
    array([0.09997559, 0.        ,        inf])
    >>> round_to_format(3.14159, "bfloat16")
    array(3.140625)
    """
    f = get_format(fmt)
    return decode(encode(x, f, saturate), f)


def _spacing_exponent(x: np.ndarray, f: FloatFormat) -> np.ndarray:
    """Exponent k of the spacing ``2**k`` of ``f``'s numbers around each ``x``."""
    _, ex = np.frexp(x)  # x = m * 2**ex with 0.5 <= |m| < 1, so the leading bit is 2**(ex-1)
    lead = np.clip(ex - 1, f.emin, f.emax + 1)
    return lead - f.mantissa_bits


def stochastic_round(x: Any, fmt: str, u: Any) -> np.ndarray:
    """Round each ``x`` down or up to a neighbour in ``fmt`` at random, eq. (12.5).

    With ``lo <= x < hi`` the two neighbours, ``x`` goes up when ``u < (x - lo) / (hi - lo)``; for
    ``u`` uniform on [0, 1) that happens with exactly that probability, so the result is ``x``
    *on average*: the rounding is unbiased. ``u`` (same shape as ``x``, or broadcastable) is
    passed in, not drawn here, so that the NumPy and PyTorch sides make the same choices.
    Results beyond the largest finite value overflow as in :func:`round_to_format`.

    >>> stochastic_round([1 + 2**-10, 1 + 2**-10], "bfloat16", [0.1, 0.2])  # 1/8 of a step
    array([1.0078125, 1.       ])
    """
    f = get_format(fmt)
    x = as_array(x, "x", allow_empty=True)
    u = _uniforms(u, x.shape)
    step = np.ldexp(1.0, _spacing_exponent(x, f))  # hi - lo
    with np.errstate(invalid="ignore"):
        scaled = x / step
        lo = np.floor(scaled)
        frac = scaled - lo  # (x - lo) / (hi - lo), exact: scaling by a power of two
        y = (lo + (u < frac)) * step
    return round_to_format(np.where(np.isfinite(x), y, x), f)


def _uniforms(u: Any, shape: tuple[int, ...]) -> np.ndarray:
    u = as_array(u, "u", allow_empty=True)
    try:
        u = np.broadcast_to(u, shape)
    except ValueError:
        raise ValueError(
            f"u must have the shape of x {shape} (or broadcast to it), got shape {u.shape}"
        ) from None
    if u.size and not ((u >= 0).all() and (u < 1).all()):
        raise ValueError(
            f"u must hold uniform numbers in [0, 1), got values from {u.min()} to {u.max()}"
        )
    return u


# ---------------------------------------------------------------------------- sums
def _addends(x: Any, f: FloatFormat) -> np.ndarray:
    x = as_array(x, "x", min_ndim=1)
    return round_to_format(x, f)  # the numbers to add are stored in the format first


def naive_sum(x: Any, fmt: str) -> np.ndarray:
    """Sum over the last axis left to right, every partial sum rounded to ``fmt``.

    The error can grow like n times the unit roundoff, and once the running sum is large the
    small addends are rounded away entirely (Higham, 1993).

    >>> naive_sum(np.full(512, 0.01), "bfloat16")  # stalls at 4: the step there is 2**-5
    array(4.)
    """
    f = get_format(fmt)
    x = _addends(x, f)
    total = np.zeros(x.shape[:-1])
    for i in range(x.shape[-1]):
        total = round_to_format(total + x[..., i], f)
    return total


def pairwise_sum(x: Any, fmt: str) -> np.ndarray:
    """Sum over the last axis as a balanced tree of additions, each rounded to ``fmt``.

    Every number takes part in only about log2(n) additions, so the error bound grows like
    log2(n) units of roundoff instead of n (Higham, 1993).

    >>> pairwise_sum(np.full(512, 0.01), "bfloat16")
    array(5.125)
    """
    f = get_format(fmt)
    level = _addends(x, f)
    while level.shape[-1] > 1:
        n = level.shape[-1]
        pairs = round_to_format(level[..., 0 : n - 1 : 2] + level[..., 1:n:2], f)
        if n % 2:  # an odd one out waits for the next level
            pairs = np.concatenate([pairs, level[..., -1:]], axis=-1)
        level = pairs
    return level[..., 0]


def kahan_sum(x: Any, fmt: str) -> np.ndarray:
    """Compensated (Kahan) summation over the last axis, every operation rounded to ``fmt``.

    ``c`` carries the part of each addend that the rounded addition lost; it is subtracted from
    the next addend (Kahan, 1965). The error bound no longer grows with n.

    >>> kahan_sum(np.full(512, 0.01), "bfloat16")
    array(5.125)
    """
    f = get_format(fmt)
    x = _addends(x, f)
    total = np.zeros(x.shape[:-1])
    c = np.zeros(x.shape[:-1])  # the running compensation
    for i in range(x.shape[-1]):
        y = round_to_format(x[..., i] - c, f)
        t = round_to_format(total + y, f)
        c = round_to_format(round_to_format(t - total, f) - y, f)  # what the addition lost
        total = t
    return total


# ---------------------------------------------------------------------------- quantisation
def _blocks(W: np.ndarray, block_size: int | None) -> tuple[np.ndarray, int]:
    """The flattened W cut into rows of ``block_size`` (the last one padded with zeros)."""
    n = W.size
    B = n if block_size is None else check_int(block_size, "block_size", low=1)
    nb = math.ceil(n / B)
    padded = np.zeros(nb * B)
    padded[:n] = W.ravel()
    return padded.reshape(nb, B), B


def _finite(W: np.ndarray, name: str) -> None:
    bad = ~np.isfinite(W)
    if bad.any():
        i = int(np.flatnonzero(bad.ravel())[0])
        raise ValueError(
            f"{name} contains {W.ravel()[i]} (first at flat index {i}): absmax quantisation "
            "needs finite values (a NaN or inf would become the scale of its whole block)"
        )


def absmax_quantize(
    W: Any, block_size: int | None = None, bits: int = 8
) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric absmax quantisation to signed ``bits``-bit integers, eq. (12.6).

    The flattened ``W`` is cut into blocks of ``block_size`` numbers (``None``: one block, the
    whole tensor). In each block ``scale = absmax / (2**(bits-1) - 1)`` and
    ``q = round(W / scale)`` (ties to even), so the largest magnitude maps to +-127 for int8.
    Returns ``q`` (int8, the shape of ``W``) and ``scale`` (one per block). NaN or inf in ``W``
    raise ``ValueError``. A block of zeros gets scale 0 and codes 0.

    >>> q, scale = absmax_quantize([[0.5, -1.0], [0.25, 0.0]])
    >>> q, scale
    (array([[  64, -127],
           [  32,    0]], dtype=int8), array([0.00787402]))
    >>> absmax_quantize([0.5, -1.0, 0.25, 0.0], block_size=2)[1]  # one scale per block of 2
    array([0.00787402, 0.0019685 ])
    """
    W = as_array(W, "W")
    _finite(W, "W")
    levels = 2 ** (check_int(bits, "bits", low=2, high=8) - 1) - 1  # 127 for int8, 7 for int4
    blocks, _ = _blocks(W, block_size)
    absmax = np.abs(blocks).max(axis=1)  # (n_blocks,)
    scale = absmax / levels
    safe = np.where(scale > 0, scale, 1.0)
    q = np.clip(np.rint(blocks / safe[:, None]), -levels, levels)  # (n_blocks, B)
    return q.ravel()[: W.size].reshape(W.shape).astype(np.int8), scale


def _codes(q: Any, name: str, low: int, high: int) -> np.ndarray:
    if hasattr(q, "detach"):
        q = q.detach().cpu().numpy()
    arr = np.asarray(q)
    if arr.dtype == bool or arr.dtype.kind not in "iu":
        raise TypeError(f"{name} must hold integer codes, got an array of dtype {arr.dtype}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty (shape {arr.shape})")
    if arr.min() < low or arr.max() > high:
        raise ValueError(
            f"{name} must hold codes from {low} to {high}, got values from {arr.min()} to {arr.max()}"
        )
    return arr.astype(np.int64)


def _scales(scale: Any, name: str, n: int, block_size: int | None) -> tuple[np.ndarray, int]:
    B = n if block_size is None else check_int(block_size, "block_size", low=1)
    nb = math.ceil(n / B)
    scale = as_array(scale, name, ndim=1)
    if scale.shape != (nb,):
        raise ValueError(
            f"{name} must have one value per block: {n} codes in blocks of {B} make {nb} "
            f"blocks, but {name} has shape {scale.shape}"
        )
    return scale, B


def absmax_dequantize(q: Any, scale: Any, block_size: int | None = None) -> np.ndarray:
    """Undo :func:`absmax_quantize`: ``W_hat = q * scale`` of each value's block.

    >>> absmax_dequantize([[64, -127], [32, 0]], [1 / 127])
    array([[ 0.50393701, -1.        ],
           [ 0.2519685 ,  0.        ]])
    """
    q = _codes(q, "q", -128, 127)
    scale, B = _scales(scale, "scale", q.size, block_size)
    per_value = np.repeat(scale, B)[: q.size]  # the scale of each value's block
    return (q.ravel() * per_value).reshape(q.shape)


def nf4_codebook() -> np.ndarray:
    """The 16 levels of 4-bit NormalFloat (NF4), eq. (12.7), in float64.

    Quantiles of the standard normal distribution: 8 for the positive half at probabilities
    evenly spaced from ``NF4_OFFSET`` down to 1/2 (1/2 itself excluded), 7 for the negative half
    the same way, and an exact zero; then divided by the largest, so the levels span [-1, 1]
    (Dettmers et al., 2023; bitsandbytes' ``create_normal_map``).

    >>> np.round(nf4_codebook(), 4)
    array([-1.    , -0.6962, -0.5251, -0.3949, -0.2844, -0.1848, -0.091 ,
            0.    ,  0.0796,  0.1609,  0.2461,  0.3379,  0.4407,  0.5626,
            0.723 ,  1.    ])
    """
    positive = ndtri(np.linspace(NF4_OFFSET, 0.5, 9)[:-1])  # 8 quantiles > 0
    negative = -ndtri(np.linspace(NF4_OFFSET, 0.5, 8)[:-1])  # 7 quantiles < 0
    levels = np.sort(np.concatenate([negative, [0.0], positive]))
    return levels / levels.max()


def nf4_quantize(W: Any, block_size: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """Blockwise NF4 quantisation: each value becomes the index of the nearest NF4 level.

    Each block of ``block_size`` values (of the flattened ``W``) is divided by its absmax, so it
    lies in [-1, 1], and each value is replaced by ``argmin_k |x - level_k|`` (a value exactly
    half-way goes to the lower level). Returns the codes (uint8, 0..15, the shape of ``W``) and
    the absmax of each block.

    >>> codes, absmax = nf4_quantize([0.0, 0.6, -1.0, 0.08], block_size=4)
    >>> codes, absmax
    (array([ 7, 13,  0,  8], dtype=uint8), array([1.]))
    """
    W = as_array(W, "W")
    _finite(W, "W")
    blocks, _ = _blocks(W, check_int(block_size, "block_size", low=1))
    absmax = np.abs(blocks).max(axis=1)
    x = blocks / np.where(absmax > 0, absmax, 1.0)[:, None]  # (n_blocks, B), in [-1, 1]
    levels = nf4_codebook()
    codes = np.abs(x[..., None] - levels).argmin(axis=-1)  # nearest level, lower one on a tie
    return codes.ravel()[: W.size].reshape(W.shape).astype(np.uint8), absmax


def nf4_dequantize(codes: Any, absmax: Any, block_size: int = 64) -> np.ndarray:
    """Undo :func:`nf4_quantize`: ``W_hat = level[code] * absmax`` of each value's block.

    >>> nf4_dequantize([7, 13, 0, 8], [2.0], block_size=4).round(6)
    array([ 0.      ,  1.125234, -2.      ,  0.159161])
    """
    codes = _codes(codes, "codes", 0, 15)
    absmax, B = _scales(absmax, "absmax", codes.size, check_int(block_size, "block_size", low=1))
    per_value = np.repeat(absmax, B)[: codes.size]
    return (nf4_codebook()[codes.ravel()] * per_value).reshape(codes.shape)


def pack_4bit(codes: Any) -> np.ndarray:
    """Pack pairs of 4-bit codes (0..15) along the last axis into bytes, the first in the high nibble.

    >>> pack_4bit([[1, 2, 15, 0]])
    array([[ 18, 240]], dtype=uint8)
    """
    codes = _codes(codes, "codes", 0, 15)
    if codes.ndim == 0 or codes.shape[-1] % 2:
        raise ValueError(
            f"codes must have an even length along the last axis to be packed in pairs, got "
            f"shape {codes.shape}"
        )
    return ((codes[..., 0::2] << 4) | codes[..., 1::2]).astype(np.uint8)


def unpack_4bit(packed: Any) -> np.ndarray:
    """Undo :func:`pack_4bit`: each byte gives two codes, high nibble first.

    >>> unpack_4bit([18, 240])
    array([ 1,  2, 15,  0], dtype=uint8)
    """
    packed = _codes(packed, "packed", 0, 255)
    if packed.ndim == 0:
        packed = packed[None]
    pairs = np.stack([packed >> 4, packed & 0xF], axis=-1)  # (..., m, 2)
    return pairs.reshape(*packed.shape[:-1], 2 * packed.shape[-1]).astype(np.uint8)
