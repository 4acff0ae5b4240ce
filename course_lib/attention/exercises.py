"""Checkers for the exercises of Chapter 4 (attention).

>>> import numpy as np
>>> def head(L):  # query i asks for position i - 1, strongly
...     return 10 * np.eye(L, k=-1), 10 * np.eye(L)
>>> previous_token_head(head).passed
True
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from course_lib.checker import (
    Outcome,
    check_cases,
    describe,
    diagnose,
    guarded,
    seeded,
    to_array,
)
from course_lib.softmax.reference import softmax as _softmax

__all__ = [
    "WHY_QUERY_IS_KEY",
    "WHY_WIDE_VARIANCE",
    "causal_attention",
    "cross_attention",
    "previous_token_head",
    "torch_head_weights",
]


#: Why the two predictions' answers are what they are, and what common wrong answers mean.
WHY_QUERY_IS_KEY = (
    "q . k0 = |k0|^2, a sum of 64 squares of unit variance, is about 64, and divided by "
    "sqrt(64) = 8 it is about 8; the other two scores are about N(0, 1). e^8 is about 3,000 "
    "times e^0, so nearly all the weight goes to key 0. 1/3 would need equal scores; about 0.5 "
    "forgets that the other scores sit near 0, not near 8."
)
WHY_WIDE_VARIANCE = (
    "each product q_l k_l has variance 2^2 * 2^2 = 16, the 64 of them sum to a variance of "
    "1,024, and dividing by sqrt(64) = 8 divides the variance by 64: 16, a standard deviation "
    "of 4. 1 is the answer for unit components: the scaling removes the width, not the size of "
    "the components; 4 counts the factor 2 once instead of twice; 1,024 forgets the scaling."
)

#: Seed of this chapter's checker inputs.
SEED = 404


def _cross(x_q, x_kv, lengths, w_q, w_k, w_v, *, scale=None, mask="keys"):
    """The answer to :func:`cross_attention`, and the typical wrong ones (``mask``: where the
    padding mask goes: ``"keys"`` (right), ``"none"``, ``"after"`` the softmax, ``"queries"``)."""
    q, k, v = x_q @ w_q, x_kv @ w_k, x_kv @ w_v  # (B, L_q, d_k), (B, L_kv, d_k), (B, L_kv, d_v)
    s = q @ k.swapaxes(-1, -2) * (1 / np.sqrt(q.shape[-1]) if scale is None else scale)
    real = np.arange(x_kv.shape[1])[None, :] < np.asarray(lengths)[:, None]  # (B, L_kv)
    if mask == "keys":
        s = np.where(real[:, None, :], s, -np.inf)  # (B, L_q, L_kv): a column per key
    elif mask == "queries":
        s = np.where(real[:, :, None], s, -np.inf)  # (B, L_q, L_kv): a row per query
    a = _softmax(s, axis=-1)  # (B, L_q, L_kv); a row with no key left gives zeros
    if mask == "after":
        a = a * real[:, None, :]
    return a @ v  # (B, L_q, d_v)


@guarded
def cross_attention(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise: ``fn(x_q, x_kv, kv_lengths, w_q, w_k, w_v)`` is one head of cross-attention.

    ``x_q`` (B, L_q, d) holds the queries' sequences, ``x_kv`` (B, L_kv, d) the sequences
    attended over, of which only the first ``kv_lengths[b]`` positions of sequence b are real
    (the rest is padding, possibly all of it). The result, (B, L_q, d_v), is
    softmax(Q K^T / sqrt(d_k)) V with the padding keys masked; zeros where no key is real.

    >>> unscaled = lambda xq, xkv, n, wq, wk, wv: _cross(xq, xkv, n, wq, wk, wv, scale=1.0)
    >>> "1/sqrt(d_k)" in cross_attention(unscaled).details[0]
    True
    """
    rng = seeded(SEED)
    raw = [  # description, B, L_q, L_kv, d, d_k, d_v, lengths
        ("one sequence of 4 tokens, no padding", 1, 4, 4, 5, 2, 3, [4]),
        ("two sequences of 5 tokens, the second with 2 real keys", 2, 5, 5, 4, 3, 2, [5, 2]),
        ("6 queries over 3 keys, d_k = 4, d_v = 1", 2, 6, 3, 4, 4, 1, [3, 1]),
        ("a second sequence with no real key at all", 2, 2, 4, 3, 2, 2, [3, 0]),
    ]
    cases = []
    for description, B, L_q, L_kv, d, d_k, d_v, lengths in raw:
        args = (
            rng.standard_normal((B, L_q, d)),
            rng.standard_normal((B, L_kv, d)),
            list(lengths),
            rng.standard_normal((d, d_k)),
            rng.standard_normal((d, d_k)),
            rng.standard_normal((d, d_v)),
        )
        cases.append((description, args, args))

    def compare(got: object, args: tuple) -> str | None:
        want = _cross(*args)
        problem = diagnose(got, want)
        if problem is None:
            return None
        arr = to_array(got)
        if arr is None or arr.shape != want.shape:
            return problem
        x_q, x_kv, lengths, w_q, *_ = args
        if not np.all(np.isfinite(arr)):
            if np.all(np.isfinite(arr[np.asarray(lengths) > 0])):
                return (
                    "a sequence with no real key gives NaN (a softmax of nothing but -inf is "
                    "0/0): return zeros there, as chapter 2's softmax does"
                )
            return problem
        wrong = {
            "the padding keys were attended to: mask the keys beyond each sequence's length": {
                "mask": "none"
            },
            "without the 1/sqrt(d_k) scaling": {"scale": 1.0},
            "you divided by the square root of the input width d; the scale is 1/sqrt(d_k), "
            "with d_k the width of a key (the columns of W_K)": {
                "scale": 1 / np.sqrt(x_q.shape[-1])
            },
            "you divided by d_k; divide by its square root": {"scale": 1 / w_q.shape[-1]},
            "the rows do not sum to 1: you multiplied the weights by the mask after the "
            "softmax (the recipe of May's notes); mask the logits with -inf before it": {
                "mask": "after"
            },
        }
        if x_q.shape[1] == x_kv.shape[1]:
            wrong[
                "the mask is on the wrong axis: it hides queries, but the padding is in the "
                "keys (the last axis of the logits)"
            ] = {"mask": "queries"}
        for hint, kwargs in wrong.items():
            other = _cross(*args, **kwargs)
            if np.all(np.isfinite(other)) and np.allclose(arr, other):
                return f"{hint} ({problem})"
        return problem

    return check_cases(
        "cross-attention over padded keys", fn, cases, compare=compare, require=require
    )


