"""Softmax and its relatives in PyTorch (Chapter 2): the twins of :mod:`course_lib.softmax.reference`.

Same names, signatures and conventions as the reference (stable; ``-inf`` masked; a fully masked
slice gives zeros, not NaN; NaN or ``+inf`` in a slice gives NaN), but in the input's dtype and
device, over any leading dimensions, and differentiable. Where PyTorch has a fused kernel
(``torch.softmax``, ``torch.log_softmax``, ``torch.logsumexp``, ``torch.sigmoid``) we call it and
add only the fully-masked-slice rule, whose cost is one extra read of the input (a max); the
slices are patched only when there is one.

**Input.** A floating-point tensor is used as it is. An *integer or boolean tensor is rejected*
with a ``TypeError``: PyTorch cannot take the softmax of integers either, and the library will
not guess whether you want float32 or float64. Other array-likes (lists, NumPy arrays) are
converted with NumPy's rules, so a list of ints becomes float64 on the CPU.

**Precision.** float16 and bfloat16 inputs are computed in float32 wherever a decision or a long
sum depends on it (top-p's cumulative sum, the online normaliser), and returned in their dtype.
The online softmax keeps its running normaliser in float64 (float32 on Apple MPS).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from course_lib.checks import (
    as_tensor,
    check_axis,
    check_int,
    check_real,
    check_same_shape,
    same_device_and_dtype,
    values_are_free_to_read,
)
from course_lib.softmax.checks import (
    bad_target_error,
    check_reduction,
    check_target_kind,
    check_target_shape,
)

__all__ = [
    "cross_entropy",
    "log_softmax",
    "logsumexp",
    "merge_softmax_stats",
    "naive_softmax",
    "online_softmax",
    "online_softmax_stats",
    "sampling_probs",
    "sigmoid",
    "softmax",
    "softmax_jacobian",
    "softmax_vjp",
    "softmax_with_temperature",
    "top_k_filter",
    "top_p_filter",
]

#: Default chunk length of the online (streaming) softmax (the same as the reference's).
CHUNK = 4096
_INF = math.inf
_LOW_PRECISION = (torch.float16, torch.bfloat16)


# ----------------------------------------------------------------------------- input checks
def _logits(x: Any, axis: int, name: str = "x") -> tuple[torch.Tensor, int]:
    """Check the logits; return them and the axis as 0..ndim-1."""
    t = as_tensor(x, name, min_ndim=1)
    return t, check_axis(axis, t.ndim)


def _work_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype to compute in: float32 for 16-bit inputs, else the input's own."""
    return torch.float32 if dtype in _LOW_PRECISION else dtype


def _fully_masked(x: torch.Tensor, dim: int) -> torch.Tensor | None:
    """A keepdim mask of the slices whose entries are all -inf, or None if there are none.

    Whether there are none is read only where that is free
    (:func:`course_lib.checks.values_are_free_to_read`); elsewhere the mask is always applied.
    """
    dead = x.detach().amax(dim=dim, keepdim=True) == -_INF
    if not values_are_free_to_read(dead):
        return dead
    return dead if bool(dead.any()) else None


# ----------------------------------------------------------------------------- the definition
def naive_softmax(x: Any, axis: int = -1) -> torch.Tensor:
    """Eq. (4) exactly as printed, ``exp(x_i) / sum_j exp(x_j)``, in x's dtype: it overflows.

    ``exp`` overflows beyond 88.72 in float32 and 11.09 in float16, and ``inf / inf`` is NaN.

    >>> naive_softmax(torch.tensor([10.0, 12.0], dtype=torch.float16))
    tensor([0., nan], dtype=torch.float16)
    """
    x, dim = _logits(x, axis)
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)


def softmax(x: Any, axis: int = -1) -> torch.Tensor:
    """Stable softmax along ``axis`` (``torch.softmax`` plus the fully-masked rule).

    A fully masked slice is replaced by zeros *before* the kernel runs (so its backward pass
    sees a harmless uniform slice instead of NaN) and its output set to 0 after, so its
    gradient is exactly 0.

    >>> softmax(torch.tensor([2.0, 4.0, 4.0]))
    tensor([0.0634, 0.4683, 0.4683])
    >>> softmax(torch.tensor([[0.0, -float("inf")], [-float("inf"), -float("inf")]]))
    tensor([[1., 0.],
            [0., 0.]])
    """
    x, dim = _logits(x, axis)
    dead = _fully_masked(x, dim)
    if dead is None:
        return torch.softmax(x, dim)
    return torch.softmax(x.masked_fill(dead, 0.0), dim).masked_fill(dead, 0.0)


