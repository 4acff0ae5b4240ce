# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% tags=["remove-cell", "colab-setup"] jupyter={"source_hidden": true}
# Google Colab only (elsewhere this cell does nothing): install the course library, then fetch
# this chapter's data.
import os
import subprocess
import sys

if "google.colab" in sys.modules or os.environ.get("COURSE_COLAB") == "1":
    url = "git+https://github.com/transformers-course/transformers-course@main"
    spec = f"course-lib[course] @ {os.environ.get('COURSE_SOURCE', url)}"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", spec], check=True)
    import course_lib.colab

    course_lib.colab.setup("10_feedback_distillation")

# %% [markdown]
# # 10. Learning from human feedback and distillation
#
# A pre-trained language model continues text; it does not follow instructions. InstructGPT
# turned GPT-3 into an assistant in three steps: supervised fine-tuning on written answers, a
# reward model trained on people's rankings of answers, and reinforcement learning against that
# reward model with a leash (a KL penalty) that keeps the policy close to where it started. This
# chapter runs all three steps on a GPT you train yourself in seconds, on a task whose quality a
# program judges exactly, so that every "human" preference is reproducible. You will see the
# method work, and see it fail: a flawed reward is exploited as soon as the leash is removed.
#
# **After this chapter you can**
#
# - write the SFT loss masked to the response, and show what training on the prompt costs;
# - write the reward model's pairwise loss (Bradley-Terry) and check it by hand;
# - estimate the per-token KL to a reference policy and check the estimate against the exact KL;
# - write PPO's clipped objective and say when it equals the unclipped one;
# - spread InstructGPT's reward over the tokens, estimate advantages with GAE, and train a value
#   head beside the policy;
# - make reward hacking happen, and stop it with the KL penalty;
# - derive DPO's loss, train with it, and compare it with PPO over several seeds;
# - state the distillation loss with its T² factor, and train a student on a teacher's
#   rationales as well as its labels.
#
# **Assumes**: Chapter 8 (the GPT, its next-token loss, sampling); probabilities, logarithms
# and the sigmoid. No reinforcement learning background is needed.
# **Core path**: about 58 minutes; the optional sections add about 24 minutes.
#
# The chapter follows section 7 (InstructGPT) and section 10 (distilling step by step) of
# Strabel's notes {cite}`strabel2023transformers`, and the papers they cite: Ouyang et al.,
# *Training language models to follow instructions with human feedback* (2022), and Hsieh et
# al., *Distilling step-by-step!* (2023); for the algorithms, Schulman et al. (PPO, 2017; GAE,
# 2016), Rafailov et al. (DPO, 2023) and Hinton et al. {cite}`hinton2015distilling`.

# %%
import copy
import math

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F

from course_lib import seed_everything
from course_lib.checker import check_prediction
from course_lib.feedback import accelerated as acc
from course_lib.feedback import exercises as check
from course_lib.feedback import pipeline as P
from course_lib.feedback import ppo as PPO
from course_lib.feedback import reference as ref
from course_lib.feedback import study
from course_lib.feedback import tasks as T
from course_lib.plotting import new_axes, use_style

rng = seed_everything(0)
use_style()

# %% [markdown]
# ## 10.1 Three steps, and a task a program can judge (core, 7 min)
#
# Strabel's notes summarise InstructGPT in three steps: (1) fine-tune GPT-3 on prompts with
# answers written by people (SFT); (2) sample several answers per prompt, let people rank them,
# and train a reward model (RM) on the rankings; (3) improve the SFT model by reinforcement
# learning (PPO) against the reward model.
#
# People are expensive and not reproducible, so our "labeller" is a program. The task: reverse
# a four-letter word over the letters `a` to `f`. The prompt is the word and `=`, the right
# response the reversed word and a full stop. `judge` says whether a response is exactly right;
# `grade` gives partial credit, which is how our labeller ranks wrong answers.

# %%
words = T.reverse_words()  # all 6^4 = 1296 words, in a seeded order
sft_words, rm_words, test_words = words[:300], words[300:600], words[1000:1200]
print(words[:4], "->", [w[::-1] + "." for w in words[:4]])
for response in ["dcba.", "dcbf.", "dcb.", "abcd.", "dcbaa."]:
    print(
        f"{response:7} judge={T.judge('abcd', response)!s:5} grade={T.grade('abcd', response):.2f}"
    )

# %% [markdown]
# The policy is Chapter 8's GPT, tiny: two layers, two heads, width 32, a vocabulary of the
# eight characters `.=abcdef`.

# %%
policy = P.make_policy(seed=0)
print(policy.config.vocab_size, "tokens,", policy.count_parameters(), "parameters")

# %% [markdown]
# ## 10.2 Supervised fine-tuning, with the loss on the response only (core, 10 min)
#
# SFT is ordinary next-token training on the concatenation prompt + response, with one change:
# only the response's tokens count. With a mask $m_t$ that is 1 where the target $y_t$ belongs to
# the response,
#
# $$\mathcal{L}_\text{SFT} = -\frac{\sum_t m_t \log \pi(y_t \mid y_{<t})}{\sum_t m_t}.$$
#
# Here it is, on the page:


# %%
def masked_nll(logits, targets, mask):
    # logits (B, L, V), targets (B, L) integer ids, mask (B, L) of 0/1
    logp = torch.log_softmax(logits, dim=-1)  # (B, L, V)
    logp_target = logp.gather(-1, targets[..., None])[..., 0]  # (B, L)
    return -(logp_target * mask).sum() / mask.sum()  # one number


tokens, targets, mask = P.encode_pairs(["abcd=", "fcea="], ["dcba.", "aecf."])
print(T.VOCAB.decode(tokens[0].tolist()), mask[0].tolist())  # targets 4..8 are the response
logits = torch.randn(
    2,
    tokens.shape[1],
    T.VOCAB.size,
    dtype=torch.float64,
    generator=torch.Generator().manual_seed(0),
)
ours = masked_nll(logits, targets, mask)
torch.testing.assert_close(ours, acc.masked_nll(logits, targets, mask))
np.testing.assert_allclose(float(ours), ref.masked_nll(logits, targets, mask), rtol=1e-12)

# %% [markdown]
# Position $t$ predicts token $t+1$, so the mask is 1 from the `=` (which predicts the first
# letter of the answer) to the last letter (which predicts the full stop). Sixty steps of SFT on
# 300 words:

