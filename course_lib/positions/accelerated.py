"""Positional encodings, in PyTorch (Chapter 6).

Same names, signatures and conventions as :mod:`course_lib.positions.reference` (read its module
docstring first), but batched over leading dimensions, on any device, in the input's dtype, and
differentiable. Angles are computed in at least float32 and the result cast back, because a
float16 angle ``pos * w`` is already wrong in the second decimal at position 100.

Relative offsets become index tensors, so every relative term is a gather, never a loop; the
Music Transformer's logits exist twice, naively (an (L, L, d) tensor, O(L^2 d) memory) and by
skewing (O(L d) extra memory beyond the (L, L) logits), so that the two can be compared
(``benchmarks/positions.py``).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from course_lib.checks import (
    as_tensor,
    check_bool,
    check_choice,
    check_int,
    fmt_shape,
    same_device_and_dtype,
    values_are_free_to_read,
)
from course_lib.positions.checks import LAYOUTS, check_base, check_even

__all__ = [
    "add_position_table",
    "alibi_bias",
    "concat_one_hot_positions",
    "relative_bias",
    "relative_key_logits",
    "relative_logits_naive",
    "relative_logits_skewed",
    "relative_value_term",
    "rotary_embedding",
    "sinusoidal_encoding",
    "sinusoidal_shift_matrix",
    "skew",
]


# ----------------------------------------------------------------------------- helpers
def _work_dtype(dtype: torch.dtype) -> torch.dtype:
    """Angles are computed in float32 at least (float64 stays float64)."""
    return torch.promote_types(dtype, torch.float32)


def _finite(t: torch.Tensor, name: str) -> torch.Tensor:
    if values_are_free_to_read(t) and not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name} must be finite, got NaN or inf")
    return t


def _number_tensor(x: Any, name: str) -> torch.Tensor:
    """Positions or offsets: a float tensor as it is, an integer tensor as the default float
    dtype (same device), anything else through NumPy (float64, CPU)."""
    if isinstance(x, torch.Tensor):
        if x.dtype == torch.bool or x.is_complex():
            raise TypeError(f"{name} must hold real numbers, got a tensor of dtype {x.dtype}")
        if not x.is_floating_point():
            x = x.to(torch.get_default_dtype())
        if x.numel() == 0:
            raise ValueError(f"{name} is empty (shape {fmt_shape(x.shape)})")
        return _finite(x, name)
    return _finite(as_tensor(x, name), name)


def _positions(positions: Any) -> torch.Tensor:
    if isinstance(positions, int) and not isinstance(positions, bool):
        n = check_int(positions, "positions (a sequence length)", low=1)
        return torch.arange(n, dtype=torch.get_default_dtype())
    return _number_tensor(positions, "positions")


def _frequencies(d: int, base: float, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """``w_i = base^(-2i/d)`` for i = 0..d/2-1, computed in float64 and cast."""
    exponents = torch.arange(0, d, 2, dtype=torch.float64) / d
    return (base**-exponents).to(device=device, dtype=dtype)  # (d/2,)


def _pairs(sin_like: torch.Tensor, cos_like: torch.Tensor, layout: str) -> torch.Tensor:
    """Put the two members of each pair in their columns: (..., d/2) x 2 -> (..., d)."""
    if layout == "interleaved":
        return torch.stack((sin_like, cos_like), dim=-1).flatten(-2)  # columns 2i, 2i+1
    return torch.cat((sin_like, cos_like), dim=-1)  # columns i, i + d/2


def _offsets(L: int, K: int | None, device: torch.device) -> torch.Tensor:
    """(L, L) integer tensor of ``j - i``, clipped to [-K, K] when K is given."""
    idx = torch.arange(L, device=device)
    off = idx[None, :] - idx[:, None]
    return off if K is None else off.clamp(-K, K)


def _odd_rows(n: int, shape: tuple[int, ...], name: str) -> int:
    if n % 2 == 0:
        raise ValueError(
            f"{name} of shape {fmt_shape(shape)} must have an odd number 2K+1 of offsets "
            f"(rows for offsets -K..K), got {n}"
        )
    return n // 2


# ----------------------------------------------------------------------------- absolute
def concat_one_hot_positions(x: torch.Tensor, max_len: int | None = None) -> torch.Tensor:
    """The slides' ``[x_i; p(i)]``: (..., L, d) -> (..., L, d + max_len).

    >>> concat_one_hot_positions(torch.tensor([[5.0], [7.0]]))
    tensor([[5., 1., 0.],
            [7., 0., 1.]])
    """
    x = as_tensor(x, "x", min_ndim=2)
    L = x.shape[-2]
    n = L if max_len is None else check_int(max_len, "max_len", low=1)
    if L > n:
        raise ValueError(
            f"x has L={L} positions but max_len={n}: positions {n}..{L - 1} have no one-hot vector"
        )
    onehot = torch.eye(L, n, dtype=x.dtype, device=x.device)  # (L, max_len): row i is e_i
    return torch.cat((x, onehot.expand(*x.shape[:-1], n)), dim=-1)  # (..., L, d + max_len)


def add_position_table(x: torch.Tensor, table: torch.Tensor, offset: int = 0) -> torch.Tensor:
    """``x_i + p(offset + i)`` for a (max_len, d) table; raises beyond the table's last row.

    >>> add_position_table(torch.ones(2, 2), torch.tensor([[0.0, 0.5], [2.0, 0.0], [9.0, 9.0]]))
    tensor([[1.0000, 1.5000],
            [3.0000, 1.0000]])
    """
    x = as_tensor(x, "x", min_ndim=2)
    table = as_tensor(table, "table", ndim=2)
    same_device_and_dtype(x=x, table=table)
    offset = check_int(offset, "offset", low=0)
    L, d = x.shape[-2:]
    if table.shape[1] != d:
        raise ValueError(
            f"table of shape {fmt_shape(table.shape)} has width {table.shape[1]}, but x of shape "
            f"{fmt_shape(x.shape)} has width {d}"
        )
    if offset + L > table.shape[0]:
        raise ValueError(
            f"positions {offset}..{offset + L - 1} are needed but the table has rows for positions "
            f"0..{table.shape[0] - 1} only: a position table cannot encode positions it has no row for"
        )
    return x + table[offset : offset + L]  # (..., L, d)


def sinusoidal_encoding(
    positions: Any, d_model: int, base: float = 10000.0, layout: str = "interleaved"
) -> torch.Tensor:
    """Eq. (19) for a tensor of positions (or an int n: positions 0..n-1), (..., d_model).

    The result has the positions' dtype and device (integer positions give the default float
    dtype).

    >>> sinusoidal_encoding(torch.tensor([1.0]), 4)
    tensor([[0.8415, 0.5403, 0.0100, 1.0000]])
    """
    pos = _positions(positions)
    d = check_even(d_model, "d_model")
    base = check_base(base)
    layout = check_choice(layout, "layout", LAYOUTS)
    work = _work_dtype(pos.dtype)
    angle = pos.to(work)[..., None] * _frequencies(d, base, work, pos.device)  # (..., d/2)
    return _pairs(angle.sin(), angle.cos(), layout).to(pos.dtype)  # (..., d)


def sinusoidal_shift_matrix(
    offsets: Any, d_model: int, base: float = 10000.0, layout: str = "interleaved"
) -> torch.Tensor:
    """M_k with ``PE(pos + k) = PE(pos) @ M_k``: (*offsets.shape, d_model, d_model).

    >>> M = sinusoidal_shift_matrix(torch.tensor(3.0), 4)
    >>> torch.allclose(sinusoidal_encoding(torch.tensor([5.0]), 4) @ M,
    ...                sinusoidal_encoding(torch.tensor([8.0]), 4), atol=1e-6)
    True
    """
    k = _number_tensor(offsets, "offsets")
    d = check_even(d_model, "d_model")
    base = check_base(base)
    layout = check_choice(layout, "layout", LAYOUTS)
    work = _work_dtype(k.dtype)
    angle = k.to(work)[..., None] * _frequencies(d, base, work, k.device)  # (..., d/2)
    c, s = angle.cos(), angle.sin()
    i = torch.arange(d // 2, device=k.device)
    sin_col, cos_col = (2 * i, 2 * i + 1) if layout == "interleaved" else (i, i + d // 2)
    out = torch.zeros(*k.shape, d, d, dtype=work, device=k.device)
    out[..., sin_col, sin_col] = c
    out[..., sin_col, cos_col] = -s
    out[..., cos_col, sin_col] = s
    out[..., cos_col, cos_col] = c
    return out.to(k.dtype)


# ----------------------------------------------------------------------------- relative
def relative_bias(values: torch.Tensor, length: int) -> torch.Tensor:
    """Variant (ii): ``values[..., clip(j - i) + K]`` as an (..., L, L) logit bias.

    >>> relative_bias(torch.tensor([-1.0, 0.0, 1.0]), 3)
    tensor([[ 0.,  1.,  1.],
            [-1.,  0.,  1.],
            [-1., -1.,  0.]])
    """
    values = as_tensor(values, "values", min_ndim=1)
    L = check_int(length, "length", low=1)
    K = _odd_rows(values.shape[-1], tuple(values.shape), "values")
    return values[..., _offsets(L, K, values.device) + K]  # (..., L, L)


def alibi_bias(slopes: torch.Tensor, length: int, symmetric: bool = False) -> torch.Tensor:
    """Variant (iii) with a fixed slope per head (ALiBi): ``-m (i - j)`` or ``-m |i - j|``.

    >>> alibi_bias(torch.tensor([0.5]), 3)[0]
    tensor([[ 0.0000,  0.5000,  1.0000],
            [-0.5000,  0.0000,  0.5000],
            [-1.0000, -0.5000,  0.0000]])
    """
    slopes = _finite(as_tensor(slopes, "slopes"), "slopes")
    L = check_int(length, "length", low=1)
    symmetric = check_bool(symmetric, "symmetric")
    off = _offsets(L, None, slopes.device)  # j - i
    distance = -off.abs() if symmetric else off  # -|i - j| or -(i - j)
    return slopes[..., None, None] * distance.to(slopes.dtype)  # (..., L, L)


def relative_key_logits(q: torch.Tensor, rel_keys: torch.Tensor) -> torch.Tensor:
    """Variant (i) / Shaw et al.: ``q_i . rel_keys[clip(j - i) + K]``, unscaled, (..., L, L).

    Computed as ``q @ rel_keys^T`` (..., L, 2K+1) followed by a gather: no (L, L, d) tensor.

    >>> q = torch.eye(2)
    >>> relative_key_logits(q, torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]))
    tensor([[3., 5.],
            [2., 4.]])
    """
    q = as_tensor(q, "q", min_ndim=2)
    rel_keys = as_tensor(rel_keys, "rel_keys", min_ndim=2)
    same_device_and_dtype(q=q, rel_keys=rel_keys)
    if q.shape[-1] != rel_keys.shape[-1]:
        raise ValueError(
            f"q of shape {fmt_shape(q.shape)} and rel_keys of shape {fmt_shape(rel_keys.shape)} "
            "must have the same last dimension d"
        )
    K = _odd_rows(rel_keys.shape[-2], tuple(rel_keys.shape), "rel_keys")
    L = q.shape[-2]
    scores = q @ rel_keys.transpose(-2, -1)  # (..., L, 2K+1): q_i . a_r for every offset r
    index = (_offsets(L, K, q.device) + K).expand(*scores.shape[:-1], L)  # (..., L, L)
    return torch.gather(scores, -1, index)  # (..., L, L)


def relative_value_term(weights: torch.Tensor, rel_values: torch.Tensor) -> torch.Tensor:
    """Shaw et al.'s ``sum_j alpha_ij a^V_ij``: bucket the weights by offset, then one matmul.

    >>> w = torch.tensor([[1.0, 0.0], [0.5, 0.5]])
    >>> relative_value_term(w, torch.tensor([[-1.0], [0.0], [1.0]]))
    tensor([[ 0.0000],
            [-0.5000]])
    """
    weights = as_tensor(weights, "weights", min_ndim=2)
    rel_values = as_tensor(rel_values, "rel_values", min_ndim=2)
    same_device_and_dtype(weights=weights, rel_values=rel_values)
    if weights.shape[-1] != weights.shape[-2]:
        raise ValueError(
            f"weights must be square (..., L, L), got shape {fmt_shape(weights.shape)}"
        )
    K = _odd_rows(rel_values.shape[-2], tuple(rel_values.shape), "rel_values")
    L = weights.shape[-1]
    index = (_offsets(L, K, weights.device) + K).expand_as(weights)  # (..., L, L)
    buckets = torch.zeros(
        *weights.shape[:-1], 2 * K + 1, dtype=weights.dtype, device=weights.device
    )
    buckets = buckets.scatter_add(-1, index, weights)  # (..., L, 2K+1): weight per offset
    return buckets @ rel_values  # (..., L, d_v)


def _music_inputs(q: Any, E_r: Any) -> tuple[torch.Tensor, torch.Tensor]:
    q = as_tensor(q, "q", min_ndim=2)
    E_r = as_tensor(E_r, "E_r", min_ndim=2)
    same_device_and_dtype(q=q, E_r=E_r)
    L = q.shape[-2]
    if q.shape[-1] != E_r.shape[-1]:
        raise ValueError(
            f"q of shape {fmt_shape(q.shape)} and E_r of shape {fmt_shape(E_r.shape)} must have "
            "the same last dimension d"
        )
    if E_r.shape[-2] < L:
        raise ValueError(
            f"E_r of shape {fmt_shape(E_r.shape)} has {E_r.shape[-2]} rows (offsets "
            f"-{E_r.shape[-2] - 1}..0) but q has L={L} positions, which needs offsets -{L - 1}..0"
        )
    return q, E_r[..., E_r.shape[-2] - L :, :]  # the last L rows: offsets -(L-1)..0


def relative_logits_naive(q: torch.Tensor, E_r: torch.Tensor) -> torch.Tensor:
    """Music Transformer relative logits by building R (..., L, L, d): O(L^2 d) memory.

    >>> relative_logits_naive(torch.eye(2), torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    tensor([[3., 0.],
            [2., 4.]])
    """
    q, E_r = _music_inputs(q, E_r)
    L = q.shape[-2]
    off = _offsets(L, None, q.device)  # (L, L): j - i
    zero = torch.zeros_like(E_r[..., :1, :])  # an all-zero row, index L, for j > i
    E_pad = torch.cat((E_r, zero), dim=-2)  # (..., L+1, d)
    index = torch.where(off <= 0, off + L - 1, L)  # (L, L): row of offset j - i, or the zero row
    R = E_pad[..., index, :]  # (..., L, L, d): the one allocation of O(L^2 d) memory
    return torch.einsum("...id,...ijd->...ij", q, R)  # (..., L, L)


def skew(A: torch.Tensor) -> torch.Tensor:
    """Steps 2-7 of Algorithm 1 (corrected): mask, pad a zero column, reshape, drop a row.

    >>> skew(torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    tensor([[2., 0.],
            [3., 4.]])
    """
    A = as_tensor(A, "A", min_ndim=2)
    if A.shape[-1] != A.shape[-2]:
        raise ValueError(f"A must be square (..., L, L), got shape {fmt_shape(A.shape)}")
    L = A.shape[-1]
    i = torch.arange(L, device=A.device)
    keep = (i[:, None] + i[None, :]) >= L - 1  # (L, L): the lower-right triangle
    B = F.pad(A * keep, (1, 0))  # (..., L, L+1): a zero column on the left
    C = B.reshape(*A.shape[:-2], L + 1, L)  # (..., L+1, L): the same numbers, read L at a time
    return C[..., 1:, :]  # (..., L, L)


def relative_logits_skewed(q: torch.Tensor, E_r: torch.Tensor) -> torch.Tensor:
    """Algorithm 1 (corrected): ``skew(q @ E_r^T)``; no (L, L, d) tensor.

    >>> relative_logits_skewed(torch.eye(2), torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    tensor([[3., 0.],
            [2., 4.]])
    """
    q, E_r = _music_inputs(q, E_r)
    return skew(q @ E_r.transpose(-2, -1))  # (..., L, L)


# ----------------------------------------------------------------------------- rotary
def rotary_embedding(
    x: torch.Tensor, positions: Any = None, base: float = 10000.0, layout: str = "interleaved"
) -> torch.Tensor:
    """RoFormer: rotate pair i of row m by ``m w_i``; same shape, dtype and device as x.

    ``positions`` (default 0..L-1; any real or integer tensor) broadcasts to ``x.shape[:-1]``.

    >>> rotary_embedding(torch.tensor([[1.0, 0.0], [1.0, 0.0]]))
    tensor([[1.0000, 0.0000],
            [0.5403, 0.8415]])
    """
    x = as_tensor(x, "x", min_ndim=2)
    d = check_even(x.shape[-1], "the last dimension of x")
    base = check_base(base)
    layout = check_choice(layout, "layout", LAYOUTS)
    lead = tuple(x.shape[:-1])
    if positions is None:
        pos = torch.arange(x.shape[-2], device=x.device)
    else:
        pos = _number_tensor(positions, "positions").to(x.device)
        try:
            ok = torch.broadcast_shapes(pos.shape, lead) == lead
        except RuntimeError:
            ok = False
        if not ok:
            raise ValueError(
                f"positions of shape {fmt_shape(pos.shape)} must broadcast to x's shape without "
                f"its last dimension, {fmt_shape(lead)} (one position per row of x)"
            )
    work = _work_dtype(x.dtype)
    angle = pos.to(work)[..., None] * _frequencies(d, base, work, x.device)  # (..., L, d/2)
    cos, sin = angle.cos(), angle.sin()
    xw = x.to(work)
    if layout == "interleaved":
        xa, xb = xw[..., 0::2], xw[..., 1::2]  # (..., L, d/2) each
    else:
        xa, xb = xw[..., : d // 2], xw[..., d // 2 :]
    return _pairs(xa * cos - xb * sin, xa * sin + xb * cos, layout).to(x.dtype)  # (..., L, d)
