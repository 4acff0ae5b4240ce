"""Checkers for the exercises of Chapter 2 (softmax).

>>> import numpy as np
>>> def good(x):
...     e = np.exp(x - x.max(axis=-1, keepdims=True))
...     return e / e.sum(axis=-1, keepdims=True)
>>> stable_softmax(good).passed
True
>>> print(stable_softmax(lambda x: np.exp(x) / np.exp(x).sum(axis=-1, keepdims=True)))
❌ Not yet: a numerically stable softmax
   - on logits near 1000: the result contains NaN or inf where every expected value is finite: exp overflowed (exp(710) is already inf in float64); subtract the maximum of each row first
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from course_lib.checker import Outcome, check_cases, diagnose, guarded, seeded, to_array
from course_lib.softmax import reference as ref

__all__ = [
    "WHY_TIES",
    "smoothed_ce_gradient",
    "softmax_jacobian",
    "stable_softmax",
    "top_p",
]


#: Seed of this chapter's checker inputs.
SEED = 2


def _not_finite(arr: Any) -> bool:
    a = to_array(arr)
    return a is not None and not np.all(np.isfinite(a))


@guarded
def stable_softmax(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise 2.1: ``fn(x)`` is the softmax over the last axis of a 1-D or 2-D array."""
    rng = seeded(SEED)
    inputs = [
        ("the notes' example [2, 4, 4]", np.array([2.0, 4.0, 4.0])),
        ("a (3, 5) matrix of normal logits", rng.standard_normal((3, 5))),
        ("a single logit", np.array([0.7])),
        ("logits near 1000", np.array([1000.0, 1001.0, 1002.0])),
        ("logits near -1000", np.array([[-1000.0, -1001.0, -1002.0]])),
        ("a masked entry (-inf)", np.array([0.0, -np.inf, 1.0])),
        ("rows of very different sizes", np.array([[0.0, 1.0, 2.0], [1000.0, 1001.0, 999.0]])),
        ("a (4, 2) matrix", 3 * rng.standard_normal((4, 2))),
    ]

    def compare(got: Any, x: np.ndarray) -> str | None:
        expected = ref.softmax(x)
        problem = diagnose(got, expected)
        if problem is None:
            return None
        if "NaN or inf" in problem:
            with np.errstate(all="ignore"):
                naive_fails = not np.all(np.isfinite(ref.naive_softmax(x)))
            if x.ndim == 2 and np.ptp(x.max(axis=-1)) > 500:
                return problem + (
                    ": subtract each row's own maximum (x.max(axis=-1, keepdims=True)), not the"
                    " maximum of the whole array"
                )
            if naive_fails:
                return problem + (
                    ": exp overflowed (exp(710) is already inf in float64); subtract the "
                    "maximum of each row first"
                    if x.max() > 0
                    else ": every exp underflowed to 0, and 0 / 0 is NaN; subtract the maximum "
                    "of each row first"
                )
        arr = to_array(got)
        if arr is not None and arr.shape == x.shape and x.ndim == 2:
            if np.allclose(arr, ref.softmax(x, axis=0)):
                return problem + ": you normalised each column; softmax normalises each row"
            if np.allclose(arr.sum(), 1.0):
                return problem + ": the whole matrix sums to 1; each row should (keepdims=True)"
        return problem

    with np.errstate(all="ignore"):  # overflow is reported in words, not as a warning
        return check_cases(
            "a numerically stable softmax",
            fn,
            [(d, (x.copy(),), x) for d, x in inputs],
            compare=compare,
            require=require,
            success="rows sum to 1, no overflow, -inf entries get probability 0",
        )