# %%
sft_losses = P.train_sft(
    policy, [w + "=" for w in sft_words], [w[::-1] + "." for w in sft_words], steps=60
)
sft_accuracy = P.accuracy(policy, test_words)
print(
    f"SFT loss {sft_losses[0]:.2f} -> {sft_losses[-1]:.2f}; greedy accuracy on unseen words {sft_accuracy:.2f}"
)
assert sft_accuracy > 0.8

# %% [markdown]
# The common bug is to train on every token, the prompt included. The prompt's letters are
# random, so the best the model can do there is a loss of $\log 6 \approx 1.79$ per letter: most
# of the gradient goes into an impossible task, and in the same sixty steps the model learns
# far less.

# %%
buggy = P.make_policy(seed=0)
bug_losses = P.train_sft(
    buggy,
    [w + "=" for w in sft_words],
    [w[::-1] + "." for w in sft_words],
    steps=60,
    mask_prompt=False,
)
bug_accuracy = P.accuracy(buggy, test_words)
print(
    f"unmasked: loss {bug_losses[-1]:.2f} (floor 3/9 log 6 = {3 / 9 * math.log(6):.2f}), accuracy {bug_accuracy:.2f}"
)
assert bug_accuracy < sft_accuracy

# %% [markdown]
# A second form of the same bug: PyTorch's `cross_entropy` skips the targets equal to
# `ignore_index` (-100 by default). Setting the prompt's labels to the padding id (here 0, the
# full stop) instead of -100 does not mask them; it trains the model to answer "." everywhere in
# the prompt.

# %%
labels = torch.where(mask.bool(), targets, torch.full_like(targets, -100))
right = F.cross_entropy(logits.reshape(-1, T.VOCAB.size), labels.reshape(-1))
wrong = F.cross_entropy(
    logits.reshape(-1, T.VOCAB.size), torch.where(mask.bool(), targets, 0).reshape(-1)
)
torch.testing.assert_close(right, ours)
assert not torch.isclose(wrong, ours)
print(
    f"ignore_index=-100: {float(right):.3f} (our masked loss), labels set to 0: {float(wrong):.3f}"
)

# %% [markdown]
# ## 10.3 The reward model and its pairwise loss (core, 10 min)
#
# The labeller sees $K$ answers to one prompt and ranks them; every ranking gives
# $\binom{K}{2}$ comparisons "$y_w$ is better than $y_l$". The reward model $r(x, y)$ (in
# InstructGPT a GPT with a scalar head) is trained so that the Bradley-Terry probability
# $\sigma(r(x, y_w) - r(x, y_l))$ of each observed preference is high (Ouyang et al., eq. 1):
#
# $$\mathcal{L}_\text{RM} = -\,\mathbb{E}_{(x, y_w, y_l)} \log \sigma\big(r(x, y_w) - r(x, y_l)\big).$$


# %%
def pairwise_loss(r_chosen, r_rejected):
    # r_chosen, r_rejected (N,) rewards of the two answers of N comparisons
    # softplus(-d) = log(1 + e^-d) = -log sigmoid(d), with no overflow
    return F.softplus(-(r_chosen - r_rejected)).mean()  # one number


r_w, r_l = torch.tensor([1.0, 0.5, -2.0]), torch.tensor([0.0, 1.5, -2.0])
by_hand = (math.log(1 + math.exp(-1)) + math.log(1 + math.exp(1)) + math.log(2)) / 3
print(f"{float(pairwise_loss(r_w, r_l)):.6f} by hand {by_hand:.6f}")
torch.testing.assert_close(pairwise_loss(r_w, r_l), acc.pairwise_loss(r_w, r_l))
np.testing.assert_allclose(float(pairwise_loss(r_w, r_l)), ref.pairwise_loss(r_w, r_l), rtol=1e-6)
np.testing.assert_allclose(float(pairwise_loss(r_w, r_l)), by_hand, rtol=1e-6)

# %% [markdown]
# Our comparisons: for each prompt, the right answer and $K-1 = 3$ wrong ones of the kinds a weak
# model makes (copied, two letters swapped, a wrong letter, too short, too long), ranked by
# `grade`; pairs with equal grades are dropped. (InstructGPT ranks samples of its own models; we
# use made-up wrong answers so that the data does not depend on a training run.)

# %%
train_pairs = T.preference_pairs(rm_words, k=4, seed=1)
held_out_pairs = T.preference_pairs(test_words, k=4, seed=2)
print(len(train_pairs), "training comparisons, for example", train_pairs[:3])

# %% [markdown]
# The reward model starts, as in InstructGPT, from the SFT model: its body is a copy of the
# policy and a linear head reads the hidden state of the response's last token.

# %%
reward_model, rm_losses = P.train_reward_model(policy, train_pairs, steps=200, lr=1e-3)
rm_accuracy = P.pair_accuracy(reward_model, held_out_pairs)
print(f"RM loss {rm_losses[0]:.3f} (log 2 = {math.log(2):.3f}) -> {np.mean(rm_losses[-10:]):.1f}")
print(f"held-out comparisons ranked right: {rm_accuracy:.2f}")
assert rm_accuracy > 0.6

# %% [markdown]
# The loss starts at exactly $\log 2$: the head starts at zero, so every comparison is a coin
# toss. The held-out accuracy is good, not perfect, like a real reward model's (InstructGPT's
# agreed with held-out labellers about 72% of the time). A policy trained hard against an
# imperfect reward model finds its mistakes; section 10.5 makes that visible, and the rest of
# this section's RL uses the exact judge as the reward, so that what we measure is the algorithm.

# %% [markdown]
# ## 10.4 Reinforcement learning with a KL penalty: PPO as InstructGPT runs it (core, 18 min)
#
# The policy $\pi$ samples a response $y$ to a prompt $x$ and gets the reward minus a penalty for
# moving away from the SFT model $\pi^\text{SFT}$ (Ouyang et al., eq. 2):
#
# $$R(x, y) = r(x, y) - \beta \sum_t \log\frac{\pi(y_t \mid x, y_{<t})}{\pi^\text{SFT}(y_t \mid x, y_{<t})}.$$
#
# The sum is a one-sample estimate of $\mathrm{KL}(\pi \,\|\, \pi^\text{SFT})$: per token, the
# log-ratio at the sampled token ("k1"). A second estimator, $e^u - 1 - u$ with
# $u = \log \pi^\text{SFT} - \log \pi$ ("k3"), is never negative. Averaged under the policy, both
# equal the exact KL; on a vocabulary of five tokens we can check that by summing over every token.


