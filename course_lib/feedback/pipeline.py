"""InstructGPT's three steps on a model trained from scratch in seconds (Chapter 10).

1. :func:`train_sft`: supervised fine-tuning on (prompt, response) pairs, the loss masked to the
   response (:func:`~course_lib.feedback.accelerated.masked_nll`); ``mask_prompt=False`` trains
   on the prompt's tokens too (a design choice that sometimes helps, Shi et al. 2024; on this
   task's random prompts it does not).
2. :func:`train_reward_model`: a GPT with a scalar head, started from the SFT weights as in
   InstructGPT, trained on comparisons with the pairwise loss.
3. :func:`train_rl`: PPO against the reward minus a per-token KL penalty to the frozen SFT
   policy (InstructGPT eq. 2). By default as InstructGPT runs it: per-token rewards, a value head
   on the policy's hidden states, GAE advantages, the clipped policy and value losses (the pieces
   are in :mod:`course_lib.feedback.ppo`); ``advantage="loo"`` uses instead the mean reward of the
   prompt's other samples as the baseline, with no value head. Optionally PPO-ptx.

Beside them, :func:`train_dpo`: direct preference optimisation on the same comparisons, with no
reward model and no sampling; and :func:`train_student` for distilling step by step. The policy
is Chapter 8's
:class:`~course_lib.gpt.model.GPT`; every run is seeded and takes seconds on two CPU cores.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import torch
from torch import nn

from course_lib.checks import check_choice, check_int, check_real
from course_lib.feedback import accelerated as acc
from course_lib.feedback.ppo import (
    ActorCritic,
    advantages_and_returns,
    loo_advantages,
    per_token_rewards,
    ppo_loss,
)
from course_lib.feedback.tasks import DIGIT_VOCAB, VOCAB, CharVocab, digit_example, judge
from course_lib.gpt.config import GPTConfig
from course_lib.gpt.model import GPT

__all__ = [
    "MAX_NEW",
    "accuracy",
    "answer_logprob",
    "encode_pairs",
    "implicit_reward_accuracy",
    "make_policy",
    "pair_accuracy",
    "responses_of",
    "right_answer_probability",
    "RewardModel",
    "DPOLog",
    "RLLog",
    "sample",
    "sampled_accuracy",
    "sequence_logprobs",
    "student_accuracy",
    "student_data",
    "train_dpo",
    "train_reward_model",
    "train_rl",
    "train_sft",
    "train_student",
]

F = TypeVar("F", bound=Callable[..., Any])


def one_thread(fn: F) -> F:
    """Run ``fn`` on one CPU thread, then restore the setting.

    The chapter's models are so small that splitting each matrix product over threads costs more
    than it saves, and on a busy machine it costs a lot more.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        before = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return fn(*args, **kwargs)
        finally:
            torch.set_num_threads(before)

    return wrapper  # type: ignore[return-value]


#: The longest response the policy may write (a right answer needs 5 tokens).
MAX_NEW = 8
PROMPT_LEN = 5


def make_policy(seed: int = 0, vocab: CharVocab = VOCAB, context: int = 16) -> GPT:
    """The chapter's tiny GPT: 2 layers, 2 heads, width 32 (about 26k parameters)."""
    cfg = GPTConfig(
        vocab_size=vocab.size, context_length=context, n_layers=2, n_heads=2, d_model=32
    )
    return GPT(cfg, seed=seed)


