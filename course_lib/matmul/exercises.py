"""Checkers for the exercises of Chapter 1 (matrix multiplication).

>>> import numpy as np
>>> outer_product_sum(lambda X, Y: np.asarray(X) @ np.asarray(Y)).passed
True
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from course_lib.checker import Outcome, check_cases, diagnose, seeded

__all__ = ["batched_product", "layer_flops", "outer_product_sum"]


#: Seed of this chapter's checker inputs.
SEED = 2024


def outer_product_sum(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise 1.1: ``fn(X, Y)`` returns XY computed as a sum of outer products."""
    rng = seeded(SEED)
    cases = [
        (
            "the 2 x 2 example of the chapter",
            (np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[5.0, 6.0], [7.0, 8.0]])),
        ),
        ("a (3, 4) X and a (4, 2) Y", (rng.standard_normal((3, 4)), rng.standard_normal((4, 2)))),
        (
            "an inner dimension of 1 (a single outer product)",
            (rng.standard_normal((3, 1)), rng.standard_normal((1, 5))),
        ),
        (
            "a (1, 6) row times a (6, 1) column",
            (rng.standard_normal((1, 6)), rng.standard_normal((6, 1))),
        ),
    ]
    return check_cases(
        "the product as a sum of outer products",
        fn,
        [(d, (X, Y), X @ Y) for d, (X, Y) in cases],
        require=require,
    )


def batched_product(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise 1.2: ``fn(A, B)`` multiplies a stack A (b, n, m) by a stack B (b, m, k)."""
    rng = seeded(SEED)
    shapes = [
        ((2, 3, 4), (2, 4, 5)),
        ((1, 2, 2), (1, 2, 2)),
        ((4, 1, 3), (4, 3, 1)),
        ((3, 5, 2), (3, 2, 5)),
    ]
    cases = []
    for sa, sb in shapes:
        A, B = rng.standard_normal(sa), rng.standard_normal(sb)
        cases.append((f"A of shape {sa} and B of shape {sb}", (A, B), A @ B))

    def compare(got: object, expected: np.ndarray) -> str | None:
        problem = diagnose(got, expected)
        if problem and np.asarray(expected).ndim == 3:
            arr = np.asarray(got, dtype=float) if got is not None else None
            if arr is not None and arr.ndim == 4:
                return problem + " (an einsum index that should be shared across A and B is not?)"
        return problem

    return check_cases("a batched product with einsum", fn, cases, compare=compare, require=require)


def layer_flops(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise 1.3: ``fn(batch, seq_len, d_in, d_out)`` counts the FLOPs of ``X @ W + b``.

    X has shape (batch, seq_len, d_in), W (d_in, d_out) and b (d_out,): a multiply-add counts as
    two FLOPs, and adding the bias costs one FLOP per output entry.

    >>> layer_flops(lambda b, L, di, do: 2 * b * L * di * do).details[0][:40]
    'on batch, seq_len, d_in, d_out = (2, 3, '
    """
    sizes = [(2, 3, 4, 5), (1, 1, 1, 1), (8, 128, 512, 2048), (1, 10, 7, 3)]
    cases = [(f"batch, seq_len, d_in, d_out = {s}", s, s) for s in sizes]

    def compare(got: object, s: tuple[int, int, int, int]) -> str | None:
        b, L, di, do = s
        want = 2 * b * L * di * do + b * L * do
        if isinstance(got, float) and float(got).is_integer():
            got = int(got)
        if not isinstance(got, int | np.integer):
            return f"return the count as an int, got {type(got).__name__}"
        if got == want:
            return None
        mistakes = {
            2 * b * L * di * do: "you left out the bias: one addition per output entry",
            b * L * di * do + b * L * do: "a multiply-add is two FLOPs (one multiply, one add)",
            b * L * di * do: "a multiply-add is two FLOPs, and the bias adds one per output",
            2 * L * di * do + L * do: "you counted one sequence: multiply by the batch size",
            2 * b * di * do + b * do: "you counted one token per sequence: multiply by seq_len",
        }
        hint = mistakes.get(int(got), "")
        return f"you count {int(got):,} FLOPs, the right count is {want:,}" + (
            f": {hint}" if hint else ""
        )

    return check_cases(
        "the FLOPs of a linear layer",
        fn,
        cases,
        compare=compare,
        require=require,
    )
