"""Long sequences (Chapter 11) in PyTorch: the twins of :mod:`course_lib.long_sequences.reference`.

Same names, signatures and conventions (read the reference's docstring), but batched over the
leading dimensions, on any device, in the inputs' dtype, differentiable, and written so that
memory grows **linearly** with the length:

* :func:`sliding_window_attention` cuts the queries into blocks of ``window`` positions; block
  a needs only the keys of blocks a - 1, a, a + 1, so it multiplies (window, d) by
  (d, 3 window): the logits take 3 L window numbers instead of L^2 (Longformer's "chunks");
* :func:`block_sparse_attention` computes only the (query block, key block) pairs its layout
  names: P block^2 logits for P pairs;
* :func:`flash_attention` walks over blocks of queries and keys with the online softmax, and
  its backward pass recomputes each block's weights from the saved log-sum-exp instead of
  storing them (a ``torch.autograd.Function``): O(L) memory, forward and backward.

Masks are made on the CPU, as chapter 4's ``causal_mask`` (move them with ``.to``).
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from course_lib.checks import as_tensor, check_bool, check_int, fmt_shape, same_device_and_dtype
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


def _ij(L: int) -> tuple[torch.Tensor, torch.Tensor]:
    i = torch.arange(L)[:, None]  # (L, 1): the query
    j = torch.arange(L)[None, :]  # (1, L): the key
    return i, j


# ----------------------------------------------------------------------------- patterns
def strided_mask(L: int, stride: int, head: int = 0) -> torch.Tensor:
    """The strided pattern (head 1: the last ``stride`` positions; head 2: every stride-th).

    >>> strided_mask(4, 2, head=2).int()
    tensor([[1, 0, 0, 0],
            [0, 1, 0, 0],
            [1, 0, 1, 0],
            [0, 1, 0, 1]], dtype=torch.int32)
    """
    L = check_int(L, "L", low=1)
    stride = check_int(stride, "stride", low=1, high=L)
    head = check_pattern_head(head)
    i, j = _ij(L)
    past = j <= i
    local = past & (j >= i - stride)
    strided = past & ((i - j) % stride == 0)
    return (local | strided, local, strided)[head]


def fixed_mask(L: int, stride: int, c: int, head: int = 0) -> torch.Tensor:
    """The fixed pattern (head 1: the own block; head 2: the last ``c`` of every block), causal.

    >>> fixed_mask(4, 2, 1, head=2).int()
    tensor([[0, 0, 0, 0],
            [0, 1, 0, 0],
            [0, 1, 0, 0],
            [0, 1, 0, 1]], dtype=torch.int32)
    """
    L = check_int(L, "L", low=1)
    stride = check_int(stride, "stride", low=1, high=L)
    c = check_int(c, "c", low=1, high=stride)
    head = check_pattern_head(head)
    i, j = _ij(L)
    past = j <= i
    same_block = past & (j // stride == i // stride)
    summary = past & (j % stride >= stride - c)
    return (same_block | summary, same_block, summary)[head]


def sliding_window_mask(
    L: int, window: int, dilation: int = 1, causal: bool = False
) -> torch.Tensor:
    """Longformer's (dilated) sliding window: j = i + s * dilation, |s| <= window.

    >>> sliding_window_mask(4, 1, causal=True).int()
    tensor([[1, 0, 0, 0],
            [1, 1, 0, 0],
            [0, 1, 1, 0],
            [0, 0, 1, 1]], dtype=torch.int32)
    """
    L, window, dilation = check_window(L, window, dilation)
    causal = check_bool(causal, "causal")
    i, j = _ij(L)
    offset = j - i
    near = (offset.abs() <= window * dilation) & (offset % dilation == 0)
    return near & (offset <= 0) if causal else near


def global_mask(L: int, global_idx: Any) -> torch.Tensor:
    """Rows and columns of the global tokens.

    >>> global_mask(3, [2]).int()
    tensor([[0, 0, 1],
            [0, 0, 1],
            [1, 1, 1]], dtype=torch.int32)
    """
    L = check_int(L, "L", low=1)
    is_global = torch.zeros(L, dtype=torch.bool)
    is_global[torch.from_numpy(check_global_indices(global_idx, L))] = True
    return is_global[:, None] | is_global[None, :]


def bigbird_layout(n_blocks: int, n_random: int, n_global: int = 1, seed: int = 0) -> torch.Tensor:
    """BigBird's block layout: global, window and random blocks (the same draws as NumPy's).

    The window and the global blocks are built with tensor operations; the random blocks are
    drawn with ``numpy.random.default_rng(seed)`` row by row, exactly as the reference does,
    so that both sides give the same layout.

    >>> bigbird_layout(4, 0).int()
    tensor([[1, 1, 1, 1],
            [1, 1, 1, 1],
            [1, 1, 1, 1],
            [1, 1, 1, 1]], dtype=torch.int32)
    """
    n = check_int(n_blocks, "n_blocks", low=1)
    r = check_int(n_random, "n_random", low=0)
    g = check_int(n_global, "n_global", low=0)
    seed = check_int(seed, "seed", low=0)
    blocks = torch.arange(n)
    is_global = (blocks < g) | (blocks >= n - g)
    i, j = _ij(n)
    layout = is_global[:, None] | is_global[None, :] | ((i - j).abs() <= 1)
    rng = np.random.default_rng(seed)
    for row in range(n):
        if is_global[row] or r == 0:
            continue
        free = np.flatnonzero(~layout[row].numpy())
        if free.size < r:
            raise ValueError(
                f"n_random={r} random blocks do not fit: block row {row} of n_blocks={n} sees all "
                f"but {free.size} blocks already (global and window)"
            )
        layout[row, torch.from_numpy(rng.choice(free, size=r, replace=False))] = True
    return layout


def expand_layout(layout: Any, block: int) -> torch.Tensor:
    """A block layout as an element mask (``repeat_interleave`` along both axes).

    >>> expand_layout(torch.tensor([[True, False]]), 2).int()
    tensor([[1, 1, 0, 0],
            [1, 1, 0, 0]], dtype=torch.int32)
    """
    device = layout.device if isinstance(layout, torch.Tensor) else torch.device("cpu")
    arr = torch.from_numpy(check_layout(layout)).to(device)
    block = check_int(block, "block", low=1)
    return arr.repeat_interleave(block, dim=0).repeat_interleave(block, dim=1)


# ----------------------------------------------------------------------------- attention
def _band(q, k, v, window: int, causal: bool, scale: float) -> torch.Tensor:
    """Sliding-window attention (dilation 1) by blocks of ``window`` queries, (..., n, d_v)."""
    n = q.shape[-2]
    w = min(window, n - 1)  # a window beyond the sequence is the whole sequence
    b = max(w, 1)  # the block: block a needs the keys of blocks a - 1, a, a + 1 only
    nb = -(-n // b)
    pad = nb * b - n
    Q = F.pad(q, (0, 0, 0, pad)).unflatten(-2, (nb, b))  # (..., nb, b, d_k)
    K = F.pad(k, (0, 0, b, b + pad)).unfold(-2, 3 * b, b)  # (..., nb, d_k, 3b): a view
    V = F.pad(v, (0, 0, b, b + pad)).unfold(-2, 3 * b, b)  # (..., nb, d_v, 3b)
    logits = (Q * scale) @ K  # (..., nb, b, 3b): 3 n b numbers, not n^2
    dev = q.device
    q_pos = torch.arange(nb * b, device=dev).view(nb, b, 1)  # (nb, b, 1)
    k_pos = (torch.arange(nb, device=dev) * b - b).view(nb, 1, 1) + torch.arange(
        3 * b, device=dev
    )  # (nb, 1, 3b)
    offset = q_pos - k_pos  # i - j
    keep = (offset <= w) & (offset >= (0 if causal else -w)) & (k_pos >= 0) & (k_pos < n)
    weights = torch.softmax(logits.masked_fill(~keep, float("-inf")), dim=-1)  # every row: i
    out = weights @ V.transpose(-1, -2)  # (..., nb, b, d_v)
    return out.flatten(-3, -2)[..., :n, :]  # (..., n, d_v)


def sliding_window_attention(
    q: Any,
    k: Any,
    v: Any,
    window: int,
    dilation: int = 1,
    causal: bool = False,
    scale: Any = None,
) -> torch.Tensor:
    """Attention under the (dilated) sliding window, in blocks: O(L * window) memory.

    A dilated window is an ordinary window on each of the ``dilation`` interleaved
    subsequences ``r, r + dilation, r + 2 dilation, ...``: each is attended separately.

    >>> q = k = torch.eye(3)
    >>> v = torch.tensor([[1.0], [2.0], [3.0]])
    >>> sliding_window_attention(q, k, v, window=1, causal=True, scale=0.0)
    tensor([[1.0000],
            [1.5000],
            [2.5000]])
    """
    q, k, v = check_qkv(q, k, v, as_tensor, self_attention=True)
    same_device_and_dtype(q=q, k=k, v=v)
    L, window, dilation = check_window(q.shape[-2], window, dilation)
    causal = check_bool(causal, "causal")
    scale = check_scale(scale, q.shape[-1])
    if dilation == 1:
        return _band(q, k, v, window, causal, scale)
    outs = [
        _band(
            q[..., r::dilation, :],
            k[..., r::dilation, :],
            v[..., r::dilation, :],
            window,
            causal,
            scale,
        )
        for r in range(min(dilation, L))
    ]  # subsequence r holds positions r, r + dilation, ...
    order = torch.cat([torch.arange(r, L, dilation) for r in range(min(dilation, L))])
    inverse = torch.empty_like(order)
    inverse[order] = torch.arange(L)
    return torch.cat(outs, dim=-2).index_select(-2, inverse.to(q.device))  # (..., L, d_v)


def block_sparse_attention(
    q: Any, k: Any, v: Any, layout: Any, block: int, causal: bool = False, scale: Any = None
) -> torch.Tensor:
    """Attention under a block layout, computing only the (query block, key block) pairs it names.

    The P pairs of the layout become one batch of (block, block) logits, (..., P, block, block);
    each query block's softmax runs over all of its pairs at once (the maxima, the sums and the
    weighted values are gathered per query block with ``scatter_reduce``/``index_add``). Memory is
    P block (block + d), linear in the number of True entries of ``layout``, even when a global
    block row holds a whole row of blocks. A query that sees no key gets zeros.

    >>> q = k = torch.zeros(4, 1)
    >>> v = torch.arange(4.0)[:, None]
    >>> block_sparse_attention(q, k, v, torch.tensor([[True, False], [True, True]]), 2)[:, 0]
    tensor([0.5000, 0.5000, 1.5000, 1.5000])
    """
    q, k, v = check_qkv(q, k, v, as_tensor)
    same_device_and_dtype(q=q, k=k, v=v)
    block = check_int(block, "block", low=1)
    n_q = check_block_length(q.shape[-2], block, "q")
    n_k = check_block_length(k.shape[-2], block, "k")
    lay = check_layout(layout, (n_q, n_k))
    causal = check_bool(causal, "causal")
    scale = check_scale(scale, q.shape[-1])
    dev = q.device
    a_np, b_np = np.nonzero(lay)  # the P pairs (query block a, key block b)
    a, b = torch.from_numpy(a_np).to(dev), torch.from_numpy(b_np).to(dev)
    Q = q.unflatten(-2, (n_q, block))[..., a, :, :]  # (..., P, block, d_k)
    K = k.unflatten(-2, (n_k, block))[..., b, :, :]  # (..., P, block, d_k)
    V = v.unflatten(-2, (n_k, block))[..., b, :, :]  # (..., P, block, d_v)
    logits = (Q * scale) @ K.transpose(-1, -2)  # (..., P, block, block)
    if causal:
        q_pos = a[:, None, None] * block + torch.arange(block, device=dev)[:, None]
        k_pos = b[:, None, None] * block + torch.arange(block, device=dev)
        logits = logits.masked_fill(k_pos > q_pos, float("-inf"))  # (P, block, block) mask
    axis = logits.ndim - 3  # the pairs' axis
    lead = logits.shape[:axis]
    # each query's maximum over all its pairs (a constant for the softmax: no gradient needed)
    row_max = logits.detach().amax(dim=-1)  # (..., P, block)
    m = torch.full((*lead, n_q, block), float("-inf"), dtype=q.dtype, device=dev)
    index = a[:, None].expand(row_max.shape)  # the query block of every (pair, query) entry
    m = m.scatter_reduce(axis, index, row_max, "amax")  # (..., n_q, block)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))  # a query that sees no key
    p = torch.exp(logits - m.index_select(axis, a)[..., None])  # (..., P, block, block)
    s = torch.zeros((*lead, n_q, block), dtype=q.dtype, device=dev).index_add(axis, a, p.sum(-1))
    acc = torch.zeros((*lead, n_q, block, v.shape[-1]), dtype=q.dtype, device=dev)
    acc = acc.index_add(axis, a, p @ V)  # (..., n_q, block, d_v): sum_j exp(.) v_j
    out = acc / torch.where(s > 0, s, torch.ones_like(s))[..., None]
    return out.flatten(-3, -2)  # (..., L_q, d_v)


#: From this many logits (N L_q L_k) up, the CPU forward spreads its query blocks over threads.
_PARALLEL_FROM = 4096 * 4096


def _flash_rows(q, k, v, out, lse, starts, causal: bool, B: int, scale: float) -> None:
    """The forward pass for the query blocks that begin at ``starts``: writes out and lse."""
    N, L_k, d_v = q.shape[0], k.shape[1], v.shape[-1]
    tile = q.new_empty((N, min(B, q.shape[1]), min(B, L_k)))  # reused: no fresh pages per block
    for qs in starts:
        qi = q[:, qs : qs + B] * scale  # (N, Bq, d_k)
        Bq = qi.shape[1]
        m = q.new_full((N, Bq), -math.inf)  # running max
        s = q.new_zeros((N, Bq))  # running sum of exp(logit - m)
        acc = q.new_zeros((N, Bq, d_v))  # running sum of exp(logit - m) v_j
        for ks in range(0, L_k, B):
            if causal and ks > qs + Bq - 1:
                break  # this block and all later ones are in every query's future
            kj = k[:, ks : ks + B]  # (N, Bk, d_k)
            full = (Bq, kj.shape[1]) == tile.shape[1:]
            p = tile if full else q.new_empty((N, Bq, kj.shape[1]))  # (N, Bq, Bk)
            torch.bmm(qi, kj.transpose(1, 2), out=p)  # the logits
            if causal and ks + kj.shape[1] - 1 > qs:  # the block crosses the diagonal
                p.masked_fill_(_future(qs, Bq, ks, kj.shape[1], q), -math.inf)
            m_new = torch.maximum(m, p.amax(dim=-1))  # (N, Bq)
            p.sub_(m_new[..., None]).exp_()  # in place: the logits become exp(logit - m_new)
            alpha = m.sub_(m_new).exp_()  # (N, Bq): rescales what was summed under the old max
            s.mul_(alpha).add_(p.sum(dim=-1))
            acc.mul_(alpha[..., None]).baddbmm_(p, v[:, ks : ks + B])  # acc += p v_j
            m = m_new
        torch.div(acc, s[..., None], out=out[:, qs : qs + Bq])
        torch.add(m, torch.log(s), out=lse[:, qs : qs + Bq])


def _flash_rows_no_grad(*args) -> None:
    with torch.no_grad():  # grad mode is per thread: a worker thread starts with it on
        _flash_rows(*args)


class _FlashAttention(torch.autograd.Function):
    """Forward by blocks with the online softmax; backward by recomputing each block.

    The query blocks are independent (each has its own running max, sum and output), so on a
    CPU with several threads the forward hands them out to that many Python threads, each
    running PyTorch's operators on one core: FlashAttention-2's parallelism over query blocks.
    One operator at a time on all cores would instead wait at a barrier after every small
    operator, which costs several times the work when other processes share the cores. Each
    worker holds its own (B, B) tile and row statistics. Below ``_PARALLEL_FROM`` logits the
    forward stays on the calling thread (and under the course's memory tracker, which sees the
    tensors of the calling thread only).
    """

    @staticmethod
    def forward(ctx, q, k, v, causal: bool, B: int, scale: float):
        N, L_q = q.shape[:2]
        out = q.new_empty((N, L_q, v.shape[-1]))
        lse = q.new_empty((N, L_q))  # log sum_j exp(logit_ij), for backward
        starts = list(range(0, L_q, B))
        big = N * L_q * k.shape[1] >= _PARALLEL_FROM  # small inputs: one thread is fast enough
        cpu = q.device.type == "cpu"
        workers = min(torch.get_num_threads(), len(starts)) if cpu and big else 1
        if workers == 1:
            _flash_rows(q, k, v, out, lse, starts, causal, B, scale)
        else:
            threads = torch.get_num_threads()
            torch.set_num_threads(1)  # one core per worker; the operators release the GIL
            try:
                with ThreadPoolExecutor(workers) as pool:
                    jobs = [
                        pool.submit(
                            _flash_rows_no_grad,
                            q,
                            k,
                            v,
                            out,
                            lse,
                            starts[w::workers],
                            causal,
                            B,
                            scale,
                        )
                        for w in range(workers)  # round robin: causal blocks differ in cost
                    ]
                    for job in jobs:
                        job.result()  # re-raises a worker's error
            finally:
                torch.set_num_threads(threads)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.causal, ctx.B, ctx.scale = causal, B, scale
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        causal, B, scale = ctx.causal, ctx.B, ctx.scale
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        D = (dout * out).sum(dim=-1)  # (N, L_q): sum_j P_ij dP_ij, from the output alone
        for qs in range(0, q.shape[-2], B):
            qi, doi = q[:, qs : qs + B], dout[:, qs : qs + B]
            Bq = qi.shape[1]
            for ks in range(0, k.shape[-2], B):
                if causal and ks > qs + Bq - 1:
                    break
                kj, vj = k[:, ks : ks + B], v[:, ks : ks + B]
                logits = (qi * scale) @ kj.transpose(1, 2)  # recomputed, (N, Bq, Bk)
                if causal and ks + kj.shape[1] - 1 > qs:
                    logits = logits.masked_fill(_future(qs, Bq, ks, kj.shape[1], q), -math.inf)
                p = torch.exp(logits - lse[:, qs : qs + Bq, None])  # the weights, exactly
                dv[:, ks : ks + B] += p.transpose(1, 2) @ doi
                dp = doi @ vj.transpose(1, 2)  # (N, Bq, Bk)
                ds = p * (dp - D[:, qs : qs + Bq, None])  # the softmax's backward
                dq[:, qs : qs + B] += (ds @ kj) * scale
                dk[:, ks : ks + B] += (ds.transpose(1, 2) @ qi) * scale
        return dq, dk, dv, None, None, None


def _future(qs: int, Bq: int, ks: int, Bk: int, like: torch.Tensor) -> torch.Tensor:
    rows = torch.arange(qs, qs + Bq, device=like.device)[:, None]
    cols = torch.arange(ks, ks + Bk, device=like.device)[None, :]
    return cols > rows  # (Bq, Bk): True where the key is in the query's future


def flash_attention(
    q: Any, k: Any, v: Any, causal: bool = False, block_size: int = 64, scale: Any = None
) -> torch.Tensor:
    """Exact attention in O(L) memory: blocks, the online softmax, backward by recomputation.

    float16 and bfloat16 inputs are computed in float32 and returned in their dtype. For speed
    on a CPU, blocks of 256 to 1024 positions amortise Python's loop (the benchmark uses 512);
    from 4096 x 4096 logits on, the query blocks are shared out among ``torch.get_num_threads()``
    Python threads, one core each (:class:`_FlashAttention`).

    >>> q, k, v = torch.randn(3, 2, 10, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    >>> expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    >>> torch.allclose(flash_attention(q, k, v, causal=True, block_size=3), expected)
    True
    """
    q, k, v = check_qkv(q, k, v, as_tensor)
    same_device_and_dtype(q=q, k=k, v=v)
    causal = check_bool(causal, "causal")
    B = check_int(block_size, "block_size", low=1)
    scale = check_scale(scale, q.shape[-1])
    lead = q.shape[:-2]
    work = torch.float32 if q.dtype in (torch.float16, torch.bfloat16) else q.dtype
    q3, k3, v3 = (t.to(work).reshape(-1, *t.shape[-2:]) for t in (q, k, v))  # (N, L, d)
    out = _FlashAttention.apply(q3, k3, v3, causal, B, scale)
    return out.reshape(*lead, *out.shape[-2:]).to(q.dtype)


# ----------------------------------------------------------------------------- Transformer-XL
def rel_shift(x: Any) -> torch.Tensor:
    """Transformer-XL's shift by padding and reshaping (no gather), future entries set to 0.

    Pad a column of zeros on the left, (L_q, K + 1); read the same numbers as (K + 1, L_q);
    drop the first row; read the rest as (L_q, K). Row i has moved left by L_q - 1 - i.

    >>> rel_shift(torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]))
    tensor([[2., 3., 0.],
            [4., 5., 6.]])
    """
    x = as_tensor(x, "x", min_ndim=2)
    L_q, K = x.shape[-2], x.shape[-1]
    if K < L_q:
        raise ValueError(
            f"x of shape {fmt_shape(x.shape)} must have at least as many keys (last axis) as "
            f"queries (axis -2): K = M + L_q with M >= 0 memory positions"
        )
    padded = F.pad(x, (1, 0))  # (..., L_q, K + 1): a zero column in front
    shifted = padded.reshape(*x.shape[:-2], K + 1, L_q)[..., 1:, :].reshape(x.shape)
    i = torch.arange(L_q, device=x.device)[:, None]
    j = torch.arange(K, device=x.device)[None, :]
    return shifted.masked_fill(j > K - L_q + i, 0.0)  # (..., L_q, K)


def xl_relative_logits(
    q: Any, k: Any, r: Any, content_bias: Any, position_bias: Any
) -> torch.Tensor:
    """The four terms in two products: ``(q + u) k^T + rel_shift((q + v) R^T)``.

    Terms (a) and (c) share k_j, terms (b) and (d) share R_{i-j}: adding the bias to the
    queries first turns four sums into two matrix products, and the shift lines the second up
    with the keys (Dai et al., 2019, appendix B).

    >>> q, k, r = torch.ones(1, 2), torch.ones(1, 2), torch.tensor([[1.0, 0.0]])
    >>> xl_relative_logits(q, k, r, torch.zeros(2), torch.tensor([0.0, 5.0]))
    tensor([[3.]])
    """
    q = as_tensor(q, "q", min_ndim=2)
    k = as_tensor(k, "k", min_ndim=2)
    r = as_tensor(r, "r", min_ndim=2)
    u = as_tensor(content_bias, "content_bias", ndim=1)
    w = as_tensor(position_bias, "position_bias", ndim=1)
    same_device_and_dtype(q=q, k=k, r=r, content_bias=u, position_bias=w)
    check_xl_shapes(tuple(q.shape), tuple(k.shape), tuple(r.shape), tuple(u.shape), tuple(w.shape))
    ac = (q + u) @ k.transpose(-1, -2)  # (..., L_q, K): terms (a) + (c)
    bd = (q + w) @ r.transpose(-1, -2)  # (..., L_q, K), by distance K - 1 - j'
    return ac + rel_shift(bd)  # terms (b) + (d) moved to key j
