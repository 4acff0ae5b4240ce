"""Chapter 13 (parameter-efficient fine-tuning): PyTorch twins of :mod:`course_lib.peft.reference`.

Batched over leading dimensions, on any device, dtype-preserving, autograd-friendly. The unmerged
layer never forms ``B A``: the update costs ``r (d + k)`` multiply-adds per input row instead of
``d k``.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from course_lib.checks import as_tensor, check_real, fmt_shape, same_device_and_dtype
from course_lib.peft.reference import check_lora_shapes

__all__ = ["dora_weight", "lora_linear", "lora_weight", "prefix_attention"]


def _checked(W: Any, A: Any, B: Any, alpha: Any) -> tuple[torch.Tensor, ...]:
    W = as_tensor(W, "W", ndim=2)
    A = as_tensor(A, "A", ndim=2)
    B = as_tensor(B, "B", ndim=2)
    same_device_and_dtype(W=W, A=A, B=B)
    r = check_lora_shapes(tuple(W.shape), tuple(A.shape), tuple(B.shape))
    alpha = check_real(alpha, "alpha", low=0.0, low_open=True, high_open=True)
    return W, A, B, alpha / r


def lora_weight(W: Any, A: Any, B: Any, alpha: float) -> torch.Tensor:
    """The merged weight ``W + (alpha / r) B A``: (d, k).

    >>> W, A, B = torch.zeros(2, 2), torch.tensor([[1.0, 2.0]]), torch.tensor([[1.0], [0.0]])
    >>> lora_weight(W, A, B, alpha=2.0)
    tensor([[2., 4.],
            [0., 0.]])
    """
    W, A, B, scale = _checked(W, A, B, alpha)
    return torch.addmm(W, B, A, alpha=scale)  # W + scale * (B @ A), one fused call


def dora_weight(W: Any, A: Any, B: Any, m: Any, alpha: float) -> torch.Tensor:
    """DoRA's weight ``m * V / ||V||``, ``V = W + (alpha / r) B A``, norms per output unit: (d, k).

    >>> W = torch.tensor([[3.0, 4.0], [0.0, 2.0]])
    >>> dora_weight(W, torch.ones(1, 2), torch.zeros(2, 1), torch.ones(2), alpha=1.0)
    tensor([[0.6000, 0.8000],
            [0.0000, 1.0000]])
    """
    V = lora_weight(W, A, B, alpha)  # (d, k)
    m = as_tensor(m, "m", ndim=1)
    same_device_and_dtype(m=m, W=V)
    if m.shape != (V.shape[0],):
        raise ValueError(
            f"m must have one length per output unit, shape ({V.shape[0]},), got {fmt_shape(m.shape)}"
        )
    wide = V if V.dtype in (torch.float32, torch.float64) else V.float()  # 16-bit: float32 inside
    norms = torch.linalg.vector_norm(wide, dim=1).to(V.dtype)  # (d,): one per output unit
    return m[:, None] * V / norms[:, None]


def lora_linear(x: Any, W: Any, A: Any, B: Any, alpha: float, b: Any = None) -> torch.Tensor:
    """A LoRA layer, unmerged: ``x W^T + (alpha / r) (x A^T) B^T + b``; x (..., k) -> (..., d).

    >>> x = torch.tensor([[1.0, 1.0]])
    >>> lora_linear(x, torch.eye(2), torch.tensor([[1.0, 2.0]]), torch.tensor([[1.0], [0.0]]), alpha=2.0)
    tensor([[7., 1.]])
    """
    W, A, B, scale = _checked(W, A, B, alpha)
    x = as_tensor(x, "x", min_ndim=1)
    same_device_and_dtype(x=x, W=W)
    if x.shape[-1] != W.shape[1]:
        raise ValueError(
            f"x must have last dimension k = {W.shape[1]} (the inputs of W "
            f"{fmt_shape(W.shape)}), got shape {fmt_shape(x.shape)}"
        )
    if b is not None:
        b = as_tensor(b, "b", ndim=1)
        if b.shape != (W.shape[0],):
            raise ValueError(f"b must have shape ({W.shape[0]},), got {fmt_shape(b.shape)}")
    return lora_core(x, W, A, B, scale, b)


def lora_core(
    x: torch.Tensor,
    W: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    scale: float,
    b: torch.Tensor | None = None,
) -> torch.Tensor:
    """:func:`lora_linear` on checked inputs (what the modules call on every step)."""
    h = F.linear(x, W, b)  # (..., d): the frozen path
    return h + scale * F.linear(F.linear(x, A), B)  # (..., r) then (..., d)


def prefix_attention(q: Any, k: Any, v: Any, pk: Any, pv: Any) -> torch.Tensor:
    """Causal attention with trained prefix keys and values in front; (..., T, d_head).

    The twin of :func:`course_lib.peft.reference.prefix_attention` (``pk``, ``pv`` (..., P, d_head)
    broadcast over the leading dimensions), computed by ``scaled_dot_product_attention`` with the
    mask that lets every token see the whole prefix; :class:`~course_lib.peft.model.AdaptedGPT`
    calls it in every layer.

    >>> q = k = v = torch.zeros(2, 3)
    >>> prefix_attention(q, k, v, torch.zeros(1, 3), torch.ones(1, 3))
    tensor([[0.5000, 0.5000, 0.5000],
            [0.3333, 0.3333, 0.3333]])
    """
    q, k, v = (as_tensor(a, n, min_ndim=2) for a, n in ((q, "q"), (k, "k"), (v, "v")))
    pk, pv = (as_tensor(p, n, min_ndim=2, allow_empty=True) for p, n in ((pk, "pk"), (pv, "pv")))
    same_device_and_dtype(q=q, k=k, v=v, pk=pk, pv=pv)
    T, dk = q.shape[-2:]
    if k.shape[-2:] != (T, dk) or v.shape[-2:] != (T, dk):
        raise ValueError(
            f"k and v must end in (T, d_head) = ({T}, {dk}) like q, got {fmt_shape(k.shape)} "
            f"and {fmt_shape(v.shape)}"
        )
    if pk.shape[-1] != dk or pk.shape != pv.shape:
        raise ValueError(
            f"pk and pv must have the same shape (..., P, {dk}), got {fmt_shape(pk.shape)} and "
            f"{fmt_shape(pv.shape)}"
        )
    return prefix_attention_core(q, k, v, pk, pv)


def prefix_attention_core(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, pk: torch.Tensor, pv: torch.Tensor
) -> torch.Tensor:
    """:func:`prefix_attention` on checked inputs (what the model calls in every layer)."""
    T, P = q.shape[-2], pk.shape[-2]
    lead = torch.broadcast_shapes(q.shape[:-2], pk.shape[:-2])
    k = torch.cat([pk.expand(*lead, -1, -1), k.expand(*lead, -1, -1)], dim=-2)  # (..., P + T, dk)
    v = torch.cat([pv.expand(*lead, -1, -1), v.expand(*lead, -1, -1)], dim=-2)  # (..., P + T, dk)
    sees = torch.ones(T, P + T, dtype=torch.bool, device=q.device).tril(diagonal=P)
    return F.scaled_dot_product_attention(q.expand(*lead, -1, -1), k, v, attn_mask=sees)
