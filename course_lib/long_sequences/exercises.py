"""Exercise checkers of Chapter 11: ``from course_lib.long_sequences import exercises as check``.

Each checker runs the learner's function on named cases (:func:`course_lib.checker.check_cases`)
and says in plain words what is wrong, naming known mistakes (:func:`course_lib.checker.first_mistake`).

>>> strided_index_set(lambda i, stride: set()).passed
False
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from course_lib.checker import Outcome, check_cases, diagnose, first_mistake, seeded
from course_lib.long_sequences.reference import rel_shift as _rel_shift

__all__ = ["online_softmax_update", "rel_shift", "strided_index_set"]

#: Seed of this chapter's checker inputs.
SEED = 11


def _strided(i: int, stride: int) -> set[int]:
    local = set(range(max(0, i - stride), i + 1))
    every = {j for j in range(i + 1) if (i - j) % stride == 0}
    return local | every


def strided_index_set(fn: Callable, *, require: bool = False) -> Outcome:
    """``fn(i, stride)`` returns the set of keys query i sees under the strided pattern (both heads).

    >>> strided_index_set(lambda i, l: {j for j in range(i + 1) if j >= i - l or (i - j) % l == 0}).passed
    True
    """
    cases = [(i, s) for i, s in [(0, 3), (2, 3), (3, 3), (10, 3), (17, 4), (9, 1), (25, 5)]]

    def compare(got: object, args: tuple[int, int]) -> str | None:
        i, stride = args
        want = _strided(i, stride)
        try:
            got = {int(j) for j in got}  # type: ignore[union-attr]
        except TypeError:
            return f"return a set (or list) of key positions, got {type(got).__name__}"
        if got == want:
            return None
        if any(j > i for j in got):
            return (
                f"query {i} may not see the future: you include {sorted(j for j in got if j > i)} "
                "(both heads are subsets of {j : j <= i})"
            )
        if got == {j for j in want if j >= max(0, i - stride)}:
            return "you have the first head only: add every stride-th key before i, (i - j) mod stride = 0"
        if got == {j for j in want if (i - j) % stride == 0}:
            return "you have the second head only: add the window {t, ..., i}"
        return f"you return {sorted(got)}, the right set is {sorted(want)}"

    return check_cases(
        "the strided index set",
        fn,
        [(f"i={i}, stride={s}", (i, s), (i, s)) for i, s in cases],
        compare=compare,
        require=require,
    )


def _update(m, s, acc, logits, values):
    m_new = np.maximum(m, logits.max(axis=-1))
    p = np.exp(logits - m_new[:, None])
    alpha = np.exp(m - m_new)
    return m_new, alpha * s + p.sum(axis=-1), alpha[:, None] * acc + p @ values


def online_softmax_update(fn: Callable, *, require: bool = False) -> Outcome:
    """``fn(m, s, acc, logits, values)`` folds one block of keys into the running statistics.

    ``m`` (B_q,) the running maxima, ``s`` (B_q,) the running sums of ``exp(logit - m)``, ``acc``
    (B_q, d_v) the running sums of ``exp(logit - m) v_j``; ``logits`` (B_q, B_k) and ``values``
    (B_k, d_v) the new block. Return the new ``(m, s, acc)``.

    >>> online_softmax_update(_update).passed
    True
    """
    rng = seeded(SEED)
    cases = []
    first = (np.full(3, -np.inf), np.zeros(3), np.zeros((3, 2)))
    cases.append(
        (
            "the first block (m = -inf, s = 0)",
            (*first, rng.standard_normal((3, 4)), rng.standard_normal((4, 2))),
        )
    )
    m0 = rng.standard_normal(3)
    state = (m0, rng.random(3) + 0.5, rng.standard_normal((3, 2)))
    cases.append(
        (
            "a block that raises the maximum",
            (*state, m0[:, None] + 2 + rng.random((3, 5)), rng.standard_normal((5, 2))),
        )
    )
    cases.append(
        (
            "a block below the maximum",
            (*state, m0[:, None] - 3 - rng.random((3, 2)), rng.standard_normal((2, 2))),
        )
    )
    cases.append(
        (
            "large logits (1000)",
            (
                np.full(2, 1000.0),
                np.ones(2),
                np.ones((2, 1)),
                np.array([[1001.0], [999.0]]),
                np.ones((1, 1)),
            ),
        )
    )

    def compare(got: object, args: tuple) -> str | None:
        if not isinstance(got, tuple | list) or len(got) != 3:
            return "return three things: the new m, s and acc"
        want = _update(*args)
        m, s, acc, logits, values = args
        for name, g, w in zip(("m", "s", "acc"), got, want, strict=True):
            problem = diagnose(g, w)
            if problem is None:
                continue
            m_new = np.maximum(m, logits.max(axis=-1))
            p = np.exp(logits - m_new[:, None])
            with np.errstate(over="ignore", invalid="ignore"):
                inverse = np.exp(m_new - m)
                mistakes = [
                    (s + p.sum(axis=-1), "rescale the old sum by exp(m_old - m_new) before adding"),
                    (acc + p @ values, "rescale the old acc by exp(m_old - m_new) before adding"),
                    (
                        inverse * s + p.sum(axis=-1),
                        "the factor is exp(m_old - m_new), not its inverse",
                    ),
                    (
                        inverse[:, None] * acc + p @ values,
                        "the factor is exp(m_old - m_new), not its inverse",
                    ),
                ]
                hint = first_mistake(g, mistakes)
            return f"{name}: {hint or problem}"
        return None

    return check_cases(
        "one step of the online softmax",
        fn,
        [(d, a, a) for d, a in cases],
        compare=compare,
        require=require,
    )


def rel_shift(fn: Callable, *, require: bool = False) -> Outcome:
    """``fn(x)`` moves row i of (L_q, K) scores by distance index to key index, future = 0.

    >>> rel_shift(_rel_shift).passed
    True
    """
    rng = seeded(SEED + 1)
    cases = [
        ("no memory, (3, 3)", rng.standard_normal((3, 3))),
        ("memory M = 2, (3, 5)", rng.standard_normal((3, 5))),
        ("one query, (1, 4)", rng.standard_normal((1, 4))),
        ("memory M = 3, (4, 7)", rng.standard_normal((4, 7))),
    ]

    def compare(got: object, x: np.ndarray) -> str | None:
        want = _rel_shift(x)
        problem = diagnose(got, want)
        if problem is None:
            return None
        L_q, K = x.shape
        raw = np.pad(x, ((0, 0), (1, 0))).reshape(K + 1, L_q)[1:].reshape(L_q, K)
        backwards = np.zeros_like(x)
        for i in range(L_q):
            for j in range(K):
                col = j - (L_q - 1 - i)
                if 0 <= col < K:
                    backwards[i, j] = x[i, col]
        hint = first_mistake(
            got,
            [
                (
                    raw,
                    "the padding trick leaves other rows' numbers where j > M + i: set them to 0",
                ),
                (x, "nothing moved: row i moves left by L_q - 1 - i"),
                (backwards, "you moved the rows the wrong way: out[i, j] = x[i, j + L_q - 1 - i]"),
            ],
        )
        return hint or problem

    return check_cases(
        "the relative shift", fn, [(d, (x,), x) for d, x in cases], compare=compare, require=require
    )
