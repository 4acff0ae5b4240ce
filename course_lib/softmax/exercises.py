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

from course_lib.checker import Outcome, call, check_cases, diagnose, seeded, to_array
from course_lib.softmax import reference as ref

__all__ = ["logsumexp", "online_update", "softmax_jacobian", "stable_softmax"]


#: Seed of this chapter's checker inputs.
SEED = 2


def _not_finite(arr: Any) -> bool:
    a = to_array(arr)
    return a is not None and not np.all(np.isfinite(a))


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


def logsumexp(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise 2.2: ``fn(x)`` is ``log(sum(exp(x)))`` over the last axis (the axis removed)."""
    rng = seeded(SEED)
    inputs = [
        ("[0, 0, 0, 0] (the answer is log 4)", np.zeros(4)),
        ("a (3, 5) matrix of normal logits", rng.standard_normal((3, 5))),
        ("[1000, 1000]", np.array([1000.0, 1000.0])),
        ("[-1000, -1000]", np.array([-1000.0, -1000.0])),
        ("a masked entry (-inf)", np.array([1.0, -np.inf, 2.0])),
        ("rows of very different sizes", np.array([[0.0, 1.0], [800.0, 801.0]])),
    ]

    def compare(got: Any, x: np.ndarray) -> str | None:
        expected = ref.logsumexp(x)
        arr = to_array(got)
        if arr is not None and arr.shape == (*expected.shape, 1):
            return (
                f"the result has shape {arr.shape} but should have shape {expected.shape}: drop "
                "the summed axis (keepdims=False), or squeeze it at the end"
            )
        problem = diagnose(got, expected)
        if problem is None:
            return None
        if arr is not None and arr.shape == expected.shape:
            m = x.max(axis=-1)
            if np.allclose(arr, expected - m):
                return problem + ": you forgot to add the maximum back (m + log sum exp(x - m))"
            if np.allclose(arr, expected + m):
                return problem + ": you added the maximum twice"
        if _not_finite(got):
            return problem + (
                ": the naive log(sum(exp(x))) overflows (or underflows to log 0); shift by the "
                "maximum first"
            )
        return problem

    with np.errstate(all="ignore"):
        return check_cases(
            "log-sum-exp",
            fn,
            [(d, (x.copy(),), x) for d, x in inputs],
            compare=compare,
            require=require,
        )


def _run_online(fn: Callable, x: np.ndarray, chunk: int) -> tuple[Any, str | None]:
    """Feed x to fn chunk by chunk from the empty state; return the final (m, l) or an error."""
    m, l = -np.inf, 0.0
    for start in range(0, len(x), chunk):
        got, error = call(fn, m, l, x[start : start + chunk].copy())
        if error:
            return None, error
        if not isinstance(got, tuple | list) or len(got) != 2:
            return None, f"return the pair (m_new, l_new), got {type(got).__name__} {got!r}"
        m, l = (float(np.asarray(v)) for v in got)
    return (m, l), None


def online_update(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise 2.3: ``fn(m, l, chunk)`` returns the state ``(m_new, l_new)`` after one chunk."""
    rng = seeded(SEED)
    inputs = [
        ("[1, 3, 2, 3] in chunks of 2 (the maximum grows)", np.array([1.0, 3.0, 2.0, 3.0]), 2),
        ("[5, 1, 2, 0] in chunks of 2 (the maximum stays)", np.array([5.0, 1.0, 2.0, 0.0]), 2),
        ("100 normal values in chunks of 7", rng.standard_normal(100), 7),
        ("one chunk of 10", rng.standard_normal(10), 10),
        ("chunks of 1", rng.standard_normal(9), 1),
        ("values growing to 1000 in chunks of 3", np.linspace(0, 1000, 12), 3),
    ]
    outcome = Outcome("the online update rule", True)
    for description, x, chunk in inputs:
        with np.errstate(all="ignore"):
            got, error = _run_online(fn, x, chunk)
        m_true = x.max()
        l_true = np.exp(x - m_true).sum()
        problem = error
        if problem is None:
            m, l = got
            if not np.isclose(m, m_true, rtol=1e-12):
                problem = f"the final maximum is {m:.6g}, it should be {m_true:.6g}"
            elif not np.isclose(l, l_true, rtol=1e-9):
                problem = f"the final normaliser l is {l:.6g}, it should be {l_true:.6g}"
                with np.errstate(all="ignore"):
                    wrong, _ = _run_online(_without_rescale, x, chunk)
                if np.isclose(l, wrong[1], rtol=1e-9):
                    problem += (
                        ": the old sum l must be rescaled by exp(m - m_new) when the maximum grows"
                    )
                elif not np.isfinite(l):
                    problem += ": shift each chunk by the new maximum before exp"
        if problem:
            outcome = Outcome(outcome.title, False, [f"on {description}: {problem}"])
            break
    else:
        outcome.details.append(f"passed all {len(inputs)} test cases")
    if require and not outcome.passed:
        raise AssertionError(str(outcome))
    return outcome


def _without_rescale(m: float, l: float, chunk: np.ndarray) -> tuple[float, float]:
    """The typical mistake: the old sum is kept as it is when the maximum grows."""
    m_new = max(m, float(chunk.max()))
    return m_new, l + float(np.exp(chunk - m_new).sum())


def softmax_jacobian(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise 2.4: ``fn(x)`` returns the (K, K) Jacobian of softmax at a 1-D x."""
    rng = seeded(SEED)
    inputs = [
        ("x = [0, 0]", np.zeros(2)),
        ("the notes' example [2, 4, 4]", np.array([2.0, 4.0, 4.0])),
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
        if arr is not None and arr.shape == expected.shape:
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