# %%
def kl_penalty(logp, logp_ref, kind="k1"):
    # logp, logp_ref (..., T): log-probabilities of the sampled tokens under pi and pi_ref
    u = logp_ref - logp
    return -u if kind == "k1" else torch.expm1(u) - u  # (..., T)


g = torch.Generator().manual_seed(1)
# pi over 5 tokens, then pi_ref
logp = torch.log_softmax(2 * torch.randn(5, generator=g, dtype=torch.float64), -1)
logq = torch.log_softmax(2 * torch.randn(5, generator=g, dtype=torch.float64), -1)
exact = float((logp.exp() * (logp - logq)).sum())
for kind in ("k1", "k3"):
    averaged = float((logp.exp() * kl_penalty(logp, logq, kind)).sum())  # E_{y ~ pi}[estimate]
    print(f"{kind}: averaged {averaged:.6f}, exact KL {exact:.6f}")
    np.testing.assert_allclose(averaged, exact, rtol=1e-10)
    torch.testing.assert_close(kl_penalty(logp, logq, kind), acc.kl_penalty(logp, logq, kind))
    np.testing.assert_allclose(
        kl_penalty(logp, logq, kind).numpy(), ref.kl_penalty(logp, logq, kind)
    )

# %% [markdown]
# PPO then maximises a clipped surrogate. With $\rho_t = \pi(y_t)/\pi_\text{old}(y_t)$, the ratio of
# the policy being trained to the one that sampled, and an advantage $A_t$ (how much better than
# expected the sample was),
#
# $$J = \mathbb{E}_t\big[\min\big(\rho_t A_t,\ \operatorname{clip}(\rho_t, 1-\epsilon, 1+\epsilon)\, A_t\big)\big].$$
#
# Inside $[1-\epsilon, 1+\epsilon]$ it is the plain policy-gradient surrogate; outside, the
# gradient stops pushing the ratio further, so several gradient steps on one batch stay safe.


# %%
def ppo_clip_objective(logp_new, logp_old, advantages, clip=0.2):
    # all (..., T): log-probabilities of the sampled tokens, and their advantages
    rho = torch.exp(logp_new - logp_old)  # (..., T)
    return torch.minimum(rho * advantages, torch.clamp(rho, 1 - clip, 1 + clip) * advantages)


logp_old = torch.log(torch.full((5,), 0.5, dtype=torch.float64))
logp_new = torch.log(torch.tensor([0.3, 0.45, 0.5, 0.55, 0.8], dtype=torch.float64))
adv = torch.tensor([1.0, 1.0, -1.0, 1.0, 1.0], dtype=torch.float64)
print(ppo_clip_objective(logp_new, logp_old, adv).numpy().round(3))
torch.testing.assert_close(
    ppo_clip_objective(logp_new, logp_old, adv), acc.ppo_clip_objective(logp_new, logp_old, adv)
)
np.testing.assert_allclose(
    ppo_clip_objective(logp_new, logp_old, adv).numpy(),
    ref.ppo_clip_objective(logp_new, logp_old, adv),
)
inside = slice(1, 4)  # ratios 0.9, 1.0, 1.1
torch.testing.assert_close(
    ppo_clip_objective(logp_new, logp_old, adv)[inside],
    (torch.exp(logp_new - logp_old) * adv)[inside],
)

# %% [markdown]
# **Per-token rewards and a value head.** Eq. 2 gives one number per answer, but PPO updates
# the policy token by token, so InstructGPT's implementation spreads the reward over the tokens:
# every token pays its share of the KL penalty, and the reward model's score arrives once, at
# the answer's last token,
#
# $$r_t = -\beta \log\frac{\pi(y_t \mid x, y_{<t})}{\pi^\text{SFT}(y_t \mid x, y_{<t})} + [t = T]\; r(x, y).$$
#
# Summed over $t$, these are eq. 2 again.


# %%
def per_token_rewards(score, logp, logp_ref, mask, beta):
    # score (B,); logp, logp_ref, mask (B, T): the sampled tokens and which belong to the answer
    rewards = -beta * (logp - logp_ref) * mask  # (B, T) the KL leash, at every token
    last = mask.sum(-1).long() - 1  # (B,) where each answer ends (its full stop)
    rewards[torch.arange(len(score)), last] += score  # r(x, y), once, at the end
    return rewards  # (B, T)


g = torch.Generator().manual_seed(2)
toy_logp, toy_ref = -torch.rand(2, 4, generator=g), -torch.rand(2, 4, generator=g)
toy_mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
toy_score = torch.tensor([1.0, 0.0])
toy_rewards = per_token_rewards(toy_score, toy_logp, toy_ref, toy_mask, beta=0.1)
print(toy_rewards.numpy().round(3) + 0.0)  # + 0.0 turns -0.0 into 0.0
torch.testing.assert_close(
    toy_rewards, PPO.per_token_rewards(toy_score, toy_logp, toy_ref, toy_mask, beta=0.1)
)
eq2 = toy_score - 0.1 * ((toy_logp - toy_ref) * toy_mask).sum(1)  # eq. 2, one number per answer
torch.testing.assert_close(toy_rewards.sum(1), eq2)

# %% [markdown]
# The first answer has three tokens, so its fourth reward is zero and the score 1 lands on its
# third token. To know which tokens deserve credit, PPO learns a **value** $V_t$: the return
# (sum of rewards) to expect from token $t$ on. Ours is a linear layer on the policy's final
# hidden states (`PPO.ActorCritic`), so one forward pass gives both $\log\pi(y_t)$ and $V_t$;
# InstructGPT uses a separate value model started from the reward model. The **advantage**
# $A_t$ says how much better than expected things went after token $t$. Generalised advantage
# estimation (GAE, Schulman et al. 2016) mixes the one-step TD errors
# $\delta_t = r_t + \gamma V_{t+1} - V_t$ as $A_t = \sum_k (\gamma\lambda)^k \delta_{t+k}$:
# $\lambda = 0$ trusts the value function (low variance, biased), $\lambda = 1$ uses the whole
# return (unbiased, noisy).

