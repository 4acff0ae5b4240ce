"""Input checks shared by every public function of the course.

Each helper raises ``TypeError`` (wrong kind or dtype) or ``ValueError`` (wrong shape or value)
with a message that names the argument, what it got and what was expected, so that a learner
never has to read a stack trace from deep inside NumPy or PyTorch.

>>> as_array([[1, 2], [3, 4]], "X").dtype
dtype('float64')
>>> as_array([1.0, 2.0], "X", ndim=2)
Traceback (most recent call last):
...
ValueError: X must have 2 dimensions, got shape (2,)
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import torch


def fmt_shape(shape: Iterable[int]) -> str:
    """Format a shape the way NumPy prints it.

    >>> fmt_shape((2, 3)), fmt_shape([4]), fmt_shape(())
    ('(2, 3)', '(4,)', '()')
    """
    dims = tuple(int(s) for s in shape)
    return str(dims)


def _check_ndim(shape: Sequence[int], name: str, ndim: int | None, min_ndim: int | None) -> None:
    if ndim is not None and len(shape) != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {fmt_shape(shape)}")
    if min_ndim is not None and len(shape) < min_ndim:
        raise ValueError(
            f"{name} must have at least {min_ndim} dimensions, got shape {fmt_shape(shape)}"
        )


def _check_nonempty(shape: Sequence[int], name: str) -> None:
    if any(s == 0 for s in shape):
        raise ValueError(
            f"{name} is empty (shape {fmt_shape(shape)}): every dimension must be at least 1"
        )


def as_array(
    x: Any,
    name: str,
    *,
    ndim: int | None = None,
    min_ndim: int | None = None,
    allow_empty: bool = False,
) -> np.ndarray:
    """Convert ``x`` to a float64 NumPy array, checking its kind and shape.

    Booleans, integers and floats are accepted and promoted to float64 (the references compute
    in float64); complex numbers, strings and objects raise ``TypeError``. Torch tensors are
    accepted too (moved to the CPU, detached).

    >>> as_array(np.zeros((0, 3)), "X")
    Traceback (most recent call last):
    ...
    ValueError: X is empty (shape (0, 3)): every dimension must be at least 1
    >>> as_array(["a"], "X")
    Traceback (most recent call last):
    ...
    TypeError: X must hold real numbers, got an array of dtype <U1
    """
    if isinstance(x, torch.Tensor):
        x = x.detach().to("cpu")
        x = x.double().numpy() if x.is_floating_point() or x.dtype == torch.bool else x.numpy()
    try:
        arr = np.asarray(x)
    except ValueError as exc:  # ragged nested lists
        raise TypeError(f"{name} must be a rectangular array of numbers ({exc})") from None
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold real numbers, got an array of dtype {arr.dtype}")
    _check_ndim(arr.shape, name, ndim, min_ndim)
    if not allow_empty:
        _check_nonempty(arr.shape, name)
    return arr.astype(np.float64, copy=False)


def as_tensor(
    x: Any,
    name: str,
    *,
    ndim: int | None = None,
    min_ndim: int | None = None,
    allow_empty: bool = False,
) -> torch.Tensor:
    """Return ``x`` as a floating-point tensor, checking its kind and shape.

    A floating tensor is returned as it is (same dtype, same device, autograd intact). A tensor
    of another dtype raises ``TypeError``: convert it yourself, the library will not guess a
    precision. Other array-likes are converted with NumPy's rules (integers become float64) and
    placed on the CPU.

    >>> as_tensor(torch.ones(2, dtype=torch.int64), "X")
    Traceback (most recent call last):
    ...
    TypeError: X must be a floating-point tensor, got dtype torch.int64 (convert it with .float())
    >>> as_tensor([1, 2], "X").dtype
    torch.float64
    """
    if isinstance(x, torch.Tensor):
        if not x.is_floating_point():
            raise TypeError(
                f"{name} must be a floating-point tensor, got dtype {x.dtype} "
                "(convert it with .float())"
            )
        t = x
    else:
        t = torch.from_numpy(as_array(x, name, allow_empty=True).copy())
    _check_ndim(tuple(t.shape), name, ndim, min_ndim)
    if not allow_empty:
        _check_nonempty(tuple(t.shape), name)
    return t


def same_device_and_dtype(**tensors: torch.Tensor) -> None:
    """Raise if the tensors live on different devices or have different dtypes.

    >>> same_device_and_dtype(X=torch.ones(1), Y=torch.ones(1, dtype=torch.float64))
    Traceback (most recent call last):
    ...
    TypeError: X and Y must have the same dtype, got torch.float32 and torch.float64
    """
    items = list(tensors.items())
    (n0, t0) = items[0]
    for n, t in items[1:]:
        if t.device != t0.device:
            raise ValueError(
                f"{n0} and {n} must be on the same device, got {t0.device} and {t.device}"
            )
        if t.dtype != t0.dtype:
            raise TypeError(f"{n0} and {n} must have the same dtype, got {t0.dtype} and {t.dtype}")


def matmul_shapes(
    x_shape: Sequence[int], y_shape: Sequence[int], x_name: str = "X", y_name: str = "Y"
) -> tuple[int, ...]:
    """Check that ``X @ Y`` is defined and return the shape of the product.

    Both operands need at least 2 dimensions; leading (batch) dimensions broadcast as in NumPy.

    >>> matmul_shapes((5, 2, 3), (3, 4))
    (5, 2, 4)
    >>> matmul_shapes((2, 3), (4, 5))
    Traceback (most recent call last):
    ...
    ValueError: cannot multiply X of shape (2, 3) by Y of shape (4, 5): the number of columns of X (3) must equal the number of rows of Y (4)
    """
    xs, ys = tuple(x_shape), tuple(y_shape)
    if len(xs) < 2 or len(ys) < 2:
        raise ValueError(
            f"{x_name} and {y_name} must be matrices (at least 2 dimensions), got shapes "
            f"{fmt_shape(xs)} and {fmt_shape(ys)}"
        )
    if xs[-1] != ys[-2]:
        raise ValueError(
            f"cannot multiply {x_name} of shape {fmt_shape(xs)} by {y_name} of shape "
            f"{fmt_shape(ys)}: the number of columns of {x_name} ({xs[-1]}) must equal the "
            f"number of rows of {y_name} ({ys[-2]})"
        )
    try:
        batch = np.broadcast_shapes(xs[:-2], ys[:-2])
    except ValueError:
        raise ValueError(
            f"the batch dimensions of {x_name} {fmt_shape(xs[:-2])} and {y_name} "
            f"{fmt_shape(ys[:-2])} do not broadcast (each pair must be equal or one of them 1)"
        ) from None
    return (*batch, xs[-2], ys[-1])


def check_axis(axis: int, ndim: int, name: str = "axis") -> int:
    """Normalise an axis index to ``0..ndim-1``.

    >>> check_axis(-1, 3)
    2
    >>> check_axis(3, 3)
    Traceback (most recent call last):
    ...
    ValueError: axis=3 is out of range for an array with 3 dimensions (allowed: -3 to 2)
    """
    if not isinstance(axis, int | np.integer) or isinstance(axis, bool):
        raise TypeError(f"{name} must be an int, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise ValueError(
            f"{name}={axis} is out of range for an array with {ndim} dimensions "
            f"(allowed: {-ndim} to {ndim - 1})"
        )
    return int(axis) % ndim


def check_int(value: Any, name: str, *, low: int | None = None, high: int | None = None) -> int:
    """Check that ``value`` is an int in ``[low, high]`` and return it.

    >>> check_int(0, "d_ff", low=1)
    Traceback (most recent call last):
    ...
    ValueError: d_ff must be at least 1, got 0
    """
    if not isinstance(value, int | np.integer) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {value!r} of type {type(value).__name__}")
    if low is not None and value < low:
        raise ValueError(f"{name} must be at least {low}, got {value}")
    if high is not None and value > high:
        raise ValueError(f"{name} must be at most {high}, got {value}")
    return int(value)


def check_choice(value: Any, name: str, choices: Iterable[str]) -> str:
    """Check that ``value`` is one of ``choices``.

    >>> check_choice("gelu2", "activation", ["relu", "gelu"])
    Traceback (most recent call last):
    ...
    ValueError: activation must be one of 'relu', 'gelu'; got 'gelu2'
    """
    options = list(choices)
    if value not in options:
        listed = ", ".join(repr(c) for c in options)
        raise ValueError(f"{name} must be one of {listed}; got {value!r}")
    return value


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
