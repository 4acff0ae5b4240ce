"""Input checks of Chapter 11, shared by the NumPy and PyTorch sides (errors name the argument).

>>> check_window(8, 9, 1)
Traceback (most recent call last):
...
ValueError: the window is larger than the sequence: window=9 * dilation=1 reaches 9 positions away, but L=8 has at most 7 (use full attention)
>>> check_block_length(10, 4, "q")
Traceback (most recent call last):
...
ValueError: q has 10 positions, not a multiple of block=4: pad the sequence to 12 or choose a block that divides 10
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from course_lib.checks import check_int, check_real, fmt_shape


def check_pattern_head(head: Any) -> int:
    """0 (both heads, their union), 1 or 2."""
    head = check_int(head, "head")
    if head not in (0, 1, 2):
        raise ValueError(f"head must be 1, 2 or 0 (the union of both heads), got {head}")
    return head


def check_window(L: Any, window: Any, dilation: Any) -> tuple[int, int, int]:
    """A window of ``window`` neighbours each side, ``dilation`` apart, that fits in L."""
    L = check_int(L, "L", low=1)
    window = check_int(window, "window", low=0)
    dilation = check_int(dilation, "dilation", low=1)
    if window * dilation > L - 1:
        raise ValueError(
            f"the window is larger than the sequence: window={window} * dilation={dilation} "
            f"reaches {window * dilation} positions away, but L={L} has at most {L - 1} "
            "(use full attention)"
        )
    return L, window, dilation


def check_global_indices(global_idx: Any, L: int) -> np.ndarray:
    """Distinct integer positions in ``0 .. L - 1`` (an empty list is allowed)."""
    if hasattr(global_idx, "detach"):
        global_idx = global_idx.detach().cpu().numpy()
    idx = np.asarray(global_idx)
    if idx.size == 0:
        return np.zeros(0, dtype=np.int64)
    if idx.ndim != 1 or idx.dtype.kind not in "iu":
        raise TypeError(
            f"global_idx must be a 1-D sequence of integer positions, got {idx.dtype} array of "
            f"shape {fmt_shape(idx.shape)}"
        )
    bad = idx[(idx < 0) | (idx >= L)]
    if bad.size:
        raise ValueError(
            f"global_idx {bad.tolist()} out of range: positions run from 0 to L - 1 = {L - 1}"
        )
    return idx.astype(np.int64)


def check_block_length(n: int, block: int, name: str) -> int:
    """The number of blocks of a length that must be a multiple of ``block``."""
    if n % block:
        up = -(-n // block) * block
        raise ValueError(
            f"{name} has {n} positions, not a multiple of block={block}: pad the sequence to "
            f"{up} or choose a block that divides {n}"
        )
    return n // block


def check_layout(layout: Any, shape: tuple[int, int] | None = None) -> np.ndarray:
    """A 2-D boolean block layout (a NumPy copy), of ``shape`` if given."""
    if hasattr(layout, "detach"):
        layout = layout.detach().cpu().numpy()
    arr = np.asarray(layout)
    if arr.dtype != np.bool_:
        raise TypeError(f"layout must be boolean (True = the blocks attend), got dtype {arr.dtype}")
    if arr.ndim != 2 or 0 in arr.shape:
        raise ValueError(
            f"layout must be a non-empty 2-D (query blocks, key blocks) array, got shape "
            f"{fmt_shape(arr.shape)}"
        )
    if shape is not None and arr.shape != shape:
        raise ValueError(
            f"layout must have shape {fmt_shape(shape)} (L_q / block, L_k / block), got "
            f"{fmt_shape(arr.shape)}"
        )
    return arr


def check_scale(scale: Any, d_k: int) -> float:
    """``1 / sqrt(d_k)`` by default, else a finite real number."""
    if scale is None:
        return 1.0 / math.sqrt(d_k)
    return check_real(scale, "scale")


def check_qkv(q: Any, k: Any, v: Any, convert: Callable, self_attention: bool = False):
    """q (..., L_q, d_k), k (..., L_k, d_k), v (..., L_k, d_v), one leading shape.

    ``convert`` is :func:`course_lib.checks.as_array` or :func:`~course_lib.checks.as_tensor`;
    ``self_attention`` demands L_q = L_k (a pattern over one sequence).
    """
    q = convert(q, "q", min_ndim=2)
    k = convert(k, "k", min_ndim=2)
    v = convert(v, "v", min_ndim=2)
    qs, ks, vs = tuple(q.shape), tuple(k.shape), tuple(v.shape)
    if qs[-1] != ks[-1]:
        raise ValueError(
            f"q of shape {fmt_shape(qs)} and k of shape {fmt_shape(ks)} must have the same last "
            f"dimension d_k, got {qs[-1]} and {ks[-1]}"
        )
    if ks[-2] != vs[-2]:
        raise ValueError(
            f"k of shape {fmt_shape(ks)} and v of shape {fmt_shape(vs)} must have the same "
            f"length L_k (one value per key), got {ks[-2]} and {vs[-2]}"
        )
    if not qs[:-2] == ks[:-2] == vs[:-2]:
        raise ValueError(
            f"q, k and v must have the same leading (batch) shape, got {fmt_shape(qs)}, "
            f"{fmt_shape(ks)} and {fmt_shape(vs)}"
        )
    if self_attention and qs[-2] != ks[-2]:
        raise ValueError(
            f"a pattern over one sequence needs as many queries as keys, got L_q={qs[-2]} and "
            f"L_k={ks[-2]}"
        )
    return q, k, v


def check_xl_shapes(q, k, r, u, w) -> None:
    """Shapes of Transformer-XL's score: q (..., L_q, d), k (..., K, d), r (K, d), biases (d,)."""
    d = q[-1]
    for name, shape in (("k", k), ("r", r)):
        if shape[-1] != d:
            raise ValueError(
                f"{name} of shape {fmt_shape(shape)} must have the width of q, d = {d}"
            )
    for name, shape in (("content_bias", u), ("position_bias", w)):
        if shape != (d,):
            raise ValueError(f"{name} must have shape ({d},), got {fmt_shape(shape)}")
    if k[-2] < q[-2]:
        raise ValueError(
            f"k of shape {fmt_shape(k)} must have at least as many positions as q of shape "
            f"{fmt_shape(q)}: K = M + L_q keys (memory, then the segment)"
        )
    if r[-2] != k[-2]:
        raise ValueError(
            f"r must hold one embedding per key distance, {k[-2]} rows, got shape {fmt_shape(r)}"
        )
    if q[:-2] != k[:-2]:
        raise ValueError(
            f"q and k must have the same leading shape, got {fmt_shape(q)} and {fmt_shape(k)}"
        )