def _causal(x, w_q, w_k, w_v, *, scale=None, mask="before", tri=np.tril, axis=-1):
    """The answer to :func:`causal_attention`, and the typical wrong ones: ``mask`` is where the
    causal mask goes (``"before"`` the softmax as -inf, ``"after"`` as a product, ``"zero"``: the
    logits set to 0 instead of -inf), ``tri`` which triangle is allowed, ``axis`` the softmax's."""
    q, k, v = x @ w_q, x @ w_k, x @ w_v  # (L, d_k), (L, d_k), (L, d_v)
    s = q @ k.T * (1 / np.sqrt(k.shape[1]) if scale is None else scale)  # (L, L)
    allowed = tri(np.ones(s.shape, dtype=bool))
    if mask == "before":
        s = np.where(allowed, s, -np.inf)
    elif mask == "zero":
        s = np.where(allowed, s, 0.0)
    a = _softmax(s, axis=axis)  # (L, L)
    if mask == "after":
        a = a * allowed
    return a @ v  # (L, d_v)


@guarded
def causal_attention(fn: Callable, *, require: bool = False) -> Outcome:
    """Find-the-bug exercise: ``fn(x, w_q, w_k, w_v)`` is one causal self-attention head.

    ``x`` (L, d); ``w_q``, ``w_k`` (d, d_k); ``w_v`` (d, d_v). The answer, (L, d_v), is
    ``softmax(mask(Q K^T / sqrt(d_k))) V`` with the future masked by -inf before the softmax.

    >>> causal_attention(lambda *a: _causal(*a)).passed
    True
    >>> "both bugs" in causal_attention(lambda *a: _causal(*a, scale=1 / a[1].shape[1], mask="after")).details[0]
    True
    """
    rng = seeded(SEED + 1)
    raw = [  # description, L, d, d_k, d_v
        ("5 tokens of width 6, d_k = 4, d_v = 3", 5, 6, 4, 3),
        ("a single token", 1, 4, 2, 2),
        ("8 tokens, d_k = 16 (wide keys), d_v = 2", 8, 5, 16, 2),
        ("3 tokens, d_k = 1", 3, 2, 1, 4),
    ]
    cases = []
    for description, L, d, d_k, d_v in raw:
        args = (
            rng.standard_normal((L, d)),
            rng.standard_normal((d, d_k)),
            rng.standard_normal((d, d_k)),
            rng.standard_normal((d, d_v)),
        )
        cases.append((description, tuple(a.copy() for a in args), args))

    def compare(got: object, args: tuple) -> str | None:
        want = _causal(*args)
        problem = diagnose(got, want)
        if problem is None:
            return None
        arr = to_array(got)
        if arr is None or arr.shape != want.shape:
            return problem
        d_k = args[1].shape[1]
        wrong = [
            (
                {"scale": 1 / d_k, "mask": "after"},
                "both bugs are still there: the logits are divided by d_k instead of sqrt(d_k), "
                "and the mask multiplies the weights after the softmax",
            ),
            (
                {"mask": "after"},
                "the rows of your weights do not sum to 1: the mask multiplies the weights "
                "after the softmax (May's recipe), so early tokens get a shrunken average; set the "
                "future logits to -inf before the softmax",
            ),
            ({"scale": 1 / d_k}, "you divide the logits by d_k; divide by its square root"),
            ({"scale": 1.0}, "you left out the 1/sqrt(d_k) scaling of the logits"),
            (
                {"tri": np.triu},
                "your mask lets every token see the later ones and hides the earlier ones "
                "(np.triu instead of np.tril)",
            ),
            (
                {"mask": "zero"},
                "a masked logit of 0 still gets weight exp(0) = 1 in the softmax; use -inf",
            ),
            (
                {"axis": 0},
                "your softmax runs down the columns: each key's weights sum to 1, not each "
                "query's; take it along the last axis",
            ),
        ]
        for kwargs, hint in wrong:
            with np.errstate(all="ignore"):
                other = _causal(*args, **kwargs)
            if np.all(np.isfinite(other)) and np.allclose(arr, other):
                return f"{hint} ({problem})"
        return problem

    return check_cases(
        "causal self-attention, one head", fn, cases, compare=compare, require=require
    )


