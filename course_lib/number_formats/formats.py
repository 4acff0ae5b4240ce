"""The five binary floating-point formats of Chapter 12, and the table of their properties.

A format is fixed by three numbers: the width of the exponent field, the width of the fraction
(mantissa) field, and what the all-ones exponent means. Everything else, the bias, the largest
finite value, the smallest normal and subnormal numbers, the machine epsilon and the number of
decimal digits, is *computed* here from those three numbers (IEEE 754-2019, section 3.3; the OCP
8-bit formats of Micikevicius et al., 2022):

* IEEE-style formats (float32, float16, bfloat16, float8_e5m2) reserve the all-ones exponent for
  infinities (fraction 0) and NaNs (fraction not 0);
* ``float8_e4m3fn`` ("finite, NaN") has no infinities: the all-ones exponent holds normal numbers,
  except the single pattern with an all-ones fraction, which is NaN. That buys one more binade, so
  its largest value is 448 instead of 240.

This module is shared by the NumPy reference and the PyTorch side; nothing in it needs mirroring.

>>> f = get_format("float16")
>>> f.bits, f.bias, f.max_finite, f.min_subnormal == 2.0**-24
(16, 15, 65504.0, True)
>>> get_format("float8_e4m3fn").max_finite
448.0
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from course_lib.checks import check_choice

__all__ = [
    "FORMATS",
    "FORMAT_NAMES",
    "FloatFormat",
    "check_bit_patterns",
    "format_table",
    "get_format",
]


@dataclass(frozen=True)
class FloatFormat:
    """A binary floating-point format: 1 sign bit, ``exponent_bits``, ``mantissa_bits``.

    ``ieee_specials`` says whether the all-ones exponent is reserved for inf/NaN (IEEE 754) or,
    as in ``float8_e4m3fn``, holds normal numbers except for one NaN pattern per sign.
    """

    name: str
    exponent_bits: int
    mantissa_bits: int
    ieee_specials: bool = True

    # ------------------------------------------------------------------ the layout
    @property
    def bits(self) -> int:
        """Total width: sign + exponent + fraction."""
        return 1 + self.exponent_bits + self.mantissa_bits

    @property
    def bias(self) -> int:
        """Exponent bias ``2**(E-1) - 1``: the stored exponent e means ``2**(e - bias)``."""
        return 2 ** (self.exponent_bits - 1) - 1

    @property
    def exponent_all_ones(self) -> int:
        return 2**self.exponent_bits - 1

    @property
    def emin(self) -> int:
        """Exponent of the smallest normal number, ``1 - bias`` (also the subnormals' exponent)."""
        return 1 - self.bias

    @property
    def emax(self) -> int:
        """Exponent of the largest finite number."""
        top = self.exponent_all_ones - (1 if self.ieee_specials else 0)
        return top - self.bias

    @property
    def max_fraction(self) -> int:
        """Largest fraction field of a finite number at exponent ``emax``."""
        full = 2**self.mantissa_bits - 1
        return full if self.ieee_specials else full - 1  # E4M3FN: all ones is NaN

    # ------------------------------------------------------------------ derived values
    @property
    def max_finite(self) -> float:
        """Largest finite value ``2**emax * (1 + max_fraction / 2**M)``."""
        return math.ldexp(1 + self.max_fraction / 2**self.mantissa_bits, self.emax)

    @property
    def min_normal(self) -> float:
        """Smallest positive normal number ``2**emin``."""
        return math.ldexp(1.0, self.emin)

    @property
    def min_subnormal(self) -> float:
        """Smallest positive subnormal number ``2**(emin - M)``."""
        return math.ldexp(1.0, self.emin - self.mantissa_bits)

    @property
    def epsilon(self) -> float:
        """Machine epsilon: the gap between 1 and the next larger number, ``2**-M``."""
        return math.ldexp(1.0, -self.mantissa_bits)

    @property
    def decimal_digits(self) -> float:
        """Decimal digits of precision, ``(M + 1) * log10(2)`` (the hidden bit counts)."""
        return (self.mantissa_bits + 1) * math.log10(2)

    # ------------------------------------------------------------------ special patterns
    @property
    def sign_shift(self) -> int:
        return self.exponent_bits + self.mantissa_bits

    @property
    def max_pattern(self) -> int:
        """Largest bit pattern, ``2**bits - 1``."""
        return 2**self.bits - 1

    @property
    def nan_pattern(self) -> int:
        """The canonical (positive, quiet) NaN: all-ones exponent, top fraction bit set.

        For ``float8_e4m3fn`` the only NaN is the all-ones pattern ``0x7F``.
        """
        if not self.ieee_specials:
            return self.exponent_all_ones << self.mantissa_bits | (2**self.mantissa_bits - 1)
        return self.exponent_all_ones << self.mantissa_bits | 1 << (self.mantissa_bits - 1)

    @property
    def inf_pattern(self) -> int | None:
        """The pattern of +inf, or ``None`` when the format has no infinities."""
        return self.exponent_all_ones << self.mantissa_bits if self.ieee_specials else None

    @property
    def max_finite_pattern(self) -> int:
        """The pattern of the largest finite value."""
        return (self.emax + self.bias) << self.mantissa_bits | self.max_fraction


FORMATS: dict[str, FloatFormat] = {
    f.name: f
    for f in (
        FloatFormat("float32", 8, 23),
        FloatFormat("float16", 5, 10),
        FloatFormat("bfloat16", 8, 7),
        FloatFormat("float8_e4m3fn", 4, 3, ieee_specials=False),
        FloatFormat("float8_e5m2", 5, 2),
    )
}
FORMAT_NAMES: tuple[str, ...] = tuple(FORMATS)


def get_format(fmt: Any, name: str = "fmt") -> FloatFormat:
    """Return the :class:`FloatFormat` called ``fmt`` (or ``fmt`` itself if it is one).

    >>> get_format("bfloat16").mantissa_bits
    7
    >>> get_format("fp8")
    Traceback (most recent call last):
    ...
    ValueError: fmt must be one of 'float32', 'float16', 'bfloat16', 'float8_e4m3fn', 'float8_e5m2'; got 'fp8'
    """
    if isinstance(fmt, FloatFormat):
        return fmt
    if not isinstance(fmt, str):
        raise TypeError(
            f"{name} must be a format name such as 'bfloat16', got {fmt!r} of type "
            f"{type(fmt).__name__}"
        )
    return FORMATS[check_choice(fmt, name, FORMAT_NAMES)]


def format_table() -> list[dict[str, Any]]:
    """One row per format, every number computed from the field widths (not typed in).

    >>> rows = format_table()
    >>> [r["format"] for r in rows]
    ['float32', 'float16', 'bfloat16', 'float8_e4m3fn', 'float8_e5m2']
    >>> rows[1]["largest finite"], rows[1]["exponent bits"], rows[1]["fraction bits"]
    (65504.0, 5, 10)
    """
    return [
        {
            "format": f.name,
            "bits": f.bits,
            "exponent bits": f.exponent_bits,
            "fraction bits": f.mantissa_bits,
            "bias": f.bias,
            "largest finite": f.max_finite,
            "smallest normal": f.min_normal,
            "smallest subnormal": f.min_subnormal,
            "machine epsilon": f.epsilon,
            "decimal digits": f.decimal_digits,
            "infinities": f.ieee_specials,
        }
        for f in FORMATS.values()
    ]


def check_bit_patterns(bits: Any, fmt: FloatFormat, name: str = "bits") -> np.ndarray:
    """Check that ``bits`` holds unsigned integers that fit in ``fmt``; return them as int64.

    Bit patterns are unsigned: 0 to ``2**fmt.bits - 1``. A float array is refused (a bit pattern
    is an integer), and so is a pattern wider than the format.

    >>> check_bit_patterns([0x3C00, 0x7BFF], get_format("float16"))
    array([15360, 31743])
    >>> check_bit_patterns(0x10000, get_format("float16"))
    Traceback (most recent call last):
    ...
    ValueError: bits holds 65536 (0x10000), which is wider than float16's 16 bits (allowed: 0 to 65535 = 0xFFFF)
    """
    if hasattr(bits, "detach"):  # a torch tensor
        bits = bits.detach().cpu().numpy()
    arr = np.asarray(bits)
    if arr.dtype == bool or arr.dtype.kind not in "iu":
        raise TypeError(
            f"{name} must hold integers (bit patterns such as 0x3F80), got an array of dtype "
            f"{arr.dtype}"
        )
    if arr.size == 0:
        return arr.astype(np.int64)
    lo, hi = int(arr.min()), int(arr.max())
    if lo < 0:
        raise ValueError(
            f"{name} holds {lo}, but bit patterns are unsigned (0 to {fmt.max_pattern}); "
            f"add 2**{fmt.bits} to a negative signed integer to get its pattern"
        )
    if hi > fmt.max_pattern:
        raise ValueError(
            f"{name} holds {hi} ({hi:#X}), which is wider than {fmt.name}'s {fmt.bits} bits "
            f"(allowed: 0 to {fmt.max_pattern} = {fmt.max_pattern:#X})".replace("0X", "0x")
        )
    return arr.astype(np.int64)