# %%
r, v = np.array([0.0, 0.0, 1.0]), np.array([0.2, 0.4, 0.6])  # reward only at the end, as in RLHF
td_errors = r + np.append(v[1:], 0) - v
np.testing.assert_allclose(ref.gae(r, v, gamma=1.0, lam=0.0), td_errors)
np.testing.assert_allclose(ref.gae(r, v, gamma=1.0, lam=1.0), 1.0 - v)  # return minus value
print(ref.gae(r, v, gamma=1.0, lam=0.5))

# %% [markdown]
# The value head learns the returns $R_t = A_t + V_t$ with a squared error, clipped like the
# policy (a new value more than $\epsilon$ from the old one gains nothing; PPO2's form). The
# loss of one gradient step is minus the clipped surrogate plus $c_V$ times the value loss; the
# advantages are whitened over the batch (mean 0, standard deviation 1), a common PPO habit
# that puts every batch on one scale. Here is the whole step, on the page:


# %%
def ppo_loss(model, tokens, mask, logp_old, values_old, advantages, returns, clip=0.2, c_v=0.5):
    logp, values = model(tokens, P.PROMPT_LEN)  # (B, T), (B, T)
    surrogate = ppo_clip_objective(logp, logp_old, advantages, clip)  # (B, T)
    policy_loss = -(surrogate * mask).sum() / mask.sum()
    values_clipped = values_old + (values - values_old).clamp(-clip, clip)  # (B, T)
    err = torch.maximum((values - returns) ** 2, (values_clipped - returns) ** 2)  # (B, T)
    value_loss = 0.5 * (err * mask).sum() / mask.sum()
    return policy_loss + c_v * value_loss


def exact_reward(ws, responses):
    return np.array([float(T.judge(w, r)) for w, r in zip(ws, responses, strict=True)])


# one iteration's data, as train_rl collects it: 4 samples for each of 16 prompts
ac = PPO.ActorCritic(copy.deepcopy(policy))  # the SFT policy, with a value head at zero
prompt_words = [w for w in sft_words[:16] for _ in range(4)]
tokens, mask = P.sample(ac.policy, [w + "=" for w in prompt_words], seed=0)  # (64, 13), (64, 8)
with torch.no_grad():
    logp_old, values_old = ac(tokens, P.PROMPT_LEN)  # (64, 8), (64, 8)
    logp_ref = P.sequence_logprobs(policy, tokens, P.PROMPT_LEN)  # the frozen SFT model
    score = torch.tensor(exact_reward(prompt_words, P.responses_of(tokens, P.PROMPT_LEN)))
    rewards = per_token_rewards(score.float(), logp_old, logp_ref, mask, beta=0.05)  # (64, 8)
    advantages, returns = PPO.advantages_and_returns(rewards, values_old, mask, gamma=1.0, lam=0.95)
loss = ppo_loss(ac, tokens, mask, logp_old, values_old, advantages, returns)
batch = (tokens, P.PROMPT_LEN, mask, logp_old, values_old, advantages, returns)
torch.testing.assert_close(loss, PPO.ppo_loss(ac, *batch)[0])
loss.backward()
print(
    f"loss {float(loss.detach()):.3f}; value head gradient norm {float(ac.value_head.weight.grad.norm()):.3f}"
)
assert float(ac.value_head.weight.grad.norm()) > 0

# %% [markdown]
# At the start the values are all zero, so the returns are just the rewards to go, and the value
# head's gradient is not zero: it starts learning at once. Together this is InstructGPT's
# objective (Ouyang et al., eq. 2), with the PPO-ptx term that section 10.5 switches on:
#
# $$\text{objective}(\phi) = \mathbb{E}_{(x, y) \sim \pi_\phi}\Big[r(x, y) - \beta \log\frac{\pi_\phi(y \mid x)}{\pi^\text{SFT}(y \mid x)}\Big] + \gamma_\text{ptx}\, \mathbb{E}_{x \sim D_\text{pretrain}}\big[\log \pi_\phi(x)\big].$$
#
# `P.train_rl` repeats the iteration above: sample, score, per-token rewards, GAE, then two
# gradient steps on the clipped loss (`advantage="gae"`, the default). Its other option,
# `advantage="loo"`, skips the value head: each answer's advantage is its total reward minus
# the mean of the other three answers to the same prompt. The reward here is the exact judge,
# so the reward is also the share of sampled answers that are right.

# %%
rl_policy, rl_log = P.train_rl(policy, sft_words + rm_words, exact_reward, beta=0.05, iterations=40)
print(
    f"share of sampled answers right: {np.mean(rl_log.reward[:5]):.2f} -> {np.mean(rl_log.reward[-5:]):.2f}"
)
print(f"KL to the SFT model (nats per answer), last 5 iterations: {np.mean(rl_log.kl[-5:]):.2f}")
print(f"value loss {np.mean(rl_log.value_loss[:5]):.2f} -> {np.mean(rl_log.value_loss[-5:]):.2f}")
assert np.mean(rl_log.reward[-5:]) > np.mean(rl_log.reward[:5]) and np.mean(rl_log.kl[-5:]) < 1.0
assert np.mean(rl_log.value_loss[-5:]) < np.mean(rl_log.value_loss[:5])

# %%
fig, axes = plt.subplots(1, 3, figsize=(12, 3.2))
curves = [
    ("reward = share right", rl_log.reward),
    ("KL to the SFT model (nats)", rl_log.kl),
    ("value loss", rl_log.value_loss),
]
for ax, (name, values) in zip(axes, curves, strict=True):
    ax.plot(values)
    ax.set(title=name, xlabel="iteration", ylabel="mean over the batch")
fig.suptitle("PPO with GAE against the exact judge (beta = 0.05)")
fig.tight_layout()
plt.show()

# %% [markdown]
# The SFT model is right on every unseen word when it answers greedily, but when it *samples*
# it is right only about half the time: RL sharpens the distribution toward what the judge
# rewards, and the KL it pays for that stays small. The value loss falls as the head learns
# which answers tend to be right.

