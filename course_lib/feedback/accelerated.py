"""Chapter 10 (Learning from human feedback and distillation): PyTorch twins of :mod:`course_lib.feedback.reference`.

Batched over leading dimensions, on any device, dtype-preserving, autograd-friendly. These are the
functions the training loops of :mod:`course_lib.feedback.pipeline` call on every step.

>>> round(float(pairwise_loss(torch.tensor([2.0]), torch.tensor([0.0]))), 6)
0.126928
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from course_lib.checks import as_tensor, check_choice, check_real, check_same_shape

__all__ = [
    "distillation_loss",
    "dpo_loss",
    "gae",
    "kl_penalty",
    "masked_nll",
    "pairwise_loss",
    "ppo_clip_objective",
    "token_logprobs",
]

KL_KINDS = ("k1", "k3")


def _targets(targets: Any, shape: tuple[int, ...], device: torch.device) -> torch.Tensor:
    t = torch.as_tensor(targets, device=device)
    if t.is_floating_point() or t.dtype == torch.bool or t.is_complex():
        raise TypeError(f"targets must hold integer token ids, got dtype {t.dtype}")
    check_same_shape(shape, tuple(t.shape), "logits without the vocabulary axis", "targets")
    return t.long()


def token_logprobs(logits: Any, targets: Any) -> torch.Tensor:
    """log p(y_t | y_<t) at each target: (..., L, V) and (..., L) -> (..., L)."""
    z = as_tensor(logits, "logits", min_ndim=1)
    t = _targets(targets, tuple(z.shape[:-1]), z.device)
    lp = torch.log_softmax(z.float() if z.dtype in (torch.float16, torch.bfloat16) else z, dim=-1)
    return lp.gather(-1, t.unsqueeze(-1)).squeeze(-1).to(z.dtype)


def masked_nll(logits: Any, targets: Any, mask: Any) -> torch.Tensor:
    """The SFT loss: mean NLL over the positions where ``mask`` is 1 (see the reference)."""
    lp = token_logprobs(logits, targets)
    m = torch.as_tensor(mask, device=lp.device)
    check_same_shape(tuple(lp.shape), tuple(m.shape), "targets", "mask")
    m = m.to(lp.dtype)
    return -(lp * m).sum() / m.sum()


def pairwise_loss(r_chosen: Any, r_rejected: Any) -> torch.Tensor:
    """InstructGPT's reward-model loss: mean ``-log sigmoid(r_w - r_l)`` (see the reference)."""
    rw = as_tensor(r_chosen, "r_chosen")
    rl = as_tensor(r_rejected, "r_rejected")
    check_same_shape(tuple(rw.shape), tuple(rl.shape), "r_chosen", "r_rejected")
    return F.softplus(-(rw - rl)).mean()


def kl_penalty(logp: Any, logp_ref: Any, kind: str = "k1") -> torch.Tensor:
    """Per-token KL estimate ``k1`` (log ratio) or ``k3`` (``e^u - 1 - u``), see the reference."""
    lp = as_tensor(logp, "logp")
    lr = as_tensor(logp_ref, "logp_ref")
    check_same_shape(tuple(lp.shape), tuple(lr.shape), "logp", "logp_ref")
    check_choice(kind, "kind", KL_KINDS)
    u = lr - lp
    return -u if kind == "k1" else torch.expm1(u) - u


def ppo_clip_objective(
    logp_new: Any, logp_old: Any, advantages: Any, clip: float = 0.2
) -> torch.Tensor:
    """PPO's clipped surrogate per token, to be maximised (see the reference)."""
    ln = as_tensor(logp_new, "logp_new")
    lo = as_tensor(logp_old, "logp_old")
    a = as_tensor(advantages, "advantages")
    check_same_shape(tuple(ln.shape), tuple(lo.shape), "logp_new", "logp_old")
    check_same_shape(tuple(ln.shape), tuple(a.shape), "logp_new", "advantages")
    eps = check_real(clip, "clip", low=0.0, high=1.0, low_open=True, high_open=True)
    rho = torch.exp(ln - lo)
    return torch.minimum(rho * a, torch.clamp(rho, 1.0 - eps, 1.0 + eps) * a)


def gae(rewards: Any, values: Any, gamma: float = 1.0, lam: float = 0.95) -> torch.Tensor:
    """Generalised advantage estimates over the last axis (see the reference)."""
    r = as_tensor(rewards, "rewards", min_ndim=1)
    v = as_tensor(values, "values", min_ndim=1)
    check_same_shape(tuple(r.shape), tuple(v.shape), "rewards", "values")
    g = check_real(gamma, "gamma", low=0.0, high=1.0)
    lm = check_real(lam, "lam", low=0.0, high=1.0)
    next_v = torch.cat([v[..., 1:], torch.zeros_like(v[..., :1])], dim=-1)
    delta = r + g * next_v - v
    out = []
    running = torch.zeros_like(delta[..., 0])
    for t in range(delta.shape[-1] - 1, -1, -1):
        running = delta[..., t] + g * lm * running
        out.append(running)
    return torch.stack(out[::-1], dim=-1)


def dpo_loss(
    logp_chosen: Any, logp_rejected: Any, ref_chosen: Any, ref_rejected: Any, beta: float = 0.1
) -> torch.Tensor:
    """DPO's loss, averaged over pairs (see the reference)."""
    names = ("logp_chosen", "logp_rejected", "ref_chosen", "ref_rejected")
    ts = [
        as_tensor(x, n)
        for x, n in zip((logp_chosen, logp_rejected, ref_chosen, ref_rejected), names, strict=True)
    ]
    for x, n in zip(ts[1:], names[1:], strict=True):
        check_same_shape(tuple(ts[0].shape), tuple(x.shape), names[0], n)
    b = check_real(beta, "beta", low=0.0, low_open=True, high_open=True)
    pw, pl, rw, rl = ts
    return F.softplus(-b * ((pw - rw) - (pl - rl))).mean()


def distillation_loss(
    student_logits: Any, teacher_logits: Any, temperature: float = 2.0
) -> torch.Tensor:
    """``T^2 KL(softmax(z_t / T) || softmax(z_s / T))``, averaged over positions (see the reference)."""
    zs = as_tensor(student_logits, "student_logits", min_ndim=1)
    zt = as_tensor(teacher_logits, "teacher_logits", min_ndim=1)
    check_same_shape(tuple(zt.shape), tuple(zs.shape), "teacher_logits", "student_logits")
    T = check_real(temperature, "temperature", low=0.0, low_open=True, high_open=True)
    log_p = torch.log_softmax(zt / T, dim=-1)
    log_q = torch.log_softmax(zs / T, dim=-1)
    kl = (log_p.exp() * (log_p - log_q)).sum(-1)
    return T * T * kl.mean()
