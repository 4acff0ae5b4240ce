"""Input checks shared by both sides of Chapter 6's position encodings (scalar arguments).

>>> check_even(5, "d_model")
Traceback (most recent call last):
...
ValueError: d_model must be even (the encoding works on pairs of columns: sin and cos, or the two coordinates of a rotation), got 5
"""

from __future__ import annotations

from typing import Any

from course_lib.checks import check_int, check_real

__all__ = ["LAYOUTS", "check_base", "check_even"]

#: Which two columns form a pair: (2i, 2i+1) or (i, i + d/2).
LAYOUTS = ("interleaved", "concatenated")


def check_base(base: Any) -> float:
    """The base of the frequencies ``base^(-2i/d)``: a positive finite number.

    >>> check_base(0)
    Traceback (most recent call last):
    ...
    ValueError: base must be in (0.0, inf), got 0
    """
    return check_real(base, "base", low=0.0, low_open=True, high_open=True)


def check_even(d: Any, name: str) -> int:
    """An even width of at least 2 (sin/cos pairs, rotation pairs)."""
    d = check_int(d, name, low=2)
    if d % 2:
        raise ValueError(
            f"{name} must be even (the encoding works on pairs of columns: sin and cos, or the two "
            f"coordinates of a rotation), got {d}"
        )
    return d
