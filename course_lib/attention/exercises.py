"""Checkers for the exercises of Chapter 4 (attention).

>>> import numpy as np
>>> causal_mask(lambda L: np.tril(np.ones((L, L), dtype=bool))).passed
True
>>> print(causal_mask(lambda L: np.triu(np.ones((L, L), dtype=bool))).details[0])
on L = 4: the mask is transposed: True above the diagonal lets each token see the future, not the past
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from course_lib.attention.reference import causal_mask as _causal
from course_lib.attention.reference import split_heads as _split
from course_lib.checker import Outcome, check_cases, diagnose, seeded, to_array
from course_lib.softmax.reference import softmax as _softmax

__all__ = ["attention_one_query", "causal_mask", "masked_softmax", "split_heads"]


#: Seed of this chapter's checker inputs.
SEED = 404


def _one_query(q: np.ndarray, K: np.ndarray, V: np.ndarray, scale: float | None = None):
    s = (K @ q) * (1 / np.sqrt(q.size) if scale is None else scale)  # (L,)
    return _softmax(s) @ V  # (d_v,)


def attention_one_query(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise 4.1: ``fn(q, K, V)`` returns softmax(K q / sqrt(d_k)) V for one query q (d_k,).

    >>> attention_one_query(lambda q, K, V: V.mean(axis=0)).passed
    False
    """
    rng = seeded(SEED)
    raw = [
        ("the worked example of notes 004 (query of x1)", [1.0, 0.0, 2.0], None, None),
        ("a random query, 5 keys, d_k = 4, d_v = 3", (4,), (5, 4), (5, 3)),
        ("a single key (the output must be its value)", (3,), (1, 3), (1, 2)),
        ("d_k = 1 and d_v = 6", (1,), (4, 1), (4, 6)),
        ("large logits (around 2800): a naive exp overflows", (8,), (6, 8), (6, 2)),
    ]
    cases = []
    for description, q, K, V in raw:
        if K is None:
            from course_lib.attention.examples import notes_004_example

            ex = notes_004_example()
            qv, Kv, Vv = np.array(q), ex["X"] @ ex["W_K"], ex["X"] @ ex["W_V"]
        else:
            qv, Kv, Vv = rng.standard_normal(q), rng.standard_normal(K), rng.standard_normal(V)
            if "large" in description:
                qv, Kv = np.full(q, 10.0), Kv + 100.0  # logits near 2800, 4 apart on average
        cases.append((description, (qv, Kv, Vv), (qv, Kv, Vv)))

    def compare(got: object, args: tuple[np.ndarray, ...]) -> str | None:
        q, K, V = args
        expected = _one_query(q, K, V)
        problem = diagnose(got, expected)
        if problem is None:
            return None
        arr = to_array(got)
        if arr is not None and arr.shape == expected.shape and np.all(np.isfinite(arr)):
            if np.allclose(arr, _one_query(q, K, V, scale=1.0)):
                return problem + " (it matches attention without the 1/sqrt(d_k) scaling)"
            if np.allclose(arr, _one_query(q, K, V, scale=1.0 / q.size)):
                return problem + " (you divided by d_k; divide by its square root)"
            if np.allclose(arr, np.exp((K @ q) / np.sqrt(q.size)) @ V):
                return problem + " (the exponentials are not normalised: divide by their sum)"
        weights = _softmax((K @ q) / np.sqrt(q.size))  # (L,)
        if arr is not None and arr.shape == weights.shape and np.allclose(arr, weights):
            return problem + " (these are the weights a_ij: return their average of V)"
        if arr is not None and arr.shape == (q.size,) and np.allclose(arr, weights @ K):
            return problem + " (you averaged the keys K instead of the values V)"
        if arr is not None and not np.all(np.isfinite(arr)):
            return problem + " (subtract the largest logit before exp, as in chapter 2)"
        return problem

    return check_cases("attention for one query", fn, cases, compare=compare, require=require)


