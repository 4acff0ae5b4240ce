"""Checkers for the exercises of Chapter 6 (positional encodings).

>>> import course_lib.positions.reference as ref
>>> sinusoidal_table(lambda n, d: ref.sinusoidal_encoding(n, d)).passed
True
>>> from course_lib.positions.as_printed import algorithm1_steps
>>> printed = lambda A: algorithm1_steps(np.eye(len(A)), np.transpose(A), "as printed")["D"]
>>> print(skew_step(printed).details[0])  # doctest: +ELLIPSIS
on the 2 x 2 example of the chapter: wrong values: ... (that is the mask as printed ...)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from course_lib.checker import (
    Outcome,
    check_cases,
    check_prediction,
    diagnose,
    first_mistake,
    guarded,
    seeded,
    to_array,
)
from course_lib.positions.as_printed import algorithm1_steps, sinusoidal_as_printed
from course_lib.positions.reference import rotary_embedding as _rotary
from course_lib.positions.reference import sinusoidal_encoding as _sinusoidal
from course_lib.positions.reference import skew as _skew

__all__ = ["rotary", "rotary_half", "scheme_prediction", "sinusoidal_table", "skew_step"]


#: Seed of this chapter's checker inputs.
SEED = 606


def _first_match(arr: np.ndarray | None, candidates: list[tuple[np.ndarray, str]]) -> str:
    hint = first_mistake(arr, candidates)
    return f" ({hint})" if hint else ""


@guarded
def sinusoidal_table(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise 6.1: ``fn(num_positions, d_model)`` returns the (num_positions, d_model) table of
    eq. (19), interleaved (sin in even columns, cos in odd ones), positions 0..num_positions-1.

    >>> sinusoidal_table(lambda n, d: np.zeros((n, d))).passed
    False
    """
    sizes = [
        ("num_positions = 2, d_model = 4 (row 1 is [sin 1, cos 1, sin 0.01, cos 0.01])", 2, 4),
        ("the 50 x 128 table of the figure in notes 004", 50, 128),
        ("num_positions = 7, d_model = 6", 7, 6),
        ("num_positions = 1, d_model = 2 (position 0 only)", 1, 2),
    ]
    cases = [(d, (n, dm), (n, dm)) for d, n, dm in sizes]

    def compare(got: object, args: tuple[int, int]) -> str | None:
        n, d = args
        expected = _sinusoidal(n, d)
        problem = diagnose(got, expected)
        if problem is None:
            return None
        arr = to_array(got)
        pos = np.arange(n, dtype=float)
        i = np.arange(d // 2)
        slow = pos[:, None] / 10000.0 ** (i / d)  # exponent i/d instead of 2i/d
        wrong_exponent = np.stack([np.sin(slow), np.cos(slow)], -1).reshape(n, d)
        candidates = [
            (
                sinusoidal_as_printed(pos, d, cos_index="2k+1"),
                "the position multiplies the sine, as printed in notes 004: it belongs inside, "
                "sin(pos * w_k)",
            ),
            (
                _sinusoidal(n, d, layout="concatenated"),
                "sines in the first half and cosines in the second: eq. (19) interleaves them, "
                "sin in column 2i and cos in column 2i+1",
            ),
            (
                _sinusoidal(n, d)[:, np.arange(d) ^ 1],
                "sin and cos are swapped: column 2i holds the sine",
            ),
            (
                _sinusoidal(np.arange(1, n + 1), d),
                "the positions start at 1: the first row is position 0",
            ),
            (
                wrong_exponent,
                "pair i should have the frequency 1 / 10000^(2i/d_model): the exponent is 2i/d, "
                "with i counting pairs",
            ),
        ]
        return problem + _first_match(arr, candidates)

    return check_cases(
        "the sinusoidal table of eq. (19)", fn, cases, compare=compare, require=require
    )


@guarded
def rotary(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise 6.2: ``fn(x, positions)`` rotates each pair (2i, 2i+1) of row m of x (L, d) by
    the angle ``positions[m] * 10000^(-2i/d)``, counter-clockwise.

    >>> rotary(lambda x, p: x).passed
    False
    """
    rng = seeded(SEED)
    raw = [
        ("a (2, 2) x at positions 0 and 1", np.array([[1.0, 0.0], [1.0, 0.0]]), np.array([0, 1])),
        ("a random (5, 8) x at positions 0..4", rng.standard_normal((5, 8)), np.arange(5)),
        (
            "a random (4, 6) x at positions 7, 3, 100, 0",
            rng.standard_normal((4, 6)),
            np.array([7, 3, 100, 0]),
        ),
        ("one row at position 12, d = 4", rng.standard_normal((1, 4)), np.array([12])),
    ]
    cases = [(d, (x, p), (x, p)) for d, x, p in raw]

    def compare(got: object, args: tuple[np.ndarray, np.ndarray]) -> str | None:
        x, p = args
        expected = _rotary(x, p)
        problem = diagnose(got, expected)
        if problem is None:
            return None
        candidates = [
            (
                _rotary(x, -p),
                "you rotate clockwise: use [[cos, -sin], [sin, cos]] on (x_2i, x_2i+1)",
            ),
            (
                _rotary(x, p, layout="concatenated"),
                "you paired column i with column i + d/2: this exercise pairs 2i with 2i+1",
            ),
            (x, "the rows are unchanged: did you forget to use the positions?"),
            (
                _rotary(x, np.arange(len(p))),
                "you used the row index 0..L-1, not the given positions",
            ),
            (
                _rotary(x, np.asarray(p) + 1),
                "your angles are one position too far: row m turns by positions[m] * w_i, so "
                "position 0 is not rotated at all",
            ),
            (
                _rotary_freqs(x, p, 10000.0 ** (-np.arange(x.shape[1] // 2) / x.shape[1])),
                "the frequency exponent is -2i/d with i the pair index (0..d/2-1); you used -i/d",
            ),
            (
                _rotary_freqs(x, p, 10000.0 ** (-4 * np.arange(x.shape[1] // 2) / x.shape[1])),
                "you put the column index 2i where the formula has the pair index i: pair i "
                "(columns 2i, 2i+1) turns at 10000^(-2i/d)",
            ),
            (
                _rotary_freqs(x, p, 10000.0 ** (2 * np.arange(x.shape[1] // 2) / x.shape[1])),
                "the exponent's sign is flipped: the frequencies 10000^(-2i/d) fall from 1 "
                "(pair 0) towards 1/10000; yours grow",
            ),
        ]
        return problem + _first_match(to_array(got), candidates)

    return check_cases("rotary embeddings", fn, cases, compare=compare, require=require)


def _rotary_freqs(x: np.ndarray, p: np.ndarray, freqs: np.ndarray) -> np.ndarray:
    """Interleaved rotary embedding with the given per-pair frequencies (for the variants with
    wrong frequencies)."""
    angle = np.asarray(p, dtype=float)[:, None] * freqs  # (L, d/2)
    a, b = x[:, 0::2], x[:, 1::2]
    out = np.empty(x.shape)
    out[:, 0::2] = a * np.cos(angle) - b * np.sin(angle)
    out[:, 1::2] = a * np.sin(angle) + b * np.cos(angle)
    return out


@guarded
def skew_step(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise 6.3: ``fn(A)`` turns ``A = Q E_r^T`` (L, L) into the relative logits D (L, L):
    steps 2-7 of Algorithm 1 with the corrected mask (zeros above the diagonal).

    >>> skew_step(lambda A: np.asarray(A)[::-1]).passed
    False
    """
    rng = seeded(SEED)
    mats = [
        ("the 2 x 2 example of the chapter", np.array([[1.0, 2.0], [3.0, 4.0]])),
        ("a random 5 x 5 A", rng.standard_normal((5, 5))),
        ("a 1 x 1 A", np.array([[3.0]])),
        ("a random 8 x 8 A", rng.standard_normal((8, 8))),
    ]
    cases = [(d, (A,), A) for d, A in mats]

    def compare(got: object, A: np.ndarray) -> str | None:
        expected = _skew(A)
        problem = diagnose(got, expected)
        if problem is None:
            return None
        arr = to_array(got)
        L = A.shape[0]
        no_mask = np.pad(A, ((0, 0), (1, 0))).reshape(L + 1, L)[1:]
        below = np.tril(np.ones((L, L), dtype=bool))
        if arr is not None and arr.shape == expected.shape:
            if np.allclose(arr[below], expected[below]) and not np.allclose(arr, expected):
                return (
                    problem + " (the lower triangle is right, but above the diagonal the result "
                    "must be zero: apply the mask of step 2 before padding)"
                )
        eye = np.eye(L)
        printed = algorithm1_steps(eye, A.T, mask="as printed")["D"]  # X = I gives A = E_r^T
        candidates = [
            (
                printed,
                "that is the mask as printed in the notes, i >= j: it zeroes entries the "
                "result needs; keep the lower-right triangle, i + j >= L - 1 (0-based)",
            ),
            (no_mask, "no mask was applied"),
            (
                np.pad(
                    A * (np.add.outer(np.arange(L), np.arange(L)) >= L - 1), ((0, 0), (0, 1))
                ).reshape(L + 1, L)[1:],
                "the zero column goes on the left of A, before the first column",
            ),
            (
                np.pad(
                    A * (np.add.outer(np.arange(L), np.arange(L)) >= L - 1), ((0, 0), (1, 0))
                ).reshape(L + 1, L)[:-1],
                "you dropped the last row of the (L + 1, L) matrix: drop the first one ([1:])",
            ),
            (
                expected.T,
                "your result is transposed: row i is query i, so the zeros are above the "
                "diagonal (j > i), not below",
            ),
            (
                _skew(A[:, ::-1]),
                "you read the offsets backwards: column r of A is offset r - (L - 1), so the "
                "last column is offset 0 (a token and itself)",
            ),
        ]
        return problem + _first_match(arr, candidates)

    return check_cases("the skewing step", fn, cases, compare=compare, require=require)


@guarded
def rotary_half(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise: ``fn(x, positions)`` is rotary embedding in the split-half layout of GPT-NeoX
    and LLaMA: column i is paired with column i + d/2 and the pair is rotated counter-clockwise
    by ``positions[m] * 10000^(-2i/d)``, for x of shape (L, d) and positions of shape (L,).

    >>> rotary_half(lambda x, p: _rotary(x, p, layout="concatenated")).passed
    True
    >>> print(rotary_half(lambda x, p: _rotary(x, p)).details[0])  # doctest: +ELLIPSIS
    on a random (5, 8) x at positions 0..4: wrong values: ... (you paired column 2i with 2i+1 ...
    """
    rng = seeded(SEED + 1)
    raw = [
        ("a (2, 2) x at positions 0 and 1", np.array([[1.0, 0.0], [1.0, 0.0]]), np.array([0, 1])),
        ("a random (5, 8) x at positions 0..4", rng.standard_normal((5, 8)), np.arange(5)),
        (
            "a random (4, 6) x at positions 7, 3, 100, 0",
            rng.standard_normal((4, 6)),
            np.array([7, 3, 100, 0]),
        ),
        ("one row at position 12, d = 4", rng.standard_normal((1, 4)), np.array([12])),
    ]
    cases = [(d, (x, p), (x, p)) for d, x, p in raw]

    def compare(got: object, args: tuple[np.ndarray, np.ndarray]) -> str | None:
        x, p = args
        expected = _rotary(x, p, layout="concatenated")
        problem = diagnose(got, expected)
        if problem is None:
            return None
        L, d = x.shape
        half = d // 2
        per_column = 10000.0 ** (-np.arange(d) / d)  # a frequency per column: wrong
        angle = p[:, None] * per_column  # (L, d)
        rotated = np.concatenate([-x[:, half:], x[:, :half]], axis=1)  # rotate_half(x)
        wrong_freqs = x * np.cos(angle) + rotated * np.sin(angle)
        candidates = [
            (
                _rotary(x, p),
                "you paired column 2i with 2i+1 (RoFormer's layout); this exercise pairs column "
                "i with column i + d/2, the first half with the second",
            ),
            (
                _rotary(x, -p, layout="concatenated"),
                "you rotate clockwise: the first of a pair becomes x_i cos - x_(i+d/2) sin",
            ),
            (
                wrong_freqs,
                "columns i and i + d/2 must share the frequency of pair i: repeat the d/2 "
                "frequencies twice, do not give every column its own",
            ),
            (x, "the rows are unchanged: did you forget to use the positions?"),
            (
                _rotary(x, np.arange(L), layout="concatenated"),
                "you used the row index 0..L-1, not the given positions",
            ),
        ]
        return problem + _first_match(to_array(got), candidates)

    return check_cases(
        "rotary embeddings, split-half layout", fn, cases, compare=compare, require=require
    )


SCHEMES = ("none", "sinusoidal", "learned", "alibi", "rotary")


#: Why ALiBi extrapolates on the 'recent' task: what section 6.9's prediction explains.
RECENT_EXPLANATION = (
    "ALiBi's bias depends only on the distance back, the same at every length, and far keys are "
    "penalised, so a model that learned to prefer the nearest marker keeps doing so; learned, "
    "sinusoidal and rotary positions are defined beyond 32 but were never trained there, and "
    "rotary meets offsets it never saw"
)


@guarded
def scheme_prediction(
    prediction: object, actual: str, *, explanation: str = RECENT_EXPLANATION
) -> Outcome:
    """A predict-then-check of a position scheme's name: any case and spacing counts ("ALiBi",
    "alibi", " Rotary "), a name outside the five schemes gets a message that lists them.

    >>> scheme_prediction("ALiBi", "alibi").passed
    True
    >>> print(scheme_prediction("relative", "alibi").details[0])
    'relative' is not one of the schemes: none, sinusoidal, learned, alibi, rotary
    """
    what = "the best scheme at length 128"
    if prediction is None or prediction is ...:
        return check_prediction(None, actual, what=what)
    if not isinstance(prediction, str):
        return Outcome(
            f"your prediction of {what}",
            False,
            [
                'write the scheme\'s name as a string, e.g. "learned"; got '
                f"{type(prediction).__name__}"
            ],
        )
    name = prediction.strip().lower()
    if name not in SCHEMES:
        return Outcome(
            f"your prediction of {what}",
            False,
            [f"{prediction!r} is not one of the schemes: {', '.join(SCHEMES)}"],
        )
    return check_prediction(name, actual, what=what, explanation=explanation)
