"""Chapter 10 (Learning from human feedback and distillation): NumPy references, float64.

Every public function here has a PyTorch twin of the same name and signature in
:mod:`course_lib.feedback.accelerated`, and a spec in :mod:`course_lib.feedback.spec`. The papers
behind the formulas: Ouyang et al. 2022 (InstructGPT: the reward model's loss, eq. 1, and the RL
objective with a per-token KL penalty, eq. 2), Schulman et al. 2017 (PPO's clipped objective, and
GAE from Schulman et al. 2016), Rafailov et al. 2023 (DPO), Hinton et al. 2015 (distillation at a
temperature T) and Hsieh et al. 2023 (distilling step by step), which Strabel's notes summarise in
their sections 7 and 10.

>>> float(np.round(pairwise_loss(np.array([2.0]), np.array([0.0])), 6))  # -log sigmoid(2)
0.126928
"""

from __future__ import annotations

from typing import Any

import numpy as np

from course_lib.checks import as_array, check_choice, check_real, check_same_shape

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


def _log_softmax(z: np.ndarray) -> np.ndarray:
    m = z.max(axis=-1, keepdims=True)
    return z - m - np.log(np.exp(z - m).sum(axis=-1, keepdims=True))


def _targets(targets: Any, shape: tuple[int, ...], vocab: int) -> np.ndarray:
    t = np.asarray(targets.detach().cpu() if hasattr(targets, "detach") else targets)
    if t.dtype.kind not in "iu":
        raise TypeError(f"targets must hold integer token ids, got dtype {t.dtype}")
    check_same_shape(shape, t.shape, "logits without the vocabulary axis", "targets")
    if t.size and (t.min() < 0 or t.max() >= vocab):
        raise ValueError(f"targets must be token ids in [0, {vocab}), got {t.min()}..{t.max()}")
    return t.astype(np.int64)


def token_logprobs(logits: Any, targets: Any) -> np.ndarray:
    """log p(y_t | y_<t): the log-probability each position gives its target token.

    Args:
        logits: (..., L, V) scores.
        targets: (..., L) integer token ids.

    Returns:
        (..., L) log-probabilities, ``log_softmax(logits)[..., targets]``.

    >>> np.round(token_logprobs(np.zeros((1, 2)), np.array([1])), 4)  # uniform over 2 tokens
    array([-0.6931])
    """
    z = as_array(logits, "logits", min_ndim=1)
    t = _targets(targets, z.shape[:-1], z.shape[-1])
    return np.take_along_axis(_log_softmax(z), t[..., None], axis=-1)[..., 0]


def masked_nll(logits: Any, targets: Any, mask: Any) -> np.ndarray:
    """The SFT loss: the mean negative log-likelihood over the positions where ``mask`` is 1.

    ``-sum_t m_t log p(y_t | y_<t) / sum_t m_t``: with ``m`` one on the response tokens only, the
    model learns to answer and is not trained to reproduce the prompt.

    Args:
        logits: (..., L, V). targets: (..., L) integer ids. mask: (..., L) of 0/1 (or weights).

    >>> logits = np.log(np.array([[0.5, 0.5], [0.9, 0.1]]))
    >>> float(np.round(masked_nll(logits, np.array([0, 0]), np.array([0.0, 1.0])), 6))  # -log 0.9
    0.105361
    """
    lp = token_logprobs(logits, targets)
    m = as_array(mask, "mask", allow_empty=True)
    check_same_shape(lp.shape, m.shape, "targets", "mask")
    if m.sum() <= 0:
        raise ValueError("mask selects no token: the loss would be 0/0")
    return np.asarray(-(lp * m).sum() / m.sum())


def pairwise_loss(r_chosen: Any, r_rejected: Any) -> np.ndarray:
    """The reward model's loss (InstructGPT eq. 1): mean of ``-log sigmoid(r(x, y_w) - r(x, y_l))``.

    The Bradley-Terry model says the labeller prefers ``y_w`` with probability
    ``sigmoid(r_w - r_l)``; this is its negative log-likelihood, averaged over the comparisons.
    Written as ``log(1 + exp(-(r_w - r_l)))``, evaluated without overflow.

    >>> float(pairwise_loss(np.array([0.0]), np.array([0.0])))  # log 2: no preference yet
    0.6931471805599453
    """
    rw = as_array(r_chosen, "r_chosen")
    rl = as_array(r_rejected, "r_rejected")
    check_same_shape(rw.shape, rl.shape, "r_chosen", "r_rejected")
    d = rw - rl
    return np.asarray(np.mean(np.logaddexp(0.0, -d)))


def kl_penalty(logp: Any, logp_ref: Any, kind: str = "k1") -> np.ndarray:
    """A per-token estimate of KL(pi || pi_ref) from the sampled tokens' log-probabilities.

    With ``u = logp_ref - logp`` (log pi_ref(y_t) - log pi(y_t) at the token the policy sampled):

    * ``"k1"``: ``-u = log pi - log pi_ref``, InstructGPT's penalty (eq. 2); unbiased, can be < 0.
    * ``"k3"``: ``exp(u) - 1 - u``, also unbiased and never negative (Schulman's "k3").

    Averaged under the policy's own distribution, both equal the exact KL (tested).

    >>> np.round(kl_penalty(np.log([0.5]), np.log([0.25])), 4), np.round(kl_penalty(np.log([0.5]), np.log([0.25]), "k3"), 4)
    (array([0.6931]), array([0.1931]))
    """
    lp = as_array(logp, "logp")
    lr = as_array(logp_ref, "logp_ref")
    check_same_shape(lp.shape, lr.shape, "logp", "logp_ref")
    check_choice(kind, "kind", KL_KINDS)
    u = lr - lp
    return -u if kind == "k1" else np.expm1(u) - u