@guarded
def softmax_jacobian(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise 2.4: ``fn(x)`` returns the (K, K) Jacobian of softmax at a 1-D x."""
    rng = seeded(SEED)
    inputs = [
        # the notes' example first: at x = 0 several mistakes coincide (diag(x) - x x^T is 0)
        ("the notes' example [2, 4, 4]", np.array([2.0, 4.0, 4.0])),
        ("x = [0, 0]", np.zeros(2)),
        ("5 normal logits", rng.standard_normal(5)),
        ("a single logit", np.array([3.0])),
    ]

    def compare(got: Any, x: np.ndarray) -> str | None:
        expected = ref.softmax_jacobian(x)
        problem = diagnose(got, expected)
        if problem is None:
            return None
        arr = to_array(got)
        s = ref.softmax(x)
        if (
            arr is not None
            and arr.shape == s.shape
            and len(s) > 1
            and np.allclose(arr, s * (1 - s))
        ):
            return (
                problem + ": you return only the diagonal s_i (1 - s_i); the Jacobian is the "
                "whole (K, K) matrix, with -s_i s_j off the diagonal"
            )
        if arr is not None and arr.shape == expected.shape:
            if np.allclose(arr, -expected):
                return (
                    problem + ": the signs are flipped; it is diag(s) - s s^T (the diagonal "
                    "s_i (1 - s_i) is positive: raising x_i raises s_i)"
                )
            if np.allclose(arr, np.diag(s) + np.outer(s, s)):
                return problem + ": subtract the outer product s s^T, do not add it"
            logit_form = np.diag(x) - np.outer(x, x)  # zero at x = 0: names nothing there
            if not np.allclose(logit_form, 0) and np.allclose(arr, logit_form):
                return (
                    problem + ": you used the logits x where the formula has the "
                    "probabilities s = softmax(x)"
                )
            if np.allclose(arr, np.eye(len(s)) - s[None, :]):
                return (
                    problem + ": that is the Jacobian of log-softmax, I - 1 s^T; softmax's is "
                    "diag(s) - s s^T"
                )
            if np.allclose(arr, -np.outer(s, s)):
                return problem + ": the diagonal term diag(s) is missing"
            if np.allclose(arr, np.diag(s)):
                return problem + ": the outer product s s^T is missing"
            if np.allclose(arr, np.diag(s) - s[None, :]) or np.allclose(arr, np.diag(s) - s):
                return problem + ": subtract the outer product np.outer(s, s), not the vector s"
        return problem

    return check_cases(
        "the softmax Jacobian",
        fn,
        [(d, (x.copy(),), x) for d, x in inputs],
        compare=compare,
        require=require,
    )


#: Why the prediction of the chapter's predict exercise is what it is, and the common wrong values.
WHY_TIES = (
    "as T goes to 0 the mass moves to the largest logits and is shared equally among ties (the "
    "softmax sees only differences, and theirs are 0): 1/3 each for three maxima, an entropy "
    "of log2(3) = 1.585 bits. 0 bits would be one winner (greedy decoding with a unique "
    "maximum); 1 bit is two tied maxima (section 2.4's example); log2(5) = 2.32 bits is the "
    "opposite limit, T to infinity (uniform)."
)


def _smoothed_target(K: int, t: int, eps: float) -> np.ndarray:
    q = np.full(K, eps / K)
    q[t] += 1 - eps
    return q


@guarded
def smoothed_ce_gradient(fn: Callable, *, require: bool = False) -> Outcome:
    """Derive exercise: ``fn(z, t, eps)`` is the gradient of cross-entropy with label smoothing.

    The target is ``q = (1 - eps) onehot(t) + eps / K`` (PyTorch's ``label_smoothing``), the loss
    ``-sum_i q_i log softmax(z)_i`` and its gradient ``softmax(z) - q``.

    >>> def good(z, t, eps):
    ...     q = np.full(len(z), eps / len(z)); q[t] += 1 - eps
    ...     return ref.softmax(z) - q
    >>> smoothed_ce_gradient(good).passed
    True
    """
    rng = seeded(SEED)
    cases = [
        ("z = [2, 1, 0], t = 0, eps = 0 (no smoothing)", np.array([2.0, 1.0, 0.0]), 0, 0.0),
        ("z = [2, 1, 0], t = 0, eps = 0.1", np.array([2.0, 1.0, 0.0]), 0, 0.1),
        ("two classes, t = 1, eps = 0.2", np.array([0.5, -0.5]), 1, 0.2),
        ("8 normal logits, t = 5, eps = 0.1", rng.standard_normal(8), 5, 0.1),
        ("logits near 1000, t = 2, eps = 0.1", np.array([1000.0, 999.0, 1001.0]), 2, 0.1),
        ("logits near -1000, t = 0, eps = 0.3", np.array([-1000.0, -1002.0, -1001.0]), 0, 0.3),
    ]

    def compare(got: Any, args: tuple) -> str | None:
        z, t, eps = args
        s = ref.softmax(z)
        q = _smoothed_target(len(z), t, eps)
        want = s - q
        problem = diagnose(got, want)
        if problem is None:
            return None
        arr = to_array(got)
        if arr is None or arr.shape != want.shape:
            return problem
        other = np.full(len(z), eps / max(len(z) - 1, 1))
        other[t] = 1 - eps
        onehot = np.eye(len(z))[t]
        if not np.all(np.isfinite(arr)):
            return problem + (
                ": exp overflowed or underflowed; compute softmax(z) the stable way, eq. (2.3)"
            )
        mistakes = [
            (s - onehot, "you left out the smoothing: the target is q, not the one-hot vector"),
            (q - s, "the sign is flipped: the gradient of the loss is softmax(z) - q"),
            (onehot - s, "the sign is flipped, and the target should be q, not the one-hot"),
            (
                s - other,
                "you spread eps over the K - 1 wrong classes; the exercise's q (PyTorch's) spreads "
                "eps / K over all K classes, the right one included",
            ),
            (z - q, "you used the logits z where the softmax of z belongs: softmax(z) - q"),
            (
                -q * (1 - s),
                "that is -q_i (1 - s_i), the diagonal of the chain rule only: the "
                "log-sum-exp term couples every class, giving softmax(z) - q",
            ),
        ]
        for wrong, hint in mistakes:
            if np.allclose(arr, wrong, rtol=1e-6, atol=1e-9):
                return f"{problem}: {hint}"
        return problem

    with np.errstate(all="ignore"):
        return check_cases(
            "the gradient of cross-entropy with label smoothing",
            fn,
            [(d, (z.copy(), t, eps), (z, t, eps)) for d, z, t, eps in cases],
            compare=compare,
            require=require,
        )


def _top_p_mask(probs: np.ndarray, p: float) -> np.ndarray:
    """Eq. (2.8) with the chapter's tie rule, on probabilities (the library's rule)."""
    ranked = np.sort(probs)[::-1]
    n = min(int(np.sum(np.cumsum(ranked) < p)) + 1, len(ranked))
    return probs >= ranked[n - 1]


@guarded
def top_p(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise: ``fn(probs, p)`` returns a boolean mask of the tokens top-p sampling keeps.

    Probabilities are exact binary fractions, so every running total is exact; ties with the
    last kept token are kept (the course's rule, ``course_lib.softmax.reference.top_p_filter``).

    >>> top_p(_top_p_mask).passed
    True
    """
    cases = [
        ("[0.5, 0.25, 0.125, 0.125] with p = 0.7", [0.5, 0.25, 0.125, 0.125], 0.7),
        (
            "a total that reaches p exactly: [0.5, 0.25, 0.125, 0.125], p = 0.75",
            [0.5, 0.25, 0.125, 0.125],
            0.75,
        ),
        (
            "unsorted probabilities [0.125, 0.5, 0.125, 0.25], p = 0.6",
            [0.125, 0.5, 0.125, 0.25],
            0.6,
        ),
        (
            "ties at the cut: [0.375, 0.125, 0.125, 0.125, 0.25], p = 0.7",
            [0.375, 0.125, 0.125, 0.125, 0.25],
            0.7,
        ),
        ("a confident token: [0.875, 0.0625, 0.0625], p = 0.5", [0.875, 0.0625, 0.0625], 0.5),
        ("p close to 1: [0.25, 0.25, 0.5], p = 0.99", [0.25, 0.25, 0.5], 0.99),
        ("a single token: [1.0], p = 0.3", [1.0], 0.3),
    ]

    def variants(probs: np.ndarray, p: float) -> list[tuple[np.ndarray, str]]:
        ranked = np.sort(probs)[::-1]
        cum = np.cumsum(ranked)
        by_count = np.zeros(len(probs), dtype=bool)
        n = min(int(np.sum(cum < p)) + 1, len(probs))
        by_count[np.argsort(-probs, kind="stable")[:n]] = True

        def keep_top(count: int) -> np.ndarray:
            count = max(1, min(count, len(probs)))
            return probs >= ranked[count - 1]

        unsorted = np.cumsum(probs)
        return [
            (
                keep_top(int(np.sum(cum <= p)) + 1),
                "a total exactly equal to p already reaches p: the test is sum >= p, not > p",
            ),
            (
                keep_top(int(np.sum(cum < p))),
                "you stop before the token that brings the total to p: keep the fewest tokens "
                "whose total is at least p, that token included",
            ),
            (
                by_count,
                "you dropped tokens tied with the last one kept; keep every token "
                "whose probability equals the last kept one (the chapter's tie rule)",
            ),
            (
                np.arange(len(probs)) <= min(int(np.sum(unsorted < p)), len(probs) - 1),
                "you summed the probabilities in the order given; sort them, largest first",
            ),
        ]

    def compare(got: Any, args: tuple) -> str | None:
        probs, p = np.asarray(args[0], dtype=float), args[1]
        want = _top_p_mask(probs, p)
        if got is None:
            return "the function returned None: did you forget a `return` statement?"
        arr = to_array(got)
        if arr is None:
            return f"return a boolean array, got {type(got).__name__}"
        if arr.shape != want.shape:
            return f"return one True/False per token, shape {want.shape}, got shape {arr.shape}" + (
                " (the indices of the kept tokens instead of a mask?)" if arr.ndim == 1 else ""
            )
        if not np.all(np.isfinite(arr)):
            return "your mask holds NaN or inf: return True/False (or 1/0) per token"
        if not np.all((arr == 0) | (arr == 1)):
            return "return True/False (or 1/0) per token, not probabilities or logits"
        mask = arr.astype(bool)
        if np.array_equal(mask, want):
            return None
        shown = (
            f"you keep {mask.astype(int).tolist()}, the right mask is {want.astype(int).tolist()}"
        )
        for wrong, hint in variants(probs, p):
            if np.array_equal(mask, wrong) and not np.array_equal(wrong, want):
                return f"{shown}: {hint}"
        return shown

    return check_cases(
        "top-p with its tie rule",
        fn,
        [(d, (np.array(pr), p), (pr, p)) for d, pr, p in cases],
        compare=compare,
        require=require,
    )
