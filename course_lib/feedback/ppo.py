"""PPO as InstructGPT uses it: a value head, per-token rewards, GAE and the clipped losses (Chapter 10).

The pieces of one PPO update, each a small function that the training loop
:func:`course_lib.feedback.pipeline.train_rl` (``advantage="gae"``) calls in this order:

1. :class:`ActorCritic`: the policy and a linear value head on its final hidden states; one
   forward pass gives log pi(y_t | x, y_<t) and V_t for every generated token.
2. :func:`per_token_rewards`: InstructGPT's reward (Ouyang et al. 2022, eq. 2) spread over the
   tokens: minus beta times the per-token KL estimate at every token, plus the reward model's
   score at the response's last token.
3. :func:`advantages_and_returns`: GAE(gamma, lambda) (Schulman et al. 2016) over the response,
   the returns A_t + V_t that the value head learns, and advantages whitened over the batch.
4. :func:`ppo_loss`: minus the clipped surrogate, plus ``value_coef`` times the (clipped) value
   loss (Schulman et al. 2017, eq. 9).

>>> mask = torch.tensor([[1.0, 1.0, 0.0]])
>>> per_token_rewards(torch.tensor([1.0]), torch.zeros(1, 3), torch.zeros(1, 3), mask, beta=0.1)
tensor([[0., 1., 0.]])
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from course_lib.checks import check_real
from course_lib.feedback import accelerated as acc
from course_lib.gpt.model import GPT

__all__ = [
    "ActorCritic",
    "advantages_and_returns",
    "loo_advantages",
    "per_token_rewards",
    "ppo_loss",
    "value_loss",
    "whiten",
]


class ActorCritic(nn.Module):
    """A GPT policy and a value head ``nn.Linear(d_model, 1)`` reading the same hidden states.

    ``forward(tokens, prompt_len)`` returns, for the ``T = L - prompt_len`` generated tokens,
    their log-probabilities (B, T) and the values (B, T): ``V_t`` is read at the position that
    predicts token t, so it sees the prompt and ``y_<t`` and estimates the return from t on.
    The head starts at zero (every value 0), as the reward model's head does.
    """

    def __init__(self, policy: GPT) -> None:
        super().__init__()
        if not isinstance(policy, GPT):
            raise TypeError(f"policy must be a GPT, got {type(policy).__name__}")
        self.policy = policy
        self.value_head = nn.Linear(policy.config.d_model, 1)
        nn.init.zeros_(self.value_head.weight)
        nn.init.zeros_(self.value_head.bias)

    def forward(self, tokens: torch.Tensor, prompt_len: int) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.policy.hidden(tokens[:, :-1])[:, prompt_len - 1 :]  # (B, T, d)
        logits = F.linear(h, self.policy.tok_emb)  # (B, T, V), the GPT's tied output layer
        logp = acc.token_logprobs(logits, tokens[:, prompt_len:])  # (B, T)
        values = self.value_head(h).squeeze(-1)  # (B, T)
        return logp, values


def per_token_rewards(
    score: torch.Tensor,
    logp: torch.Tensor,
    logp_ref: torch.Tensor,
    mask: torch.Tensor,
    beta: float,
) -> torch.Tensor:
    """``r_t = -beta * k1_t`` on every response token, plus ``score`` on the last one, (B, T).

    ``score`` (B,) is r(x, y); ``logp``, ``logp_ref`` (B, T) the sampled tokens' log-probabilities
    under the policy and the frozen SFT model; ``mask`` (B, T) is 1 on the response's tokens (a
    prefix of each row). Summed over t, the rewards are eq. 2 of Ouyang et al.
    """
    beta = check_real(beta, "beta", low=0.0)
    rewards = -beta * acc.kl_penalty(logp, logp_ref) * mask  # (B, T)
    last = mask.sum(-1).long() - 1  # (B,) index of each response's last token
    rewards[torch.arange(len(score)), last] += score
    return rewards


def whiten(x: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """``(x - mean) / std`` over the masked entries (0 elsewhere): advantages on one scale."""
    n = mask.sum()
    mean = (x * mask).sum() / n
    var = ((x - mean) ** 2 * mask).sum() / n
    return (x - mean) * torch.rsqrt(var + eps) * mask


def advantages_and_returns(
    rewards: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    gamma: float = 1.0,
    lam: float = 0.95,
    normalise: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE advantages and the returns ``A_t + V_t`` (the value head's targets), both (B, T).

    Values past the response's end are 0, so the last token's TD error is ``r_T - V_T``. With
    ``normalise`` the advantages are whitened over the batch (the returns are not).
    """
    values = values * mask
    adv = acc.gae(rewards * mask, values, gamma, lam) * mask  # (B, T)
    returns = adv + values  # (B, T)
    return (whiten(adv, mask) if normalise else adv), returns


def loo_advantages(total: torch.Tensor) -> torch.Tensor:
    """Leave-one-out advantages: each answer's total reward minus the mean of the *other* answers
    to the same prompt (the baseline of RLOO, Ahmadian et al. 2024; GRPO, Shao et al. 2024, uses
    the mean of all of them and divides by their standard deviation).

    ``total`` is (P, k): k >= 2 answers to each of P prompts. Returns (P, k). Equal to
    ``k / (k - 1)`` times the total minus the prompt's mean, so each row sums to zero.

    >>> loo_advantages(torch.tensor([[1.0, 0.0, 0.0, 0.0]]))
    tensor([[ 1.0000, -0.3333, -0.3333, -0.3333]])
    """
    if not isinstance(total, torch.Tensor):
        raise TypeError(f"total must be a torch.Tensor, got {type(total).__name__}")
    if total.ndim != 2 or total.shape[1] < 2:
        raise ValueError(
            f"total must be (prompts, k) with k >= 2 answers, got {tuple(total.shape)}"
        )
    k = total.shape[1]
    baseline = (total.sum(1, keepdim=True) - total) / (k - 1)  # (P, k) the others' mean
    return total - baseline


def value_loss(
    values: torch.Tensor,
    values_old: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor,
    clip: float | None = 0.2,
) -> torch.Tensor:
    """``0.5 (V_t - R_t)^2`` averaged over the response's tokens; with ``clip``, PPO2's pessimistic
    form ``0.5 max((V - R)^2, (V_old + clip(V - V_old, -c, c) - R)^2)``."""
    err = (values - returns) ** 2  # (B, T)
    if clip is not None:
        clipped = values_old + (values - values_old).clamp(-clip, clip)
        err = torch.maximum(err, (clipped - returns) ** 2)
    return 0.5 * (err * mask).sum() / mask.sum()


def ppo_loss(
    model: ActorCritic,
    tokens: torch.Tensor,
    prompt_len: int,
    mask: torch.Tensor,
    logp_old: torch.Tensor,
    values_old: torch.Tensor,
    advantages: torch.Tensor,
    returns: torch.Tensor,
    clip: float = 0.2,
    value_clip: float | None = 0.2,
    value_coef: float = 0.5,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The loss to minimise, ``-J_clip + value_coef * L_V``, and its two parts (policy, value)."""
    logp, values = model(tokens, prompt_len)  # (B, T), (B, T)
    obj = acc.ppo_clip_objective(logp, logp_old, advantages, clip)  # (B, T)
    policy_loss = -(obj * mask).sum() / mask.sum()
    v_loss = value_loss(values, values_old, returns, mask, value_clip)
    return policy_loss + value_coef * v_loss, policy_loss, v_loss
