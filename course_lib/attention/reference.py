"""Scaled dot-product and multi-head attention, in NumPy (Chapter 4).

Written to be read next to Strabel's notes (*Transformers*, 2023, section 2):

* eq. (13), Definition 2.1: ``Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V`` for
  Q (d_l, d_k), K (d_s, d_k) and V (d_s, d_v);
* eqs. (14)-(18): multi-head attention with per-head weights ``W_Q^i, W_K^i, W_V^i`` and one
  output matrix ``W_O``: ``Multihead(X_Q, X_K, X_V) = concat(A^1, ..., A^h) W_O``;
* the lecture slides' step-by-step form: ``a_ij = softmax_j(q_i . k_j / sqrt(d_k))`` and
  ``h_i = sum_j a_ij v_j``, one query at a time (:func:`attention_per_query`).

Conventions shared with :mod:`course_lib.attention.accelerated` (same names and signatures):

* rows are tokens: ``q`` is (..., L_q, d_k), ``k`` is (..., L_k, d_k), ``v`` is (..., L_k, d_v);
  leading (batch) dimensions broadcast as in ``@``;
* ``mask`` is boolean, **True = may attend**, and must broadcast *to* the logits' shape
  (..., L_q, L_k) without enlarging it; masked logits become -inf before the softmax;
* ``bias`` is a float term added to the logits (relative positions, ALiBi: chapter 6), with the
  same broadcasting rule;
* ``scale`` defaults to ``1 / sqrt(d_k)``;
* a query whose keys are all masked gets all-zero weights and an all-zero output (the softmax of
  chapter 2 returns zeros for a fully masked row). ``torch.nn.MultiheadAttention`` returns NaN
  there instead.

Everything is computed in float64.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from course_lib.attention.checks import (
    check_attention_scale,
    check_broadcasts_to,
    multi_head_shapes,
)
from course_lib.checks import as_array, check_int, fmt_shape, matmul_shapes
from course_lib.softmax.reference import softmax

__all__ = [
    "attention_per_query",
    "attention_weights",
    "causal_mask",
    "fuse_head_weights",
    "merge_heads",
    "multi_head_attention",
    "padding_mask",
    "scaled_dot_product_attention",
    "split_heads",
]


# ----------------------------------------------------------------------------- input checks
def _as_mask(mask: Any, target: tuple[int, ...]) -> np.ndarray | None:
    if mask is None:
        return None
    if hasattr(mask, "detach"):  # a torch tensor
        mask = mask.detach().cpu().numpy()
    arr = np.asarray(mask)
    if arr.dtype != np.bool_:
        raise TypeError(
            f"mask must be boolean (True = may attend), got dtype {arr.dtype}; "
            "for an additive float mask pass it as bias"
        )
    check_broadcasts_to(arr.shape, target, "mask")
    return arr


def _as_bias(bias: Any, target: tuple[int, ...]) -> np.ndarray | None:
    if bias is None:
        return None
    arr = as_array(bias, "bias")
    check_broadcasts_to(arr.shape, target, "bias")
    return arr


def _qk(q: Any, k: Any) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    q = as_array(q, "q", min_ndim=2)
    k = as_array(k, "k", min_ndim=2)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q of shape {fmt_shape(q.shape)} and k of shape {fmt_shape(k.shape)} must have the "
            f"same last dimension d_k, got {q.shape[-1]} and {k.shape[-1]}"
        )
    logits_shape = matmul_shapes(q.shape, k.swapaxes(-1, -2).shape, "q", "k^T")
    return q, k, logits_shape


def _qkv(q: Any, k: Any, v: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[int, ...]]:
    q, k, logits_shape = _qk(q, k)
    v = as_array(v, "v", min_ndim=2)
    if v.shape[-2] != k.shape[-2]:
        raise ValueError(
            f"k of shape {fmt_shape(k.shape)} and v of shape {fmt_shape(v.shape)} must have the "
            f"same length L_k (one value per key), got {k.shape[-2]} keys and {v.shape[-2]} values"
        )
    matmul_shapes(logits_shape, v.shape, "the weights", "v")  # batch dimensions broadcast
    return q, k, v, logits_shape


# ----------------------------------------------------------------------------- masks
def causal_mask(L: int) -> np.ndarray:
    """Boolean (L, L) mask, True on and below the diagonal: token i may attend to tokens j <= i.

    This is the matrix M of May's notes, section 1.1, as booleans.

    >>> causal_mask(3)
    array([[ True, False, False],
           [ True,  True, False],
           [ True,  True,  True]])
    """
    L = check_int(L, "L", low=1)
    return np.tril(np.ones((L, L), dtype=bool))


def padding_mask(lengths: Any, L: int) -> np.ndarray:
    """Boolean (B, 1, L) key mask: True where key position j < lengths[b] (a real token).

    The middle axis of size 1 broadcasts over the queries, so the result can be used directly
    as the mask of (B, L_q, L) logits, and combined with a causal mask by ``&``. For logits with
    a head axis, (B, h, L_q, L), insert it: ``padding_mask(lengths, L)[:, None]``.

    >>> padding_mask([3, 1], 4).astype(int)
    array([[[1, 1, 1, 0]],
    <BLANKLINE>
           [[1, 0, 0, 0]]])
    """
    L = check_int(L, "L", low=1)
    arr = np.asarray(lengths.detach().cpu() if hasattr(lengths, "detach") else lengths)
    if arr.ndim != 1 or arr.size == 0 or arr.dtype.kind not in "iu":
        raise TypeError(
            f"lengths must be a non-empty 1-D sequence of ints (one per sequence), got "
            f"{arr.dtype} array of shape {fmt_shape(arr.shape)}"
        )
    if arr.min() < 1 or arr.max() > L:
        raise ValueError(f"every length must be between 1 and L={L}, got {arr.tolist()}")
    keep = np.zeros((arr.size, 1, L), dtype=bool)
    for b, n in enumerate(arr):
        keep[b, 0, :n] = True
    return keep


# ----------------------------------------------------------------------------- attention
def attention_weights(
    q: Any, k: Any, mask: Any = None, bias: Any = None, scale: Any = None
) -> np.ndarray:
    """The weights ``softmax(scale * Q K^T + bias)`` of eq. (13), masked, shape (..., L_q, L_k).

    Row i holds the weights a_i1, ..., a_iL_k with which query i averages the values; each row
    sums to one, except a fully masked row, which is all zeros.

    >>> q = np.array([[1.0, 0.0]])
    >>> k = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> attention_weights(q, k, scale=1.0)  # softmax([1, 0])
    array([[0.73105858, 0.26894142]])
    >>> attention_weights(q, k, mask=np.array([[False, True]]))
    array([[0., 1.]])
    """
    q, k, logits_shape = _qk(q, k)
    mask = _as_mask(mask, logits_shape)
    bias = _as_bias(bias, logits_shape)
    scale = check_attention_scale(scale, q.shape[-1])
    logits = scale * (q @ k.swapaxes(-1, -2))  # (..., L_q, L_k)
    if bias is not None:
        logits = logits + bias
    if mask is not None:
        logits = np.where(mask, logits, -np.inf)  # masked before the softmax
    return softmax(logits, axis=-1)


def scaled_dot_product_attention(
    q: Any, k: Any, v: Any, mask: Any = None, bias: Any = None, scale: Any = None
) -> np.ndarray:
    """Eq. (13) in matrix form: ``softmax(Q K^T / sqrt(d_k)) V``, shape (..., L_q, d_v).

    With the default ``scale`` this is exactly Definition 2.1 of the notes; ``scale=1`` gives
    the unscaled dot-product attention of the worked example in May's notes.

    >>> q = np.array([[1.0, 0.0]])
    >>> k = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> v = np.array([[10.0], [20.0]])
    >>> scaled_dot_product_attention(q, k, v, scale=1.0)  # 0.731 * 10 + 0.269 * 20
    array([[12.68941421]])
    """
    q, k, v, logits_shape = _qkv(q, k, v)
    a = attention_weights(q, k, mask, bias, scale)  # (..., L_q, L_k)
    return a @ v  # (..., L_q, d_v): row i is sum_j a_ij v_j


def attention_per_query(
    q: Any, k: Any, v: Any, mask: Any = None, bias: Any = None, scale: Any = None
) -> np.ndarray:
    """The slides' derivation, one query at a time: ``h_i = sum_j a_ij v_j``.

    For each query i: the logits ``s_ij = scale * q_i . k_j (+ bias_ij)``, the weights
    ``a_ij = exp(s_ij) / sum_j' exp(s_ij')`` over the keys j it may attend to, and the output
    ``h_i = sum_j a_ij v_j``. Same result as :func:`scaled_dot_product_attention`.

    >>> q = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> k = v = np.eye(2)
    >>> attention_per_query(q, k, v, scale=1.0)
    array([[0.73105858, 0.26894142],
           [0.26894142, 0.73105858]])
    """
    q, k, v, logits_shape = _qkv(q, k, v)
    mask = _as_mask(mask, logits_shape)
    bias = _as_bias(bias, logits_shape)
    scale = check_attention_scale(scale, q.shape[-1])
    batch = logits_shape[:-2]
    L_q, L_k, d_v = logits_shape[-2], logits_shape[-1], v.shape[-1]
    qb = np.broadcast_to(q, (*batch, L_q, q.shape[-1]))
    kb = np.broadcast_to(k, (*batch, L_k, k.shape[-1]))
    vb = np.broadcast_to(v, (*batch, L_k, d_v))
    mb = None if mask is None else np.broadcast_to(mask, logits_shape)
    bb = None if bias is None else np.broadcast_to(bias, logits_shape)
    out = np.zeros((*batch, L_q, d_v))
    for idx in itertools.product(*(range(n) for n in batch)):
        for i in range(L_q):
            s = np.array([scale * np.dot(qb[idx][i], kb[idx][j]) for j in range(L_k)])
            if bb is not None:
                s = s + bb[idx][i]
            if mb is not None:
                s = np.where(mb[idx][i], s, -np.inf)
            a = softmax(s, axis=-1)  # (L_k,): a_i1 ... a_iL_k
            out[idx][i] = sum(a[j] * vb[idx][j] for j in range(L_k))
    return out


# ----------------------------------------------------------------------------- heads
def split_heads(x: Any, n_heads: int) -> np.ndarray:
    """Cut the last axis into ``n_heads`` consecutive blocks: (..., L, h*d) -> (..., h, L, d).

    Head i gets columns ``i*d`` to ``(i+1)*d - 1``: the layout of a fused projection whose
    columns are the per-head matrices side by side.

    >>> x = np.arange(8.0).reshape(2, 4)  # L = 2 tokens, h * d = 2 * 2
    >>> split_heads(x, 2)[1]  # head 1: columns 2 and 3
    array([[2., 3.],
           [6., 7.]])
    """
    x = as_array(x, "x", min_ndim=2)
    h = check_int(n_heads, "n_heads", low=1)
    width = x.shape[-1]
    if width % h:
        raise ValueError(
            f"the last dimension of x (shape {fmt_shape(x.shape)}) is {width}, which is not "
            f"divisible by n_heads={h}"
        )
    d = width // h
    return np.stack([x[..., i * d : (i + 1) * d] for i in range(h)], axis=-3)


def merge_heads(x: Any) -> np.ndarray:
    """Inverse of :func:`split_heads`: concat(A^1, ..., A^h) of eq. (18), (..., h, L, d) -> (..., L, h*d).

    >>> a = np.stack([np.zeros((2, 1)), np.ones((2, 1))])  # h = 2 heads, L = 2, d = 1
    >>> merge_heads(a)
    array([[0., 1.],
           [0., 1.]])
    """
    x = as_array(x, "x", min_ndim=3)
    return np.concatenate([x[..., i, :, :] for i in range(x.shape[-3])], axis=-1)


def fuse_head_weights(w: Any) -> np.ndarray:
    """Per-head matrices side by side: (h, d_in, d_k) -> one (d_in, h*d_k) matrix.

    ``X @ fuse_head_weights(w)`` holds ``X @ w[i]`` in columns ``i*d_k`` to ``(i+1)*d_k - 1``,
    so ``split_heads(X @ fuse_head_weights(w), h)[..., i, :, :] == X @ w[i]``.

    >>> w = np.stack([np.eye(2), 2 * np.eye(2)])  # h = 2, d_in = d_k = 2
    >>> fuse_head_weights(w)
    array([[1., 0., 2., 0.],
           [0., 1., 0., 2.]])
    """
    w = as_array(w, "w", ndim=3)
    return np.concatenate([w[i] for i in range(w.shape[0])], axis=-1)


def _check_vector(b: Any, name: str, shape: tuple[int, ...]) -> np.ndarray | None:
    if b is None:
        return None
    arr = as_array(b, name)
    if arr.shape != shape:
        raise ValueError(f"{name} must have shape {fmt_shape(shape)}, got {fmt_shape(arr.shape)}")
    return arr


def _mha_inputs(x_q, x_k, x_v, w_q, w_k, w_v, w_o, b_q, b_k, b_v, b_o):
    x_q = as_array(x_q, "x_q", min_ndim=2)
    x_k = as_array(x_k, "x_k", min_ndim=2)
    x_v = as_array(x_v, "x_v", min_ndim=2)
    w_q = as_array(w_q, "w_q", ndim=3)
    w_k = as_array(w_k, "w_k", ndim=3)
    w_v = as_array(w_v, "w_v", ndim=3)
    w_o = as_array(w_o, "w_o", ndim=2)
    h, d_k, d_v = multi_head_shapes(*(tuple(a.shape) for a in (x_q, x_k, x_v, w_q, w_k, w_v, w_o)))
    b_q = _check_vector(b_q, "b_q", (h, d_k))
    b_k = _check_vector(b_k, "b_k", (h, d_k))
    b_v = _check_vector(b_v, "b_v", (h, d_v))
    b_o = _check_vector(b_o, "b_o", (w_o.shape[1],))
    return x_q, x_k, x_v, w_q, w_k, w_v, w_o, b_q, b_k, b_v, b_o


def multi_head_attention(
    x_q: Any,
    x_k: Any,
    x_v: Any,
    w_q: Any,
    w_k: Any,
    w_v: Any,
    w_o: Any,
    mask: Any = None,
    bias: Any = None,
    b_q: Any = None,
    b_k: Any = None,
    b_v: Any = None,
    b_o: Any = None,
) -> np.ndarray:
    """Multi-head attention exactly as eqs. (14)-(18), one head at a time.

    Shapes: x_q (..., d_l, d_g), x_k (..., d_s, d_w), x_v (..., d_s, d_u); per-head weights
    stacked along the first axis, w_q (h, d_g, d_k), w_k (h, d_w, d_k), w_v (h, d_u, d_v);
    w_o (h*d_v, d_o). Optional biases b_q, b_k (h, d_k), b_v (h, d_v), b_o (d_o,) (the notes
    have none; ``torch.nn.MultiheadAttention`` has them). ``mask`` and ``bias`` broadcast to
    (..., h, d_l, d_s): a (d_l, d_s) one applies to every head. Returns (..., d_l, d_o).

    For head i (eqs. 16-17): ``Q^i = X_Q W_Q^i``, ``K^i = X_K W_K^i``, ``V^i = X_V W_V^i`` and
    ``A^i = Attention(Q^i, K^i, V^i)``; then (eq. 18) ``concat(A^1, ..., A^h) W_O``.

    >>> x = np.array([[1.0, 0.0], [0.0, 1.0]])  # L = 2 tokens, d_model = 2
    >>> w = np.stack([np.eye(2)[:, :1], np.eye(2)[:, 1:]])  # h = 2 heads, d_k = 1
    >>> multi_head_attention(x, x, x, w, w, w, np.eye(2)).round(3)
    array([[0.731, 0.5  ],
           [0.5  , 0.731]])
    """
    x_q, x_k, x_v, w_q, w_k, w_v, w_o, b_q, b_k, b_v, b_o = _mha_inputs(
        x_q, x_k, x_v, w_q, w_k, w_v, w_o, b_q, b_k, b_v, b_o
    )
    h = w_q.shape[0]
    batch = np.broadcast_shapes(x_q.shape[:-2], x_k.shape[:-2], x_v.shape[:-2])
    logits_shape = (*batch, h, x_q.shape[-2], x_k.shape[-2])  # (..., h, d_l, d_s)
    x_q, x_k, x_v = (np.broadcast_to(x, (*batch, *x.shape[-2:])) for x in (x_q, x_k, x_v))
    mask = _as_mask(mask, logits_shape)
    bias = _as_bias(bias, logits_shape)
    heads = []
    for i in range(h):
        Q = x_q @ w_q[i] + (0 if b_q is None else b_q[i])  # (..., d_l, d_k)   eq. (16)
        K = x_k @ w_k[i] + (0 if b_k is None else b_k[i])  # (..., d_s, d_k)
        V = x_v @ w_v[i] + (0 if b_v is None else b_v[i])  # (..., d_s, d_v)
        m = None if mask is None else np.broadcast_to(mask, logits_shape)[..., i, :, :]
        bi = None if bias is None else np.broadcast_to(bias, logits_shape)[..., i, :, :]
        heads.append(scaled_dot_product_attention(Q, K, V, m, bi))  # (..., d_l, d_v) eq. (17)
    concat = np.concatenate(heads, axis=-1)  # (..., d_l, h*d_v)
    out = concat @ w_o  # (..., d_l, d_o)                                      eq. (18)
    return out if b_o is None else out + b_o