# %% [markdown]
# ## 10.5 Reward hacking, and the KL leash (core, 8 min)
#
# A reward model is a model: it has flaws, and a policy optimised against it finds them. Our
# proxy `flawed_reward` has two, of a kind real reward models show (they often prefer longer
# answers): it checks only the first four letters, and it adds 0.1 per letter. Type your own
# responses into the widget to see how the three scorers disagree.

# %%
from course_lib.feedback.widget import reward_explorer  # noqa: E402

reward_explorer("abcd", "dcbaeee")

# %% [markdown]
# Without the KL penalty ($\beta = 0$) the policy learns to keep writing instead of stopping: the
# proxy reward goes up, the true accuracy goes to zero. With $\beta = 0.2$ each extra letter
# costs more in KL (the SFT model is nearly sure the answer stops there) than the 0.1 it earns.
# InstructGPT's PPO-ptx adds a second anchor: each update also takes a gradient step on the
# next-token loss of the pre-training data (here the SFT data stands in for it), which on this
# task holds the policy too, even at $\beta = 0$.


# %%
# NBVAL_IGNORE_OUTPUT
def proxy_reward(ws, responses):
    return np.array([T.flawed_reward(w, r) for w, r in zip(ws, responses, strict=True)])


hack = {
    beta: P.train_rl(policy, sft_words + rm_words, proxy_reward, beta=beta, iterations=30)[1]
    for beta in (0.0, 0.2)
}
sft_data = ([w + "=" for w in sft_words], [w[::-1] + "." for w in sft_words])
ptx_log = P.train_rl(
    policy, sft_words + rm_words, proxy_reward, beta=0.0, iterations=30, ptx=sft_data, ptx_coef=1.0
)[1]
for beta, log in hack.items():
    print(
        f"beta={beta}: proxy reward {np.mean(log.reward[-5:]):.2f}, length {np.mean(log.length[-5:]):.1f}, "
        f"truly right {np.mean(log.accuracy[-5:]):.2f}, KL {np.mean(log.kl[-5:]):.1f}"
    )
assert np.mean(hack[0.0].accuracy[-5:]) < 0.2 < np.mean(hack[0.2].accuracy[-5:])
print(
    f"beta=0.0 with PPO-ptx: length {np.mean(ptx_log.length[-5:]):.1f}, truly right {np.mean(ptx_log.accuracy[-5:]):.2f}"
)
assert np.mean(ptx_log.accuracy[-5:]) > 0.5

# %%
fig, axes = plt.subplots(1, 3, figsize=(12, 3.2))
runs = {**{f"beta = {b}": log for b, log in hack.items()}, "beta = 0, with PPO-ptx": ptx_log}
for ax, (name, field) in zip(
    axes,
    [("proxy reward", "reward"), ("KL to the SFT model (nats)", "kl"), ("truly right", "accuracy")],
    strict=True,
):
    for label, log in runs.items():
        ax.plot(getattr(log, field), label=label)
    ax.set(title=name, xlabel="iteration", ylabel="mean over the batch")
axes[2].legend(loc="lower left")
fig.suptitle("Reward hacking: a length-loving proxy")
fig.tight_layout()
plt.show()

# %% [markdown]
# The same happens with the learned reward model of section 10.3: trained long enough against
# it, a policy finds answers it scores highly that the judge calls wrong (try it:
# `P.train_rl(policy, words, lambda ws, rs: reward_model.score(ws, rs).detach().numpy())`).
# In InstructGPT the pre-training mix serves mainly to keep the model's general abilities (the
# paper's "alignment tax" on public NLP benchmarks); the KL term is what limits exploitation.

# %% [markdown]
# ## 10.6 DPO, and PPO against DPO over seeds (optional, 12 min)
#
# **Direct preference optimisation.** The KL-regularised objective
# $\max_\pi \mathbb{E}[r(x,y)] - \beta\,\mathrm{KL}(\pi \| \pi_\text{ref})$ has the closed-form
# optimum $\pi^*(y|x) \propto \pi_\text{ref}(y|x)\, e^{r(x,y)/\beta}$. Solving for the reward,
# $r(x, y) = \beta \log \frac{\pi^*(y|x)}{\pi_\text{ref}(y|x)} + \beta \log Z(x)$; the partition
# function $Z(x)$ cancels in a difference of two answers to the same prompt, so the reward
# model's pairwise loss can be written directly in terms of the policy (Rafailov et al. 2023):
#
# $$\mathcal{L}_\text{DPO} = -\log\sigma\Big(\beta\log\frac{\pi(y_w)}{\pi_\text{ref}(y_w)} - \beta\log\frac{\pi(y_l)}{\pi_\text{ref}(y_l)}\Big).$$

# %%
lp_w, lp_l, ref_w, ref_l = (
    np.array([-3.0, -5.0]),
    np.array([-4.0, -4.5]),
    np.array([-3.5, -5.0]),
    np.array([-3.5, -4.0]),
)
beta = 0.5
# the reward model's loss, with the implicit reward beta log(pi / pi_ref)
implicit = ref.pairwise_loss(beta * (lp_w - ref_w), beta * (lp_l - ref_l))
np.testing.assert_allclose(ref.dpo_loss(lp_w, lp_l, ref_w, ref_l, beta), implicit)
print(f"DPO loss {float(ref.dpo_loss(lp_w, lp_l, ref_w, ref_l, beta)):.4f}")

# %% [markdown]
# DPO needs no reward model and no sampling: it trains the policy directly on the comparisons
# of section 10.3, with the SFT model as the frozen reference. We compare it with the PPO run of
# section 10.4 (PPO with GAE) on the unseen words, by the share of *sampled* answers that are
# right (greedy answers were already all right after SFT).

# %%
dpo_policy, dpo_losses = P.train_dpo(policy, train_pairs, beta=0.1, steps=60)
compare = {
    "SFT": P.sampled_accuracy(policy, test_words),
    "PPO, 40 iterations": P.sampled_accuracy(rl_policy, test_words),
    "DPO, 60 steps": P.sampled_accuracy(dpo_policy, test_words),
}
for name, value in compare.items():
    print(f"{name:20} sampled answers right on unseen words: {value:.2f}")
print(f"DPO loss {dpo_losses[0]:.3f} -> {np.mean(dpo_losses[-5:]):.3f}")
assert compare["DPO, 60 steps"] > compare["SFT"] and compare["PPO, 40 iterations"] > compare["SFT"]

