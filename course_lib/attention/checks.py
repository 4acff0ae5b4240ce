"""Input checks of Chapter 4's attention, shared by the NumPy and PyTorch sides (shapes only, so
both backends call them with their arrays' shapes).

>>> check_attention_scale(None, 16)
0.25
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

from course_lib.checks import fmt_shape


def check_attention_scale(scale: Any, d_k: int) -> float:
    """The scale on attention logits: ``1/sqrt(d_k)`` by default, else a positive finite number.

    >>> check_attention_scale(None, 16)
    0.25
    >>> check_attention_scale(-1.0, 16)
    Traceback (most recent call last):
    ...
    ValueError: scale must be a positive finite number, got -1.0
    """
    if scale is None:
        return 1.0 / math.sqrt(d_k)
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real):
        raise TypeError(f"scale must be a number or None, got {scale!r}")
    if not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"scale must be a positive finite number, got {scale}")
    return float(scale)


def check_broadcasts_to(shape: Sequence[int], target: Sequence[int], name: str) -> None:
    """Raise unless an array of ``shape`` broadcasts to the attention logits' ``target`` shape
    without enlarging it.

    >>> check_broadcasts_to((1, 3), (2, 4, 3), "mask")
    >>> check_broadcasts_to((2, 3), (4, 3), "mask")
    Traceback (most recent call last):
    ...
    ValueError: mask of shape (2, 3) does not broadcast to the attention logits of shape (4, 3) (..., L_q, L_k): each of its dimensions, aligned from the right, must be 1 or equal the logits' dimension
    """
    try:
        ok = np.broadcast_shapes(tuple(shape), tuple(target)) == tuple(target)
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(
            f"{name} of shape {fmt_shape(shape)} does not broadcast to the attention logits of "
            f"shape {fmt_shape(target)} (..., L_q, L_k): each of its dimensions, aligned from the "
            "right, must be 1 or equal the logits' dimension"
        )


def multi_head_shapes(
    x_q: Sequence[int],
    x_k: Sequence[int],
    x_v: Sequence[int],
    w_q: Sequence[int],
    w_k: Sequence[int],
    w_v: Sequence[int],
    w_o: Sequence[int],
) -> tuple[int, int, int]:
    """Check the shapes of multi-head attention's inputs (eqs. 14-18); return (h, d_k, d_v).

    x_q (..., d_l, d_g), x_k (..., d_s, d_w), x_v (..., d_s, d_u); per-head weights w_q
    (h, d_g, d_k), w_k (h, d_w, d_k), w_v (h, d_u, d_v); w_o (h*d_v, d_o). Backend-agnostic:
    both sides of the library call it with their arrays' shapes.

    >>> multi_head_shapes((5, 8), (7, 8), (7, 8), (2, 8, 4), (2, 8, 4), (2, 8, 3), (6, 8))
    (2, 4, 3)
    >>> multi_head_shapes((5, 8), (7, 8), (7, 8), (2, 8, 4), (2, 8, 4), (2, 8, 3), (8, 8))
    Traceback (most recent call last):
    ...
    ValueError: w_o of shape (8, 8) must have h * d_v = 2 * 3 = 6 rows (one per column of concat(A^1, ..., A^h))
    """
    h, _, d_k = w_q
    for w, name, x, x_name, d_name in (
        (w_q, "w_q", x_q, "x_q", "d_g"),
        (w_k, "w_k", x_k, "x_k", "d_w"),
        (w_v, "w_v", x_v, "x_v", "d_u"),
    ):
        if w[0] != h:
            raise ValueError(f"{name} of shape {fmt_shape(w)} has {w[0]} heads, but w_q has {h}")
        if w[1] != x[-1]:
            raise ValueError(
                f"{name} of shape {fmt_shape(w)} expects inputs of width {w[1]}, but "
                f"{x_name} has width {x[-1]} ({name} must be (h, {d_name}, ...))"
            )
    if w_k[2] != d_k:
        raise ValueError(
            f"w_q {fmt_shape(w_q)} and w_k {fmt_shape(w_k)} must project to the same "
            f"d_k, got {d_k} and {w_k[2]}"
        )
    if x_k[-2] != x_v[-2]:
        raise ValueError(
            f"x_k of shape {fmt_shape(x_k)} and x_v of shape {fmt_shape(x_v)} must "
            f"have the same length d_s (one value per key), got {x_k[-2]} and {x_v[-2]}"
        )
    d_v = w_v[2]
    if w_o[0] != h * d_v:
        raise ValueError(
            f"w_o of shape {fmt_shape(w_o)} must have h * d_v = {h} * {d_v} = {h * d_v} "
            "rows (one per column of concat(A^1, ..., A^h))"
        )
    return int(h), int(d_k), int(d_v)
