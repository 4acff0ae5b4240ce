"""Checkers for the exercises of Chapter 12 (number formats).

>>> decode_bfloat16(lambda bits: float(ref.decode(bits, "bfloat16"))).passed
True
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

import course_lib.number_formats.reference as ref
from course_lib.checker import Outcome, check_cases, diagnose, to_array

__all__ = ["absmax_int8", "decode_bfloat16", "largest_finite"]


def _as_float(got: Any) -> float | None:
    try:
        arr = np.asarray(got.detach().cpu() if hasattr(got, "detach") else got, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    return float(arr) if arr.shape in ((), (1,)) else None


def _bf16_variant(
    bits: int, *, bias: int = 127, hidden: bool = True, subnormals: bool = True, frac_bits: int = 7
) -> float:
    """bfloat16 decoded with one of the usual mistakes (for the diagnosis)."""
    s, e, f = bits >> 15, (bits >> 7) & 0xFF, bits & 0x7F
    if e == 0xFF:
        return math.nan if f else (-1) ** s * math.inf
    if e == 0 and subnormals:
        return (-1) ** s * math.ldexp(f / 2**frac_bits, 1 - bias)
    return (-1) ** s * math.ldexp((1 if hidden else 0) + f / 2**frac_bits, e - bias)


def decode_bfloat16(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise 12.1: ``fn(bits)`` returns the value (a float) of a 16-bit bfloat16 pattern."""
    patterns = [
        (0x3F80, "0x3F80 (one)"),
        (0x3E20, "0x3E20 (the notes' 0.15625, in bfloat16)"),
        (0xC049, "0xC049 (a negative number)"),
        (0x4479, "0x4479"),
        (0x0080, "0x0080 (the smallest normal number)"),
        (0x0001, "0x0001 (the smallest subnormal number)"),
        (0x8000, "0x8000 (negative zero)"),
        (0x7F7F, "0x7F7F (the largest finite number)"),
        (0xFF80, "0xFF80"),
        (0x7FC1, "0x7FC1"),
    ]

    def compare(got: Any, bits: int) -> str | None:
        want = float(ref.decode(bits, "bfloat16"))
        g = _as_float(got)
        if g is None:
            return f"return one float, got {type(got).__name__} {got!r}"
        if math.isnan(want):
            if math.isnan(g):
                return None
            return (
                f"you return {g:.6g} but the pattern is NaN: an all-ones exponent with a "
                "non-zero fraction is Not a Number"
            )
        if g == want and math.copysign(1, g) == math.copysign(1, want):
            return None
        if g == want:
            return "the sign of zero is wrong: 0x8000 is -0.0 (sign bit set, everything else 0)"
        hints = [
            (-want, "the sign is lost: bit 15 is the sign, value = (-1)**sign * ..."),
            (
                _bf16_variant(bits, bias=128),
                "the bias of bfloat16 is 127 (as for float32), not 128",
            ),
            (
                _bf16_variant(bits, bias=126),
                "the bias of bfloat16 is 127 (as for float32), not 126",
            ),
            (
                _bf16_variant(bits, hidden=False),
                "a normal number has a hidden leading 1: 1 + f/2**7",
            ),
            (
                _bf16_variant(bits, subnormals=False),
                "an exponent field of 0 means a subnormal number: no hidden 1, and the exponent "
                "is 1 - 127 = -126, not 0 - 127",
            ),
            (
                _bf16_variant(bits, frac_bits=23),
                "bfloat16 has 7 fraction bits: divide the fraction field by 2**7, not 2**23",
            ),
        ]
        if math.isinf(want):
            return (
                f"you return {g!r} but the pattern is {want}: an all-ones exponent with a zero "
                "fraction is infinity"
            )
        for wrong, hint in hints:
            if g == wrong or (wrong != 0 and math.isclose(g, wrong, rel_tol=1e-12)):
                return f"you return {g!r} instead of {want!r}: {hint}"
        return f"you return {g!r} but the value is {want!r}"

    return check_cases(
        "decoding a bfloat16 bit pattern by hand",
        fn,
        [(desc, (bits,), bits) for bits, desc in patterns],
        compare=compare,
        require=require,
    )