def logsumexp(x: Any, axis: int = -1) -> torch.Tensor:
    """``log sum_j exp(x_j)`` along ``axis`` (removed), stable; ``-inf`` for a fully masked slice.

    >>> logsumexp(torch.tensor([1000.0, 1000.0], dtype=torch.float64))  # 1000 + log 2
    tensor(1000.6931, dtype=torch.float64)
    """
    x, dim = _logits(x, axis)
    dead = _fully_masked(x, dim)
    if dead is None:
        return torch.logsumexp(x, dim)
    out = torch.logsumexp(x.masked_fill(dead, 0.0), dim)
    return out.masked_fill(dead.squeeze(dim), -_INF)


def log_softmax(x: Any, axis: int = -1) -> torch.Tensor:
    """``x - logsumexp(x)`` along ``axis`` (``torch.log_softmax``); ``-inf`` where fully masked.

    >>> log_softmax(torch.tensor([0.0, -1000.0]))
    tensor([    0., -1000.])
    """
    x, dim = _logits(x, axis)
    dead = _fully_masked(x, dim)
    if dead is None:
        return torch.log_softmax(x, dim)
    return torch.log_softmax(x.masked_fill(dead, 0.0), dim).masked_fill(dead, -_INF)


def sigmoid(x: Any) -> torch.Tensor:
    """The logistic function, elementwise (``torch.sigmoid``): the two-class softmax.

    >>> sigmoid(torch.tensor([0.0, 2.0, -1000.0]))
    tensor([0.5000, 0.8808, 0.0000])
    """
    return torch.sigmoid(as_tensor(x, "x"))


# ----------------------------------------------------------------------------- temperature, sampling
def _temper(x: torch.Tensor, temperature: float, dim: int) -> torch.Tensor:
    """Logits whose softmax is ``softmax(x / T)``, including the limits T = 0 and T = inf."""
    if temperature == 0.0:  # the argmax, ties shared: 0 at the maxima, -inf elsewhere
        m = x.detach().amax(dim=dim, keepdim=True)
        hard = torch.full_like(x, -_INF).masked_fill(x == m, 0.0)
        return torch.where(torch.isfinite(m), hard, m)  # keep the masked / NaN / +inf rules
    if temperature == _INF:  # uniform over the unmasked entries
        return x.masked_fill(torch.isfinite(x), 0.0)
    return x / temperature


def softmax_with_temperature(x: Any, temperature: float = 1.0, axis: int = -1) -> torch.Tensor:
    """``softmax(x / T)`` along ``axis``; ``temperature`` 0 is the argmax, ``inf`` uniform.

    >>> softmax_with_temperature(torch.tensor([1.0, 2.0, 2.0]), 0)
    tensor([0.0000, 0.5000, 0.5000])
    """
    x, dim = _logits(x, axis)
    t = check_real(temperature, "temperature", low=0.0)
    return softmax(_temper(x, t, dim), axis=dim)


def _top_k(x: torch.Tensor, k: int, dim: int) -> torch.Tensor:
    k = min(k, x.shape[dim])
    kth = torch.topk(x.detach(), k, dim=dim).values.narrow(dim, k - 1, 1)  # k-th largest
    out = x.masked_fill(x < kth, -_INF)
    return out.masked_fill(torch.isnan(x).any(dim=dim, keepdim=True), math.nan)


def top_k_filter(x: Any, k: int, axis: int = -1) -> torch.Tensor:
    """Keep the ``k`` largest logits of each slice (ties with the k-th too); others become ``-inf``.

    >>> top_k_filter(torch.tensor([1.0, 3.0, 2.0, 0.0]), 2)
    tensor([-inf, 3., 2., -inf])
    """
    x, dim = _logits(x, axis)
    return _top_k(x, check_int(k, "k", low=1), dim)


def _top_p(x: torch.Tensor, p: float, dim: int) -> torch.Tensor:
    if p == 1.0:
        return x.clone()
    xs = x.movedim(dim, -1)
    work = xs.detach().to(_work_dtype(xs.dtype))  # decide in at least float32 (exact upcast)
    desc = torch.sort(work, dim=-1, descending=True).values  # logits, largest first
    cum = torch.cumsum(softmax(desc), dim=-1)  # probability of the top 1, 2, ... entries
    n = ((cum < p).sum(dim=-1, keepdim=True) + 1).clamp(max=xs.shape[-1])  # entries needed
    threshold = desc.gather(-1, n - 1)  # the logit of the last one needed (ties kept)
    out = xs.masked_fill(work < threshold, -_INF)
    out = out.masked_fill(torch.isnan(work).any(dim=-1, keepdim=True), math.nan)
    return out.movedim(-1, dim)


def top_p_filter(x: Any, p: float, axis: int = -1) -> torch.Tensor:
    """Nucleus truncation: keep the fewest most probable entries with probability >= ``p``.

    >>> top_p_filter(torch.log(torch.tensor([0.5, 0.3, 0.15, 0.05])), 0.75).isfinite()
    tensor([ True,  True, False, False])
    """
    x, dim = _logits(x, axis)
    return _top_p(x, check_real(p, "p", low=0.0, high=1.0, low_open=True), dim)