def encode_pairs(
    prompts: Sequence[str], responses: Sequence[str], vocab: CharVocab = VOCAB
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Tokens (B, L), next-token targets (B, L) and the response mask (B, L), right-padded with '.'.

    Position t predicts token t + 1; the mask is 1 where that target is a response token.
    """
    seqs = [vocab.encode(p + r) for p, r in zip(prompts, responses, strict=True)]
    n = max(len(s) for s in seqs)
    tokens = torch.zeros(len(seqs), n, dtype=torch.long)
    mask = torch.zeros(len(seqs), n)
    for i, (p, s) in enumerate(zip(prompts, seqs, strict=True)):
        tokens[i, : len(s)] = torch.tensor(s)
        mask[i, len(p) - 1 : len(s) - 1] = 1.0
    targets = torch.cat([tokens[:, 1:], torch.zeros_like(tokens[:, :1])], dim=1)
    return tokens, targets, mask


@one_thread
def train_sft(
    model: GPT,
    prompts: Sequence[str],
    responses: Sequence[str],
    steps: int = 300,
    batch: int = 64,
    lr: float = 3e-3,
    mask_prompt: bool = True,
    seed: int = 0,
    vocab: CharVocab = VOCAB,
    weights: Sequence[float] | None = None,
) -> list[float]:
    """Fine-tune ``model`` in place on the pairs; return the loss of every step.

    With ``mask_prompt=False`` every position after the first is a target, the prompt included.
    ``weights`` (one per pair) scale each example's tokens, for multi-task losses.
    """
    check_int(steps, "steps", low=0)
    tokens, targets, mask = encode_pairs(prompts, responses, vocab)
    if not mask_prompt:  # every real next token is a target, the prompt's included
        lengths = torch.tensor([len(p) + len(r) for p, r in zip(prompts, responses, strict=True)])
        mask = (torch.arange(tokens.shape[1]) < lengths[:, None] - 1).float()
    if weights is not None:
        mask = mask * torch.as_tensor(weights, dtype=torch.float32)[:, None]
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    losses = []
    for _ in range(steps):
        idx = torch.randint(len(tokens), (batch,), generator=g)
        loss = acc.masked_nll(model(tokens[idx]), targets[idx], mask[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


@one_thread
@torch.no_grad()
def sample(
    model: GPT,
    prompts: Sequence[str],
    seed: int = 0,
    greedy: bool = False,
    max_new: int = MAX_NEW,
    vocab: CharVocab = VOCAB,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Batched sampling (prompts of one length): (B, P + max_new) tokens and the response mask.

    The mask is 1 on every generated token up to and including the first '.', 0 after it.
    """
    g = torch.Generator().manual_seed(seed)
    x = torch.tensor([vocab.encode(p) for p in prompts])
    done = torch.zeros(len(prompts), dtype=torch.bool)
    mask = torch.zeros(len(prompts), max_new)
    for t in range(max_new):
        logits = model(x)[:, -1]
        if greedy:
            nxt = logits.argmax(-1)
        else:
            nxt = torch.multinomial(torch.softmax(logits.float(), -1), 1, generator=g)[:, 0]
        nxt = torch.where(done, torch.zeros_like(nxt), nxt)
        mask[:, t] = (~done).float()
        done = done | (nxt == 0)
        x = torch.cat([x, nxt[:, None]], dim=1)
    return x, mask


def responses_of(tokens: torch.Tensor, prompt_len: int, vocab: CharVocab = VOCAB) -> list[str]:
    """The generated text up to and including the first '.'."""
    out = []
    for row in tokens[:, prompt_len:].tolist():
        s = vocab.decode(row)
        out.append(s.split(".", 1)[0] + "." if "." in s else s)
    return out


@one_thread
def accuracy(model: GPT, words: Sequence[str], score: Callable[[str, str], float] = judge) -> float:
    """Mean score of the greedy responses (with :func:`judge`: the share exactly right)."""
    prompts = [w + "=" for w in words]
    tokens, _ = sample(model, prompts, greedy=True)
    return float(
        np.mean([score(w, r) for w, r in zip(words, responses_of(tokens, PROMPT_LEN), strict=True)])
    )


def sequence_logprobs(model: nn.Module, tokens: torch.Tensor, prompt_len: int) -> torch.Tensor:
    """log pi(y_t | x, y_<t) of every generated token, (B, T) for T = tokens.shape[1] - prompt_len."""
    logits = model(tokens[:, :-1])[:, prompt_len - 1 :]
    return acc.token_logprobs(logits, tokens[:, prompt_len:])


@one_thread
@torch.no_grad()
def answer_logprob(model: GPT, words: Sequence[str], answers: Sequence[str]) -> torch.Tensor:
    """log pi(answer | word + "=") of each pair, summed over the answer's tokens: (N,)."""
    tokens, targets, mask = encode_pairs([w + "=" for w in words], answers)  # (N, L) each
    return (acc.token_logprobs(model(tokens), targets) * mask).sum(-1)


def right_answer_probability(model: GPT, words: Sequence[str]) -> float:
    """The mean over ``words`` of pi(right answer | word): the exact expected share of sampled
    answers that are right (temperature 1), with no sampling noise.

    :func:`sample` stops at the first '.', and the right answer (the word reversed and '.') has
    5 tokens, so the probability that a sample is exactly right is the product of the 5 tokens'
    probabilities.
    """
    answers = [w[::-1] + "." for w in words]
    return float(answer_logprob(model, words, answers).exp().mean())


def implicit_reward_accuracy(
    model: GPT, reference: GPT, pairs: Sequence[tuple[str, str, str]]
) -> float:
    """The share of (word, chosen, rejected) comparisons that DPO's implicit reward
    beta log pi(y)/pi_ref(y) ranks right (chosen strictly higher; beta > 0 drops out).

    TRL logs this on its evaluation pairs as ``rewards/accuracies``.
    """
    words = [p[0] for p in pairs]
    ratio_w = answer_logprob(model, words, [p[1] for p in pairs]) - answer_logprob(
        reference, words, [p[1] for p in pairs]
    )  # (N,)
    ratio_l = answer_logprob(model, words, [p[2] for p in pairs]) - answer_logprob(
        reference, words, [p[2] for p in pairs]
    )  # (N,)
    return float((ratio_w > ratio_l).float().mean())


class RewardModel(nn.Module):
    """A GPT body and a linear head on the hidden state of the response's last token: r(x, y)."""

    def __init__(self, body: GPT) -> None:
        super().__init__()
        self.body = body
        self.head = nn.Linear(body.config.d_model, 1)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def forward(self, tokens: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
        h = self.body.hidden(tokens)  # (B, L, d)
        return self.head(h[torch.arange(len(tokens)), last]).squeeze(-1)  # (B,)

    def score(self, words: Sequence[str], responses: Sequence[str]) -> torch.Tensor:
        tokens, _, _ = encode_pairs([w + "=" for w in words], responses)
        last = torch.tensor([len(w) + len(r) for w, r in zip(words, responses, strict=True)])
        return self(tokens, last)


@one_thread
def train_reward_model(
    sft: GPT,
    pairs: Sequence[tuple[str, str, str]],
    steps: int = 300,
    batch: int = 64,
    lr: float = 1e-3,
    seed: int = 0,
) -> tuple[RewardModel, list[float]]:
    """A reward model started from a copy of the SFT model; the loss of every step."""
    rm = RewardModel(copy.deepcopy(sft))
    words = [p[0] for p in pairs]
    rw_tokens, _, _ = encode_pairs([w + "=" for w in words], [p[1] for p in pairs])
    rl_tokens, _, _ = encode_pairs([w + "=" for w in words], [p[2] for p in pairs])
    last_w = torch.tensor([len(p[0]) + len(p[1]) for p in pairs])
    last_l = torch.tensor([len(p[0]) + len(p[2]) for p in pairs])
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(rm.parameters(), lr=lr, weight_decay=0.0)
    losses = []
    for _ in range(steps):
        idx = torch.randint(len(pairs), (batch,), generator=g)
        loss = acc.pairwise_loss(rm(rw_tokens[idx], last_w[idx]), rm(rl_tokens[idx], last_l[idx]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return rm, losses


@one_thread
@torch.no_grad()
def pair_accuracy(rm: RewardModel, pairs: Sequence[tuple[str, str, str]]) -> float:
    """The share of comparisons where the reward model ranks the chosen response higher."""
    words = [p[0] for p in pairs]
    rw = rm.score(words, [p[1] for p in pairs])
    rl = rm.score(words, [p[2] for p in pairs])
    return float((rw > rl).float().mean())


@dataclass
class RLLog:
    """What :func:`train_rl` records at every iteration (means over the batch).

    ``value_loss`` (the mean over the iteration's gradient steps) stays empty with the
    leave-one-out baseline, which has no value head. ``p_right`` (filled when
    :func:`train_rl` gets ``eval_words``) is :func:`right_answer_probability` of the policy that
    sampled the iteration's batch, on those words.
    """

    reward: list[float] = field(default_factory=list)
    kl: list[float] = field(default_factory=list)
    accuracy: list[float] = field(default_factory=list)
    length: list[float] = field(default_factory=list)
    value_loss: list[float] = field(default_factory=list)
    p_right: list[float] = field(default_factory=list)


ADVANTAGES = ("gae", "loo")


@one_thread
def train_rl(
    policy: GPT,
    words: Sequence[str],
    reward_fn: Callable[[Sequence[str], Sequence[str]], np.ndarray],
    beta: float = 0.1,
    iterations: int = 40,
    prompts_per_batch: int = 16,
    samples_per_prompt: int = 4,
    epochs: int = 2,
    lr: float = 1e-3,
    clip: float = 0.2,
    seed: int = 0,
    ptx: tuple[Sequence[str], Sequence[str]] | None = None,
    ptx_coef: float = 0.0,
    advantage: str = "gae",
    gamma: float = 1.0,
    lam: float = 0.95,
    value_coef: float = 0.5,
    value_clip: float | None = 0.2,
    value_lr: float = 1e-2,
    eval_words: Sequence[str] | None = None,
) -> tuple[GPT, RLLog]:
    """PPO with a KL penalty to the starting policy; returns the trained copy and the log.

    Per iteration: sample ``samples_per_prompt`` responses to each of ``prompts_per_batch``
    prompts, score them with ``reward_fn(words, responses)``, compute the advantages, then take
    ``epochs`` gradient steps on the clipped objective.

    * ``advantage="gae"`` (InstructGPT's PPO): per-token rewards (``-beta`` times the k1 KL
      estimate at every token, the score at the last one, see
      :func:`~course_lib.feedback.ppo.per_token_rewards`), values from a linear head on the
      policy's hidden states (:class:`~course_lib.feedback.ppo.ActorCritic`, its head trained
      with learning rate ``value_lr``), GAE(``gamma``, ``lam``) advantages whitened over the
      batch, and the loss ``-J_clip + value_coef * L_V`` with the value loss clipped at
      ``value_clip`` (``None``: unclipped).
    * ``advantage="loo"``: no value head; one advantage per response, its total reward (score
      minus ``beta`` times the summed KL) minus the mean total of the prompt's other samples.

    With ``ptx=(prompts, responses)`` and ``ptx_coef > 0`` each step also adds ``ptx_coef``
    times the masked next-token loss on a batch of those pairs: InstructGPT's PPO-ptx mixes
    pre-training gradients in this way (here the SFT data stands in for the pre-training
    corpus). With ``eval_words``, every iteration also logs the exact probability of the right
    answer on them (``log.p_right``). Runs are deterministic: the same arguments give the same
    log.
    """
    check_real(beta, "beta", low=0.0)
    check_int(samples_per_prompt, "samples_per_prompt", low=2)
    check_choice(advantage, "advantage", ADVANTAGES)
    check_real(value_coef, "value_coef", low=0.0)
    check_real(value_lr, "value_lr", low=0.0, low_open=True)
    if value_clip is not None:
        check_real(value_clip, "value_clip", low=0.0, low_open=True)
    ref = copy.deepcopy(policy).eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    pi = copy.deepcopy(policy)
    ac = ActorCritic(pi)  # the value head is used only with advantage="gae"
    if advantage == "gae":
        opt = torch.optim.AdamW(
            [
                {"params": pi.parameters()},
                {"params": ac.value_head.parameters(), "lr": value_lr},
            ],
            lr=lr,
            weight_decay=0.0,
        )
    else:
        opt = torch.optim.AdamW(pi.parameters(), lr=lr, weight_decay=0.0)
    check_real(ptx_coef, "ptx_coef", low=0.0)
    if ptx is not None:
        ptx_tokens, ptx_targets, ptx_mask = encode_pairs(ptx[0], ptx[1])
    rng = np.random.default_rng(seed)
    log = RLLog()
    k = samples_per_prompt
    for it in range(iterations):
        batch_words = [
            words[int(i)] for i in rng.choice(len(words), prompts_per_batch, replace=False)
        ]
        ws = [w for w in batch_words for _ in range(k)]
        tokens, mask = sample(pi, [w + "=" for w in ws], seed=seed * 100_003 + it)
        resp = responses_of(tokens, PROMPT_LEN)
        if eval_words is not None:  # the policy that sampled this batch
            log.p_right.append(right_answer_probability(pi, eval_words))
        with torch.no_grad():
            if advantage == "gae":
                logp_old, values_old = ac(tokens, PROMPT_LEN)  # (B, T), (B, T)
            else:
                logp_old = sequence_logprobs(pi, tokens, PROMPT_LEN)  # (B, T)
            logp_ref = sequence_logprobs(ref, tokens, PROMPT_LEN)
            kl = (acc.kl_penalty(logp_old, logp_ref) * mask).sum(1)  # (B,)
            score = torch.as_tensor(np.asarray(reward_fn(ws, resp), dtype=np.float32))
            if advantage == "gae":
                rewards = per_token_rewards(score, logp_old, logp_ref, mask, beta)  # (B, T)
                adv, returns = advantages_and_returns(rewards, values_old, mask, gamma, lam)
            else:
                total = (score - beta * kl).view(-1, k)  # (prompts, k)
                adv = loo_advantages(total).reshape(-1, 1).expand_as(mask)  # (B, T)
        v_losses = []
        for _ in range(epochs):
            if advantage == "gae":
                batch = (tokens, PROMPT_LEN, mask, logp_old, values_old, adv, returns)
                loss, _, v_loss = ppo_loss(ac, *batch, clip, value_clip, value_coef)
                v_losses.append(float(v_loss.detach()))
            else:
                logp = sequence_logprobs(pi, tokens, PROMPT_LEN)
                obj = acc.ppo_clip_objective(logp, logp_old, adv, clip)
                loss = -(obj * mask).sum() / mask.sum()
            if ptx is not None and ptx_coef > 0:
                j = torch.as_tensor(rng.choice(len(ptx_tokens), len(ws)))
                lm = acc.masked_nll(pi(ptx_tokens[j]), ptx_targets[j], ptx_mask[j])
                loss = loss + ptx_coef * lm
            opt.zero_grad()
            loss.backward()
            opt.step()
        log.reward.append(float(score.mean()))
        log.kl.append(float(kl.mean()))
        log.accuracy.append(float(np.mean([judge(w, r) for w, r in zip(ws, resp, strict=True)])))
        log.length.append(float(mask.sum(1).mean()) - 1)
        if v_losses:
            log.value_loss.append(float(np.mean(v_losses)))
    return pi, log


def _response_logprob(
    model: nn.Module, tokens: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """log pi(y | x) summed over the response's tokens, (B,)."""
    return (acc.token_logprobs(model(tokens), targets) * mask).sum(-1)


@dataclass
class DPOLog:
    """What :func:`train_dpo` records at every step, as means over the step's batch of pairs.

    ``chosen`` and ``rejected`` are the log-ratios ``log pi(y) - log pi_ref(y)`` of the chosen and
    the rejected answers (summed over the answer's tokens), TRL's ``logps/chosen`` minus the
    reference's; ``beta`` times them are DPO's implicit rewards. Both start at 0.
    """

    loss: list[float] = field(default_factory=list)
    chosen: list[float] = field(default_factory=list)
    rejected: list[float] = field(default_factory=list)


@one_thread
def train_dpo(
    policy: GPT,
    pairs: Sequence[tuple[str, str, str]],
    beta: float = 0.1,
    steps: int = 100,
    batch: int = 64,
    lr: float = 1e-3,
    seed: int = 0,
) -> tuple[GPT, DPOLog]:
    """DPO from ``policy`` (also the frozen reference) on (word, chosen, rejected) comparisons.

    Returns the trained copy and the log of every step (loss, chosen and rejected log-ratios).
    """
    check_real(beta, "beta", low=0.0, low_open=True)
    check_int(steps, "steps", low=0)
    ref = copy.deepcopy(policy).eval()
    pi = copy.deepcopy(policy)
    prompts = [p[0] + "=" for p in pairs]
    cw = encode_pairs(prompts, [p[1] for p in pairs])
    cl = encode_pairs(prompts, [p[2] for p in pairs])
    with torch.no_grad():
        ref_w = _response_logprob(ref, *cw)
        ref_l = _response_logprob(ref, *cl)
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(pi.parameters(), lr=lr, weight_decay=0.0)
    log = DPOLog()
    for _ in range(steps):
        idx = torch.randint(len(pairs), (batch,), generator=g)
        lw = _response_logprob(pi, *(t[idx] for t in cw))  # (batch,)
        ll = _response_logprob(pi, *(t[idx] for t in cl))  # (batch,)
        loss = acc.dpo_loss(lw, ll, ref_w[idx], ref_l[idx], beta)
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.loss.append(float(loss.detach()))
        log.chosen.append(float((lw - ref_w[idx]).mean().detach()))
        log.rejected.append(float((ll - ref_l[idx]).mean().detach()))
    return pi, log


@one_thread
@torch.no_grad()
def sampled_accuracy(model: GPT, words: Sequence[str], seed: int = 0) -> float:
    """The share of right answers when the model samples (temperature 1) instead of taking the argmax."""
    tokens, _ = sample(model, [w + "=" for w in words], seed=seed)
    return float(
        np.mean([judge(w, r) for w, r in zip(words, responses_of(tokens, PROMPT_LEN), strict=True)])
    )


def student_data(
    numbers: Sequence[str], with_rationale: bool, rationale_weight: float = 1.0
) -> tuple[list[str], list[str], list[float]]:
    """Prompts, responses and loss weights for the digit-sum student (see :func:`train_student`).

    >>> student_data(["352"], with_rationale=True)
    (['352=', '352?'], ['0.', '3,8,0.'], [1.0, 1.0])
    """
    check_real(rationale_weight, "rationale_weight", low=0.0)
    prompts, responses, weights = [], [], []
    for s in numbers:
        label, why = digit_example(s)
        prompts.append(s + "=")
        responses.append(label + ".")
        weights.append(1.0)
        if with_rationale:
            prompts.append(s + "?")
            responses.append(why + ".")
            weights.append(float(rationale_weight))
    return prompts, responses, weights


def train_student(
    numbers: Sequence[str],
    with_rationale: bool,
    steps: int = 800,
    rationale_weight: float = 1.0,
    seed: int = 0,
) -> GPT:
    """A small GPT trained on the program teacher's labels, and with ``with_rationale`` its rationales.

    Label task: ``"352="`` -> ``"0."``; rationale task (Hsieh et al.'s task prefix is here the
    prompt's last character): ``"352?"`` -> ``"3,8,0."``. The loss is the masked next-token loss
    of both, ``L_label + rationale_weight * L_rationale`` (per token); at test time only the label
    task is asked.
    """
    prompts, responses, weights = student_data(numbers, with_rationale, rationale_weight)
    model = make_policy(seed, DIGIT_VOCAB, context=16)
    train_sft(model, prompts, responses, steps=steps, seed=seed, vocab=DIGIT_VOCAB, weights=weights)
    return model


@one_thread
@torch.no_grad()
def student_accuracy(model: GPT, numbers: Sequence[str]) -> float:
    """The share of digit strings (all of one length) whose greedy label is right."""
    prompts = [s + "=" for s in numbers]
    tokens, _ = sample(model, prompts, greedy=True, max_new=2, vocab=DIGIT_VOCAB)
    got = responses_of(tokens, len(prompts[0]), DIGIT_VOCAB)
    want = [digit_example(s)[0] + "." for s in numbers]
    return float(np.mean([g == w for g, w in zip(got, want, strict=True)]))
