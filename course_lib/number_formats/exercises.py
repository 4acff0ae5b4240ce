"""Checkers for the exercises of Chapter 12 (number formats, both parts).

>>> decode_bfloat16(lambda bits: float(ref.decode(bits, "bfloat16"))).passed
True
>>> print(round_to_bfloat16(lambda bits: bits >> 16).details[0])  # doctest: +ELLIPSIS
on 0x3DCCCCCD (0.1): you return 0x3DCC instead of 0x3DCD: dropping the low 16 bits truncates...
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

import course_lib.number_formats.reference as ref
from course_lib.checker import Outcome, check_cases, diagnose, guarded, to_array

__all__ = ["absmax_int8_in_float32", "decode_bfloat16", "nf4_codes", "round_to_bfloat16"]


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


@guarded
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


def _as_int(got: Any) -> int | None:
    """A learner's single integer (int, NumPy or torch integer), or None."""
    if isinstance(got, bool):
        return None
    if isinstance(got, int | np.integer):
        return int(got)
    if hasattr(got, "dtype") and hasattr(got, "item"):
        try:
            arr = np.asarray(got.detach().cpu() if hasattr(got, "detach") else got)
        except (TypeError, ValueError):
            return None
        if arr.size == 1 and arr.dtype.kind in "iu":
            return int(arr.reshape(()))
    return None


def _bf16_of(bits32: int) -> int:
    """The correctly rounded bfloat16 pattern of a float32 pattern (the reference)."""
    value = np.array([bits32], dtype=np.uint32).view(np.float32)
    with np.errstate(invalid="ignore"):
        return int(ref.encode(value, "bfloat16")[0])


def _is_nan16(b: int) -> bool:
    return (b >> 7) & 0xFF == 0xFF and b & 0x7F != 0