@guarded
def previous_token_head(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise: ``fn(L)`` returns ``(W_Q, W_K)``, each of shape (L, d_k), such that for the
    inputs X = I_L (token i is the one-hot vector of its position) every query i >= 1 puts at
    least 90% of its attention on key i - 1 (no mask; scaled by 1/sqrt(d_k)).

    >>> import numpy as np
    >>> print(previous_token_head(lambda L: (np.eye(L), np.eye(L))).details[0])
    on L = 4: each query attends to itself (key i), not to the previous token: shift the query so that position i asks for position i - 1
    """
    cases = [(f"L = {L}", (L,), L) for L in (4, 8, 16)]

    def compare(got: object, L: int) -> str | None:
        if not isinstance(got, tuple | list) or len(got) != 2:
            return f"return a pair (W_Q, W_K) of two matrices, got {describe(got)}"
        w_q, w_k = (to_array(w) for w in got)
        if w_q is None or w_k is None:
            return "W_Q and W_K must be arrays of numbers"
        if w_q.ndim != 2 or w_k.ndim != 2 or w_q.shape[0] != L or w_k.shape[0] != L:
            return (
                f"W_Q and W_K must have shape (L, d_k) = ({L}, d_k): got {w_q.shape} and "
                f"{w_k.shape}"
            )
        if w_q.shape[1] != w_k.shape[1]:
            return f"W_Q and W_K need the same width d_k: got {w_q.shape[1]} and {w_k.shape[1]}"
        if not (np.all(np.isfinite(w_q)) and np.all(np.isfinite(w_k))):
            return "W_Q and W_K contain NaN or inf"
        weights = _weights(w_q, w_k)  # (L, L): X = I, so Q = W_Q and K = W_K
        rows = np.arange(1, L)
        looks = weights[rows].argmax(axis=1)  # the key each query i >= 1 looks at most
        if np.all(looks == rows):
            return (
                "each query attends to itself (key i), not to the previous token: shift the "
                "query so that position i asks for position i - 1"
            )
        if np.all(looks[:-1] == rows[:-1] + 1):
            return "the shift goes the wrong way: query i looks at key i + 1, the next token"
        wrong = rows[looks != rows - 1]
        if wrong.size:
            i = int(wrong[0])
            return f"query {i} looks most at key {int(weights[i].argmax())}, not at key {i - 1}"
        weakest = float(weights[rows, rows - 1].min())
        if weakest < 0.9:
            return (
                f"the right keys, but too softly: the smallest weight on the previous token is "
                f"{weakest:.2f}, below 0.9. Scale W_Q or W_K up: the logits are divided by "
                "sqrt(d_k), and the gap between the right logit and the others sets the weight"
            )
        return None

    return check_cases("a previous-token head", fn, cases, compare=compare, require=require)


def _weights(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    return _softmax(q @ k.T / np.sqrt(q.shape[1]), axis=-1)


@guarded
def torch_head_weights(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise: ``fn(in_proj_weight, h)`` turns the packed (3d, d) input weight of
    ``torch.nn.MultiheadAttention`` into the per-head ``(w_q, w_k, w_v)``, each (h, d, d_k),
    with ``x @ w_q[i]`` the queries of head i (eq. 16 of Strabel's notes).

    PyTorch stores the weight as ``nn.Linear`` does, (out, in), and computes ``x @ W.T``; its
    rows are the queries', then the keys', then the values' output features, head after head.

    >>> bad = lambda w, h: tuple(p.reshape(h, w.shape[1], -1) for p in np.split(w, 3))
    >>> "stored transposed" in torch_head_weights(bad).details[0]
    True
    """
    rng = seeded(SEED)
    shapes = [(6, 2), (8, 4), (4, 1), (12, 3)]  # (d, h)
    cases = []
    for d, h in shapes:
        w = rng.standard_normal((3 * d, d))
        cases.append((f"d = {d} and h = {h}", (w, h), (w, h)))

    def heads(w: np.ndarray, h: int) -> np.ndarray:  # (h*d_k, d) -> (h, d, d_k)
        return w.reshape(h, w.shape[0] // h, w.shape[1]).transpose(0, 2, 1)

    def compare(got: object, args: tuple[np.ndarray, int]) -> str | None:
        w, h = args
        d = w.shape[1]
        parts = np.split(w, 3)  # W_Q, W_K, W_V as PyTorch stores them, (d, d) each
        stacked = None if isinstance(got, tuple | list) else to_array(got)
        if stacked is not None and stacked.ndim == 4 and len(stacked) == 3:
            got = tuple(stacked)  # the three stacked into one (3, h, d, d_k) array or tensor
        if not isinstance(got, tuple | list) or len(got) != 3:
            return f"return a tuple (w_q, w_k, w_v) of three arrays, got {describe(got)}"
        names = ("w_q", "w_k", "w_v")
        for name, mine, part in zip(names, got, parts, strict=True):
            want = heads(part, h)
            problem = diagnose(mine, want)
            if problem is None:
                continue
            arr = to_array(mine)
            if arr is not None and arr.shape == want.shape:
                others = [heads(p, h) for p in parts]
                if any(np.allclose(arr, o) for o in others):
                    return (
                        f"{name} holds another projection's weights: the rows of in_proj_weight "
                        "are the queries', then the keys', then the values'"
                    )
                if np.allclose(arr, part.reshape(h, d, d // h)):
                    return (
                        f"{name}: the weight is stored transposed, (out, in) as in nn.Linear: "
                        f"transpose it before cutting it into heads ({problem})"
                    )
                if np.allclose(arr, part.T.reshape(h, d, d // h)):
                    return (
                        f"{name}: a reshape of the transposed weight cuts it into blocks of "
                        "rows, i.e. of input features; head i is a block of d_k consecutive "
                        f"columns ({problem})"
                    )
                if np.allclose(arr, part.T.reshape(d, d // h, h).transpose(2, 0, 1)):
                    return (
                        f"{name}: head i must get d_k consecutive columns, not every h-th one "
                        f"({problem})"
                    )
            return f"{name}: {problem}"
        return None

    return check_cases(
        "PyTorch's weights, head by head", fn, cases, compare=compare, require=require
    )
