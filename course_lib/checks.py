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
import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # PyTorch is imported where a tensor is made: the NumPy half runs without it
    import torch


def is_tensor(x: Any) -> bool:
    """Whether ``x`` is a ``torch.Tensor``, without importing PyTorch (no tensor can exist
    before something imported it).

    >>> is_tensor([1.0]), is_tensor(np.ones(2))
    (False, False)
    """
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


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
    if is_tensor(x):
        torch = sys.modules["torch"]
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

    >>> import torch
    >>> as_tensor(torch.ones(2, dtype=torch.int64), "X")
    Traceback (most recent call last):
    ...
    TypeError: X must be a floating-point tensor, got dtype torch.int64 (convert it with .float())
    >>> as_tensor([1, 2], "X").dtype
    torch.float64
    """
    import torch

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


def values_are_free_to_read(t: torch.Tensor) -> bool:
    """Whether a check may read a tensor's values (``bool(t.all())``, ``int(t.max())``).

    Reading a value makes the host wait for the device and breaks a ``torch.compile`` graph, so
    value checks run only in eager mode on the CPU, where reading costs nothing. On a GPU, a
    meta device or under compilation they are skipped (shape and dtype checks still run), which
    keeps GPU timings honest and lets a model's forward trace as one graph.

    >>> import torch
    >>> values_are_free_to_read(torch.ones(2)), values_are_free_to_read(torch.ones(2, device="meta"))
    (True, False)
    """
    import torch

    return t.device.type == "cpu" and not torch.compiler.is_compiling()


def same_device_and_dtype(**tensors: torch.Tensor) -> None:
    """Raise if the tensors live on different devices or have different dtypes.

    >>> import torch
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
    kinds = {type(c) for c in options}
    if len(kinds) == 1 and not isinstance(value, next(iter(kinds))):
        kind = next(iter(kinds)).__name__
        raise TypeError(f"{name} must be a {kind}, one of {options}; got {value!r}")
    if value not in options:
        listed = ", ".join(repr(c) for c in options)
        raise ValueError(f"{name} must be one of {listed}; got {value!r}")
    return value


def check_bool(value: Any, name: str) -> bool:
    """A real bool (not 0/1, not a string).

    >>> check_bool("yes", "saturate")
    Traceback (most recent call last):
    ...
    TypeError: saturate must be True or False, got 'yes'
    """
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_real(
    value: Any,
    name: str,
    *,
    low: float = -math.inf,
    high: float = math.inf,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """A real number (not a bool, not NaN) in the interval from ``low`` to ``high``.

    The interval is closed unless ``low_open``/``high_open``; an open infinite end rejects
    infinity, so ``low=0, low_open=True, high_open=True`` means "positive and finite".

    >>> check_real(0.5, "p", low=0.0, high=1.0, low_open=True)
    0.5
    >>> check_real(-1, "temperature", low=0.0)
    Traceback (most recent call last):
    ...
    ValueError: temperature must be in [0.0, inf], got -1
    >>> check_real(True, "lr", low=0.0, low_open=True)
    Traceback (most recent call last):
    ...
    TypeError: lr must be a real number, got True of type bool
    """
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"{name} must be a real number, got {value!r} of type {type(value).__name__}"
        )
    v = float(value)
    too_low = v <= low if low_open else v < low
    too_high = v >= high if high_open else v > high
    if math.isnan(v) or too_low or too_high:
        interval = f"{'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
        raise ValueError(f"{name} must be in {interval}, got {value!r}")
    return v


def check_same_shape(
    a_shape: Sequence[int], b_shape: Sequence[int], a_name: str, b_name: str
) -> None:
    """Raise unless two arrays have the same shape.

    >>> check_same_shape((2, 3), (3, 2), "x", "grad")
    Traceback (most recent call last):
    ...
    ValueError: grad must have the shape of x (2, 3), got (3, 2)
    """
    if tuple(a_shape) != tuple(b_shape):
        raise ValueError(
            f"{b_name} must have the shape of {a_name} {fmt_shape(a_shape)}, "
            f"got {fmt_shape(b_shape)}"
        )


def check_token_ids(tokens: Any, config: Any) -> np.ndarray:
    """Token ids (..., L) as int64, checked against ``config.vocab_size`` and
    ``config.context_length`` (any model config with those two fields): integers, 1 <= L <=
    context_length, every id in [0, vocab_size).

    >>> from types import SimpleNamespace
    >>> check_token_ids([[1, 2]], SimpleNamespace(vocab_size=3, context_length=4)).dtype
    dtype('int64')
    """
    t = np.asarray(tokens.detach().cpu() if hasattr(tokens, "detach") else tokens)
    if t.dtype.kind not in "iu":
        raise TypeError(f"tokens must be integers (token ids), got an array of dtype {t.dtype}")
    if t.ndim < 1 or 0 in t.shape:
        raise ValueError(f"tokens must have shape (..., L) with L >= 1, got {fmt_shape(t.shape)}")
    if t.shape[-1] > config.context_length:
        raise ValueError(
            f"the sequence has {t.shape[-1]} tokens but the model has only "
            f"context_length = {config.context_length} positions"
        )
    if t.min() < 0 or t.max() >= config.vocab_size:
        raise ValueError(
            f"token ids must lie in [0, {config.vocab_size - 1}] (vocab_size = "
            f"{config.vocab_size}), got values from {t.min()} to {t.max()}"
        )
    return t.astype(np.int64)
