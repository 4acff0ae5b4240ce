"""Scaled dot-product and multi-head attention, in PyTorch (Chapter 4).

Same names, signatures and conventions as :mod:`course_lib.attention.reference` (read its
docstring for the equations and the mask rules), but batched over any leading dimensions, on
any device, in the inputs' dtype, and differentiable.

The attention here is the *explicit* computation: two matrix products and a softmax, with the
(..., L_q, L_k) weights held in memory. ``torch.nn.functional.scaled_dot_product_attention``
computes the same thing with a fused kernel that never stores the weights; chapter 4 compares
the two, and :class:`course_lib.attention.module.MultiHeadAttention` can use either.

Multi-head attention here multiplies by one **fused** (d, h*d_k) projection matrix per input
and reshapes (:func:`split_heads`), instead of looping over the h per-head matrices of eqs.
(14)-(18) as the reference does; the two are the same computation.
"""

from __future__ import annotations

from typing import Any

import torch

from course_lib.attention.checks import (
    check_attention_scale,
    check_broadcasts_to,
    multi_head_shapes,
)
from course_lib.checks import as_tensor, check_int, fmt_shape, matmul_shapes, same_device_and_dtype
from course_lib.softmax.accelerated import softmax

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
def _as_mask(mask: Any, target: tuple[int, ...], like: torch.Tensor) -> torch.Tensor | None:
    if mask is None:
        return None
    if not isinstance(mask, torch.Tensor):
        mask = torch.as_tensor(mask)
    if mask.dtype != torch.bool:
        raise TypeError(
            f"mask must be boolean (True = may attend), got dtype {mask.dtype}; "
            "for an additive float mask pass it as bias"
        )
    check_broadcasts_to(tuple(mask.shape), target, "mask")
    if mask.device != like.device:
        raise ValueError(f"mask is on {mask.device} but the inputs are on {like.device}")
    return mask


def _as_bias(bias: Any, target: tuple[int, ...], like: torch.Tensor) -> torch.Tensor | None:
    if bias is None:
        return None
    bias = as_tensor(bias, "bias")
    same_device_and_dtype(q=like, bias=bias)
    check_broadcasts_to(tuple(bias.shape), target, "bias")
    return bias


def _qk(q: Any, k: Any) -> tuple[torch.Tensor, torch.Tensor, tuple[int, ...]]:
    q = as_tensor(q, "q", min_ndim=2)
    k = as_tensor(k, "k", min_ndim=2)
    same_device_and_dtype(q=q, k=k)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q of shape {fmt_shape(q.shape)} and k of shape {fmt_shape(k.shape)} must have the "
            f"same last dimension d_k, got {q.shape[-1]} and {k.shape[-1]}"
        )
    kt_shape = (*k.shape[:-2], k.shape[-1], k.shape[-2])
    return q, k, matmul_shapes(tuple(q.shape), kt_shape, "q", "k^T")


def _qkv(q: Any, k: Any, v: Any):
    q, k, logits_shape = _qk(q, k)
    v = as_tensor(v, "v", min_ndim=2)
    same_device_and_dtype(q=q, v=v)
    if v.shape[-2] != k.shape[-2]:
        raise ValueError(
            f"k of shape {fmt_shape(k.shape)} and v of shape {fmt_shape(v.shape)} must have the "
            f"same length L_k (one value per key), got {k.shape[-2]} keys and {v.shape[-2]} values"
        )
    matmul_shapes(logits_shape, tuple(v.shape), "the weights", "v")
    return q, k, v, logits_shape


def _logits(q, k, mask, bias, scale, logits_shape) -> torch.Tensor:
    mask = _as_mask(mask, logits_shape, q)
    bias = _as_bias(bias, logits_shape, q)
    scale = check_attention_scale(scale, q.shape[-1])
    logits = (q * scale) @ k.transpose(-2, -1)  # (..., L_q, L_k)
    if bias is not None:
        logits = logits + bias
    if mask is not None:
        logits = logits.masked_fill(~mask, float("-inf"))
    return logits


# ----------------------------------------------------------------------------- masks
def causal_mask(L: int) -> torch.Tensor:
    """Boolean (L, L) mask on the CPU, True on and below the diagonal (move it with ``.to``).

    >>> causal_mask(3)
    tensor([[ True, False, False],
            [ True,  True, False],
            [ True,  True,  True]])
    """
    L = check_int(L, "L", low=1)
    return torch.ones(L, L, dtype=torch.bool).tril()


