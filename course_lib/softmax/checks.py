"""Input checks of Chapter 2 shared by the NumPy and PyTorch softmax modules.

They follow :mod:`course_lib.checks`: a ``TypeError`` or ``ValueError`` that names the argument,
what it got and what was expected.

>>> check_reduction("avg")
Traceback (most recent call last):
...
ValueError: reduction must be one of 'mean', 'sum', 'none'; got 'avg'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from course_lib.checks import fmt_shape

REDUCTIONS = ("mean", "sum", "none")


def check_reduction(value: Any) -> str:
    """Check a loss reduction: ``"mean"``, ``"sum"`` or ``"none"``."""
    if not isinstance(value, str):
        raise TypeError(f"reduction must be a str, one of 'mean', 'sum', 'none'; got {value!r}")
    if value not in REDUCTIONS:
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