@guarded
def round_to_bfloat16(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise: ``fn(bits)`` takes a float32 bit pattern (an int, 0 to 2**32 - 1) and returns
    the bfloat16 bit pattern (an int, 0 to 0xFFFF) of its value rounded to nearest, ties to even;
    a NaN stays a NaN (any NaN pattern is accepted) and an overflow becomes infinity."""
    patterns = [
        (0x3F800000, "0x3F800000 (one)"),
        (0x3DCCCCCD, "0x3DCCCCCD (0.1)"),
        (0x3F808000, "0x3F808000 (1 + 2**-8, exactly half-way between two bfloat16 numbers)"),
        (0x3F818000, "0x3F818000 (1 + 3 * 2**-8, another tie)"),
        (0x3F808001, "0x3F808001 (just above a tie)"),
        (0xBDCCCCCD, "0xBDCCCCCD (-0.1)"),
        (0x80000000, "0x80000000 (negative zero)"),
        (0x007FFFFF, "0x007FFFFF (the largest float32 subnormal)"),
        (0x7F7FFFFF, "0x7F7FFFFF (the largest float32)"),
        (0xFF800000, "0xFF800000 (minus infinity)"),
        (0x7FC00000, "0x7FC00000 (a quiet NaN)"),
        (0x7F800001, "0x7F800001 (a NaN whose only fraction bit is the lowest)"),
    ]

    def compare(got: Any, bits: int) -> str | None:
        want = _bf16_of(bits)
        g = _as_int(got)
        if got is None:
            return "the function returned None: did you forget a `return` statement?"
        if g is None:
            shown = f" {got!r}" if isinstance(got, float | str | bytes) else ""
            return (
                "return the bfloat16 bit pattern as one int (0 to 0xFFFF), got "
                f"{type(got).__name__}{shown}"
            )
        if not 0 <= g <= 0xFFFF:
            return f"you return 0x{g:X}, which is not a 16-bit pattern (0 to 0xFFFF)"
        if _is_nan16(want):
            if _is_nan16(g):
                return None
            if g in (0x7F80, 0xFF80):
                return (
                    f"you return 0x{g:04X}, infinity, for a NaN: adding the rounding increment to a "
                    "NaN whose fraction bits are all low carries into the exponent and clears the "
                    "fraction; handle NaN first (keep its top 16 bits and set a fraction bit)"
                )
            return f"you return 0x{g:04X} but the input is a NaN and must stay a NaN"
        if g == want:
            return None
        hints = [
            (
                bits >> 16,
                "dropping the low 16 bits truncates (rounds toward zero); round to nearest: add "
                "half a step of the kept bits before you shift",
            ),
            (
                (bits + 0x8000) >> 16,
                "adding 0x8000 rounds a tie up; ties go to even: add 0x7FFF plus the lowest kept "
                "bit ((bits >> 16) & 1), then shift",
            ),
            (
                ((bits + 0x7FFF) >> 16) & 0xFFFF,
                "adding 0x7FFF alone rounds every tie down; ties go to the even neighbour: add "
                "0x7FFF plus the lowest kept bit ((bits >> 16) & 1)",
            ),
        ]
        for wrong, hint in hints:
            if g == wrong & 0xFFFF and g != want:
                return f"you return 0x{g:04X} instead of 0x{want:04X}: {hint}"
        return f"you return 0x{g:04X} but the correctly rounded pattern is 0x{want:04X}"

    return check_cases(
        "rounding a float32 to bfloat16 with integer operations",
        fn,
        [(desc, (bits,), bits) for bits, desc in patterns],
        compare=compare,
        require=require,
    )


def _pair(got: Any) -> tuple[np.ndarray | None, np.ndarray | None, str | None]:
    """(codes, scales) as float64 arrays from a learner's pair, or a message."""
    if got is None:
        return None, None, "the function returned None: did you forget a `return` statement?"
    if not isinstance(got, tuple | list) or len(got) != 2:
        return None, None, f"return a pair (codes, scales), got {type(got).__name__}"
    codes, scales = (to_array(x) for x in got)
    if codes is None or scales is None:
        return None, None, "the codes and the scales must be arrays (or tensors) of numbers"
    return codes, scales.reshape(-1), None


@guarded
def absmax_int8_in_float32(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise (find the bug): ``fn(W, block_size)`` quantises a 1-D **bfloat16** tensor ``W``
    to absmax int8 codes per block, computed in float32; returns ``(q, scale)``: the codes (the
    shape of ``W``) and one scale ``absmax / 127`` per block (float32; a block of zeros gets
    scale 0 and codes 0)."""
    import torch

    g = torch.Generator().manual_seed(12)
    cases = [
        ("W = [0.5, -1.0, 0.25, 0.0] in one block", torch.tensor([0.5, -1.0, 0.25, 0.0]), 4),
        ("4096 weights of scale 0.02 in blocks of 64", 0.02 * torch.randn(4096, generator=g), 64),
        (
            "a block with an outlier and a block of zeros",
            torch.tensor([0.1, -0.2, 8.0, 0.05, 0.0, 0.0, 0.0, 0.0]),
            4,
        ),
    ]

    def compare(got: Any, args: tuple[Any, int]) -> str | None:
        W, B = args
        exact = W.double().numpy().reshape(-1, B)  # the bfloat16 values, exactly
        s_exact = np.abs(exact).max(axis=1) / 127  # (n_blocks,)
        safe = np.where(s_exact > 0, s_exact, 1.0)[:, None]
        q_exact = np.rint(exact / safe)  # (n_blocks, B)
        blocks16 = W.view(-1, B)
        s16 = blocks16.abs().amax(dim=1, keepdim=True) / 127  # bfloat16, as in the buggy code
        q16 = torch.round(blocks16 / torch.where(s16 > 0, s16, 1)).double().numpy()
        blocks32 = W.float().view(-1, B)  # the same in float32 (the library's way)
        s32 = blocks32.abs().amax(dim=1, keepdim=True) / 127
        q32 = torch.round(blocks32 / torch.where(s32 > 0, s32, 1)).double().numpy()
        codes, scales, problem = _pair(got)
        if problem:
            return problem
        if scales.size != s_exact.size:
            return f"{scales.size} scales for {s_exact.size} blocks: one scale per block"
        if not (np.all(np.isfinite(codes)) and np.all(np.isfinite(scales))):
            return (
                "NaN or inf in your result: a block of zeros has absmax 0; give it scale 0 and "
                "codes 0 instead of dividing by zero"
            )
        nonzero = s_exact > 0
        if nonzero.any() and np.allclose(scales[nonzero], s_exact[nonzero] * 127 / 128):
            return "divide the absmax by 127, not 128: symmetric int8 uses -127..127"
        if codes.size != q_exact.size:
            return f"{codes.size} codes for {q_exact.size} weights: one code per weight"
        q = codes.reshape(q_exact.shape)
        wrapped = (q16 + 128) % 256 - 128  # the same codes after a cast to int8 (128 -> -128)
        if (np.array_equal(q, q16) or np.array_equal(q, wrapped)) and not np.array_equal(
            q16, q_exact
        ):
            beyond = " (some even round to 128, beyond int8)" if (q16 == 128).any() else ""
            return (
                "your codes are those of the computation in bfloat16: w / s is rounded to 8 "
                "significant bits before round() sees it, and near 127 the bfloat16 numbers are "
                f"0.5 apart{beyond}; convert the block to float32 first (W.float())"
            )
        if not (np.array_equal(q, q_exact) or np.array_equal(q, q32)):
            if np.array_equal(q, np.trunc(exact / safe)):
                return "round to the nearest integer (torch.round), do not truncate toward zero"
            wrong = int((q != q_exact).sum())
            return f"{wrong} of {q.size} codes are not the nearest integer to w / scale"
        if not np.allclose(scales, s_exact, rtol=1e-6, atol=0):
            s_bf16 = s16.double().numpy().reshape(-1)
            if np.allclose(scales, s_bf16, rtol=0, atol=0):
                return (
                    "your scales are rounded to bfloat16 (8 significant bits): absmax / 127 was "
                    "computed in bfloat16; convert the block to float32 first (W.float()) and "
                    "keep the scales in float32, as bitsandbytes does"
                )
            return f"scales: {diagnose(scales, s_exact, rtol=1e-6, atol=0)}"
        return None

    return check_cases(
        "absmax int8 quantisation of bfloat16 weights, computed in float32",
        fn,
        [(d, (W.to(torch.bfloat16), B), (W.to(torch.bfloat16), B)) for d, W, B in cases],
        compare=compare,
        require=require,
    )


@guarded
def nf4_codes(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise: ``fn(W, block_size)`` quantises the 1-D NumPy array ``W`` (its length a
    multiple of ``block_size``) to NF4: each block divided by its absmax, each value replaced by
    the index (0..15) of the nearest level of ``ref.nf4_codebook()``. Returns ``(codes, absmax)``:
    the codes (the shape of ``W``) and the absmax of each block."""
    rng = np.random.default_rng(44)
    cases = [
        ("W = [0.0, 0.6, -1.0, 0.08] in one block", np.array([0.0, 0.6, -1.0, 0.08]), 4),
        ("128 normal weights in blocks of 64", 0.02 * rng.standard_normal(128), 64),
        (
            "blocks of 8 of very different sizes",
            np.r_[rng.standard_normal(8), 1e-3 * rng.standard_normal(8)],
            8,
        ),
        ("a block of zeros and a negative outlier", np.r_[np.zeros(4), [0.1, -3.0, 0.2, 0.3]], 4),
    ]
    levels = ref.nf4_codebook()

    def compare(got: Any, args: tuple[np.ndarray, int]) -> str | None:
        W, B = args
        want_codes, want_absmax = ref.nf4_quantize(W, block_size=B)
        codes, absmax, problem = _pair(got)
        if problem:
            return problem
        blocks = W.reshape(-1, B)
        if absmax.size != want_absmax.size:
            if absmax.size == 1:
                return "one absmax for the whole array: NF4 scales each block by its own absmax"
            return f"{absmax.size} absmax values for {want_absmax.size} blocks: one per block"
        if np.allclose(absmax, blocks.max(axis=1)) and not np.allclose(absmax, want_absmax):
            return "absmax is the largest |w| of the block, not the largest w: use np.abs"
        if not np.allclose(absmax, want_absmax, rtol=1e-6, atol=0):
            return f"absmax: {diagnose(absmax, want_absmax, rtol=1e-6, atol=0)}"
        if codes.size != W.size:
            return f"{codes.size} codes for {W.size} weights: one code per weight"
        codes = codes.reshape(W.shape)
        if np.array_equal(codes, want_codes):
            return None
        if not np.all(np.isfinite(codes)) or codes.min() < 0 or codes.max() > 15:
            if np.all(np.isfinite(codes)) and np.abs(codes).max() <= 1.0:
                return (
                    "your codes look like level values: return the index (0..15) of the "
                    "nearest level, not the level itself"
                )
            return (
                "codes must be the indices 0..15 of the nearest level (and no NaN: divide a "
                "block of zeros by 1, not by its absmax 0)"
            )
        safe = np.where(want_absmax > 0, want_absmax, 1.0)[:, None]
        x = (blocks / safe).reshape(-1)
        even = np.clip(np.rint((x + 1) * 7.5), 0, 15)
        if np.array_equal(codes.reshape(-1), even):
            return (
                "that spaces 16 levels evenly over [-1, 1] (like int4); NF4's levels are the "
                "values of ref.nf4_codebook(): take the index of the nearest one"
            )
        unnorm = np.abs(W[:, None] - levels).argmin(axis=1)
        if np.array_equal(codes.reshape(-1), unnorm):
            return "divide each block by its absmax first, so that it lies in [-1, 1]"
        wrong = int((codes.reshape(-1) != want_codes.reshape(-1)).sum())
        return f"{wrong} of {W.size} codes are not the index of the nearest level"

    return check_cases(
        "NF4 codes per block",
        fn,
        [(d, (W, B), (W, B)) for d, W, B in cases],
        compare=compare,
        require=require,
    )
