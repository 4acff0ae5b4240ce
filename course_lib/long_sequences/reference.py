"""Long sequences (Chapter 11) in NumPy, float64, written to be read next to the notes.

Sources: Strabel's notes (*Transformers*, October 2023), section 9: Transformer-XL (eq. 25),
the Sparse Transformer (eqs. 26-28, strided and fixed patterns), Longformer and BigBird; and
the handwritten lecture notes, "sub-quadratic self-attention" (local attention, FlashAttention).

Conventions, shared with :mod:`course_lib.long_sequences.accelerated` (same names, same
signatures):

* positions are numbered from 0; a pattern is a boolean (L, L) mask, **True = query i may
  attend to key j**, the convention of chapter 4's masks;
* ``q`` is (..., L_q, d_k), ``k`` (..., L_k, d_k), ``v`` (..., L_k, d_v), with the same leading
  (batch) shape; ``scale`` defaults to ``1 / sqrt(d_k)``;
* the attention functions here never build the dense (L_q, L_k) matrix of weights: each
  query sees only its index set S_i (eq. 27), so memory grows with L times the size of a set.

Every function is checked against chapter 4's dense attention under the matching mask
(``tests/test_long_sequences.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from course_lib.checks import as_array, check_bool, check_int, fmt_shape
from course_lib.long_sequences.checks import (
    check_block_length,
    check_global_indices,
    check_layout,
    check_pattern_head,
    check_qkv,
    check_scale,
    check_window,
    check_xl_shapes,
)

__all__ = [
    "bigbird_layout",
    "block_sparse_attention",
    "expand_layout",
    "fixed_mask",
    "flash_attention",
    "global_mask",
    "rel_shift",
    "sliding_window_attention",
    "sliding_window_mask",
    "strided_mask",
    "xl_relative_logits",
]


# ----------------------------------------------------------------------------- patterns
def strided_mask(L: int, stride: int, head: int = 0) -> np.ndarray:
    """The Sparse Transformer's strided pattern (Strabel's notes, section 9.2), (L, L) boolean.

    Head 1 attends to the previous ``stride`` positions and itself,
    ``A_i^(1) = {t, ..., i}`` with ``t = max(0, i - stride)``; head 2 to every ``stride``-th
    position before it, ``A_i^(2) = {j <= i : (i - j) mod stride = 0}``. ``head=0`` gives their
    union, what two heads in sequence (or one merged head) can reach.

    >>> strided_mask(5, 2).astype(int)
    array([[1, 0, 0, 0, 0],
           [1, 1, 0, 0, 0],
           [1, 1, 1, 0, 0],
           [0, 1, 1, 1, 0],
           [1, 0, 1, 1, 1]])
    """
    L = check_int(L, "L", low=1)
    stride = check_int(stride, "stride", low=1, high=L)
    head = check_pattern_head(head)
    mask = np.zeros((L, L), dtype=bool)
    for i in range(L):
        for j in range(i + 1):  # A_i^(m) is a subset of {j : j <= i}
            local = j >= max(0, i - stride)
            strided = (i - j) % stride == 0
            mask[i, j] = (local or strided, local, strided)[head]
    return mask


def fixed_mask(L: int, stride: int, c: int, head: int = 0) -> np.ndarray:
    """The Sparse Transformer's fixed pattern, causal, (L, L) boolean.

    Head 1 attends within its own block of ``stride`` positions,
    ``A_i^(1) = {j <= i : floor(j / stride) = floor(i / stride)}``; head 2 to the last ``c``
    positions of every block ("summary" positions),
    ``A_i^(2) = {j <= i : j mod stride in {stride - c, ..., stride - 1}}``. (The notes write the
    set as ``{t, ..., l}`` with ``t = l - c``: c + 1 values, but ``j mod l`` never equals l.)

    >>> fixed_mask(6, 3, 1).astype(int)
    array([[1, 0, 0, 0, 0, 0],
           [1, 1, 0, 0, 0, 0],
           [1, 1, 1, 0, 0, 0],
           [0, 0, 1, 1, 0, 0],
           [0, 0, 1, 1, 1, 0],
           [0, 0, 1, 1, 1, 1]])
    """
    L = check_int(L, "L", low=1)
    stride = check_int(stride, "stride", low=1, high=L)
    c = check_int(c, "c", low=1, high=stride)
    head = check_pattern_head(head)
    mask = np.zeros((L, L), dtype=bool)
    for i in range(L):
        for j in range(i + 1):
            same_block = j // stride == i // stride
            summary = j % stride >= stride - c
            mask[i, j] = (same_block or summary, same_block, summary)[head]
    return mask


def sliding_window_mask(L: int, window: int, dilation: int = 1, causal: bool = False) -> np.ndarray:
    """Longformer's (dilated) sliding window, (L, L) boolean.

    Query i attends to ``j = i + s * dilation`` for ``s = -window, ..., window`` (``s <= 0`` if
    ``causal``): ``window`` neighbours on each side, ``dilation - 1`` positions skipped between
    two of them. The window must fit in the sequence: ``window * dilation <= L - 1``.

    >>> sliding_window_mask(5, 1).astype(int)
    array([[1, 1, 0, 0, 0],
           [1, 1, 1, 0, 0],
           [0, 1, 1, 1, 0],
           [0, 0, 1, 1, 1],
           [0, 0, 0, 1, 1]])
    >>> sliding_window_mask(5, 1, dilation=2, causal=True).astype(int)[4]
    array([0, 0, 1, 0, 1])
    """
    L, window, dilation = check_window(L, window, dilation)
    causal = check_bool(causal, "causal")
    mask = np.zeros((L, L), dtype=bool)
    for i in range(L):
        for s in range(-window, 1 if causal else window + 1):
            j = i + s * dilation
            if 0 <= j < L:
                mask[i, j] = True
    return mask


def global_mask(L: int, global_idx: Any) -> np.ndarray:
    """Longformer's global attention, (L, L) boolean: global tokens see all, all see them.

    Row g and column g are True for every g in ``global_idx``; combine with a window by ``|``.

    >>> global_mask(4, [0]).astype(int)
    array([[1, 1, 1, 1],
           [1, 0, 0, 0],
           [1, 0, 0, 0],
           [1, 0, 0, 0]])
    """
    L = check_int(L, "L", low=1)
    idx = check_global_indices(global_idx, L)
    mask = np.zeros((L, L), dtype=bool)
    mask[idx, :] = True
    mask[:, idx] = True
    return mask


def bigbird_layout(n_blocks: int, n_random: int, n_global: int = 1, seed: int = 0) -> np.ndarray:
    """BigBird's pattern over blocks, (n_blocks, n_blocks) boolean (Zaheer et al., 2020).

    Three parts: the first and last ``n_global`` blocks are global (their rows and columns are
    full); every other block row sees its window (itself and its two neighbours) and
    ``n_random`` random blocks drawn, without replacement, from the blocks it does not already
    see (``numpy.random.default_rng(seed)``, one row after another).

    >>> bigbird_layout(7, 1, seed=0).astype(int)  # row 1: window 0-2, globals 0 and 6, random 5
    array([[1, 1, 1, 1, 1, 1, 1],
           [1, 1, 1, 0, 0, 1, 1],
           [1, 1, 1, 1, 0, 1, 1],
           [1, 0, 1, 1, 1, 1, 1],
           [1, 1, 0, 1, 1, 1, 1],
           [1, 1, 0, 0, 1, 1, 1],
           [1, 1, 1, 1, 1, 1, 1]])
    """
    n = check_int(n_blocks, "n_blocks", low=1)
    r = check_int(n_random, "n_random", low=0)
    g = check_int(n_global, "n_global", low=0)
    seed = check_int(seed, "seed", low=0)
    layout = np.zeros((n, n), dtype=bool)
    glob = [b for b in range(n) if b < g or b >= n - g]
    layout[glob, :] = True
    layout[:, glob] = True
    rng = np.random.default_rng(seed)
    for i in range(n):
        if i in glob:
            continue
        layout[i, max(0, i - 1) : i + 2] = True  # the window: i - 1, i, i + 1
        free = np.flatnonzero(~layout[i])  # the blocks row i does not see yet
        if free.size < r:
            raise ValueError(
                f"n_random={r} random blocks do not fit: block row {i} of n_blocks={n} sees all "
                f"but {free.size} blocks already (global and window)"
            )
        if r:
            layout[i, rng.choice(free, size=r, replace=False)] = True
    return layout


def expand_layout(layout: Any, block: int) -> np.ndarray:
    """A block pattern as an element mask: entry (i, j) is ``layout[i // block, j // block]``.

    >>> expand_layout(np.array([[True, False], [True, True]]), 2).astype(int)
    array([[1, 1, 0, 0],
           [1, 1, 0, 0],
           [1, 1, 1, 1],
           [1, 1, 1, 1]])
    """
    layout = check_layout(layout)
    block = check_int(block, "block", low=1)
    n_q, n_k = layout.shape
    mask = np.zeros((n_q * block, n_k * block), dtype=bool)
    for a in range(n_q):
        for b in range(n_k):
            mask[a * block : (a + 1) * block, b * block : (b + 1) * block] = layout[a, b]
    return mask


# ----------------------------------------------------------------------------- attention
def _attend_sets(q: np.ndarray, k: np.ndarray, v: np.ndarray, sets, scale: float) -> np.ndarray:
    """Eqs. (26)-(28) over the last two axes: out_i = softmax(scale q_i K_{S_i}^T) V_{S_i}."""
    out = np.zeros((*q.shape[:-1], v.shape[-1]))
    for i, S_i in enumerate(sets):
        if len(S_i) == 0:
            continue  # a query with no key: zeros, as chapter 4's masked attention gives
        logits = scale * np.einsum("...d,...sd->...s", q[..., i, :], k[..., S_i, :])  # (..., |S_i|)
        w = np.exp(logits - logits.max(axis=-1, keepdims=True))
        w /= w.sum(axis=-1, keepdims=True)
        out[..., i, :] = np.einsum("...s,...sd->...d", w, v[..., S_i, :])
    return out


def sliding_window_attention(
    q: Any,
    k: Any,
    v: Any,
    window: int,
    dilation: int = 1,
    causal: bool = False,
    scale: Any = None,
) -> np.ndarray:
    """Attention under :func:`sliding_window_mask`, one query at a time: O(L * window) memory.

    Query i averages the values of its window only, ``S_i = {i + s * dilation}`` (eq. 27 with
    Longformer's index sets); equal to dense attention under the mask, shape (..., L, d_v).

    >>> q = k = np.eye(3)
    >>> v = np.array([[1.0], [2.0], [3.0]])
    >>> sliding_window_attention(q, k, v, window=1, causal=True, scale=0.0)  # running means of 2
    array([[1. ],
           [1.5],
           [2.5]])
    """
    q, k, v = check_qkv(q, k, v, as_array, self_attention=True)
    L = q.shape[-2]
    L, window, dilation = check_window(L, window, dilation)
    causal = check_bool(causal, "causal")
    scale = check_scale(scale, q.shape[-1])
    sets = []
    for i in range(L):
        steps = range(-window, 1 if causal else window + 1)
        sets.append([i + s * dilation for s in steps if 0 <= i + s * dilation < L])
    return _attend_sets(q, k, v, sets, scale)


def block_sparse_attention(
    q: Any, k: Any, v: Any, layout: Any, block: int, causal: bool = False, scale: Any = None
) -> np.ndarray:
    """Attention under a block pattern, one query block at a time: no (L, L) matrix.

    ``layout`` is (L_q / block, L_k / block) boolean: query block a sees the keys of block b
    when ``layout[a, b]``; ``causal`` also hides key j from query i when j > i. The lengths
    must be multiples of ``block``. Equal to dense attention under
    ``expand_layout(layout, block) & causal_mask``.

    >>> q = k = np.zeros((4, 1))
    >>> v = np.arange(4.0)[:, None]
    >>> block_sparse_attention(q, k, v, np.array([[True, False], [True, True]]), 2)[:, 0]
    array([0.5, 0.5, 1.5, 1.5])
    """
    q, k, v = check_qkv(q, k, v, as_array)
    block = check_int(block, "block", low=1)
    n_q = check_block_length(q.shape[-2], block, "q")
    n_k = check_block_length(k.shape[-2], block, "k")
    layout = check_layout(layout, (n_q, n_k))
    causal = check_bool(causal, "causal")
    scale = check_scale(scale, q.shape[-1])
    sets = []
    for a in range(n_q):
        keys = [j for b in np.flatnonzero(layout[a]) for j in range(b * block, (b + 1) * block)]
        for i in range(a * block, (a + 1) * block):
            sets.append([j for j in keys if not causal or j <= i])
    return _attend_sets(q, k, v, sets, scale)


def flash_attention(
    q: Any, k: Any, v: Any, causal: bool = False, block_size: int = 64, scale: Any = None
) -> np.ndarray:
    """Exact attention by blocks with the online softmax (Dao et al., 2022), never (L_q, L_k).

    For each block of queries, the keys and values come in blocks of ``block_size``; a running
    maximum ``m``, a running sum ``s`` of exponentials and a running (unnormalised) output
    ``acc`` are rescaled by ``exp(m_old - m_new)`` each time a block raises the maximum
    (chapter 2's online softmax, one vector of values per logit). ``causal`` hides key j from
    query i when j > i (top-left aligned, as chapter 4's ``causal_mask``).

    >>> rng = np.random.default_rng(0)
    >>> q, k, v = rng.standard_normal((3, 10, 4))
    >>> w = np.exp(q @ k.T / 2); w /= w.sum(-1, keepdims=True)
    >>> np.allclose(flash_attention(q, k, v, block_size=3), w @ v)
    True
    """
    q, k, v = check_qkv(q, k, v, as_array)
    causal = check_bool(causal, "causal")
    B = check_int(block_size, "block_size", low=1)
    scale = check_scale(scale, q.shape[-1])
    L_q, L_k = q.shape[-2], k.shape[-2]
    out = np.zeros((*q.shape[:-1], v.shape[-1]))
    for qs in range(0, L_q, B):  # one block of queries at a time
        qi = q[..., qs : qs + B, :]  # (..., Bq, d_k)
        rows = np.arange(qs, qs + qi.shape[-2])
        m = np.full(qi.shape[:-1], -np.inf)  # running max, (..., Bq)
        s = np.zeros(qi.shape[:-1])  # running sum of exp(logit - m), (..., Bq)
        acc = np.zeros((*qi.shape[:-1], v.shape[-1]))  # running sum of exp(logit - m) v_j
        for ks in range(0, L_k, B):
            if causal and ks > rows[-1]:
                break  # every later key is in every query's future
            logits = scale * qi @ k[..., ks : ks + B, :].swapaxes(-1, -2)  # (..., Bq, Bk)
            if causal:
                cols = np.arange(ks, ks + logits.shape[-1])
                logits = np.where(cols[None, :] <= rows[:, None], logits, -np.inf)
            m_new = np.maximum(m, logits.max(axis=-1))  # finite: key 0 is never hidden
            p = np.exp(logits - m_new[..., None])  # (..., Bq, Bk)
            rescale = np.exp(m - m_new)  # 0 on the first block (m = -inf)
            s = rescale * s + p.sum(axis=-1)
            acc = rescale[..., None] * acc + p @ v[..., ks : ks + B, :]
            m = m_new
        out[..., qs : qs + B, :] = acc / s[..., None]
    return out


# ----------------------------------------------------------------------------- Transformer-XL
def rel_shift(x: Any) -> np.ndarray:
    """Transformer-XL's shift: from "query i, distance index j'" to "query i, key j".

    ``x`` is (..., L_q, K), ``K = M + L_q`` keys (M memory positions, then the queries' own), and
    column j' of ``x`` belongs to the distance ``K - 1 - j'`` (the order Transformer-XL builds
    its relative embeddings in: R_{K-1}, ..., R_1, R_0). Query i sits at key position M + i,
    so key j is at distance ``M + i - j`` and the result is
    ``out[..., i, j] = x[..., i, j + L_q - 1 - i]`` for ``j <= M + i``, and 0 for the keys in
    the query's future (the padding trick fills those with other rows' numbers; a causal mask
    hides them anyway).

    >>> rel_shift(np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]))  # M = 1, L_q = 2
    array([[2., 3., 0.],
           [4., 5., 6.]])
    """
    x = as_array(x, "x", min_ndim=2)
    L_q, K = x.shape[-2], x.shape[-1]
    if K < L_q:
        raise ValueError(
            f"x of shape {fmt_shape(x.shape)} must have at least as many keys (last axis) as "
            f"queries (axis -2): K = M + L_q with M >= 0 memory positions"
        )
    out = np.zeros_like(x)
    for i in range(L_q):
        for j in range(K):
            col = j + L_q - 1 - i
            if col < K:  # j <= M + i: the key is not in the query's future
                out[..., i, j] = x[..., i, col]
    return out


def xl_relative_logits(q: Any, k: Any, r: Any, content_bias: Any, position_bias: Any) -> np.ndarray:
    """Transformer-XL's score of query i and key j, term by term (Dai et al., 2019, eq. in 3.3).

    With ``R_d`` the (projected) embedding of the distance d = M + i - j:

        A_ij = q_i . k_j          (a) content
             + q_i . R_d          (b) content-dependent position
             + u . k_j            (c) global content bias   (u = ``content_bias``)
             + v . R_d            (d) global position bias  (v = ``position_bias``)

    ``q`` (..., L_q, d), ``k`` (..., K, d) with K = M + L_q, ``r`` (K, d) or (..., K, d) in
    descending distance (row j' is R_{K-1-j'}), the biases (d,). Returns (..., L_q, K),
    unscaled; terms (b) and (d) are 0 where the key is in the query's future (j > M + i).

    >>> q, k, r = np.ones((1, 2)), np.ones((1, 2)), np.array([[1.0, 0.0]])
    >>> xl_relative_logits(q, k, r, np.zeros(2), np.array([0.0, 5.0]))  # 2 + 1 + 0 + 0
    array([[3.]])
    """
    q = as_array(q, "q", min_ndim=2)
    k = as_array(k, "k", min_ndim=2)
    r = as_array(r, "r", min_ndim=2)
    u = as_array(content_bias, "content_bias", ndim=1)
    w = as_array(position_bias, "position_bias", ndim=1)
    check_xl_shapes(q.shape, k.shape, r.shape, u.shape, w.shape)
    L_q, K = q.shape[-2], k.shape[-2]
    M = K - L_q
    out = np.zeros((*q.shape[:-1], K))
    for i in range(L_q):
        for j in range(K):
            q_i, k_j = q[..., i, :], k[..., j, :]
            out[..., i, j] = np.sum(q_i * k_j, axis=-1) + np.sum(u * k_j, axis=-1)  # (a) + (c)
            dist = M + i - j
            if dist >= 0:
                R = r[..., K - 1 - dist, :]  # the embedding of distance M + i - j
                out[..., i, j] += np.sum(q_i * R, axis=-1) + np.sum(w * R, axis=-1)  # (b) + (d)
    return out