def sampling_probs(
    x: Any,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    axis: int = -1,
) -> torch.Tensor:
    """The sampling distribution: top-k on the logits, then temperature, then top-p, softmax.

    16-bit inputs are computed in float32 and returned in their dtype.

    >>> sampling_probs(torch.tensor([2.0, 1.0, 0.0, -1.0]), top_k=2)
    tensor([0.7311, 0.2689, 0.0000, 0.0000])
    """
    x, dim = _logits(x, axis)
    t = check_real(temperature, "temperature", low=0.0)
    k = None if top_k is None else check_int(top_k, "top_k", low=1)
    p = None if top_p is None else check_real(top_p, "top_p", low=0.0, high=1.0, low_open=True)
    z = x.to(_work_dtype(x.dtype))
    if k is not None:
        z = _top_k(z, k, dim)
    z = _temper(z, t, dim)
    if p is not None:
        z = _top_p(z, p, dim)
    return softmax(z, axis=dim).to(x.dtype)


# ----------------------------------------------------------------------------- derivatives
def softmax_jacobian(x: Any, axis: int = -1) -> torch.Tensor:
    """``J = diag(s) - s s^T`` per slice, shape ``(..., K, K)`` (the other dims, then K, K).

    >>> softmax_jacobian(torch.tensor([0.0, 0.0]))
    tensor([[ 0.2500, -0.2500],
            [-0.2500,  0.2500]])
    """
    x, dim = _logits(x, axis)
    s = softmax(x, axis=dim).movedim(dim, -1)  # (..., K)
    return torch.diag_embed(s) - s.unsqueeze(-1) * s.unsqueeze(-2)  # (..., K, K)


def softmax_vjp(x: Any, grad: Any, axis: int = -1) -> torch.Tensor:
    """The gradient with respect to x from the gradient ``grad`` with respect to softmax(x).

    ``s * (grad - <grad, s>)``: what ``torch.softmax``'s backward computes, O(K) per slice.

    >>> softmax_vjp(torch.tensor([0.0, 0.0]), torch.tensor([1.0, 0.0]))
    tensor([ 0.2500, -0.2500])
    """
    x, dim = _logits(x, axis)
    g = as_tensor(grad, "grad")
    same_device_and_dtype(x=x, grad=g)
    check_same_shape(x.shape, g.shape, "x", "grad")
    s = softmax(x, axis=dim)
    return s * (g - (g * s).sum(dim=dim, keepdim=True))


