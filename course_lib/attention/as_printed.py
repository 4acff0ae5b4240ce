"""The attention formulas of the lecture notes exactly as printed, errors included (Chapter 4).

Each function reproduces one printed statement so that the chapter can compare it with the
correct form (in :mod:`course_lib.attention.reference`):

* :func:`may_worked_example`: May's notes, section 1.1: the worked example's weights and result,
  which are those of attention *without* the 1/sqrt(d_k) scaling;
* :func:`may_footnote_weights`: May's notes, footnote 6, read as its words say ("divide by the
  dimension of K"): logits divided by d_k instead of sqrt(d_k);
* :func:`may_masked_weights`: May's notes, section 1.1: the causal mask "element-wise multiplied
  with alpha", i.e. applied *after* the softmax;
* :func:`may_v_alpha`: May's notes, section 1.1: "V alpha would give the result";
* :func:`slides_output`: the lecture slides, "Computing Attention": ``h_i = sum_{j=1}^{K} a_ij v_j``,
  a sum over the first K objects (K is the width of a vector) instead of all M.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from course_lib.attention.examples import may_worked_example as _example
from course_lib.checks import as_array, check_int
from course_lib.softmax.reference import softmax

__all__ = [
    "may_footnote_weights",
    "may_masked_weights",
    "may_v_alpha",
    "may_worked_example",
    "slides_output",
]


def may_worked_example() -> dict[str, np.ndarray]:
    """The printed numbers of May's notes, section 1.1: scores, weights and result for x1.

    Computed as the notes do, ``softmax(q_1 K^T) V`` with no scaling.

    >>> ex = may_worked_example()
    >>> ex["scores"].tolist(), ex["weights"].round(2).tolist(), ex["result"].round(1).tolist()
    ([2.0, 4.0, 4.0], [0.06, 0.47, 0.47], [1.9, 6.7, 1.6])
    """
    ex = _example()
    Q, K, V = (ex["X"] @ ex[name] for name in ("W_Q", "W_K", "W_V"))  # (3, 3) each
    scores = Q[0] @ K.T  # (3,): no 1/sqrt(d_k)
    weights = softmax(scores)
    return {"scores": scores, "weights": weights, "result": weights @ V}


def may_footnote_weights(q: Any, k: Any) -> np.ndarray:
    """Attention weights with the logits divided by d_k ("divide by the dimension of K").

    >>> may_footnote_weights([[1.0, 0.0, 2.0]], [[0.0, 1.0, 1.0], [4.0, 4.0, 0.0]]).round(3)
    array([[0.339, 0.661]])
    """
    q, k = as_array(q, "q", ndim=2), as_array(k, "k", ndim=2)
    return softmax(q @ k.T / q.shape[-1])


def may_masked_weights(logits: Any, mask: Any) -> np.ndarray:
    """The softmax of the logits, multiplied element-wise by the 0/1 mask afterwards.

    >>> may_masked_weights(np.zeros((2, 2)), np.tril(np.ones((2, 2)))).sum(axis=1)
    array([0.5, 1. ])
    """
    s = as_array(logits, "logits")
    return softmax(s) * np.asarray(mask, dtype=np.float64)


def may_v_alpha(V: Any, alpha: Any) -> np.ndarray:
    """The product ``V alpha`` as printed (defined only when d_v equals the number of tokens).

    >>> may_v_alpha(np.ones((3, 2)), np.eye(3))
    Traceback (most recent call last):
    ...
    ValueError: V alpha is undefined: V is (3, 2) and alpha is (3, 3); the result is alpha V
    """
    V, alpha = as_array(V, "V", ndim=2), as_array(alpha, "alpha", ndim=2)
    if V.shape[1] != alpha.shape[0]:
        raise ValueError(
            f"V alpha is undefined: V is {V.shape} and alpha is {alpha.shape}; the result is alpha V"
        )
    return V @ alpha


def slides_output(a: Any, V: Any, i: int, K: int) -> np.ndarray:
    """``h_i = sum_{j=1}^{K} a_ij v_j`` as printed: only the first K of the M values.

    >>> slides_output(np.full((3, 3), 1 / 3), np.eye(3), 0, 2)
    array([0.333, 0.333, 0.   ])
    """
    a, V = as_array(a, "a", ndim=2), as_array(V, "V", ndim=2)
    i, K = check_int(i, "i", low=0, high=a.shape[0] - 1), check_int(K, "K", low=1)
    return sum(a[i, j] * V[j] for j in range(min(K, V.shape[0])))
