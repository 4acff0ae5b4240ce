"""Input checks of Chapter 2 shared by the NumPy and PyTorch softmax modules.

They follow :mod:`course_lib.checks`: a ``TypeError`` or ``ValueError`` that names the argument,
what it got and what was expected.

>>> check_real(0.5, "p", low=0.0, high=1.0, low_open=True)
0.5
>>> check_real(-1, "temperature", low=0.0)
Traceback (most recent call last):
...
ValueError: temperature must be in [0.0, inf], got -1
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from course_lib.checks import fmt_shape

REDUCTIONS = ("mean", "sum", "none")


def check_real(
    value: Any, name: str, *, low: float, high: float = math.inf, low_open: bool = False
) -> float:
    """Check that ``value`` is a real number (not a bool) in ``[low, high]`` (or ``(low, high]``)."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise TypeError(
            f"{name} must be a real number, got {value!r} of type {type(value).__name__}"
        )
    v = float(value)
    below = v <= low if low_open else v < low
    if math.isnan(v) or below or v > high:
        bracket = "(" if low_open else "["
        raise ValueError(f"{name} must be in {bracket}{low}, {high}], got {value!r}")
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


def check_reduction(value: Any) -> str:
    """Check a loss reduction: ``"mean"``, ``"sum"`` or ``"none"``."""
    if not isinstance(value, str) or value not in REDUCTIONS:
        raise ValueError(f"reduction must be one of 'mean', 'sum', 'none'; got {value!r}")
    return value


def check_target_kind(dtype_is_integer: bool, dtype: Any) -> None:
    """Targets are integer class indices (probabilities as targets are not supported)."""
    if not dtype_is_integer:
        raise TypeError(f"targets must hold integer class indices, got dtype {dtype}")


def check_target_shape(shape: Sequence[int], expected: Sequence[int]) -> None:
    """The targets have the logits' shape without the class axis."""
    if tuple(shape) != tuple(expected):
        raise ValueError(
            "targets must have the shape of the logits without the class axis "
            f"{fmt_shape(expected)}, got {fmt_shape(shape)}"
        )


def bad_target_error(value: int, classes: int, ignore_index: int) -> ValueError:
    """The error for a class index out of range."""
    return ValueError(
        f"targets must be class indices in 0..{classes - 1} (or ignore_index={ignore_index}),"
        f" got {value}"
    )
