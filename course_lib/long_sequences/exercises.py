"""Exercise checkers of Chapter 11: ``from course_lib.long_sequences import exercises as check``.

Each checker runs the learner's function on named cases (:func:`course_lib.checker.check_cases`)
and says in plain words what is wrong, naming known mistakes (:func:`course_lib.checker.first_mistake`).

>>> window_attention(lambda q, k, v, w: v).passed
False
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from course_lib.checker import Outcome, call, check_cases, diagnose, first_mistake, seeded, to_array
from course_lib.checks import as_array, check_int
from course_lib.long_sequences.checks import check_qkv
from course_lib.long_sequences.reference import sliding_window_attention as _reference_window
from course_lib.measure import peak_numpy_memory

__all__ = ["attend_in_blocks", "online_softmax_update", "window_attention"]

#: Seed of this chapter's checker inputs.
SEED = 11
#: How close a learner's values must be (float32 arithmetic passes, a wrong formula does not).
RTOL, ATOL = 1e-5, 1e-7


def _attend(q: np.ndarray, K: np.ndarray, V: np.ndarray, scale: float) -> np.ndarray:
    """One query (d,) against its keys (n, d) and values (n, d_v): a softmax-weighted sum."""
    logits = K @ q * scale  # (n,)
    w = np.exp(logits - logits.max())
    return (w / w.sum()) @ V


def _window_variant(q, k, v, w, keys_of, *, scale=None, zero_pad=False):
    """Attention where query i sees the key positions ``keys_of(i)``; positions outside the
    sequence are skipped, or (``zero_pad``) attended as zero keys with zero values."""
    L, d = q.shape
    scale = 1 / np.sqrt(d) if scale is None else scale
    out = np.zeros((L, v.shape[1]))
    for i in range(L):
        js = [j for j in keys_of(i) if zero_pad or 0 <= j < L]
        K = np.array([k[j] if 0 <= j < L else np.zeros(d) for j in js])  # (n, d)
        V = np.array([v[j] if 0 <= j < L else np.zeros(v.shape[1]) for j in js])
        out[i] = _attend(q[i], K, V, scale)
    return out


def window_attention(fn: Callable, *, require: bool = False) -> Outcome:
    """``fn(q, k, v, w)``: attention where query i sees the keys j with ``|i - j| <= w``.

    q, k, v are (L, d) NumPy arrays; the result is (L, d_v) and must equal dense attention under
    the sliding-window mask, computed without an (L, L) matrix. The checker names the usual
    mistakes: zero padding that receives attention, whole blocks of keys left unmasked, a
    one-sided window, ``w`` read as the whole window, and the missing ``1 / sqrt(d)``.

    >>> def by_loop(q, k, v, w):
    ...     out = np.zeros_like(v)
    ...     for i in range(len(q)):
    ...         j = np.arange(max(0, i - w), min(len(q), i + w + 1))
    ...         x = k[j] @ q[i] / np.sqrt(q.shape[1])
    ...         out[i] = np.exp(x - x.max()) @ v[j] / np.exp(x - x.max()).sum()
    ...     return out
    >>> window_attention(by_loop).passed
    True
    """
    rng = seeded(SEED)
    cases = []
    for description, L, w, size in [
        ("L = 12, w = 3 (whole blocks)", 12, 3, 1.0),
        ("L = 10, w = 3 (a partial last block)", 10, 3, 1.0),
        ("L = 7, w = 1", 7, 1, 1.0),
        ("L = 6, w = 5 (the window covers the sequence)", 6, 5, 1.0),
        ("L = 9, w = 2, logits in the hundreds", 9, 2, 30.0),
    ]:
        q, k = size * rng.standard_normal((2, L, 4))  # (L, d) each
        v = rng.standard_normal((L, 3))  # (L, d_v)
        cases.append((description, (q, k, v, w), (q, k, v, w)))

    def compare(got: object, args: tuple) -> str | None:
        q, k, v, w = args
        want = _reference_window(q, k, v, w)  # the library's NumPy reference
        problem = diagnose(got, want, rtol=RTOL, atol=ATOL)
        if problem is None:
            return None
        arr = to_array(got)
        if arr is not None and arr.shape == want.shape and not np.isfinite(arr).all():
            return (
                "NaN or inf: exp overflowed; subtract each row's largest logit before exp "
                "(the softmax does not change)"
            )

        def blocks_of(i: int) -> range:  # the keys of query i's block of w and its neighbours
            return range((i // w - 1) * w, (i // w + 2) * w)

        mistakes = [
            (
                _window_variant(q, k, v, w, lambda i: range(i - w, i + w + 1), zero_pad=True),
                "positions outside the sequence receive attention: the zero padding at the ends "
                "is a key with logit 0 (weight e^0 = 1 before normalising); mask j < 0 and "
                "j >= L out of the softmax",
            ),
            (
                _window_variant(q, k, v, w, blocks_of),
                "each query attends to all 3w keys of its three blocks: inside the blocks, mask "
                "the keys with |i - j| > w",
            ),
            (
                _window_variant(q, k, v, w, blocks_of, zero_pad=True),
                "each query attends to all 3w keys of its three blocks, the zero padding "
                "included: mask |i - j| > w and the positions outside the sequence",
            ),
            (
                _window_variant(q, k, v, w, lambda i: range(i - w, i + 1)),
                "only the keys before i: this window is not causal, it has w neighbours on "
                "each side",
            ),
            (
                _window_variant(q, k, v, w, lambda i: range(i - w // 2, i + w // 2 + 1)),
                "w is the number of neighbours on EACH side (Longformer's paper counts both "
                "sides together; this chapter does not)",
            ),
            (
                _window_variant(q, k, v, w, lambda i: range(i - w + 1, i + w)),
                "off by one: the keys at distance exactly w belong to the window, |i - j| <= w",
            ),
            (
                _window_variant(q, k, v, w, lambda i: range(i - w, i + w + 1), scale=1.0),
                "divide the logits by sqrt(d)",
            ),
        ]
        return first_mistake(got, mistakes, rtol=RTOL, atol=ATOL) or problem

    outcome = check_cases(
        "sliding-window attention by blocks", fn, cases, compare=compare, require=False
    )
    if outcome.passed:
        L, w = 2048, 4
        q, k, v = rng.standard_normal((3, L, 4))
        peak, error = call(peak_numpy_memory, lambda: fn(q, k, v, w))
        if error:
            outcome = Outcome(outcome.title, False, [f"on L = {L}, w = {w}: {error}"])
        elif peak > L * L * 8 / 4:
            outcome = Outcome(
                outcome.title,
                False,
                [
                    f"the values are right, but at L = {L} your function allocated "
                    f"{peak / 2**20:.0f} MiB, as much as (L, L) matrices take "
                    f"({L * L * 8 / 2**20:.0f} MiB each in float64): compute each block of w "
                    "queries against the 3w keys of its own and its two neighbouring blocks only"
                ],
            )
    if require and not outcome.passed:
        raise AssertionError(str(outcome))
    return outcome


def attend_in_blocks(
    update: Callable, q: np.ndarray, k: np.ndarray, v: np.ndarray, block: int
) -> np.ndarray:
    """softmax(q k^T / sqrt(d)) v over blocks of keys, each folded in by
    ``update(m, s, acc, logits, values)`` (the exercise's online-softmax step).

    >>> q = k = np.eye(2)
    >>> v = np.array([[1.0], [3.0]])
    >>> attend_in_blocks(_update, q, k, v, block=1).round(2)
    array([[1.66],
           [2.34]])
    """
    q, k, v = check_qkv(q, k, v, as_array)
    block = check_int(block, "block", low=1)
    if not callable(update):
        raise TypeError(f"update must be a function, got {type(update).__name__}")
    m = np.full(q.shape[0], -np.inf)  # (L_q,)
    s = np.zeros(q.shape[0])  # (L_q,)
    acc = np.zeros((q.shape[0], v.shape[1]))  # (L_q, d_v)
    for start in range(0, k.shape[0], block):
        logits = q @ k[start : start + block].T / np.sqrt(q.shape[1])  # (L_q, block)
        m, s, acc = update(m, s, acc, logits, v[start : start + block])
    return acc / s[:, None]


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
            problem = diagnose(g, w, rtol=RTOL, atol=ATOL)
            if problem is None:
                continue
            arr = to_array(g)
            if arr is not None and not np.isfinite(arr).all() and np.isneginf(m).all():
                return (
                    f"{name}: NaN or inf on the first block, where m_old = -inf: the factor "
                    "exp(m_old - m_new) is 0 there, while its inverse exp(m_new - m_old) is inf "
                    "(the factor is exp(m_old - m_new), not its inverse)"
                )
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
                hint = first_mistake(g, mistakes, rtol=RTOL, atol=ATOL)
            return f"{name}: {hint or problem}"
        return None

    return check_cases(
        "one step of the online softmax",
        fn,
        [(d, a, a) for d, a in cases],
        compare=compare,
        require=require,
    )