# ----------------------------------------------------------------------------- online softmax
def _merge(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    shift = m.masked_fill(m == -_INF, 0.0)  # two empty states: avoid -inf - (-inf)
    return m, l1 * torch.exp(m1 - shift) + l2 * torch.exp(m2 - shift)


def merge_softmax_stats(m1: Any, l1: Any, m2: Any, l2: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """Combine (max, normaliser) statistics of two parts: ``l1 e^(m1 - m) + l2 e^(m2 - m)``.

    >>> m, l = merge_softmax_stats(torch.tensor(1.0), torch.tensor(1.0), torch.tensor(3.0), torch.tensor(2.0))
    >>> m, l
    (tensor(3.), tensor(2.1353))
    """
    names = ("m1", "l1", "m2", "l2")
    ts = [as_tensor(v, n, allow_empty=True) for v, n in zip((m1, l1, m2, l2), names, strict=True)]
    same_device_and_dtype(**dict(zip(names, ts, strict=True)))
    for t, n in zip(ts[1:], names[1:], strict=True):
        check_same_shape(ts[0].shape, t.shape, "m1", n)
    for t, n in ((ts[1], "l1"), (ts[3], "l2")):
        if bool((t < 0).any()):
            raise ValueError(f"{n} is a sum of exponentials and must be >= 0, got {t.min().item()}")
    return _merge(*ts)


def _acc_dtype(x: torch.Tensor) -> torch.dtype:
    return torch.float32 if x.device.type == "mps" else torch.float64


def _online_stats(xs: torch.Tensor, chunk_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(m, l) over the last dim of xs, one chunk at a time, in the accumulation dtype."""
    acc, work = _acc_dtype(xs), _work_dtype(xs.dtype)
    m = torch.full(xs.shape[:-1], -_INF, dtype=acc, device=xs.device)  # the empty state
    l = torch.zeros(xs.shape[:-1], dtype=acc, device=xs.device)
    for start in range(0, xs.shape[-1], chunk_size):
        chunk = xs[..., start : start + chunk_size].to(work)  # a view unless upcast
        m_c = chunk.amax(dim=-1)
        shift = m_c.masked_fill(m_c == -_INF, 0.0).unsqueeze(-1)
        l_c = (chunk - shift).exp_().sum(dim=-1, dtype=acc)  # one temporary chunk, freed here
        m, l = _merge(m, l, m_c.to(acc), l_c)
    return m, l


def online_softmax_stats(
    x: Any, chunk_size: int = CHUNK, axis: int = -1
) -> tuple[torch.Tensor, torch.Tensor]:
    """The maximum and normaliser ``(m, l)`` along ``axis``, computed one chunk at a time.

    >>> m, l = online_softmax_stats(torch.tensor([1.0, 3.0, 2.0, 3.0]), chunk_size=2)
    >>> m, l
    (tensor(3.), tensor(2.5032))
    """
    x, dim = _logits(x, axis)
    chunk_size = check_int(chunk_size, "chunk_size", low=1)
    m, l = _online_stats(x.movedim(dim, -1), chunk_size)
    return m.to(x.dtype), l.to(x.dtype)


def online_softmax(x: Any, chunk_size: int = CHUNK, axis: int = -1) -> torch.Tensor:
    """Softmax in two passes over chunks; besides the output, memory for one chunk at a time.

    Without autograd, the second pass writes each chunk of the result in place; with autograd,
    the chunks are concatenated (the backward pass needs them anyway).

    >>> online_softmax(torch.tensor([2.0, 4.0, 4.0]), chunk_size=1)
    tensor([0.0634, 0.4683, 0.4683])
    """
    x, dim = _logits(x, axis)
    chunk_size = check_int(chunk_size, "chunk_size", low=1)
    xs = x.movedim(dim, -1)  # a view, (..., K)
    m, l = _online_stats(xs, chunk_size)
    work = _work_dtype(x.dtype)
    shift = m.masked_fill(m == -_INF, 0.0).to(work).unsqueeze(-1)  # exact: m is an entry of x
    inv = (1.0 / l.masked_fill(l == 0.0, 1.0)).to(work).unsqueeze(-1)  # a fully masked slice: 0
    starts = range(0, xs.shape[-1], chunk_size)
    if torch.is_grad_enabled() and x.requires_grad:
        parts = [
            (torch.exp(xs[..., s : s + chunk_size].to(work) - shift) * inv).to(x.dtype)
            for s in starts
        ]
        return torch.cat(parts, dim=-1).movedim(-1, dim)
    out = torch.empty_like(xs)  # the result, in x's layout
    for s in starts:
        o = out[..., s : s + chunk_size]  # a view of the output
        c = xs[..., s : s + chunk_size]
        if work == x.dtype:
            torch.sub(c, shift, out=o).exp_().mul_(inv)  # no temporary at all
        else:
            o.copy_((c.to(work) - shift).exp_().mul_(inv))  # one float32 chunk
    return out.movedim(-1, dim)


# ----------------------------------------------------------------------------- cross-entropy
def _targets(targets: Any, x: torch.Tensor, dim: int, ignore_index: int) -> torch.Tensor:
    if isinstance(targets, torch.Tensor):
        t = targets
        if t.device != x.device:
            raise ValueError(
                f"targets must be on the device of the logits ({x.device}), got {t.device}"
            )
    else:
        t = torch.as_tensor(targets, device=x.device)
    integer = not (t.is_floating_point() or t.is_complex() or t.dtype == torch.bool)
    check_target_kind(integer, t.dtype)
    expected = x.shape[:dim] + x.shape[dim + 1 :]
    check_target_shape(t.shape, expected)
    classes = x.shape[dim]
    bad = (t != ignore_index) & ((t < 0) | (t >= classes))
    if bool(bad.any()):
        raise bad_target_error(int(t[bad].flatten()[0]), classes, ignore_index)
    return t.long()


def cross_entropy(
    logits: Any,
    targets: Any,
    axis: int = -1,
    reduction: str = "mean",
    ignore_index: int = -100,
) -> torch.Tensor:
    """Cross-entropy from logits, ``-log_softmax(x)_t``, with classes along ``axis``.

    Agrees with ``torch.nn.functional.cross_entropy`` (which wants the classes on dim 1).

    >>> cross_entropy(torch.zeros(1, 4), torch.tensor([2]))  # log 4
    tensor(1.3863)
    """
    x, dim = _logits(logits, axis, "logits")
    reduction = check_reduction(reduction)
    ignore_index = check_int(ignore_index, "ignore_index")
    t = _targets(targets, x, dim, ignore_index)
    keep = t != ignore_index
    logp = log_softmax(x, axis=dim).movedim(dim, -1)  # (..., C), fused kernel
    picked = logp.gather(-1, t.masked_fill(~keep, 0).unsqueeze(-1)).squeeze(-1)
    losses = (-picked).masked_fill(~keep, 0.0)
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    return losses.sum() / keep.sum()
