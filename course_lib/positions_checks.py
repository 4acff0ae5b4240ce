"""Input checks shared by both sides of Chapter 6's position encodings (scalar arguments).

>>> check_even(5, "d_model")
Traceback (most recent call last):
...
ValueError: d_model must be even (the encoding works on pairs of columns: sin and cos, or the two coordinates of a rotation), got 5
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from course_lib.checks import check_int

__all__ = ["LAYOUTS", "check_base", "check_bool", "check_even"]

#: Which two columns form a pair: (2i, 2i+1) or (i, i + d/2).
LAYOUTS = ("interleaved", "concatenated")


def check_base(base: Any) -> float:
    """The base of the frequencies ``base^(-2i/d)``: a positive finite number.

    >>> check_base(0)
    Traceback (most recent call last):
    ...
    ValueError: base must be a positive finite number, got 0
    """
    if isinstance(base, bool) or not isinstance(base, int | float | np.integer | np.floating):
        raise TypeError(f"base must be a number, got {base!r}")
    if not math.isfinite(base) or base <= 0:
        raise ValueError(f"base must be a positive finite number, got {base}")
    return float(base)


def check_even(d: Any, name: str) -> int:
    """An even width of at least 2 (sin/cos pairs, rotation pairs)."""
    d = check_int(d, name, low=2)
    if d % 2:
        raise ValueError(
            f"{name} must be even (the encoding works on pairs of columns: sin and cos, or the two "
            f"coordinates of a rotation), got {d}"
        )
    return d


def check_bool(value: Any, name: str) -> bool:
    """A real bool (not 0/1 or a string).

    >>> check_bool("yes", "symmetric")
    Traceback (most recent call last):
    ...
    TypeError: symmetric must be True or False, got 'yes'
    """
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)