def largest_finite(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise 12.2: ``fn(exponent_bits, mantissa_bits)``, the largest finite value of an
    IEEE-style format (the all-ones exponent reserved for infinities and NaNs)."""
    sizes = [(5, 10), (8, 7), (8, 23), (5, 2), (4, 3), (11, 52)]
    names = {
        (5, 10): "float16",
        (8, 7): "bfloat16",
        (8, 23): "float32",
        (5, 2): "float8_e5m2",
        (4, 3): "an IEEE-style E4M3 (not the E4M3FN of the chapter)",
        (11, 52): "float64",
    }

    def compare(got: Any, size: tuple[int, int]) -> str | None:
        E, M = size
        bias = 2 ** (E - 1) - 1
        want = math.ldexp(2 - 2.0**-M, bias)
        g = _as_float(got)
        if g is None:
            return f"return one number, got {type(got).__name__}"
        if math.isclose(g, want, rel_tol=1e-12):
            return None
        mistakes = [
            (
                2 * want,
                "the all-ones exponent is reserved for inf and NaN: the largest exponent "
                "field is 2**E - 2, so the largest power is 2**bias",
            ),
            (
                math.ldexp(1, bias + 1),
                "that is the first power of two *beyond* the range; the "
                "largest fraction is all ones: 1 + (2**M - 1)/2**M = 2 - 2**-M",
            ),
            (math.ldexp(1, bias), "the largest number has an all-ones fraction, not 0"),
            (
                math.ldexp(2 - 2.0 ** (1 - M), bias),
                "the largest fraction is 1 - 2**-M, so the significand is 2 - 2**-M",
            ),
        ]
        for wrong, hint in mistakes:
            if math.isclose(g, wrong, rel_tol=1e-12):
                return f"you return {g:.8g} instead of {want:.8g}: {hint}"
        return f"you return {g:.8g} but the largest finite value is {want:.8g}"

    return check_cases(
        "the largest finite value of a format",
        fn,
        [(f"{names[s]} (E={s[0]}, M={s[1]})", s, s) for s in sizes],
        compare=compare,
        require=require,
    )


def absmax_int8(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise 12.3: ``fn(W, block_size)`` returns ``(q, scale)``: int8 codes of the 1-D array
    ``W`` (its length a multiple of ``block_size``) and one scale ``absmax / 127`` per block."""
    rng = np.random.default_rng(12)
    cases = [
        ("W = [0.5, -1.0, 0.25, 0.0] in one block", np.array([0.5, -1.0, 0.25, 0.0]), 4),
        ("12 random values in blocks of 4", rng.standard_normal(12), 4),
        ("64 small weights in blocks of 16", 0.02 * rng.standard_normal(64), 16),
        (
            "a block with an outlier and a block of zeros",
            np.array([0.1, -0.2, 8.0, 0.05, 0.0, 0.0, 0.0, 0.0]),
            4,
        ),
    ]

    def compare(got: Any, args: tuple[np.ndarray, int]) -> str | None:
        W, B = args
        q_want, s_want = ref.absmax_quantize(W, block_size=B)
        if not isinstance(got, tuple | list) or len(got) != 2:
            return "return a pair (q, scale)"
        q, scale = got
        q_arr, s_arr = to_array(q), to_array(scale)
        if q_arr is None or s_arr is None:
            return "q and scale must be arrays of numbers"
        s_arr = s_arr.reshape(-1)
        if s_arr.shape != s_want.shape:
            return (
                f"scale has {s_arr.size} values but there are {s_want.size} blocks: one scale per "
                "block of block_size values"
            )
        if np.any(~np.isfinite(q_arr)) or np.any(~np.isfinite(s_arr)):
            return (
                "NaN or inf in your result: a block of zeros has absmax 0, so give it scale 0 and "
                "codes 0 instead of dividing by zero"
            )
        ratio = s_arr[s_want > 0] / s_want[s_want > 0]
        if ratio.size and np.allclose(ratio, 127 / 128):
            return "divide the absmax by 127, not 128: symmetric int8 uses -127..127"
        problem = diagnose(s_arr, s_want, rtol=1e-9, atol=1e-15)
        if problem:
            return f"scale: {problem}"
        if np.asarray(q).dtype.kind not in "iu" and not (
            hasattr(q, "dtype") and str(q.dtype).startswith("torch.int")
        ):
            return "q must hold integers: round, then convert with .astype(np.int8)"
        if q_arr.shape != q_want.shape:
            return f"q has shape {q_arr.shape} but W has shape {q_want.shape}"
        if np.array_equal(q_arr, q_want):
            return None
        per_block = np.repeat(s_want, B)
        x = W / np.where(per_block > 0, per_block, 1.0)
        if np.array_equal(q_arr, np.trunc(x)):
            return "round to the nearest integer (np.rint), do not truncate toward zero"
        if np.array_equal(q_arr, np.floor(x)):
            return "round to the nearest integer (np.rint), do not round down with floor"
        return f"codes: {diagnose(q_arr, q_want)}"

    return check_cases(
        "absmax int8 quantisation per block",
        fn,
        [(d, (W, B), (W, B)) for d, W, B in cases],
        compare=compare,
        require=require,
    )
