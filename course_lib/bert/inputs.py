"""Input checks of Chapter 9's model functions, shared by the NumPy and the PyTorch side.

Token ids, segment ids, the attention (padding) mask and MLM labels are integer or boolean
arrays of one shape ``(..., L)``; each check names the argument and what it expected.

>>> check_ids(np.array([[1, 2, 9]]), "tokens", high=5, max_len=8)
Traceback (most recent call last):
...
ValueError: tokens must lie in [0, 4] (vocab_size = 5), got values from 1 to 9
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from course_lib.checks import fmt_shape, values_are_free_to_read

__all__ = ["IGNORE", "check_ids", "check_labels", "check_mask", "check_segments"]

#: The label of a position that the loss skips (PyTorch's and Hugging Face's convention).
IGNORE = -100


def _as_int(x: Any, name: str) -> np.ndarray | torch.Tensor:
    t = x if isinstance(x, torch.Tensor | np.ndarray) else np.asarray(x)
    kind_ok = (
        not (t.is_floating_point() or t.is_complex() or t.dtype == torch.bool)
        if isinstance(t, torch.Tensor)
        else t.dtype.kind in "iu"
    )
    if not kind_ok:
        raise TypeError(f"{name} must hold integers (ids), got dtype {t.dtype}")
    if t.ndim < 1 or 0 in tuple(t.shape):
        raise ValueError(f"{name} must have shape (..., L) with L >= 1, got {fmt_shape(t.shape)}")
    return t


def _readable(t: Any) -> bool:
    return not isinstance(t, torch.Tensor) or values_are_free_to_read(t)


def check_ids(
    tokens: Any, name: str, high: int, max_len: int | None = None, what: str = "vocab_size"
):
    """Integer ids (..., L) in ``[0, high)``, with ``L <= max_len``."""
    t = _as_int(tokens, name)
    if max_len is not None and t.shape[-1] > max_len:
        raise ValueError(
            f"{name} has {t.shape[-1]} positions but the model has only max_len = {max_len}: "
            "truncate the sequence or build a model with more positions"
        )
    if _readable(t):
        lo, hi = int(t.min()), int(t.max())
        if lo < 0 or hi >= high:
            raise ValueError(
                f"{name} must lie in [0, {high - 1}] ({what} = {high}), got values from {lo} to {hi}"
            )
    return t


def _same_shape(t: Any, name: str, tokens: Any) -> None:
    if tuple(t.shape) != tuple(tokens.shape):
        raise ValueError(
            f"{name} must have the shape of tokens, {fmt_shape(tokens.shape)}, got {fmt_shape(t.shape)}"
        )


def check_segments(segments: Any, tokens: Any, n_segments: int):
    """Segment ids (0 for sentence A, 1 for B) of the tokens' shape; ``None`` means all zeros."""
    if segments is None:
        return (
            torch.zeros_like(tokens) if isinstance(tokens, torch.Tensor) else np.zeros_like(tokens)
        )
    s = check_ids(segments, "segments", n_segments, what="n_segments")
    _same_shape(s, "segments", tokens)
    return s


def check_mask(attention_mask: Any, tokens: Any):
    """A boolean mask of the tokens' shape, True for real tokens and False for padding."""
    if attention_mask is None:
        return None
    m = attention_mask if isinstance(attention_mask, torch.Tensor) else np.asarray(attention_mask)
    if m.dtype not in (torch.bool, np.dtype(bool)):
        raise TypeError(f"attention_mask must be boolean (True = real token), got dtype {m.dtype}")
    _same_shape(m, "attention_mask", tokens)
    if _readable(m) and not bool(m.any(-1).all()):
        raise ValueError("attention_mask must keep at least one real token in every sequence")
    return m


def check_labels(labels: Any, logits_shape: tuple[int, ...]):
    """Labels (..., L): a class id in ``[0, C)`` or :data:`IGNORE`, for logits (..., L, C)."""
    t = _as_int(labels, "labels")
    if tuple(t.shape) != tuple(logits_shape[:-1]):
        raise ValueError(
            f"labels must have shape {fmt_shape(logits_shape[:-1])} (one per position of logits "
            f"{fmt_shape(logits_shape)}), got {fmt_shape(t.shape)}"
        )
    if _readable(t):
        C = logits_shape[-1]
        bad = (t != IGNORE) & ((t < 0) | (t >= C))
        if bool(bad.any()):
            raise ValueError(
                f"labels must be in [0, {C - 1}] or {IGNORE} (skipped), got {int(t[bad][0])}"
            )
        if not bool((t != IGNORE).any()):
            raise ValueError(f"labels are all {IGNORE}: there is no position to compute a loss on")
    return t