# %% [markdown]
# Both improve on SFT. One run of each says little, though: how much does the result depend on
# the seed? `study.seed_study` trains each method three times from the same SFT model, changing
# only the method's own randomness (PPO's prompts and samples, DPO's batches), and measures on
# the unseen words the sampled and greedy accuracy and the KL to the SFT model (estimated, like
# the penalty, on the policy's own samples). Three seeds of three methods take about half a minute.

# %%
# NBVAL_IGNORE_OUTPUT
rows = study.seed_study(policy, sft_words + rm_words, train_pairs, test_words, seeds=(0, 1, 2))
summary = study.summarise(rows)
print(f"{'':20} {'sampled right':>15} {'min-max':>11} {'lowest greedy':>14} {'KL':>6}")
for s in summary:
    print(
        f"{s['method']:20} {s['accuracy_mean']:9.2f} ± {s['accuracy_std']:.2f} "
        f"{s['accuracy_min']:5.2f}-{s['accuracy_max']:.2f} {s['greedy_min']:14.2f} {s['kl_mean']:6.2f}"
    )
by_method = {s["method"]: s for s in summary}
assert by_method["PPO (GAE)"]["accuracy_min"] > compare["SFT"] + 0.2
assert by_method["PPO (GAE)"]["accuracy_mean"] > by_method["DPO"]["accuracy_mean"] + 0.05

# %% [markdown]
# (± is the standard deviation over the three seeds. The exact numbers depend on the CPU's
# kernels; the pattern held on the machines we tried.) In our runs both PPO variants ended
# within a few points of each other on every seed, at a KL of about 0.3 nats: with four samples
# per prompt the leave-one-out baseline is already good, and the value head earns its keep when
# there is one sample per prompt, or long answers where credit must be assigned token by token.
# DPO was less stable: two seeds gained about 25 points, and one barely moved while its KL to the
# SFT model grew several times larger and even its greedy answers got worse. Its loss fell all
# the same: DPO's loss rewards a larger *gap* between chosen and rejected log-probabilities, and
# the gap can grow by pushing both down, moving probability to answers that are in neither set.
# PPO cannot be fooled this way, because it scores the policy's own samples.
#
# The costs differ in kind. A PPO iteration runs 8 sampling passes of the policy, one scoring
# pass of the policy and of the reference, and two gradient steps, and needs a reward for every
# sample; a DPO step is one gradient step on 64 fixed comparisons. `benchmarks/feedback.py` times
# both (`python -m benchmarks.run feedback`); on our machine a PPO iteration took about as long
# as two DPO steps (0.04 s against 0.02 s on one CPU thread), and the value head added under a
# tenth to the iteration. DPO can only learn from the comparisons it is given, while PPO
# explores, which is also how it finds a reward model's flaws.

# %% [markdown]
# ## 10.7 Distillation: soft targets, and distilling step by step (optional, 12 min)
#
# Hinton et al. train a small student on a large teacher's output distribution softened by a
# temperature $T$, with the loss $T^2\,\mathrm{KL}(\mathrm{softmax}(z_t/T)\,\|\,\mathrm{softmax}(z_s/T))$.
# The gradient of the KL with respect to the student's logits is $(q - p)/T$, and for large $T$,
# $q - p \approx (z_s - z_t)/(VT)$ (logits centred): the gradient shrinks like $1/T^2$, and the
# factor $T^2$ undoes that.

# %%
zt = torch.tensor([2.0, 0.5, -1.0, 0.0], dtype=torch.float64)
zs = torch.tensor([0.5, 0.5, 0.0, -1.0], dtype=torch.float64, requires_grad=True)
for temperature in (1.0, 10.0, 100.0):
    zs.grad = None
    acc.distillation_loss(zs[None], zt[None], temperature).backward()
    print(f"T={temperature:5}: gradient {zs.grad.numpy().round(3)}")
d = (zs - zt).detach()
np.testing.assert_allclose(zs.grad.numpy(), ((d - d.mean()) / 4).numpy(), atol=1e-2)

# %% [markdown]
# Distilling step by step (Hsieh et al. 2023, the figure in section 10 of Strabel's notes) asks
# the teacher, a large model prompted with chain-of-thought examples, for a label *and* a
# rationale, and trains the student on both as two tasks told apart by a prefix:
# $\mathcal{L} = \mathcal{L}_\text{label} + \lambda\,\mathcal{L}_\text{rationale}$, each a masked
# next-token loss like section 10.2's. At test time only the label is asked for, so the rationale
# costs nothing at inference. Our teacher is a program, our task the sum of three digits modulo
# 10, and the rationale the running sums:

# %%
label, rationale = T.digit_example("352")
print(f"label task:     '352=' -> '{label}.'")
print(f"rationale task: '352?' -> '{rationale}.'")
assert label == str((3 + 5 + 2) % 10)

# %% [markdown]
# Two students of the same size, trained for the same 800 steps on the same 600 of the 1000
# digit strings: one on the labels only, one on labels and rationales (half of each batch is
# then rationale examples, so it sees *fewer* label examples). Both are asked for labels only,
# on 200 strings neither saw.

# %%
# NBVAL_IGNORE_OUTPUT
digit_strings = T.digit_strings(3)
seen, unseen = digit_strings[:600], digit_strings[-200:]
students = {wr: P.train_student(seen, with_rationale=wr) for wr in (False, True)}
label_only, step_by_step = (P.student_accuracy(students[wr], unseen) for wr in (False, True))
print(f"labels only: {label_only:.2f} right; labels and rationales: {step_by_step:.2f} right")
assert step_by_step > label_only + 0.5

# %% [markdown]
# (The exact numbers depend on the CPU's kernels: the step-by-step student scored between 0.8
# and 0.96 on the machines we tried; the label-only one about 0.1.) The label-only student stays
# near chance: it has to find the sum of three digits modulo
# 10 from 600 examples in one step. The rationale task teaches the intermediate sum, which the
# label task then reuses through the shared weights. How much data does each student need?
# Hsieh et al.'s main result is an accuracy-against-data curve: the step-by-step student
# reaches the label-only one's accuracy with a fraction of the examples. Ours, with 200 and
# 400 strings added to the 600 above (four more students, about 15 seconds):