def causal_mask(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise 4.2: ``fn(L)`` returns the boolean (L, L) causal mask, True where j <= i."""
    cases = [(f"L = {L}", (L,), L) for L in (4, 1, 7)]

    def compare(got: object, L: int) -> str | None:
        expected = _causal(L)
        arr = np.asarray(got) if got is not None else None
        if arr is not None and arr.shape == expected.shape and arr.dtype != np.bool_:
            values = to_array(arr)
            if values is not None and np.array_equal(values, expected):
                return (
                    f"the pattern is right but the dtype is {arr.dtype}: return booleans "
                    "(True = may attend), so that the mask works with np.where and ~"
                )
        problem = diagnose(got, expected.astype(float))
        if problem is None or arr is None or arr.shape != expected.shape:
            return problem
        if np.array_equal(arr, expected.T):
            return (
                "the mask is transposed: True above the diagonal lets each token see the "
                "future, not the past"
            )
        if np.array_equal(arr, np.tril(np.ones((L, L), dtype=bool), -1)):
            return "the diagonal is False: a token must be allowed to attend to itself"
        return problem

    return check_cases("the causal mask", fn, cases, compare=compare, require=require)


def masked_softmax(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise 4.3: ``fn(logits, mask)`` returns the softmax over the last axis where ``mask``
    is True and 0 where it is False; a row with no True gives zeros.

    >>> from course_lib.softmax.reference import softmax
    >>> wrong = lambda s, m: softmax(s) * m  # the notes' recipe: multiply after the softmax
    >>> "multiplied" in masked_softmax(wrong).details[0]
    True
    """
    rng = seeded(SEED)
    L = 5
    causal = _causal(L)
    partial = rng.random((3, 6)) < 0.6
    partial[:, 0] = True
    empty_row = causal.copy()
    empty_row[2] = False
    cases = [
        ("a causal mask on 5 x 5 logits", (rng.standard_normal((L, L)), causal)),
        ("a random mask on (3, 6) logits", (rng.standard_normal((3, 6)), partial)),
        ("a batch of 2 with a (5, 5) mask broadcast", (rng.standard_normal((2, L, L)), causal)),
        ("a row with nothing to attend to (row 2)", (rng.standard_normal((L, L)), empty_row)),
    ]

    def compare(got: object, args: tuple[np.ndarray, np.ndarray]) -> str | None:
        s, m = args
        m = np.broadcast_to(m, s.shape)
        want = _softmax(np.where(m, s, -np.inf), axis=-1)
        problem = diagnose(got, want)
        if problem is None:
            return None
        arr = to_array(got)
        if arr is None or arr.shape != want.shape:
            return problem
        dead = ~m.any(axis=-1)  # rows with nothing to attend to
        if not np.all(np.isfinite(arr)):
            if not np.all(np.isfinite(arr[dead])):
                return "a fully masked row gives NaN: return zeros there (nothing to attend to)"
            return problem
        if np.any(np.abs(arr[~m]) > 1e-12):
            if np.allclose(arr, _softmax(np.where(~m, s, -np.inf), axis=-1)):
                return problem + " (the mask is inverted: True means the key may be attended to)"
            return problem + " (masked positions must get weight exactly 0)"
        if np.allclose(arr, _softmax(s, axis=-1) * m):
            return (
                "the rows do not sum to 1: you multiplied the probabilities by the mask after "
                "the softmax (the recipe of notes 004), which removes weight without "
                "renormalising. Set the masked logits to -inf before the softmax instead"
            )
        return problem

    return check_cases(
        "a masked softmax", fn, [(d, a, a) for d, a in cases], compare=compare, require=require
    )


def split_heads(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise 4.4: ``fn(x, h)`` turns (B, L, h*d) into (B, h, L, d); head i gets columns
    i*d to (i+1)*d - 1.

    >>> out = split_heads(lambda x, h: x.reshape(x.shape[0], h, x.shape[1], -1))
    >>> "a reshape alone mixes tokens and heads" in out.details[0]
    True
    """
    rng = seeded(SEED)
    shapes = [((2, 3, 8), 2), ((1, 5, 6), 3), ((3, 4, 4), 1), ((2, 2, 12), 4)]
    cases = [(f"x of shape {s} and h = {h}", (rng.standard_normal(s), h), None) for s, h in shapes]

    checked = [(description, args, args) for description, args, _ in cases]

    def check(got: object, args: tuple[np.ndarray, int]) -> str | None:
        x, h = args
        B, L, width = x.shape
        d = width // h
        want = _split(x, h)
        problem = diagnose(got, want)
        if problem is None:
            return None
        arr = to_array(got)
        if arr is None:
            return problem
        if arr.shape == (B, L, h, d):
            return problem + " (move the head axis in front of L: transpose axes 1 and 2)"
        if arr.shape == want.shape:
            if np.allclose(arr, x.reshape(B, h, L, d)):
                return problem + ": a reshape alone mixes tokens and heads: reshape, then transpose"
            if np.allclose(arr, x.reshape(B, L, d, h).transpose(0, 3, 1, 2)):
                return problem + " (head i must get consecutive columns, not every h-th one)"
        return problem

    return check_cases("splitting heads", fn, checked, compare=check, require=require)