def padding_mask(lengths: Any, L: int) -> torch.Tensor:
    """Boolean (B, 1, L) key mask, True where key position j < lengths[b].

    On the device of ``lengths`` when it is a tensor, else on the CPU.

    >>> padding_mask(torch.tensor([3, 1]), 4).int()
    tensor([[[1, 1, 1, 0]],
    <BLANKLINE>
            [[1, 0, 0, 0]]], dtype=torch.int32)
    """
    L = check_int(L, "L", low=1)
    t = lengths if isinstance(lengths, torch.Tensor) else torch.as_tensor(lengths)
    if t.ndim != 1 or t.numel() == 0 or t.is_floating_point() or t.dtype == torch.bool:
        raise TypeError(
            f"lengths must be a non-empty 1-D sequence of ints (one per sequence), got "
            f"{t.dtype} tensor of shape {fmt_shape(t.shape)}"
        )
    if int(t.min()) < 1 or int(t.max()) > L:
        raise ValueError(f"every length must be between 1 and L={L}, got {t.tolist()}")
    return (torch.arange(L, device=t.device) < t[:, None]).unsqueeze(1)  # (B, 1, L)


# ----------------------------------------------------------------------------- attention
def attention_weights(
    q: Any, k: Any, mask: Any = None, bias: Any = None, scale: Any = None
) -> torch.Tensor:
    """``softmax(scale * Q K^T + bias)`` with masked logits at -inf, shape (..., L_q, L_k).

    >>> q, k = torch.tensor([[1.0, 0.0]]), torch.eye(2)
    >>> attention_weights(q, k, scale=1.0)
    tensor([[0.7311, 0.2689]])
    """
    q, k, logits_shape = _qk(q, k)
    return softmax(_logits(q, k, mask, bias, scale, logits_shape), axis=-1)


def scaled_dot_product_attention(
    q: Any, k: Any, v: Any, mask: Any = None, bias: Any = None, scale: Any = None
) -> torch.Tensor:
    """Eq. (13), explicitly: ``softmax(Q K^T / sqrt(d_k)) V``, shape (..., L_q, d_v).

    Holds the (..., L_q, L_k) weights in memory (which is what makes backward cheap and long
    sequences expensive); ``torch.nn.functional.scaled_dot_product_attention`` does not.

    >>> q, k = torch.tensor([[1.0, 0.0]]), torch.eye(2)
    >>> v = torch.tensor([[10.0], [20.0]])
    >>> scaled_dot_product_attention(q, k, v, scale=1.0)
    tensor([[12.6894]])
    """
    q, k, v, logits_shape = _qkv(q, k, v)
    a = softmax(_logits(q, k, mask, bias, scale, logits_shape), axis=-1)  # (..., L_q, L_k)
    return a @ v  # (..., L_q, d_v)


def attention_per_query(
    q: Any, k: Any, v: Any, mask: Any = None, bias: Any = None, scale: Any = None
) -> torch.Tensor:
    """The slides' form, a loop over queries i (vectorised over batch and keys): h_i = sum_j a_ij v_j.

    >>> q = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    >>> attention_per_query(q, torch.eye(2), torch.eye(2), scale=1.0)
    tensor([[0.7311, 0.2689],
            [0.2689, 0.7311]])
    """
    q, k, v, logits_shape = _qkv(q, k, v)
    mask = _as_mask(mask, logits_shape, q)
    bias = _as_bias(bias, logits_shape, q)
    scale = check_attention_scale(scale, q.shape[-1])
    batch, L_q = logits_shape[:-2], logits_shape[-2]
    q = q.expand(*batch, *q.shape[-2:])
    rows = []
    for i in range(L_q):
        s = scale * (k * q[..., i, None, :]).sum(-1)  # (..., L_k): q_i . k_j for every j
        if bias is not None:
            s = s + bias.expand(logits_shape)[..., i, :]
        if mask is not None:
            s = s.masked_fill(~mask.expand(logits_shape)[..., i, :], float("-inf"))
        a = softmax(s, axis=-1)  # (..., L_k)
        rows.append((a.unsqueeze(-1) * v).sum(-2))  # (..., d_v): sum_j a_ij v_j
    return torch.stack(rows, dim=-2)  # (..., L_q, d_v)