# %%
# NBVAL_IGNORE_OUTPUT
sizes = (200, 400, 600)
curve = {
    wr: [
        P.student_accuracy(P.train_student(digit_strings[:n], with_rationale=wr), unseen)
        for n in sizes[:-1]
    ]
    + [P.student_accuracy(students[wr], unseen)]  # n = 600: the two students above
    for wr in (False, True)
}
fig, ax = new_axes(
    title="Distilling step by step: accuracy against training data",
    xlabel="training strings",
    ylabel="label accuracy on 200 unseen strings",
)
ax.plot(sizes, curve[False], "o-", label="labels only")
ax.plot(sizes, curve[True], "s-", label="labels and rationales")
ax.axhline(0.1, color="grey", ls=":", label="chance (1 in 10)")
ax.set_xticks(sizes)
ax.set_ylim(0, 1)
ax.legend()
plt.show()
print("labels only:           ", [round(a, 2) for a in curve[False]])
print("labels and rationales: ", [round(a, 2) for a in curve[True]])
assert max(curve[False]) < 0.3 and curve[True][-1] > 0.5  # chance at every size, vs learned

# %% [markdown]
# With 200 strings neither student learns (in our runs); somewhere between 200 and 400 the
# rationales start to pay, and the label-only student is still at chance with all 600. On this
# task the label-only student would need far more data, or a bigger model, to catch up; that
# gap, at a fraction of the data, is the paper's claim.

# %% [markdown]
# ## 10.8 What the notes leave out (core, 5 min)
#
# Strabel's notes describe step 3 as "the model from 1 generates an output, the reward model
# calculates a reward and then the model is updated using ... PPO". Read literally, that
# maximises the reward model's score alone. The paper's objective (eq. 2) also subtracts the
# per-token KL to the SFT model, and its PPO-ptx variant adds the pre-training loss. Section 10.5
# reproduced what the literal reading gives (β = 0: the proxy reward rises while the answers
# become wrong) and what the KL term prevents; we assert it once more here.

# %%
# the proxy prefers the hacked policy; the judge does not
assert np.mean(hack[0.0].reward[-5:]) > np.mean(hack[0.2].reward[-5:])
assert np.mean(hack[0.0].accuracy[-5:]) < np.mean(hack[0.2].accuracy[-5:])

# %% [markdown]
# A smaller point: the notes call the reward model "also a GPT 3 model". The paper's reward
# models are 6B-parameter models from the GPT-3 family, not the 175B model being tuned: the
# authors report that 175B reward models were unstable to train and far more expensive (Ouyang
# et al., section 3.5). Our section 10.3 follows the paper in starting the reward model from the
# SFT model.
#
# Section 10 of the notes (distilling step by step) has a heading and no text; its only content,
# the paper's overview figure, is printed inside section 9, among the long-sequence models.
# Section 10.7 above gives the method's loss.

# %% [markdown]
# ## Exercises
#
# Four kinds: implement (a checker tells you what is wrong), predict then check, a conceptual
# question, and a stretch problem. Solutions are folded below each exercise.
#
# ```{exercise} The SFT loss masked to the response
# :label: ex-feedback-sft
#
# Write `my_masked_nll(logits, targets, mask)` in NumPy: logits (..., L, V), integer targets
# (..., L), a 0/1 mask (..., L); return the mean negative log-likelihood over the masked positions.
# ```


# %%
def my_masked_nll(logits, targets, mask):
    raise NotImplementedError  # your code here


check.masked_nll(my_masked_nll)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-feedback-sft
# :class: dropdown
# ```


# %% tags=["solution"]
def my_masked_nll(logits, targets, mask):
    z = logits - logits.max(axis=-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    picked = np.take_along_axis(logp, targets[..., None], axis=-1)[..., 0]
    return -(picked * mask).sum() / mask.sum()


check.masked_nll(my_masked_nll, require=True)

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} The reward model's pairwise loss
# :label: ex-feedback-rm
#
# Write `my_pairwise_loss(r_chosen, r_rejected)`: the mean of $-\log\sigma(r_w - r_l)$, in a
# form that does not overflow for reward gaps of hundreds.
# ```


# %%
def my_pairwise_loss(r_chosen, r_rejected):
    raise NotImplementedError  # your code here


check.pairwise_loss(my_pairwise_loss)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-feedback-rm
# :class: dropdown
# ```


# %% tags=["solution"]
def my_pairwise_loss(r_chosen, r_rejected):
    d = np.asarray(r_chosen) - np.asarray(r_rejected)
    return np.mean(np.logaddexp(0.0, -d))  # log(1 + e^-d), never overflows


check.pairwise_loss(my_pairwise_loss, require=True)

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} PPO's clipped objective
# :label: ex-feedback-ppo
#
# Write `my_ppo(logp_new, logp_old, advantages, clip)` returning the per-token clipped surrogate.
# ```


# %%
def my_ppo(logp_new, logp_old, advantages, clip):
    raise NotImplementedError  # your code here


check.ppo_clip_objective(my_ppo)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-feedback-ppo
# :class: dropdown
# ```


# %% tags=["solution"]
def my_ppo(logp_new, logp_old, advantages, clip):
    rho = np.exp(logp_new - logp_old)
    return np.minimum(rho * advantages, np.clip(rho, 1 - clip, 1 + clip) * advantages)


check.ppo_clip_objective(my_ppo, require=True)

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Predict, then check: a reward model that has learned nothing
# :label: ex-feedback-predict
#
# A reward model whose head is zero gives every answer the reward 0. What is its pairwise loss,
# to three decimals? Write it down, then run the cell.
# ```

# %%
prediction = None  # your prediction here
check_prediction(
    prediction,
    float(ref.pairwise_loss(np.zeros(4), np.zeros(4))),
    what="the loss of a zero reward model",
    rtol=0.01,
)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-feedback-predict
# :class: dropdown
# ```