def ppo_clip_objective(
    logp_new: Any, logp_old: Any, advantages: Any, clip: float = 0.2
) -> np.ndarray:
    """PPO's clipped surrogate, per token: ``min(rho A, clip(rho, 1 - eps, 1 + eps) A)``.

    ``rho = exp(logp_new - logp_old)`` is the probability ratio of the new policy to the one that
    sampled the tokens. The objective is *maximised*; inside ``[1 - eps, 1 + eps]`` it equals the
    unclipped ``rho A`` (Schulman et al. 2017, eq. 7).

    >>> ppo_clip_objective(np.log([1.5, 1.5]), np.log([1.0, 1.0]), np.array([1.0, -1.0]))
    array([ 1.2, -1.5])
    """
    ln = as_array(logp_new, "logp_new")
    lo = as_array(logp_old, "logp_old")
    a = as_array(advantages, "advantages")
    check_same_shape(ln.shape, lo.shape, "logp_new", "logp_old")
    check_same_shape(ln.shape, a.shape, "logp_new", "advantages")
    eps = check_real(clip, "clip", low=0.0, high=1.0, low_open=True, high_open=True)
    rho = np.exp(ln - lo)
    return np.minimum(rho * a, np.clip(rho, 1.0 - eps, 1.0 + eps) * a)


def gae(rewards: Any, values: Any, gamma: float = 1.0, lam: float = 0.95) -> np.ndarray:
    """Generalised advantage estimates over the last axis (Schulman et al. 2016).

    ``delta_t = r_t + gamma V_{t+1} - V_t`` (``V_T = 0`` after the last step) and
    ``A_t = sum_k (gamma lam)^k delta_{t+k}``, computed by the backward recursion
    ``A_t = delta_t + gamma lam A_{t+1}``. ``lam = 0`` gives the one-step TD error, ``lam = 1``
    the return minus the value.

    >>> gae(np.array([0.0, 1.0]), np.array([0.5, 0.5]), gamma=1.0, lam=1.0)
    array([0.5, 0.5])
    """
    r = as_array(rewards, "rewards", min_ndim=1)
    v = as_array(values, "values", min_ndim=1)
    check_same_shape(r.shape, v.shape, "rewards", "values")
    g = check_real(gamma, "gamma", low=0.0, high=1.0)
    lm = check_real(lam, "lam", low=0.0, high=1.0)
    T = r.shape[-1]
    adv = np.zeros_like(r)
    running = np.zeros(r.shape[:-1])
    for t in reversed(range(T)):
        next_v = v[..., t + 1] if t + 1 < T else 0.0
        delta = r[..., t] + g * next_v - v[..., t]
        running = delta + g * lm * running
        adv[..., t] = running
    return adv


def dpo_loss(
    logp_chosen: Any, logp_rejected: Any, ref_chosen: Any, ref_rejected: Any, beta: float = 0.1
) -> np.ndarray:
    """Direct preference optimisation (Rafailov et al. 2023, eq. 7), averaged over pairs.

    ``-log sigmoid(beta [(log pi(y_w) - log pi_ref(y_w)) - (log pi(y_l) - log pi_ref(y_l))])``,
    with each log-probability summed over the response's tokens: the reward model's loss with
    the implicit reward ``beta log(pi / pi_ref)`` in place of ``r``.

    >>> float(dpo_loss(np.array([-1.0]), np.array([-1.0]), np.array([-1.0]), np.array([-1.0])))
    0.6931471805599453
    """
    names = ("logp_chosen", "logp_rejected", "ref_chosen", "ref_rejected")
    arrs = [
        as_array(x, n)
        for x, n in zip((logp_chosen, logp_rejected, ref_chosen, ref_rejected), names, strict=True)
    ]
    for x, n in zip(arrs[1:], names[1:], strict=True):
        check_same_shape(arrs[0].shape, x.shape, names[0], n)
    b = check_real(beta, "beta", low=0.0, low_open=True, high_open=True)
    pw, pl, rw, rl = arrs
    margin = b * ((pw - rw) - (pl - rl))
    return np.asarray(np.mean(np.logaddexp(0.0, -margin)))


def distillation_loss(
    student_logits: Any, teacher_logits: Any, temperature: float = 2.0
) -> np.ndarray:
    """Hinton et al.'s soft-target loss: ``T^2 KL(softmax(z_t / T) || softmax(z_s / T))``.

    Averaged over every leading position. The ``T^2`` keeps the gradient's size independent of
    ``T``: the gradient of the KL with respect to the student's logits shrinks like ``1 / T^2``.

    >>> float(distillation_loss(np.zeros((1, 3)), np.zeros((1, 3))))  # same distribution
    0.0
    """
    zs = as_array(student_logits, "student_logits", min_ndim=1)
    zt = as_array(teacher_logits, "teacher_logits", min_ndim=1)
    check_same_shape(zt.shape, zs.shape, "teacher_logits", "student_logits")
    T = check_real(temperature, "temperature", low=0.0, low_open=True, high_open=True)
    log_p = _log_softmax(zt / T)
    log_q = _log_softmax(zs / T)
    kl = (np.exp(log_p) * (log_p - log_q)).sum(axis=-1)
    return np.asarray(T * T * kl.mean())
