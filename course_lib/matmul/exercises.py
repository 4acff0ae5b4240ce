"""Checkers for the exercises of Chapter 1 (matrix multiplication).

>>> import numpy as np
>>> outer_product_sum(lambda X, Y: np.asarray(X) @ np.asarray(Y)).passed
True
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from course_lib.checker import (
    Outcome,
    check_cases,
    diagnose,
    first_mistake,
    guarded,
    seeded,
    to_array,
)
from course_lib.checks import is_tensor

__all__ = ["WHY_SHAPE", "layer_flops", "linear_weight", "outer_product_sum"]

#: Why the shape prediction's answer is what it is, and what the common wrong answers mean.
WHY_SHAPE = (
    "the last two dimensions multiply as matrices, (5, 3) @ (3, 6) -> (5, 6); the leading, batch "
    "dimensions broadcast aligned from the right, (4, 1) against (2,) -> (4, 2): (4, 2, 5, 6). "
    "(4, 1, 5, 6) leaves the size-1 dimension unbroadcast; (4, 5, 6) or (2, 5, 6) drops a batch "
    "dimension; expecting an error aligns the batch dimensions from the left."
)


#: Seed of this chapter's checker inputs.
SEED = 2024


@guarded
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

    def compare(got: object, args: tuple[np.ndarray, np.ndarray]) -> str | None:
        X, Y = args
        problem = diagnose(got, X @ Y)
        if problem is None:
            return None
        outers = np.stack([np.outer(X[:, k], Y[k]) for k in range(X.shape[1])])
        if X.shape[1] > 1 and first_mistake(got, [(outers, "")]) is not None:
            return (
                f"you return the {X.shape[1]} outer products one by one, shape {outers.shape}: "
                "add them up into one (m, n) matrix"
            )
        hint = first_mistake(
            got,
            [
                (outers[-1], "you kept only the last outer product: add each one to the total "
                 "(total += ...), do not overwrite it"),
                (outers[0], "you stopped after the first outer product: sum over every k"),
                (X.T @ Y.T, "you paired row k of X with column k of Y: the outer products pair "
                 "column k of X with row k of Y"),
                (X * Y if X.shape == Y.shape else np.empty(0), "that is the elementwise product "
                 "X * Y: an outer product np.outer(X[:, k], Y[k]) is (m, n)"),
            ],
        ) if X.shape[1] > 1 or X.shape == Y.shape else None  # fmt: skip
        return f"{problem}: {hint}" if hint else problem

    return check_cases(
        "the product as a sum of outer products",
        fn,
        [(d, (X, Y), (X, Y)) for d, (X, Y) in cases],
        compare=compare,
        require=require,
    )


@guarded
def linear_weight(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise 1.2 (find the bug): ``fn(W)`` turns a notes-convention weight into nn.Linear's.

    ``W`` has shape ``(d_in, d_out)`` and the layer computes ``x @ W``; ``torch.nn.Linear``
    stores ``weight`` as ``(d_out, d_in)`` and computes ``x @ weight.T``, so the answer is
    ``W.T``. The checker passes NumPy arrays and reads back anything array-like.

    >>> linear_weight(lambda W: W.T).passed
    True
    >>> print(linear_weight(lambda W: W.reshape(W.shape[1], W.shape[0])).details[0])  # doctest: +ELLIPSIS
    on W of shape (3, 4) (d_in = 3, d_out = 4): ... reshape keeps the numbers in memory order ...
    """
    rng = seeded(SEED)
    symmetric = rng.standard_normal((3, 3))
    cases = [
        ("W of shape (3, 4) (d_in = 3, d_out = 4)", rng.standard_normal((3, 4))),
        ("a square W that is not symmetric", rng.standard_normal((3, 3))),
        ("W of shape (4, 2)", rng.standard_normal((4, 2))),
        ("a single output, W of shape (5, 1)", rng.standard_normal((5, 1))),
        ("a single input, W of shape (1, 3)", rng.standard_normal((1, 3))),
        ("a symmetric W (the colleague's test)", symmetric + symmetric.T),
    ]

    def compare(got: object, W: np.ndarray) -> str | None:
        want = W.T
        problem = diagnose(got, want)
        if problem is None:
            return None
        arr = to_array(got)
        if arr is None or arr.size != W.size:
            return problem
        d_in, d_out = W.shape
        if arr.shape == W.shape and d_in != d_out:
            return (
                f"you return W's own shape {W.shape}; nn.Linear stores weight as (out_features, "
                f"in_features) = ({d_out}, {d_in}) and computes x @ weight.T"
            )
        if arr.shape == want.shape and np.allclose(arr, W.reshape(d_out, d_in)):
            if d_in == d_out and np.allclose(arr, W):
                return (
                    "you return W unchanged: nn.Linear computes x @ weight.T, so this layer "
                    "applies W^T, not W (a symmetric W hides the difference)"
                )
            return (
                f"{problem}: right shape, wrong entries; reshape keeps the numbers in memory "
                "order and cuts them into new rows, a transpose (W.T) swaps the two axes"
            )
        return problem

    return check_cases(
        "a notes-convention weight for nn.Linear",
        fn,
        [(d, (W.copy(),), W) for d, W in cases],
        compare=compare,
        require=require,
        success="x @ weight.T equals x @ W for every shape, square and not",
    )


@guarded
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
        if is_tensor(got) and got.ndim == 0:  # a 0-d tensor from torch arithmetic
            got = got.item()
        if isinstance(got, float | np.floating) and float(got).is_integer():
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