# %% tags=["solution"]
prediction = math.log(2)  # -log sigmoid(0) = -log(1/2)
assert check_prediction(
    prediction,
    float(ref.pairwise_loss(np.zeros(4), np.zeros(4))),
    what="the loss of a zero reward model",
).passed

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Why a KL penalty and not just early stopping?
# :label: ex-feedback-concept
#
# In section 10.5 the hacked policy first had to stop writing the full stop. Explain, with the
# per-token KL, why that step is expensive under $\beta = 0.2$ and free under $\beta = 0$, and
# why stopping training early is a weaker protection.
# ```

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-feedback-concept
# :class: dropdown
# ```
#
# After the fourth letter the SFT model puts nearly all its probability on the full stop. A
# policy that writes a letter there pays $\log \pi(\text{letter}) - \log \pi^\text{SFT}(\text{letter})$,
# several nats, each time, which at $\beta = 0.2$ outweighs the 0.1 the proxy pays per letter. At
# $\beta = 0$ nothing opposes the proxy. Early stopping only limits how far the optimisation has
# gone, not where it goes: the direction is still "toward the proxy's flaw", and how many steps
# are safe depends on the flaw, which one does not know in advance. The KL term changes the
# optimum itself, to $\pi^* \propto \pi^\text{SFT} e^{r/\beta}$.
#
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Stretch: a separate critic started from the reward model
# :label: ex-feedback-stretch
#
# Our value head shares the policy's body. InstructGPT instead trains a separate value model,
# initialised from the reward model. Build that critic (a copy of `reward_model`'s body with a
# head read at every response position, not only the last), use it in place of
# `PPO.ActorCritic`'s head in a copy of `train_rl`'s loop, and compare the value loss and the
# reward curves of the two critics over three seeds.
# ```

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-feedback-stretch
# :class: dropdown
# ```
#
# The critic is `RewardModel`'s body and head applied to every position:
# `critic.head(critic.body.hidden(tokens[:, :-1])[:, P.PROMPT_LEN - 1 :]).squeeze(-1)` gives
# $V_t$ (B, T). The policy's log-probabilities come from `P.sequence_logprobs`; give the
# critic its own optimiser (or a second parameter group) and add its value loss to the PPO
# loss as before. Started from the reward model, the critic already knows which answers are
# good, so its first value loss is lower and the early advantages are less noisy; on this small
# task the reward curves end close to the shared head's. The price is a second transformer to
# run forward and backward at every step, which is why many open implementations share the body.
#
# ```{solution-end}
# ```

# %% [markdown]
# ## Summary
#
# - InstructGPT's three steps: SFT with the loss on the response only; a reward model trained
#   on $\binom{K}{2}$ comparisons per prompt with $-\log\sigma(r_w - r_l)$; PPO against the reward
#   model with a per-token KL penalty to the SFT model.
# - The k1 and k3 estimates of the KL, averaged under the policy, are the exact KL; k3 is never
#   negative.
# - PPO's clipped objective equals the policy-gradient surrogate while the ratio is within
#   $1 \pm \epsilon$ and stops pushing beyond it. InstructGPT's PPO spreads the reward over the
#   tokens (the KL at each, the score at the last), learns a value for every token, and takes
#   GAE advantages; PPO-ptx adds the pre-training loss.
# - A policy optimised against a flawed reward exploits the flaw; the KL penalty is what keeps
#   it honest, and Strabel's summary leaves it out.
# - DPO is the reward model's loss with the implicit reward $\beta \log(\pi/\pi_\text{ref})$;
#   distillation at temperature $T$ needs the factor $T^2$. Over three seeds PPO's result barely
#   moved, DPO's varied widely, and DPO's falling loss did not guarantee better answers.
# - A student trained on a teacher's rationales as a second task learned a digit-sum task that
#   the same student trained on labels alone did not.
#
# ## References
#
# - G. Strabel, *Transformers*, lecture notes, 2023, sections 7 and 10 {cite}`strabel2023transformers`.
# - L. Ouyang et al., *Training language models to follow instructions with human feedback*,
#   NeurIPS 2022 (InstructGPT) {cite}`ouyang2022training`.
# - J. Schulman, F. Wolski, P. Dhariwal, A. Radford, O. Klimov, *Proximal policy optimization
#   algorithms*, 2017 {cite}`schulman2017proximal`; J. Schulman et al., *High-dimensional
#   continuous control using generalized advantage estimation*, ICLR 2016 {cite}`schulman2016high`.
# - R. Rafailov et al., *Direct preference optimization: your language model is secretly a reward
#   model*, NeurIPS 2023 {cite}`rafailov2023direct`.
# - G. Hinton, O. Vinyals, J. Dean, *Distilling the knowledge in a neural network*, 2015
#   {cite}`hinton2015distilling`.
# - C.-Y. Hsieh et al., *Distilling step-by-step! Outperforming larger language models with less
#   training data and smaller model sizes*, Findings of ACL 2023 {cite}`hsieh2023distilling`.
#
# ## How this chapter is tested
#
# `course_lib/feedback/spec.py` lists eight mirrored functions (`token_logprobs`, `masked_nll`,
# `pairwise_loss`, `kl_penalty`, `ppo_clip_objective`, `gae`, `dpo_loss`, `distillation_loss`);
# the conformance suite runs the NumPy and PyTorch versions on the same random inputs in float64
# and float32. `tests/test_feedback.py` checks the losses against hand-derived values, the KL
# estimates against scipy's exact KL, the masked loss against PyTorch's `cross_entropy`, the
# distillation loss against scipy, PPO's gradient where it clips, the PPO pieces of
# `course_lib/feedback/ppo.py` (per-token rewards summing to eq. 2, GAE with $\gamma = \lambda = 1$
# equal to returns minus values, the clipped value loss by hand, gradients reaching the value
# head, the value loss falling on a fixed batch, identical logs from repeated runs), and retrains short runs
# (marked `portability`), comparing only losses, rewards and accuracies; they and this notebook
# also pass with PyTorch's portable kernels (`ATEN_CPU_CAPABILITY=default`).
# `benchmarks/feedback.py` runs the seed study of section 10.6 with timings: seconds per PPO
# iteration and per DPO step, with the accuracy and spread each reaches. Bad input
# names the argument:

# %%
for bad in (
    lambda: acc.pairwise_loss(torch.zeros(3), torch.zeros(2)),
    lambda: ref.kl_penalty(np.zeros(2), np.zeros(2), "k2"),
    lambda: ref.ppo_clip_objective(np.zeros(2), np.zeros(2), np.zeros(2), clip=1.5),
    lambda: ref.masked_nll(np.zeros((2, 3)), np.zeros(2, dtype=int), np.zeros(2)),
):
    try:
        bad()
    except (TypeError, ValueError) as err:
        print(f"{type(err).__name__}: {err}")