# ----------------------------------------------------------------------------- heads
def split_heads(x: Any, n_heads: int) -> torch.Tensor:
    """(..., L, h*d) -> (..., h, L, d): head i gets columns ``i*d`` to ``(i+1)*d - 1``.

    >>> split_heads(torch.arange(8.0).reshape(2, 4), 2)[1]
    tensor([[2., 3.],
            [6., 7.]])
    """
    x = as_tensor(x, "x", min_ndim=2)
    h = check_int(n_heads, "n_heads", low=1)
    if x.shape[-1] % h:
        raise ValueError(
            f"the last dimension of x (shape {fmt_shape(x.shape)}) is {x.shape[-1]}, which is "
            f"not divisible by n_heads={h}"
        )
    return x.unflatten(-1, (h, x.shape[-1] // h)).transpose(-3, -2)  # (..., h, L, d)


def merge_heads(x: Any) -> torch.Tensor:
    """(..., h, L, d) -> (..., L, h*d), the concat of eq. (18).

    >>> merge_heads(torch.stack([torch.zeros(2, 1), torch.ones(2, 1)]))
    tensor([[0., 1.],
            [0., 1.]])
    """
    x = as_tensor(x, "x", min_ndim=3)
    return x.transpose(-3, -2).flatten(-2)  # (..., L, h*d)


def fuse_head_weights(w: Any) -> torch.Tensor:
    """(h, d_in, d_k) -> (d_in, h*d_k): the per-head matrices side by side.

    >>> fuse_head_weights(torch.stack([torch.eye(2), 2 * torch.eye(2)]))
    tensor([[1., 0., 2., 0.],
            [0., 1., 0., 2.]])
    """
    w = as_tensor(w, "w", ndim=3)
    h, d_in, d_k = w.shape
    return w.permute(1, 0, 2).reshape(d_in, h * d_k)


def _check_vector(b, name, shape, like) -> torch.Tensor | None:
    if b is None:
        return None
    b = as_tensor(b, name)
    same_device_and_dtype(x_q=like, **{name: b})
    if tuple(b.shape) != shape:
        raise ValueError(f"{name} must have shape {fmt_shape(shape)}, got {fmt_shape(b.shape)}")
    return b


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
) -> torch.Tensor:
    """Eqs. (14)-(18) with fused projections: one (d, h*d_k) matrix per input and a reshape.

    Same arguments as the reference: x_q (..., d_l, d_g), x_k (..., d_s, d_w), x_v (..., d_s,
    d_u), w_q (h, d_g, d_k), w_k (h, d_w, d_k), w_v (h, d_u, d_v), w_o (h*d_v, d_o), optional
    biases b_q, b_k (h, d_k), b_v (h, d_v), b_o (d_o,); ``mask`` and ``bias`` broadcast to
    (..., h, d_l, d_s). Returns (..., d_l, d_o).

    >>> x = torch.eye(2)
    >>> w = torch.stack([torch.eye(2)[:, :1], torch.eye(2)[:, 1:]])
    >>> multi_head_attention(x, x, x, w, w, w, torch.eye(2))
    tensor([[0.7311, 0.5000],
            [0.5000, 0.7311]])
    """
    x_q = as_tensor(x_q, "x_q", min_ndim=2)
    x_k = as_tensor(x_k, "x_k", min_ndim=2)
    x_v = as_tensor(x_v, "x_v", min_ndim=2)
    w_q = as_tensor(w_q, "w_q", ndim=3)
    w_k = as_tensor(w_k, "w_k", ndim=3)
    w_v = as_tensor(w_v, "w_v", ndim=3)
    w_o = as_tensor(w_o, "w_o", ndim=2)
    same_device_and_dtype(x_q=x_q, x_k=x_k, x_v=x_v, w_q=w_q, w_k=w_k, w_v=w_v, w_o=w_o)
    h, d_k, d_v = multi_head_shapes(*(tuple(a.shape) for a in (x_q, x_k, x_v, w_q, w_k, w_v, w_o)))
    b_q = _check_vector(b_q, "b_q", (h, d_k), x_q)
    b_k = _check_vector(b_k, "b_k", (h, d_k), x_q)
    b_v = _check_vector(b_v, "b_v", (h, d_v), x_q)
    b_o = _check_vector(b_o, "b_o", (w_o.shape[1],), x_q)
    batch = torch.broadcast_shapes(x_q.shape[:-2], x_k.shape[:-2], x_v.shape[:-2])
    logits_shape = (*batch, h, x_q.shape[-2], x_k.shape[-2])  # (..., h, d_l, d_s)
    mask = _as_mask(mask, logits_shape, x_q)
    bias = _as_bias(bias, logits_shape, x_q)
    x_q, x_k, x_v = (x.expand(*batch, *x.shape[-2:]) for x in (x_q, x_k, x_v))

    q = x_q @ fuse_head_weights(w_q)  # (..., d_l, h*d_k): all heads in one product
    k = x_k @ fuse_head_weights(w_k)  # (..., d_s, h*d_k)
    v = x_v @ fuse_head_weights(w_v)  # (..., d_s, h*d_v)
    if b_q is not None:
        q = q + b_q.reshape(-1)
    if b_k is not None:
        k = k + b_k.reshape(-1)
    if b_v is not None:
        v = v + b_v.reshape(-1)
    q, k, v = split_heads(q, h), split_heads(k, h), split_heads(v, h)  # (..., h, L, d)
    a = scaled_dot_product_attention(q, k, v, mask, bias)  # (..., h, d_l, d_v)
    out = merge_heads(a) @ w_o  # (..., d_l, d_o)
    return out if b_o is None else out + b_o
