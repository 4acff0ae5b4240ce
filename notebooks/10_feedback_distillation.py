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
# method work, and see it fail: a learned or flawed reward is exploited as soon as the leash is
# too loose.
#
# **After this chapter you can**
#
# - write the SFT loss masked to the response, and say what training on the prompt changes;
# - write the reward model's pairwise loss (Bradley-Terry) and check it by hand;
# - estimate the per-token KL to a reference policy and check the estimate against the exact KL;
# - write PPO's clipped objective and say when it equals the unclipped one, and when it has no
#   gradient;
# - spread InstructGPT's reward over the tokens, estimate advantages with GAE (a backward loop you
#   read on the page), and train a value head beside the policy;
# - make reward hacking happen, against a flawed proxy and against a learned reward model, and
#   read the over-optimisation curve of proxy reward and true accuracy against the KL;
# - derive DPO's loss and compare it with PPO trained on the same comparisons, over five seeds;
# - state Hinton's distillation loss with its $T^2$ factor, and train a student on a teacher's
#   rationales as well as its labels.
#
# **Assumes**: Chapter 8 (the GPT, its next-token loss, sampling); probabilities, logarithms
# and the sigmoid. No reinforcement learning background is needed.
# **Core path**: about 56 minutes (the prediction is inside section 10.4), plus about 10 for
# its core exercise, a bug to find; the optional sections add about 68 minutes, and the other
# exercises about 30 and a stretch problem.
# The optional quiz that ends the lesson takes about 20 minutes more.
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
from course_lib.feedback.widget import reward_explorer
from course_lib.plotting import new_axes, use_style

rng = seed_everything(0)
use_style()

# %% [markdown]
# ## 10.1 Three steps, and a task a program can judge (core, 5 min)
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
#
# Keep one difference from the paper in mind throughout: our judge is an *oracle*. It is never
# wrong and never inconsistent, whereas InstructGPT's labellers agreed with each other on only
# 72.6 ± 1.5% of comparisons (the held-out labellers on 77.3 ± 1.3%; paper, section 3.4).
# Training directly against such a checker is itself a method today, "reinforcement learning
# with verifiable rewards" (RLVR), used for mathematics and code where a program can check the
# answer {cite}`lambert2024tulu`; section 10.4 uses it, and section 10.6 compares it with the
# preference-based methods.
#
# The lecture slides show what the method bought in practice: ChatGPT's first screen (December
# 2022) lists as capabilities that it "allows user to provide follow-up corrections" and is
# "trained to decline inappropriate requests", and as limitations that it "may occasionally
# generate incorrect information", may "produce harmful instructions or biased content", and has
# "limited knowledge of world and events after 2021". OpenAI's announcement (the slides' link,
# <https://openai.com/blog/chatgpt/>) says it was trained with the same methods as InstructGPT,
# with conversations written by people as the SFT data. Read the two columns with this chapter
# in mind: the capabilities are behaviours that comparisons can reward; the knowledge limit comes
# from pre-training, which no reward model changes; and incorrect answers that a reward model
# scores well are what section 10.5 calls reward hacking.

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
# ## 10.2 Supervised fine-tuning, with the loss on the response only (core, 8 min)
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
g = torch.Generator().manual_seed(0)
logits = torch.randn(2, tokens.shape[1], T.VOCAB.size, dtype=torch.float64, generator=g)
ours = masked_nll(logits, targets, mask)
torch.testing.assert_close(ours, acc.masked_nll(logits, targets, mask))  # = the library's

# %% [markdown]
# Position $t$ predicts token $t+1$, so the mask is 1 from the `=` (which predicts the first
# letter of the answer) to the last letter (which predicts the full stop). Sixty steps of SFT on
# 300 words:

# %%
sft_losses = P.train_sft(
    policy, [w + "=" for w in sft_words], [w[::-1] + "." for w in sft_words], steps=60
)
sft_accuracy = P.accuracy(policy, test_words)
print(f"SFT loss {sft_losses[0]:.2f} -> {sft_losses[-1]:.2f}")
print(f"greedy accuracy on unseen words {sft_accuracy:.2f}")
assert sft_losses[-1] < sft_losses[0] and 0 <= sft_accuracy <= 1

# %% [markdown]
# Masking the prompt is a design choice, not a law. Shi et al. report that a loss over the
# instructions as well sometimes *helps*, for example when the instructions are long and the
# answers short {cite}`shi2024instruction`. Here it should not: the prompt's letters are random,
# so the best the model can do there is a loss of $\log 6 \approx 1.79$ per letter, and part of
# every gradient goes into a task that cannot be learned. The same sixty steps with the loss on
# every token:

# %%
unmasked = P.make_policy(seed=0)
unmasked_losses = P.train_sft(
    unmasked,
    [w + "=" for w in sft_words],
    [w[::-1] + "." for w in sft_words],
    steps=60,
    mask_prompt=False,
)
floor = 3 / 9 * math.log(6)  # 3 of the 9 targets are unpredictable letters
print(f"loss on every token: {unmasked_losses[-1]:.2f} (its floor is {floor:.2f})")
print(f"greedy accuracy {P.accuracy(unmasked, test_words):.2f}, against {sft_accuracy:.2f}")

# %% [markdown]
# On this task, at this budget, the model trained on the prompt too got no unseen word right (one
# seed; the point is the mechanism, not the size of the gap). What *is* a bug is the following,
# because it does something other than what was meant: PyTorch's `cross_entropy` skips the targets
# equal to `ignore_index` (-100 by default). Setting the prompt's labels to the padding id (here
# 0, the full stop) instead of -100 does not mask them; it trains the model to answer "."
# everywhere in the prompt.

# %%
labels = torch.where(mask.bool(), targets, torch.full_like(targets, -100))
right = F.cross_entropy(logits.reshape(-1, T.VOCAB.size), labels.reshape(-1))
wrong = F.cross_entropy(
    logits.reshape(-1, T.VOCAB.size), torch.where(mask.bool(), targets, 0).reshape(-1)
)
torch.testing.assert_close(right, ours)  # -100 masks: the same as our masked loss
print(f"ignore_index=-100: {float(right):.3f}; labels set to 0: {float(wrong):.3f}")

# %% [markdown]
# ## 10.3 The reward model and its pairwise loss (core, 7 min)
#
# The labeller sees $K$ answers to one prompt and ranks them; every ranking gives
# $\binom{K}{2}$ comparisons "$y_w$ is better than $y_l$". The reward model $r(x, y)$ (in
# InstructGPT a GPT with a scalar head) is trained so that the Bradley-Terry probability
# $\sigma(r(x, y_w) - r(x, y_l))$ of each observed preference is high (Ouyang et al., eq. 1):
#
# $$\mathcal{L}_\text{RM} = -\frac{1}{\binom{K}{2}}\,\mathbb{E}_{(x, y_w, y_l)} \log \sigma\big(r(x, y_w) - r(x, y_l)\big).$$
#
# The factor $1/\binom{K}{2}$ is there because InstructGPT puts all the comparisons of one
# prompt into one batch element: trained as separate examples, the $\binom{K}{2}$ correlated
# comparisons of a prompt made the reward model overfit within one epoch (paper, section 3.5).


# %% tags=["worksheet"]
def pairwise_loss(r_chosen, r_rejected):
    # r_chosen, r_rejected (N,) rewards of the two answers of N comparisons
    # softplus(-d) = log(1 + e^-d) = -log sigmoid(d), with no overflow
    return F.softplus(-(r_chosen - r_rejected)).mean()  # one number


r_w, r_l = torch.tensor([1.0, 0.5, -2.0]), torch.tensor([0.0, 1.5, -2.0])
by_hand = (math.log(1 + math.exp(-1)) + math.log(1 + math.exp(1)) + math.log(2)) / 3
print(f"{float(pairwise_loss(r_w, r_l)):.6f} by hand {by_hand:.6f}")
np.testing.assert_allclose(float(pairwise_loss(r_w, r_l)), by_hand, rtol=1e-6)
torch.testing.assert_close(pairwise_loss(r_w, r_l), acc.pairwise_loss(r_w, r_l))  # = library's

# %% [markdown]
# Our comparisons: for each prompt, the right answer and $K-1 = 3$ wrong ones of the kinds a weak
# model makes (copied, two letters swapped, a wrong letter, too short, too long), ranked by
# `grade`; pairs with equal grades are dropped. (InstructGPT ranks samples of its own models; we
# use made-up wrong answers so that the data does not depend on a training run. Section 10.5
# shows what that costs.) We keep them as separate examples, a simplification.

# %%
train_pairs = T.preference_pairs(rm_words, k=4, seed=1)
held_out_pairs = T.preference_pairs(test_words, k=4, seed=2)
print(len(train_pairs), "training comparisons, for example", train_pairs[:3])

# %% [markdown]
# The reward model starts, as in InstructGPT, from the SFT model: its body is a copy of the
# policy, and a linear head, started at zero, reads the hidden state of the response's last
# token.

# %% tags=["nbval-ignore-output"]
reward_model, rm_losses = P.train_reward_model(policy, train_pairs, steps=200, lr=1e-3)
rm_accuracy = P.pair_accuracy(reward_model, held_out_pairs)
print(f"RM loss {rm_losses[0]:.3f} -> {np.mean(rm_losses[-10:]):.1f} (mean of the last 10 steps)")
print(f"{len(held_out_pairs)} held-out comparisons, ranked right: {rm_accuracy:.2f}")
assert np.mean(rm_losses[-10:]) < rm_losses[0] and rm_accuracy > 0.5  # it learned something

# %% [markdown]
# The loss starts at $\log 2 \approx 0.693$: with the head at zero every comparison is a coin
# toss. The last digit of the accuracy depends on your CPU: 200 steps of training round
# differently on different processors. The seed study of sections 10.5 and 10.6 (a script, its
# results in `data/`) trained five such reward models, each from its own SFT model and its own
# comparisons; its seed 0 is exactly the run above. Their accuracies on the same held-out
# comparisons:

# %%
shipped = study.load_study()  # data/feedback/seed_study.json, made by a script
rm_accuracies = {
    r["seed"]: r["rm_pair_accuracy"] for r in shipped["runs"] if r["method"] == study.RM
}
print("held-out comparisons ranked right, per seed:", [f"{a:.2f}" for a in rm_accuracies.values()])

# %% [markdown]
# Good, not perfect, like a real reward model. InstructGPT's 6B reward model predicted the
# preferences of the labellers in its training set 72.4 ± 0.4% of the time and those of held-out
# labellers 69.6 ± 0.9%; the training labellers agreed with each other 72.6 ± 1.5% of the time
# and the held-out ones 77.3 ± 1.3% {cite}`ouyang2022training`: the reward model agreed with its
# training labellers about as often as they agreed with each other, and with held-out labellers
# less often than they agreed among themselves. A policy trained hard against an
# imperfect reward model finds its mistakes; section 10.5 makes that visible. Section 10.4's
# reinforcement learning uses the exact judge as the reward (the RLVR setting of section 10.1),
# so that what we watch there is the algorithm alone.

# %% [markdown]
# ## 10.4 Reinforcement learning with a KL penalty: PPO as InstructGPT runs it (core, 34 min)
#
# The policy $\pi$ samples a response $y$ to a prompt $x$ and gets the reward minus a penalty for
# moving away from the SFT model $\pi^\text{SFT}$ (Ouyang et al., eq. 2):
#
# $$R(x, y) = r(x, y) - \beta \sum_t \log\frac{\pi(y_t \mid x, y_{<t})}{\pi^\text{SFT}(y_t \mid x, y_{<t})}.$$
#
# **The KL penalty.** The sum is a one-sample estimate of $\mathrm{KL}(\pi \,\|\, \pi^\text{SFT})$:
# per token, the log-ratio at the sampled token. Schulman's note *Approximating KL divergence*
# {cite}`schulman2020approximating` calls it "k1" and proposes a second estimator, "k3",
# $e^u - 1 - u$ with $u = \log \pi^\text{SFT} - \log \pi$, which is never negative (k1 is, on
# tokens the reference likes more than the policy does). Averaged under the policy, both equal the
# exact KL; on a vocabulary of five tokens we can check that by summing over every token.


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
torch.testing.assert_close(kl_penalty(logp, logq, "k3"), acc.kl_penalty(logp, logq, "k3"))

# %% [markdown]
# **The clipped objective.** PPO maximises a clipped surrogate. With
# $\rho_t = \pi(y_t)/\pi_\text{old}(y_t)$, the ratio of the policy being trained to the one that
# sampled, and an advantage $A_t$ (how much better than expected the sample was),
#
# $$J = \mathbb{E}_t\big[\min\big(\rho_t A_t,\ \operatorname{clip}(\rho_t, 1-\epsilon, 1+\epsilon)\, A_t\big)\big].$$
#
# The min picks the smaller, more pessimistic, of the two terms. Before reading on, work out
# what that does to the gradient.

# %% [markdown] tags=["worksheet"]
# ```{exercise} Predict, then check: which tokens still get a gradient?
# :label: ex-feedback-predict
#
# Three tokens, $\epsilon = 0.2$. After a few gradient steps the first has $\rho = 0.6$ and
# advantage $A = +1$, the second $\rho = 1.6$ and $A = +1$, the third $\rho = 0.6$ and
# $A = -1$. What is the derivative of $J$ with respect to each token's log-probability
# $\log \pi(y_t)$? Write the three numbers (hint: $\partial \rho / \partial \log\pi = \rho$),
# then run the cell, which asks autograd.
# ```

# %% tags=["worksheet"]
prediction = None  # your prediction: [dJ/dlog pi of token 1, of token 2, of token 3]
logp_old = torch.log(torch.full((3,), 0.5, dtype=torch.float64))
logp_new = torch.log(torch.tensor([0.3, 0.8, 0.3], dtype=torch.float64))  # rho 0.6, 1.6, 0.6
logp_new.requires_grad_()
advantage = torch.tensor([1.0, 1.0, -1.0], dtype=torch.float64)
acc.ppo_clip_objective(logp_new, logp_old, advantage, 0.2).sum().backward()  # J of the three
check_prediction(
    prediction,
    logp_new.grad.numpy().round(3),
    what="the gradient of J for the three tokens",
    atol=0.02,
    explanation=(
        "the min keeps rho A only where the ratio moved against the advantage (token 1: its "
        "gradient is rho A = 0.6); where it moved with the advantage (token 2 up with A > 0, "
        "token 3 down with A < 0) the clipped term is the smaller one and constant in rho: 0. "
        "1.0 for token 1 forgets the chain rule; -0.6 for token 3 takes its move for a wrong one"
    ),
)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-feedback-predict
# :class: dropdown
# ```

# %% tags=["solution"]
# token 1: rho = 0.6 < 1 - eps with A > 0: the min keeps rho * A; d(rho A)/dlog pi = rho A = 0.6
# token 2: rho = 1.6 > 1 + eps with A > 0: the min keeps 1.2 * A, a constant: 0
# token 3: rho = 0.6 < 1 - eps with A < 0: rho A = -0.6 > 0.8 A = -0.8, the min keeps 0.8 A: 0
prediction = [0.6, 0.0, 0.0]
assert check_prediction(
    prediction, logp_new.grad.numpy().round(3), what="the gradient", atol=0.02
).passed

# %% [markdown] tags=["solution"]
# The first token became less likely although it was good: it is pushed back up, with weight
# 0.6. The second gained enough and is left alone; so is the third, a bad token that already
# lost enough probability. Clipping removes the incentive to move further in the direction the
# advantage wants, never the incentive to undo a move the wrong way.
#
# ```{solution-end}
# ```

# %% [markdown]
# Inside $[1-\epsilon, 1+\epsilon]$ the two terms of the min are equal. Outside, there are two
# cases:
#
# - the ratio moved *with* the advantage ($\rho > 1+\epsilon$ with $A > 0$, or $\rho < 1-\epsilon$
#   with $A < 0$): the clipped term is the smaller one, it is constant in $\rho$, and the update
#   stops pushing further;
# - the ratio moved *against* the advantage ($\rho < 1-\epsilon$ with $A > 0$, or
#   $\rho > 1+\epsilon$ with $A < 0$): the unclipped term is the smaller one, and the min keeps
#   it, so a step that made a good action less likely is undone with full force.
#
# So $J$ equals the unclipped surrogate $\rho A$ in the second case too, not only inside the
# interval. On the page, with five tokens and $\epsilon = 0.2$: ratios 0.6, 0.9, 1.0, 1.1 and
# 1.6, advantage +1 except the third.


# %%
def ppo_clip_objective(logp_new, logp_old, advantages, clip=0.2):
    # all (..., T): log-probabilities of the sampled tokens, and their advantages
    rho = torch.exp(logp_new - logp_old)  # (..., T)
    return torch.minimum(rho * advantages, torch.clamp(rho, 1 - clip, 1 + clip) * advantages)


logp_old = torch.log(torch.full((5,), 0.5, dtype=torch.float64))
logp_new = torch.log(torch.tensor([0.3, 0.45, 0.5, 0.55, 0.8], dtype=torch.float64))
adv = torch.tensor([1.0, 1.0, -1.0, 1.0, 1.0], dtype=torch.float64)
objective = ppo_clip_objective(logp_new, logp_old, adv)
print(objective.numpy().round(3))
torch.testing.assert_close(objective, acc.ppo_clip_objective(logp_new, logp_old, adv))
unclipped = torch.exp(logp_new - logp_old) * adv
torch.testing.assert_close(objective[:4], unclipped[:4])  # inside, and rho = 0.6 against A > 0

# %% [markdown]
# The first token's ratio fell to 0.6 although its advantage is positive: the objective is
# $0.6 \cdot 1 = 0.6$, the unclipped value, not the clipped $0.8$. The last token's ratio rose
# to 1.6 with a positive advantage: the objective is capped at $1.2$.
#
# **Per-token rewards and a value head.** Eq. 2 gives one number per answer, but PPO updates
# the policy token by token, so the reward is spread over the tokens: every token pays its share
# of the KL penalty, and the reward model's score arrives once, at the answer's last token. The
# InstructGPT paper states the per-token KL penalty but not this layout; it comes from the code
# of the OpenAI papers InstructGPT builds on {cite}`ziegler2019fine,stiennon2020learning`, whose
# answers all had one length, so the score went into the last column, and TRL's PPO puts it on
# each answer's own last token, as we do:
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
eq2 = toy_score - 0.1 * ((toy_logp - toy_ref) * toy_mask).sum(1)  # eq. 2, one number per answer
torch.testing.assert_close(toy_rewards.sum(1), eq2)

# %% [markdown]
# The first answer has three tokens, so its fourth reward is zero and the score 1 lands on its
# third token. To know which tokens deserve credit, PPO learns a **value** $V_t$: the return
# (sum of rewards) to expect from token $t$ on. Ours is a linear layer on the policy's final
# hidden states (`PPO.ActorCritic`), so one forward pass gives both $\log\pi(y_t)$ and $V_t$;
# InstructGPT uses a separate value model started from the reward model.
#
# **Advantages by GAE.** The advantage $A_t$ says how much better than expected things went
# after token $t$. Generalised advantage estimation (GAE, Schulman et al. 2016) mixes the
# one-step TD errors $\delta_t = r_t + \gamma V_{t+1} - V_t$ as
# $A_t = \sum_k (\gamma\lambda)^k \delta_{t+k}$. Written backwards, that sum is one line,
# $A_t = \delta_t + \gamma\lambda A_{t+1}$, so GAE is a loop from the last token to the first:


# %%
def gae(rewards, values, gamma=1.0, lam=0.95):
    # rewards, values (B, T); the value after the last token is 0
    n = rewards.shape[-1]
    advantages = torch.zeros_like(rewards)  # (B, T)
    running = torch.zeros_like(rewards[..., 0])  # (B,) A_{t+1}, 0 after the end
    for t in reversed(range(n)):
        next_value = values[..., t + 1] if t + 1 < n else 0.0  # (B,) V_{t+1}
        delta = rewards[..., t] + gamma * next_value - values[..., t]  # (B,) TD error
        running = delta + gamma * lam * running  # (B,) A_t = delta_t + gamma lam A_{t+1}
        advantages[..., t] = running
    return advantages  # (B, T)


r = torch.tensor([[0.0, 0.0, 1.0]], dtype=torch.float64)  # reward only at the end, as in RLHF
v = torch.tensor([[0.2, 0.4, 0.6]], dtype=torch.float64)
td_errors = r + torch.cat([v[:, 1:], torch.zeros(1, 1, dtype=v.dtype)], 1) - v
torch.testing.assert_close(gae(r, v, lam=0.0), td_errors)  # lambda = 0: the one-step TD error
torch.testing.assert_close(gae(r, v, lam=1.0), 1.0 - v)  # lambda = 1: return minus value
print(gae(r, v, lam=0.5).numpy())
torch.testing.assert_close(gae(r, v, lam=0.5), acc.gae(r, v, 1.0, 0.5))  # = the library's

# %% [markdown]
# $\lambda = 0$ trusts the value function (low variance, biased while the values are wrong);
# $\lambda = 1$ uses the whole return (unbiased, noisy). The value head learns the returns
# $R_t = A_t + V_t$ with a squared error, clipped like the policy (PPO2's form): the loss takes
# the larger of $(V - R)^2$ and $(V_\text{clip} - R)^2$, with
# $V_\text{clip} = V_\text{old} + \operatorname{clip}(V - V_\text{old}, -\epsilon, \epsilon)$.
# Once a value has moved more than $\epsilon$ toward its return, the clipped error is the larger
# one and constant in $V$, so moving further gains nothing in this update; a move away from the
# return keeps its full gradient. The loss of one gradient step is minus
# the clipped surrogate plus $c_V$ times the value loss; the advantages are whitened over the
# batch (mean 0, standard deviation 1), a common PPO habit that puts every batch on one scale.
# Here is the whole step, on the page:


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
    # GAE as above (acc.gae), whitened; returns = A + V
    advantages, returns = PPO.advantages_and_returns(rewards, values_old, mask, 1.0, 0.95)
loss = ppo_loss(ac, tokens, mask, logp_old, values_old, advantages, returns)
batch = (tokens, P.PROMPT_LEN, mask, logp_old, values_old, advantages, returns)
torch.testing.assert_close(loss, PPO.ppo_loss(ac, *batch)[0])  # = the library's step
loss.backward()
print(f"loss {float(loss.detach()):.3f}")
print(f"value head gradient norm {float(ac.value_head.weight.grad.norm()):.3f}")

# %% [markdown]
# At the start the values are all zero, so the returns are the rewards to go (each later reward
# discounted by $\lambda = 0.95$ per token, since $R_t = A_t$), and the value head's gradient is
# not zero: it starts learning at once. Together this is InstructGPT's
# objective (Ouyang et al., eq. 2), with the PPO-ptx term that section 10.5 switches on:
#
# $$\text{objective}(\phi) = \mathbb{E}_{(x, y) \sim \pi_\phi}\Big[r(x, y) - \beta \log\frac{\pi_\phi(y \mid x)}{\pi^\text{SFT}(y \mid x)}\Big] + \gamma_\text{ptx}\, \mathbb{E}_{x \sim D_\text{pretrain}}\big[\log \pi_\phi(x)\big].$$
#
# `P.train_rl` repeats the iteration above: sample, score, per-token rewards, GAE, then two
# gradient steps on the clipped loss (`advantage="gae"`, the default). Its other option,
# `advantage="loo"`, skips the value head: each answer's advantage is its total reward minus
# the mean of the *other* three answers to the same prompt. That leave-one-out baseline is the
# one of RLOO {cite}`ahmadian2024back`; GRPO {cite}`shao2024deepseekmath` uses the mean of the
# group instead and divides by its standard deviation. Neither needs a value model, which is why
# both are popular for large models. The reward here is the exact judge, so the reward is also
# the share of sampled answers that are right.

# %%
rl_policy, rl_log = P.train_rl(policy, sft_words + rm_words, exact_reward, beta=0.05, iterations=40)
first, last = np.mean(rl_log.reward[:5]), np.mean(rl_log.reward[-5:])
print(f"share of sampled answers right: {first:.2f} -> {last:.2f}")
print(f"KL to the SFT model (nats per answer), last 5 iterations: {np.mean(rl_log.kl[-5:]):.2f}")
print(f"value loss {np.mean(rl_log.value_loss[:5]):.2f} -> {np.mean(rl_log.value_loss[-5:]):.2f}")
assert 0 <= last <= 1 and np.mean(rl_log.kl[-5:]) >= -0.5  # sane ranges (k1 can dip below 0)

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
fig.suptitle("PPO with GAE against the exact judge (RLVR, beta = 0.05)")
fig.tight_layout()
plt.show()

# %% [markdown]
# The SFT model is right on nearly every unseen word when it answers greedily, but when it
# *samples* it is right only about half the time: RL sharpens the distribution toward what the
# judge rewards, and the KL it pays for that stays small. (Karpathy's *State of GPT* talk makes
# the same point about RLHF'd chat models: they lose entropy.) The value loss falls as the head
# learns which answers tend to be right. Section 10.6 repeats this run over five seeds.
#
# A share of sampled answers is a noisy score: one sample for each of 200 words has a standard
# error of about 0.035. This task allows an exact one. The right answer is one sequence of five
# tokens, so the probability that a sample is right is the product of their five probabilities,
# $\pi(y^\star \mid x) = \prod_t \pi(y^\star_t \mid x, y^\star_{<t})$, and its mean over the
# words is the expected share of sampled answers right, with no sampling noise. The rest of the
# chapter reports it (`P.right_answer_probability`); for the SFT model:

# %%
p_right_sft = P.right_answer_probability(policy, test_words)  # mean of pi(y* | x) over the words
print(f"SFT: P(a sampled answer is right) {p_right_sft:.2f}, mean over the 200 unseen words")

# %% [markdown]
# ## 10.5 Reward hacking, and the KL leash (optional, 25 min)
#
# A reward model is a model: it has flaws, and a policy optimised against it finds them. We
# start with a proxy whose flaws we chose. `flawed_reward` checks only the first four letters,
# and it adds 0.1 per letter (real reward models often prefer longer answers). Type your own
# responses into the widget to see how the three scorers disagree.

# %%
reward_explorer("abcd", "dcbaeee")

# %% [markdown]
# Without the KL penalty ($\beta = 0$) nothing stops the policy from writing on instead of
# stopping. With $\beta = 0.2$ each extra letter costs more in KL (the SFT model is nearly sure
# the answer stops there) than the 0.1 it earns. InstructGPT's PPO-ptx adds a second anchor:
# each update also takes a gradient step on the next-token loss of the pre-training data (here
# the SFT data stands in for it). Three runs of 30 iterations, one seed each:


# %% tags=["nbval-ignore-output"]
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
runs = {**{f"beta = {b}": log for b, log in hack.items()}, "beta = 0, with PPO-ptx": ptx_log}
for name, log in runs.items():
    print(
        f"{name:24} proxy reward {np.mean(log.reward[-5:]):.2f}, "
        f"length {np.mean(log.length[-5:]):.1f}, truly right {np.mean(log.accuracy[-5:]):.2f}, "
        f"KL {np.mean(log.kl[-5:]):.1f}"
    )

# %%
fig, axes = plt.subplots(1, 3, figsize=(12, 3.2))
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
# In our runs, at $\beta = 0$ the proxy reward rose while the answers grew to the maximum length
# and the judge's accuracy fell to zero; $\beta = 0.2$ kept the answers short and mostly right,
# and PPO-ptx did too on this task, even at $\beta = 0$. (One seed each; the printed numbers move
# a little between CPUs.) In InstructGPT the pre-training mix serves mainly to keep the model's
# general abilities (the paper's "alignment tax" on public NLP benchmarks); the KL term is what
# limits exploitation.
#
# **The learned reward model is hacked too.** The flaws above were planted. Section 10.3's
# reward model has flaws nobody planted: it was trained only on the right answer and five kinds
# of made-up wrong ones, so on anything else its score is a guess. PPO against its score, at the
# $\beta = 0.05$ that suited the exact judge:


# %% tags=["nbval-ignore-output"]
def rm_reward(ws, responses):
    with torch.no_grad():
        return reward_model.score(ws, responses).numpy()


rm_policy, rm_log = P.train_rl(policy, sft_words + rm_words, rm_reward, beta=0.05, iterations=30)
print(f"RM score of its samples {rm_log.reward[0]:.2f} -> {np.mean(rm_log.reward[-5:]):.2f}")
print(f"truly right            {rm_log.accuracy[0]:.2f} -> {np.mean(rm_log.accuracy[-5:]):.2f}")
shown = test_words[:6]
tokens, _ = P.sample(rm_policy, [w + "=" for w in shown], seed=0)
answers = P.responses_of(tokens, P.PROMPT_LEN)
scores = rm_reward(shown, answers)
right_scores = rm_reward(shown, [w[::-1] + "." for w in shown])
for w, a, s, s_right in zip(shown, answers, scores, right_scores, strict=True):
    print(
        f"{w}= -> {a!r:8} RM score {s:5.2f}   (the right answer {w[::-1]}. scores {s_right:5.2f})"
    )

# %% [markdown]
# The policy found that very short answers, often the empty answer ".", get a high score (about
# 4, above most right answers): no comparison in the reward model's data contained one, so
# nothing taught it that they are bad. (Scores of different prompts are not comparable, a point
# the exercises return to.)
# Its score went up while the judge's accuracy went to zero. That is the general shape of
# reward-model over-optimisation, which Gao et al. measured at scale {cite}`gao2023scaling`:
# plotted against the distance from the start, $\sqrt{\mathrm{KL}}$, the proxy reward keeps
# rising while the true ("gold") reward first rises and then falls. The shipped study of section
# 10.6 ran PPO against a reward model like ours (one per seed, trained on that seed's
# comparisons) at five values of $\beta$, five seeds each, and logged at every iteration the
# reward model's mean score of the batch (the proxy), the batch's KL to the SFT model (on the
# words PPO trains on) and the exact probability of the right answer on the 200 unseen words
# (the truth). Here is every iteration of every seed at one learning rate, $10^{-3}$ for every
# $\beta$, so that $\beta$ is the only thing that varies. Both are drawn as their change since
# the start. Each reward model puts its scores at its own level (the data fixes only differences
# within a prompt; the shift-invariance exercise shows why), so the on-page model above and each
# seed's start from different numbers; and each seed has its own SFT model, whose probability of
# the right answer lies between 0.26 and 0.55.

# %%
rm_runs = [r for r in shipped["runs"] if r["method"] == study.RM and r["lr"] == 1e-3]
fig, (ax_proxy, ax_true) = plt.subplots(1, 2, figsize=(11, 3.8))
curves = {}  # beta -> (sqrt KL, change of the truth), each (seeds, iterations)
for i, beta in enumerate(shipped["config"]["rm_betas"]):
    logs = [r["log"] for r in rm_runs if r["beta"] == beta]
    distance = np.sqrt(np.maximum([m["kl"] for m in logs], 0))  # (seeds, iterations)
    gain = np.array([np.subtract(m["reward"], m["reward"][0]) for m in logs])  # (seeds, its)
    truth = np.array([np.subtract(m["p_right"], m["p_right"][0]) for m in logs])  # likewise
    curves[beta] = (distance, truth)
    ax_proxy.plot(distance.T, gain.T, ".", color=f"C{i}", ms=3, alpha=0.5)
    ax_true.plot(distance.T, truth.T, ".", color=f"C{i}", ms=3, alpha=0.5)
    ax_true.plot([], [], "o", color=f"C{i}", label=f"{beta}")
ax_proxy.set(title="proxy: the RM's mean score of the batch", ylabel="change since the start")
ax_true.set(title="truth: P(right answer) on 200 unseen words", ylabel="change since the start")
for ax in (ax_proxy, ax_true):
    ax.set(xlabel="sqrt(KL of the batch to the SFT model), nats^0.5")
ax_true.legend(title="beta", fontsize=8)
fig.suptitle("Over-optimising a learned reward model (PPO, lr 1e-3; every iteration of 5 seeds)")
fig.tight_layout()
plt.show()

# %% [markdown]
# To compare the values of $\beta$ at the same distance, bin the points by $\sqrt{\mathrm{KL}}$:
# the mean change of the truth over every iteration of every seed that falls in the bin (in
# brackets, how many points; each $\beta$ has 5 seeds times 40 iterations).

# %%
edges = [0.0, 0.3, 0.6, 0.9, 1.2, 1.5, 2.0, 2.5, 3.0]
bins = list(zip(edges, edges[1:], strict=False))
print(f"{'sqrt KL':>9}", *(f"{f'{a}-{b}':>10}" for a, b in bins))
for beta, (distance, truth) in curves.items():
    cells = []
    for a, b in bins:
        inside = (distance >= a) & (distance < b)
        mean = round(float(truth[inside].mean()), 2) + 0.0 if inside.any() else None  # no -0.00
        cells.append("" if mean is None else f"{mean:+.2f} ({inside.sum():>2})")
    print(f"{f'beta {beta}':>9}", *(f"{c:>10}" for c in cells))


def in_bin(beta, seed, low=0.6, high=0.9):  # the changes of one seed's iterations in one bin
    distance, truth = curves[beta]
    return truth[seed][(distance[seed] >= low) & (distance[seed] < high)]


per_seed = [
    in_bin(1.0, s).mean() - np.concatenate([in_bin(0.05, s), in_bin(0.2, s)]).mean()
    for s in range(len(shipped["config"]["seeds"]))
]
print("sqrt KL 0.6-0.9, beta 1 minus beta <= 0.2, seed by seed:", [f"{x:+.2f}" for x in per_seed])

# %% [markdown]
# Each seed starts at the left and moves right as PPO trains. At $\beta = 0.05$ and $0.2$ the
# policies travelled far (a $\sqrt{\mathrm{KL}}$ of 1.7 to 2.9 by the last iteration), the
# reward model's mean score rose, and the probability of the right answer fell on every seed,
# by 0.25 to 0.55, to near zero: proxy and truth moved in opposite directions. At $\beta = 1$
# and $2$ the policies stayed within a $\sqrt{\mathrm{KL}}$ of about 1.2 and the truth moved
# little. Gao et al.'s gold reward first rises and then falls; here, at this learning rate, the
# truth did not rise on average at any $\beta$: the easiest gains the reward model offers
# (answers unlike any in its data) are wrong from the start. (At $\beta = 1$ and a learning rate
# of $3 \cdot 10^{-3}$, in section 10.6's table, its mean rose a little: 0.54 against the SFT
# models' 0.46.)
#
# Does $\beta$ only decide how far along one curve the policy goes? Not quite, here: at the same
# distance, $\beta = 1$ lost less than $\beta \le 0.2$, $-0.08$ against $-0.15$ at a
# $\sqrt{\mathrm{KL}}$ of 0.6 to 0.9 and $-0.11$ against $-0.22$ to $-0.24$ at 0.9 to 1.2
# ($\beta = 2$ never went that far), and it did so on every seed in the first of those bins
# (by $+0.01$ to $+0.16$). Two things temper that reading: the small-$\beta$ points in a bin
# are one or two early iterations per seed, the large-$\beta$ points many late ones, so a bin
# also compares different amounts of training; and the distance is the KL of the training
# batch, on the words PPO trains on (the table of section 10.6 measures it on the unseen words).
# An exercise compares this with Gao et al.'s finding about the KL penalty. A reward model
# trained on comparisons of the policy's own samples, as InstructGPT's was, would have seen the
# answers PPO finds; that it would hold up better is a hypothesis we did not test here.

# %% [markdown]
# ## 10.6 DPO, and PPO against DPO on the same comparisons (optional, 29 min)
#
# **Direct preference optimisation.** The KL-regularised objective
# $\max_\pi \mathbb{E}[r(x,y)] - \beta\,\mathrm{KL}(\pi \| \pi_\text{ref})$ has the closed-form
# optimum $\pi^*(y|x) \propto \pi_\text{ref}(y|x)\, e^{r(x,y)/\beta}$. Solving for the reward,
# $r(x, y) = \beta \log \frac{\pi^*(y|x)}{\pi_\text{ref}(y|x)} + \beta \log Z(x)$; the partition
# function $Z(x)$ cancels in a difference of two answers to the same prompt, so the reward
# model's pairwise loss can be written directly in terms of the policy (Rafailov et al. 2023):
#
# $$\mathcal{L}_\text{DPO} = -\log\sigma\Big(\beta\log\frac{\pi(y_w)}{\pi_\text{ref}(y_w)} - \beta\log\frac{\pi(y_l)}{\pi_\text{ref}(y_l)}\Big).$$
#
# The terms $\hat r = \beta \log \pi(y)/\pi_\text{ref}(y)$ are DPO's *implicit rewards*. The loss
# is section 10.3's pairwise loss applied to them:


# %% tags=["worksheet"]
def dpo_loss(logp_w, logp_l, ref_w, ref_l, beta=0.1):
    # all (N,): log pi(y | x) summed over each answer's tokens, for N comparisons
    reward_w = beta * (logp_w - ref_w)  # (N,) implicit rewards of the chosen answers
    reward_l = beta * (logp_l - ref_l)  # (N,) and of the rejected ones
    return pairwise_loss(reward_w, reward_l)  # one number


lp_w, lp_l = torch.tensor([-3.0, -5.0]), torch.tensor([-4.0, -4.5])
ref_w, ref_l = torch.tensor([-3.5, -5.0]), torch.tensor([-3.5, -4.0])
print(f"DPO loss {float(dpo_loss(lp_w, lp_l, ref_w, ref_l, beta=0.5)):.4f}")
torch.testing.assert_close(
    dpo_loss(lp_w, lp_l, ref_w, ref_l, 0.5), acc.dpo_loss(lp_w, lp_l, ref_w, ref_l, 0.5)
)  # = the library's

# %% [markdown]
# DPO needs no reward model and no sampling: it trains the policy directly on the comparisons
# of section 10.3, with the SFT model as the frozen reference. The loss rewards a larger gap
# $\hat r_w - \hat r_l$; nothing in it says that $\log \pi(y_w)$ itself must rise. Sixty steps of
# 64 comparisons, logging the chosen and rejected log-ratios $\log \pi(y) - \log\pi_\text{ref}(y)$
# of each batch (what TRL logs as `rewards/chosen` and `rewards/rejected`, divided by $\beta$):

# %%
dpo_policy, dpo_log = P.train_dpo(policy, train_pairs, beta=0.1, steps=60)
print(f"DPO loss {dpo_log.loss[0]:.3f} -> {np.mean(dpo_log.loss[-5:]):.3f}")
print(f"chosen log-ratio   {np.mean(dpo_log.chosen[-5:]):6.2f} (last 5 steps)")
print(f"rejected log-ratio {np.mean(dpo_log.rejected[-5:]):6.2f}")
for name, model in {"SFT": policy, "PPO (judge)": rl_policy, "DPO": dpo_policy}.items():
    p_right = P.right_answer_probability(model, test_words)  # mean pi(right answer | word)
    print(f"{name:12} P(a sampled answer is right), mean over the unseen words: {p_right:.2f}")

# %% [markdown]
# One run of each says little, and the PPO run above had an oracle for a reward, while DPO had
# only the comparisons. The fair comparison gives both the same information. The shipped study
# (`course_lib/feedback/study.py`; the command is in the appendix) builds, for each of five
# seeds, its own SFT model and its own comparisons (the seed draws the SFT weights and batches
# and the wrong answers of the comparisons; seed 0 is this chapter's), and trains from them:
#
# - **PPO + learned RM**: a reward model trained on the seed's comparisons (200 steps), then PPO
#   with GAE against its score, 40 iterations of 64 samples, at five values of $\beta$. This is
#   the plain pipeline: no normalisation of the reward model (InstructGPT's bias, see the
#   exercises), no whitening or clipping of the rewards, and no reward model retrained on the
#   policy's own samples;
# - **DPO**: 60 steps of 64 of those comparisons, at three values of $\beta$;
# - as references with an oracle reward (RLVR), **PPO + exact judge** with GAE and with the
#   leave-one-out baseline, at section 10.4's $\beta = 0.05$.
#
# Each method at each $\beta$ ran at five learning rates, $10^{-4}$ to $10^{-2}$ a factor of
# about 3 apart, and the table shows the rate that scored best on 200 *validation* words (a `*`
# marks a best rate at the edge of the grid); every $\beta$ is shown, rather than the best one.
# All are scored on 200 unseen test words: the exact probability of the right answer (mean ±
# standard error over the seeds, and the worst and best seed), the greedy accuracy, the KL to
# the SFT model on the policy's own samples (4 per word), and "pairs", the share of the held-out
# comparisons ranked right by the reward model (PPO + RM) or by DPO's implicit reward
# $\beta \log \pi(y)/\pi_\text{ref}(y)$ (DPO; TRL logs it as `rewards/accuracies`).

# %%
rows = study.select(study.summarise(shipped["runs"]))  # each (method, beta) at its best rate
sft = np.array([s["p_right"] for s in shipped["sft"]])  # (seeds,) each seed's SFT model
layout = "{:29} {:>4} {:>6} {:>11} {:>9} {:>6} {:>5} {:>5}"
print(layout.format("method", "beta", "lr", "P(right)", "min-max", "greedy", "KL", "pairs"))
sft_se = sft.std(ddof=1) / np.sqrt(len(sft))
spread = f"{sft.min():.2f}-{sft.max():.2f}"
greedy = f"{np.mean([s['greedy'] for s in shipped['sft']]):.2f}"
print(
    layout.format("SFT (start)", "", "", f"{sft.mean():.2f} ± {sft_se:.2f}", spread, greedy, 0, "")
)
for row in rows:
    pairs = row.get("rm_pair_accuracy_mean", row.get("implicit_accuracy_mean"))
    print(
        layout.format(
            row["method"],
            row["beta"],
            f"{row['lr']:.0e}" + ("*" if row["lr_at_edge"] else ""),
            f"{row['p_right_mean']:.2f} ± {row['p_right_se']:.2f}",
            f"{row['p_right_min']:.2f}-{row['p_right_max']:.2f}",
            f"{row['greedy_mean']:.2f}",
            f"{row['kl_mean']:.2f}",
            "" if pairs is None else f"{pairs:.2f}",
        )
    )

# %% [markdown]
# Every method starts from the same SFT model within a seed, and the seeds' SFT models differ a
# lot (seed 2's is the weak one), so compare the methods seed by seed: the best DPO row minus the
# best PPO + RM row (each by its validation score), and, at a KL no larger than PPO's, the best
# DPO run among those that stayed that close.

# %%
every = study.summarise(shipped["runs"])  # every (method, beta, learning rate)


def by_seed(row):  # (seeds,) the exact P(right) of one row's runs, seed by seed
    keys = (row["method"], row["beta"], row["lr"])
    mine = [r for r in shipped["runs"] if (r["method"], r["beta"], r["lr"]) == keys]
    return np.array([r["p_right"] for r in sorted(mine, key=lambda r: r["seed"])])


def best(candidates):  # the row with the best validation score
    return max(candidates, key=lambda r: r["p_right_val_mean"])


ppo = best(r for r in rows if r["method"] == study.RM)
dpo = best(r for r in rows if r["method"] == study.DPO)
close = best(r for r in every if r["method"] == study.DPO and r["kl_mean"] <= ppo["kl_mean"])
for name, row in (("the best DPO", dpo), ("DPO at a KL no larger", close)):
    diff = by_seed(row) - by_seed(ppo)  # (seeds,) paired by seed
    print(
        f"{name} (beta {row['beta']}, lr {row['lr']:.0e}, KL {row['kl_mean']:.2f}) minus PPO + RM "
        f"(beta {ppo['beta']}, lr {ppo['lr']:.0e}, KL {ppo['kl_mean']:.2f}): "
        f"{diff.mean():+.2f} ± {diff.std(ddof=1) / np.sqrt(len(diff)):.2f}, "
        f"seed by seed {[f'{d:+.2f}' for d in diff]}"
    )
print(f"DPO at a KL no larger: P(right) {close['p_right_mean']:.2f} ± {close['p_right_se']:.2f}")

# %% [markdown]
# What the study shows, at these budgets (5 seeds; PPO 40 iterations of 64 samples, DPO 60 steps
# of 64 comparisons; each at its best of five learning rates):
#
# - With the oracle (RLVR), PPO reached a probability of the right answer of 0.90 ± 0.02 with
#   GAE and 0.93 ± 0.02 with the leave-one-out baseline (both at the rate $3 \cdot 10^{-3}$, a KL
#   of about 0.7 nats), from the SFT models' 0.46 ± 0.05.
# - From the comparisons alone, DPO reached 0.70 ± 0.05 to 0.77 ± 0.04. PPO against a reward
#   model trained on the same comparisons reached at most 0.54 ± 0.08 ($\beta = 1$). At
#   $\beta \le 0.5$ its best rate was the grid's smallest, $10^{-4}$, and it still ended below
#   the SFT models (0.37 to 0.41): no rate we tried let it improve there, and the larger ones
#   were hacked to near 0.
# - Seed by seed, the best DPO beat the best PPO + RM on all five seeds, by 0.23 ± 0.09 on
#   average. The table's DPO rows travelled further (a KL of 1.0 to 1.9 against PPO's 0.56), but
#   the lead is not bought with distance: at a KL of 0.30, DPO ($\beta = 1$, rate $10^{-3}$)
#   reached 0.67 ± 0.05, ahead of PPO + RM on every seed, by 0.12 ± 0.04.
# - The reward models ranked 0.83 to 0.89 of the held-out comparisons right (0.87 on average);
#   DPO's implicit reward ranked 0.90 ($\beta = 0.1$) to 0.96 ($\beta = 1$) right. On answers like
#   those of the comparisons, DPO's policy is the better reward model too.
#
# So "PPO beat DPO", which an earlier version of this chapter concluded from the runs against
# the judge, was "an oracle reward beat comparisons". Given the same comparisons, DPO did better
# here, on every seed and at a matched KL. Section 10.5 shows why PPO + RM fell behind: the
# reward model is wrong about answers unlike those in its data, and PPO explores exactly there
# (the held-out comparisons, made like the training ones, do not test that). DPO only moves
# probability between the answers it is shown (and, as below, sometimes onto answers in neither
# set). Whether InstructGPT's mitigations (a normalised reward model, rewards whitened or
# clipped, a reward model retrained on the policy's samples) would close the gap is a hypothesis
# this study does not test.

# **Does DPO push both log-probabilities down?** The study logged, at every step, the mean
# chosen and rejected log-ratios of the batch. Per seed, at $\beta = 0.1$ and this section's
# learning rate, $10^{-3}$:

# %%
dpo_runs = [
    r for r in shipped["runs"] if r["method"] == study.DPO and (r["beta"], r["lr"]) == (0.1, 1e-3)
]
fig, ax = new_axes(
    title="DPO (beta = 0.1): log pi(y) - log pi_ref(y) of the batch, per seed",
    xlabel="DPO step",
    ylabel="log-ratio (nats)",
)
for i, run in enumerate(dpo_runs):
    colour = f"C{i}"
    ax.plot(run["log"]["chosen"], color=colour, label=f"seed {run['seed']}: chosen")
    ax.plot(run["log"]["rejected"], color=colour, ls=":", label="rejected")
ax.axhline(0, color="grey", lw=0.8)
ax.legend(fontsize=7, ncol=2)
plt.show()
for run in dpo_runs:
    chosen, rejected = np.mean(run["log"]["chosen"][-5:]), np.mean(run["log"]["rejected"][-5:])
    print(
        f"seed {run['seed']}: chosen {chosen:5.2f}, rejected {rejected:5.2f}, loss "
        f"{np.mean(run['log']['loss'][-5:]):.2f}; P(right) {run['p_right']:.2f} (its SFT model "
        f"{sft[run['seed']]:.2f}), greedy {run['greedy']:.2f}, KL {run['kl']:.1f}"
    )
larger_beta = [
    r for r in shipped["runs"] if r["method"] == study.DPO and r["lr"] == 1e-3 and r["beta"] > 0.1
]
below = sum(np.mean(r["log"]["chosen"][-5:]) < 0 for r in larger_beta)
print(
    f"beta = 0.3 and 1: chosen log-ratio below zero at the end on {below} of "
    f"{len(larger_beta)} runs"
)

# %% [markdown]
# At $\beta = 0.1$ the rejected answers' log-ratio fell by 3.3 to 6.4 nats. The chosen answers'
# log-ratio rose on seeds 0 to 2 and fell on seeds 3 and 4, by about 1 nat: the two seeds whose
# probability of the right answer ended below their own SFT model's and whose KL to the SFT
# model was the largest (2.1 and 2.4 nats; their greedy accuracy fell to about 0.8, as seed 2's
# did). Their loss fell like the others' (to about 0.5): the gap grew while the chosen answers
# became less likely, and the probability went to answers in neither set. At $\beta = 0.3$ and
# $1$ (not plotted; the last line above) the chosen log-ratio ended *below* zero on nine of the
# ten runs at this rate, while the loss fell: the gap grew by pushing both down.
#
# That needs one more look, because our "chosen" answers are not all right: a swapped pair of
# letters is preferred to a copied word. Split by whether the chosen answer is the right one,
# for the DPO run of this section ($\beta = 0.1$, seed 0) and one at $\beta = 0.3$:


# %%
def answer_logprob(model, ws, answers):
    tokens, targets, mask = P.encode_pairs([w + "=" for w in ws], answers)  # (N, L) each
    with torch.no_grad():
        return (acc.token_logprobs(model(tokens), targets) * mask).sum(-1)  # (N,) log pi(y | x)


pair_words = [w for w, _, _ in train_pairs]
chosen = [c for _, c, _ in train_pairs]
is_right = np.array([c == w[::-1] + "." for w, c, _ in train_pairs])
print(f"chosen answers that are the right answer: {is_right.mean():.0%}")
dpo_03, _ = P.train_dpo(policy, train_pairs, beta=0.3, steps=60)
sft_logp = answer_logprob(policy, pair_words, chosen)  # (N,)
torch.testing.assert_close(sft_logp, P.answer_logprob(policy, pair_words, chosen))  # = library's
sft_logp = sft_logp.numpy()
for name, model in (("beta = 0.1", dpo_policy), ("beta = 0.3", dpo_03)):
    ratio = answer_logprob(model, pair_words, chosen).numpy() - sft_logp  # (N,) log-ratios
    print(
        f"{name}: chosen log-ratio {ratio.mean():5.2f}"
        f" = right answers {ratio[is_right].mean():5.2f}"
        f" and chosen wrong answers {ratio[~is_right].mean():5.2f}"
    )

# %% [markdown]
# A little over half of the chosen answers are the right one. At $\beta = 0.1$ the chosen
# log-ratio rose (+0.7), but mostly through the chosen *wrong* answers (+1.2, the right ones
# +0.4): DPO made "less wrong" answers likelier, which is what the comparisons literally ask.
# At $\beta = 0.3$ the chosen log-ratio fell (-0.3), yet the right answers rose (+0.4) while
# the chosen wrong answers fell (-1.1). A falling chosen log-probability is therefore not by
# itself a failure, nor a rising one a success: DPO's loss constrains only the gap within each
# pair, and where the probability goes has to be measured on the answers one cares about (the
# two seeds above where it went elsewhere are the warning).
#
# The costs differ in kind. A PPO iteration runs 8 sampling passes of the policy, one scoring
# pass of the policy, the reference and (here) the reward model, and two gradient steps, and it
# needs a reward for every sample; a DPO step is one gradient step on 64 fixed comparisons. The
# appendix gives the measured times. DPO can only learn from the comparisons it is given, while
# PPO explores, which is also how it finds a reward model's flaws.

# %% [markdown]
# ## 10.7 Distillation: soft targets, and distilling step by step (optional, 14 min)
#
# Hinton et al. train a small student on a large teacher's output distribution softened by a
# temperature $T$. With teacher logits $z_t$ and student logits $z_s$, write
# $p = \mathrm{softmax}(z_t/T)$ for the teacher's softened distribution and
# $q = \mathrm{softmax}(z_s/T)$ for the student's. The full loss is a weighted sum of a soft term
# and the ordinary hard-label loss at temperature 1 {cite}`hinton2015distilling`:
#
# $$\mathcal{L} = \alpha\, T^2\, \mathrm{KL}(p \,\|\, q) + (1 - \alpha)\, \mathrm{CE}\big(y, \mathrm{softmax}(z_s)\big).$$
#
# Why $T^2$: the gradient of the soft term with respect to the student's logits is $(q - p)/T$,
# and for large $T$, $q - p \approx (z_s - z_t)/(VT)$ (logits centred, $V$ the vocabulary
# size), so the gradient shrinks like $1/T^2$. The hard term's gradient does not depend on $T$.
# Multiplying the soft term by $T^2$ keeps the relative weight of the two terms the same when
# one tries another temperature, so $\alpha$ means the same thing at every $T$. The soft term, on
# the page:


# %%
def distillation_loss(student_logits, teacher_logits, temperature=2.0):
    # student_logits, teacher_logits (N, V): N positions, V classes
    log_p = torch.log_softmax(teacher_logits / temperature, dim=-1)  # (N, V) teacher, softened
    log_q = torch.log_softmax(student_logits / temperature, dim=-1)  # (N, V) student, softened
    kl = (log_p.exp() * (log_p - log_q)).sum(-1)  # (N,) KL(p || q)
    return temperature**2 * kl.mean()  # one number


zt = torch.tensor([2.0, 0.5, -1.0, 0.0], dtype=torch.float64)
zs = torch.tensor([0.5, 0.5, 0.0, -1.0], dtype=torch.float64, requires_grad=True)
torch.testing.assert_close(
    distillation_loss(zs[None], zt[None], 3.0), acc.distillation_loss(zs[None], zt[None], 3.0)
)  # = the library's
for temperature in (1.0, 10.0, 100.0):
    zs.grad = None
    distillation_loss(zs[None], zt[None], temperature).backward()
    print(f"T={temperature:5}: gradient {zs.grad.numpy().round(3)}")
d = (zs - zt).detach()
np.testing.assert_allclose(zs.grad.numpy(), ((d - d.mean()) / 4).numpy(), atol=1e-2)

# %% [markdown]
# With the $T^2$ factor the gradient stays the same size as $T$ grows, and at $T = 100$ it is
# $(z_s - z_t)/V$ after centring: matching logits, as Hinton et al. note for high temperatures.
#
# Distilling step by step (Hsieh et al. 2023, the figure in section 10 of Strabel's notes) asks
# the teacher, a large model prompted with chain-of-thought examples, for a label *and* a
# rationale, and trains the student on both as two tasks told apart by a prefix:
# $\mathcal{L} = \mathcal{L}_\text{label} + \lambda\,\mathcal{L}_\text{rationale}$, each a masked
# next-token loss like section 10.2's. At test time only the label is asked for, so the rationale
# costs nothing at inference. The paper's headline: a 770M-parameter T5 trained this way beat
# the 540B-parameter PaLM prompted with a few examples, using 80% of the ANLI training data
# {cite}`hsieh2023distilling`. Our teacher is a program, our task the sum of three digits modulo
# 10, and the rationale the running sums:

# %%
label, rationale = T.digit_example("352")
print(f"label task:     '352=' -> '{label}.'")
print(f"rationale task: '352?' -> '{rationale}.'")
assert label == str((3 + 5 + 2) % 10)

# %% [markdown]
# A program teacher is an exact one: its rationale *is* the computation, step by step, much like
# training on a scratchpad. A large model's rationales are noisier and less complete, so expect
# the effect here to be unusually large. Two students of the same size, trained for the same 800
# steps on the same 600 of the 1000 digit strings: one on the labels only, one on labels and
# rationales (half of each batch is then rationale examples, so it sees *fewer* label examples).
# Both are asked for labels only, on 200 strings neither saw.

# %% tags=["nbval-ignore-output"]
digit_strings = T.digit_strings(3)
seen, unseen = digit_strings[:600], digit_strings[-200:]
students = {wr: P.train_student(seen, with_rationale=wr) for wr in (False, True)}
label_only, step_by_step = (P.student_accuracy(students[wr], unseen) for wr in (False, True))
print(f"labels only: {label_only:.2f} right; labels and rationales: {step_by_step:.2f} right")
assert 0 <= label_only <= 1 and 0 <= step_by_step <= 1

# %% [markdown]
# In our runs the label-only student stayed near chance (0.1): it has to find the sum of three
# digits modulo 10 from 600 examples in one step. The step-by-step student scored between 0.77 and
# 0.96, depending on the machine and its kernels. The rationale task teaches the intermediate sum,
# which the label task then reuses through the shared weights. How much data does each student
# need? Hsieh et al.'s curve is accuracy against the amount of training data. Ours, with 200 and
# 400 strings added to the 600 above (four more students, the chapter's slowest cell):

# %% tags=["nbval-ignore-output"]
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

# %% [markdown]
# With 200 strings neither student learned (in our runs, one seed per point); somewhere between
# 200 and 400 the rationales started to pay, and the label-only student was still at chance with
# all 600. On this task the label-only student would need more data, or a bigger model, to catch
# up; the shape, not the size, of the gap is what it shares with the paper's claim.

# %% [markdown]
# ## 10.8 What the notes leave out (core, 2 min)
#
# Strabel's notes describe step 3 as "the model from 1 generates an output, the reward model
# calculates a reward and then the model is updated using ... PPO". Read literally, that
# maximises the reward model's score alone. The paper's objective (eq. 2) also subtracts the
# per-token KL to the SFT model, and its PPO-ptx variant adds the pre-training loss. Section 10.5
# (optional) reproduces what the literal reading gives: with $\beta = 0$ a flawed proxy's reward
# rises while the answers become wrong, and even a learned reward model is exploited when the
# KL term is weak.
#
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
# One is on the core path (about 10 minutes): a bug to find (the core prediction sits in
# section 10.4, where it belongs). The others are optional: an implementation with a checker that
# names the mistake, a derivation, two conceptual questions and a stretch problem. Solutions are
# folded below each exercise.

# %% [markdown]
# ```{exercise} Find the bug: GAE that reads past the end of an answer (core, 10 min)
# :label: ex-feedback-debug
#
# Section 10.4's `gae` assumes that every answer fills its row. A colleague adapted it to a
# batch of answers of different lengths, padded after the full stop (`mask` is 1 on each
# answer's tokens, 0 on the padding). PPO trained with it learns well when every answer has the
# maximum length and badly when the answers are short. Run it on the batch below and compare
# with the library's `PPO.advantages_and_returns` (its advantages before whitening); find what
# is wrong, and write the fixed version as `fixed_gae`, with zeros at the padding. The checker
# tries answers of several lengths, values that are not zero at the padding (the value head
# reads every position) and two settings of $\gamma$ and $\lambda$.
# ```


# %%
def buggy_gae(rewards, values, mask, gamma=1.0, lam=0.95):
    # rewards, values, mask (B, T): mask is 1 on each answer's tokens, 0 on the padding after it
    n = rewards.shape[-1]
    advantages = torch.zeros_like(rewards)  # (B, T)
    running = torch.zeros_like(rewards[:, 0])  # (B,)
    for t in reversed(range(n)):
        next_value = values[:, t + 1] if t + 1 < n else 0.0  # (B,)
        delta = rewards[:, t] + gamma * next_value - values[:, t]  # (B,)
        running = delta + gamma * lam * running
        advantages[:, t] = running * mask[:, t]  # no advantage on the padding
    return advantages


batch_mask = torch.tensor([[1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])  # answers of 2 and 4
batch_rewards = torch.tensor([[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]])  # the score at the end
batch_values = torch.tensor([[0.3, 0.5, 0.8, 0.9], [0.2, 0.4, 0.6, 0.8]])  # V at every position
print(buggy_gae(batch_rewards, batch_values, batch_mask).numpy().round(3) + 0.0)  # no -0.
library = PPO.advantages_and_returns(batch_rewards, batch_values, batch_mask, 1.0, 0.95, False)
print(library[0].numpy().round(3))


def fixed_gae(rewards, values, mask, gamma=1.0, lam=0.95):
    raise NotImplementedError  # your code here


check.masked_gae(fixed_gae)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-feedback-debug
# :class: dropdown
# ```


# %% tags=["solution"]
def fixed_gae(rewards, values, mask, gamma=1.0, lam=0.95):
    n = rewards.shape[-1]
    advantages = torch.zeros_like(rewards)  # (B, T)
    running = torch.zeros_like(rewards[:, 0])  # (B,)
    for t in reversed(range(n)):
        next_value = values[:, t + 1] * mask[:, t + 1] if t + 1 < n else 0.0  # 0 after the end
        delta = rewards[:, t] + gamma * next_value - values[:, t]  # (B,)
        running = (delta + gamma * lam * running) * mask[:, t]  # nothing flows back from padding
        advantages[:, t] = running
    return advantages


check.masked_gae(fixed_gae, require=True)

# %% [markdown] tags=["solution"]
# The answer ends at its full stop: there is no value after it, and nothing that happens after
# it belongs to it. The colleague's loop leaks the padding into the answer twice. At the last
# token, $\delta_T$ adds $\gamma V_{T+1}$, the value head's output at a padding position. And at
# every padding position $\delta_t = \gamma V_{t+1} - V_t$ is not zero, so the running sum
# carries those errors back to the answer's tokens. The mask on the output hides both, because
# it zeroes only the padding's own advantages. An answer that fills its row has no padding,
# which is why PPO learned there. Two tests would pass the wrong code: answers of one length,
# and a value head at zero (as at the start of training, so the bug bites only once the values
# are learned). The same fix in one line, with the page's `gae`:
# `gae(rewards * mask, values * mask, gamma, lam) * mask`, which is what the library does.
#
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Implement: the leave-one-out baseline (optional, 10 min)
# :label: ex-feedback-loo
#
# `train_rl(..., advantage="loo")` gives each answer the advantage "its total reward minus the
# mean total of the other $k - 1$ answers to the same prompt" (RLOO's baseline). Write
# `my_loo_advantages(total)` for a NumPy array `total` of shape (prompts, k), returning an
# array of the same shape. The checker compares it with the library's on inputs you did not
# choose. Then show that each row of the result sums to zero, and say why that matters.
# ```


# %%
def my_loo_advantages(total):
    raise NotImplementedError  # your code here


check.loo_advantages(my_loo_advantages)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-feedback-loo
# :class: dropdown
# ```


# %% tags=["solution"]
def my_loo_advantages(total):
    k = total.shape[1]
    others = (total.sum(axis=1, keepdims=True) - total) / (k - 1)  # (P, k)
    return total - others


check.loo_advantages(my_loo_advantages, require=True)
np.testing.assert_allclose(
    my_loo_advantages(np.array([[1.0, 0.0, 0.0, 1.0]])).sum(), 0.0, atol=1e-12
)

# %% [markdown] tags=["solution"]
# $A_i = R_i - \frac{1}{k-1}\sum_{j \ne i} R_j = \frac{k}{k-1}(R_i - \bar R)$, and the
# $R_i - \bar R$ of a row sum to zero. The baseline of answer $i$ does not depend on answer $i$,
# so subtracting it leaves the policy gradient unbiased (the mean of all $k$ would include $R_i$
# and shrink every advantage by $(k-1)/k$; that bias is small and GRPO accepts it). A prompt
# whose answers are all right or all wrong gives zero advantages: it teaches nothing, which is
# why RLVR runs filter prompts that are too easy or too hard.
#
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Derivation: the weight in DPO's gradient (optional, 8 min)
# :label: ex-feedback-dpo-gradient
#
# With $\hat r_w = \beta \log\frac{\pi_\theta(y_w)}{\pi_\text{ref}(y_w)}$ and $\hat r_l$ likewise,
# derive $\nabla_\theta \mathcal{L}_\text{DPO}$ for one comparison. Show that it is a weight
# times $\nabla\log\pi_\theta(y_w) - \nabla\log\pi_\theta(y_l)$, find the weight, and say when a
# comparison stops teaching. Check the weight with autograd on `dpo_loss`.
# ```

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-feedback-dpo-gradient
# :class: dropdown
# ```
#
# $\mathcal{L} = -\log\sigma(\hat r_w - \hat r_l)$ and $\frac{d}{dx}\left(-\log\sigma(x)\right) =
# -(1 - \sigma(x)) = -\sigma(-x)$. With $x = \hat r_w - \hat r_l$ and
# $\nabla \hat r = \beta \nabla\log\pi_\theta$,
#
# $$\nabla_\theta\mathcal{L}_\text{DPO} = -\beta\,\sigma(\hat r_l - \hat r_w)\,
# \big[\nabla\log\pi_\theta(y_w) - \nabla\log\pi_\theta(y_l)\big].$$
#
# The weight $\sigma(\hat r_l - \hat r_w)$ is large when the implicit reward ranks the pair the
# wrong way and goes to zero once the pair is ranked right by a wide margin: a comparison that
# is already "learned" stops teaching (Rafailov et al., section 4). The direction only asks for
# a *difference*; it can be followed by lowering both log-probabilities, the rejected one faster,
# which section 10.6's logs show at $\beta = 0.3$ and $1$.

# %% tags=["solution"]
lw, ll = torch.tensor([-3.0], requires_grad=True), torch.tensor([-4.0], requires_grad=True)
rw, rl, beta = torch.tensor([-3.5]), torch.tensor([-3.5]), 0.5
dpo_loss(lw, ll, rw, rl, beta).backward()
weight = torch.sigmoid(beta * (ll - rl) - beta * (lw - rw)).detach()  # sigma(r_l - r_w)
torch.testing.assert_close(lw.grad, -beta * weight)
torch.testing.assert_close(ll.grad, beta * weight)
print(f"weight sigma(r_l - r_w) = {float(weight):.4f}; dL/dlogp_w = {float(lw.grad):.4f}")

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Conceptual: what a reward model cannot know (optional, 5 min)
# :label: ex-feedback-shift
#
# Show that the Bradley-Terry loss of section 10.3 does not change when every reward of one
# prompt is shifted by the same amount $c(x)$. What does that mean for comparing the reward
# model's scores of answers to *different* prompts, and why does InstructGPT normalise its reward
# model before RL? Where does the same invariance appear in DPO's derivation?
# ```

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-feedback-shift
# :class: dropdown
# ```
#
# The loss depends on the rewards only through $r(x, y_w) - r(x, y_l)$, two answers to the
# same prompt, so $c(x)$ cancels. The data therefore says nothing about the level of the scores
# of one prompt against another: a score of 4 for an answer to one word and 2 for an answer to
# another may mean nothing, and a policy can only exploit the differences within a prompt. What
# fixes the level is accident (initialisation, the head's bias). InstructGPT adds a bias to its
# reward model so that the labellers' demonstrations score 0 on average before RL, which puts
# the scores on one level (paper, section 3.5). With per-prompt baselines such as RLOO's the
# shift cancels again; a learned value function has to learn it. In DPO, the
# $\beta \log Z(x)$ of the optimal policy's reward is exactly such a per-prompt shift, and it
# cancels for the same reason.

# %% tags=["solution"]
shift = torch.tensor([3.0, -7.0, 0.5])  # one c(x) per comparison's prompt
torch.testing.assert_close(pairwise_loss(r_w + shift, r_l + shift), pairwise_loss(r_w, r_l))

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Conceptual: a KL penalty, or early stopping? (optional, 8 min)
# :label: ex-feedback-concept
#
# (a) In section 10.5 the hacked policy first had to stop writing the full stop. Explain, with
# the per-token KL, why that step is expensive under $\beta = 0.2$ and free under $\beta = 0$.
# (b) Gao et al. found that, against a learned reward model, a larger KL coefficient does not
# buy a better true score at a given distance from the start: it mostly decides how far the
# policy goes, which stopping earlier decides too {cite}`gao2023scaling`. Do section 10.5's
# binned curves agree? (c) Then why does almost every RLHF run keep the KL term rather than stop
# early?
# ```

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-feedback-concept
# :class: dropdown
# ```
#
# (a) After the fourth letter the SFT model puts nearly all its probability on the full stop. A
# policy that writes a letter there pays $\log \pi(\text{letter}) - \log \pi^\text{SFT}(\text{letter})$,
# several nats, each time, which at $\beta = 0.2$ outweighs the 0.1 the proxy pays per letter. At
# $\beta = 0$ nothing opposes the proxy.
#
# (b) Not quite, here. At the same $\sqrt{\mathrm{KL}}$, $\beta = 1$ lost less of the truth than
# $\beta \le 0.2$ (about 0.07 less at 0.6 to 0.9, 0.1 less at 0.9 to 1.2, and on every seed in
# the first bin): the penalty did a little more than stopping earlier would have. That leans
# against Gao et al.'s finding, in a setting far from theirs (a policy of 26k parameters, 40
# iterations, a reward model that is wrong about whole kinds of answers), and a bin compares a
# few early iterations of a small $\beta$ with many late ones of a large $\beta$. Both agree on
# what matters most: the truth fell the further the policy went, whatever $\beta$, and a larger
# $\beta$ mainly kept it closer.
#
# (c) Because there is no gold signal to stop on in practice. Our truth curve uses the judge, and
# Gao et al.'s a large "gold" reward model standing in for people; a real run has neither at
# every step. The proxy it trains on keeps rising whether or not the answers improve, so the
# moment to stop cannot be read off the training curves, and people can be asked only now and
# then. The KL term puts the distance into the objective: its optimum,
# $\pi^* \propto \pi^\text{SFT} e^{r/\beta}$ (section 10.6), is a fixed point that training
# approaches rather than passes, so a run that goes on longer does not drift further, and a
# $\beta$ chosen once, with a few human evaluations, keeps meaning the same thing. Per token, it
# also charges exactly the moves that leave the SFT model's habits, like the unstopped answers of
# (a), which keeps the policy where the reward model's scores were trained and keeps PPO's
# updates stable. Gao et al. caution that their KL result may depend on the hyperparameters; it
# says that the KL term is no better than early stopping at a well-chosen distance, not that it
# is useless.
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
# good, so its first value loss should be lower and the early advantages less noisy; measure
# whether the reward curves differ over your three seeds before concluding. The price is a
# second transformer to run forward and backward at every step, which is why many open
# implementations share the body.
#
# ```{solution-end}
# ```

# %% [markdown]
# ## Summary
#
# - InstructGPT's three steps: SFT with the loss on the response (masking the prompt is a design
#   choice; here it helps); a reward model trained on $\binom{K}{2}$ comparisons per prompt with
#   $-\log\sigma(r_w - r_l)$; PPO against the reward model with a per-token KL penalty to the SFT
#   model. InstructGPT's reward model predicted its training labellers' preferences 72.4% of the
#   time and held-out labellers' 69.6%; the two groups agreed among themselves 72.6% and 77.3%.
# - The k1 and k3 estimates of the KL, averaged under the policy, are the exact KL; k3 is never
#   negative.
# - PPO's clipped objective equals the unclipped surrogate $\rho A$ inside $1 \pm \epsilon$ and
#   also wherever the ratio has moved against the advantage (the min keeps it, so the move is
#   undone); it is flat, with no gradient, only where the ratio has moved beyond $1 \pm \epsilon$
#   in the direction the advantage wants. PPO for language models spreads the reward over the
#   tokens (the KL at each, the score at the last), learns a value for every token and takes GAE
#   advantages (a backward loop that must stop at each answer's end); RLOO and GRPO replace the
#   value by the other answers' mean.
# - A policy optimised against a flawed proxy, or against a learned reward model off its data,
#   exploits it: the proxy rises while the truth falls. A larger $\beta$ mainly keeps the policy
#   closer to the start, where it loses less; Gao et al. found that at a given KL the penalty is
#   no better than stopping early (here it was a little better), and it is kept because there is
#   no true signal to stop on. Strabel's summary leaves the KL term out.
# - DPO is the reward model's loss with the implicit reward $\beta \log(\pi/\pi_\text{ref})$.
#   From the same comparisons, over five seeds (each with its own SFT model and comparisons) and
#   each method at its best learning rate, DPO reached a probability of the right answer of
#   0.70-0.77 and PPO against a reward model trained on them at most 0.54, behind DPO on every
#   seed and at a matched KL; PPO against the exact judge (RLVR, an oracle) reached 0.90-0.93.
#   DPO's implicit reward ranked held-out comparisons better (0.90-0.96) than the reward models
#   (0.83-0.89). DPO's loss can fall while the chosen answers become less likely; where the right
#   answers went must be measured, not assumed.
# - Distillation at temperature $T$ needs the factor $T^2$ to keep the soft and hard terms'
#   balance. A student trained on a program teacher's rationales as a second task learned a
#   digit-sum task that the same student trained on labels alone did not.

# %% [markdown]
# ## Quiz (optional, 20 min)
#
# Test yourself on this chapter's sections: multiple choice and numeric questions, each
# naming the section it tests. Choose or type an answer and check it: the quiz says whether it
# is right and why, for the wrong options too. The cell below needs nothing from the cells
# above it, so it also runs on its own when you come back to the chapter.

# %%
from course_lib import quiz

quiz.show("10_feedback_distillation")

# %% [markdown]
# ## References
#
# - G. Strabel, *Transformers*, lecture notes, 2023, sections 7 and 10 {cite}`strabel2023transformers`.
# - L. Ouyang et al., *Training language models to follow instructions with human feedback*,
#   NeurIPS 2022 (InstructGPT) {cite}`ouyang2022training`.
# - J. Schulman, F. Wolski, P. Dhariwal, A. Radford, O. Klimov, *Proximal policy optimization
#   algorithms*, 2017 {cite}`schulman2017proximal`; J. Schulman et al., *High-dimensional
#   continuous control using generalized advantage estimation*, ICLR 2016 {cite}`schulman2016high`.
# - J. Schulman, *Approximating KL divergence*, 2020 {cite}`schulman2020approximating`.
# - A. Ahmadian et al., *Back to basics: revisiting REINFORCE-style optimization for learning from
#   human feedback in LLMs*, ACL 2024 (RLOO) {cite}`ahmadian2024back`; Z. Shao et al.,
#   *DeepSeekMath*, 2024 (GRPO) {cite}`shao2024deepseekmath`; N. Lambert et al., *Tülu 3*, 2024
#   (RLVR) {cite}`lambert2024tulu`.
# - L. Gao, J. Schulman, J. Hilton, *Scaling laws for reward model overoptimization*, ICML 2023
#   {cite}`gao2023scaling`.
# - D. M. Ziegler et al., *Fine-tuning language models from human preferences*, 2019
#   {cite}`ziegler2019fine`; N. Stiennon et al., *Learning to summarize from human feedback*,
#   NeurIPS 2020 {cite}`stiennon2020learning`.
# - Z. Shi et al., *Instruction tuning with loss over instructions*, 2024 {cite}`shi2024instruction`.
# - R. Rafailov et al., *Direct preference optimization: your language model is secretly a reward
#   model*, NeurIPS 2023 {cite}`rafailov2023direct`.
# - G. Hinton, O. Vinyals, J. Dean, *Distilling the knowledge in a neural network*, 2015
#   {cite}`hinton2015distilling`.
# - C.-Y. Hsieh et al., *Distilling step-by-step! Outperforming larger language models with less
#   training data and smaller model sizes*, Findings of ACL 2023 {cite}`hsieh2023distilling`.

# %% [markdown]
# ## How this chapter is tested
#
# **Parity.** Every function written on the page equals the library's PyTorch version (one
# assertion beside it) and the NumPy reference in `course_lib/feedback/reference.py`:

# %%
g = torch.Generator().manual_seed(3)
lp, lq = -torch.rand(2, 3, 5, generator=g, dtype=torch.float64)  # (B, T) log-probabilities
rv, vv = torch.randn(2, 3, 5, generator=g, dtype=torch.float64)  # (B, T) rewards and values
zs3, zt3 = torch.randn(2, 4, 6, generator=g, dtype=torch.float64)  # (N, V) logits
pairs4 = -torch.rand(4, 6, generator=g, dtype=torch.float64)  # 4 x (N,) sequence log-probs
toks, tgts, msk = P.encode_pairs(["abcd=", "fcea="], ["dcba.", "aecf."])  # (B, L) each
z = torch.randn(*toks.shape, T.VOCAB.size, generator=g, dtype=torch.float64)  # (B, L, V)
on_page = {
    "masked_nll": (masked_nll(z, tgts, msk), ref.masked_nll(z, tgts, msk)),
    "pairwise_loss": (pairwise_loss(r_w, r_l), ref.pairwise_loss(r_w, r_l)),
    "kl_penalty k1": (kl_penalty(lp, lq), ref.kl_penalty(lp, lq)),
    "kl_penalty k3": (kl_penalty(lp, lq, "k3"), ref.kl_penalty(lp, lq, "k3")),
    "ppo_clip_objective": (ppo_clip_objective(lp, lq, rv), ref.ppo_clip_objective(lp, lq, rv)),
    "gae": (gae(rv, vv, 0.9, 0.8), ref.gae(rv, vv, 0.9, 0.8)),
    "dpo_loss": (dpo_loss(*pairs4, beta=0.3), ref.dpo_loss(*pairs4, beta=0.3)),
    "distillation_loss": (distillation_loss(zs3, zt3, 2.5), ref.distillation_loss(zs3, zt3, 2.5)),
}
for ours, numpy_ref in on_page.values():
    np.testing.assert_allclose(ours.detach().numpy(), numpy_ref, rtol=1e-6, atol=1e-12)
print(len(on_page), "functions on the page equal the NumPy references")

# %% [markdown]
# `course_lib/feedback/spec.py` lists eight mirrored functions (`token_logprobs`, `masked_nll`,
# `pairwise_loss`, `kl_penalty`, `ppo_clip_objective`, `gae`, `dpo_loss`, `distillation_loss`);
# the conformance suite runs the NumPy and PyTorch versions on the same random inputs in float64
# and float32. `tests/test_feedback.py` checks the losses against hand-derived values, the KL
# estimates against scipy's exact KL, the masked loss against PyTorch's `cross_entropy`, the
# distillation loss against scipy, PPO's gradient where it clips, the PPO pieces of
# `course_lib/feedback/ppo.py` (per-token rewards summing to eq. 2, GAE with $\gamma = \lambda = 1$
# equal to returns minus values, the leave-one-out advantages, the clipped value loss by hand,
# gradients reaching the value head, the value loss falling on a fixed batch, identical logs
# from repeated runs), the exercise checkers (they accept the library and name each planted
# mistake), and retrains short runs (marked `portability`), comparing only losses, rewards and
# accuracies, never weights, and asserting sanity ranges, not the chapter's conclusions.
#
# **Machine-dependent outputs.** The cells tagged `nbval-ignore-output` (the reward model's
# accuracy in section 10.3, the reward-hacking runs of section 10.5 and the distillation students
# of section 10.7) train long enough for another CPU's kernels to change the printed numbers in
# the second decimal: the reward model ranked 0.83, 0.84 or 0.85 of the held-out comparisons
# right on the CPUs and kernels we tried, the step-by-step student scored between 0.77 and 0.96,
# the label-only one about 0.1. The numbers the text relies on are printed from the shipped study
# instead. The other cells train briefly or not at all, and print probabilities computed exactly
# rather than sampled.
#
# **The shipped study** (`data/feedback/seed_study.json`, read in sections 10.3, 10.5 and 10.6)
# was made by
# `OMP_NUM_THREADS=1 nice -n 10 python -m course_lib.feedback.study data/feedback/seed_study.json`
# (`run_study` in `course_lib/feedback/study.py`, one CPU thread, 250 runs: five seeds, each with
# its own SFT model and comparisons, every method at five learning rates). `tests/test_feedback.py`
# runs the script on a tiny setting, checks the exact probability of the right answer against
# sampling and DPO's implicit-reward accuracy against its definition, and checks that the shipped
# file has every method, seed, $\beta$ and learning rate and the command. `data/README.md`
# describes the file.
#
# **Timing.** `benchmarks/feedback.py` (`python -m benchmarks.run feedback`) runs three seeds of
# the study with timings, at the default learning rate: seconds per PPO iteration (with the
# learned reward model and with the judge) and per DPO step, with the score and spread each
# reaches. Measured on an idle machine
# before the learned-reward-model runs were added, a PPO iteration against the judge took about
# as long as two DPO steps (0.04 s against 0.02 s, one CPU thread), and the value head added
# under a tenth; the reward model adds one forward pass per iteration. Timings taken on the
# shared machine where the study was re-run are not valid measurements and are not quoted.
#
# **Bad input** names the argument:

# %%
for bad in (
    lambda: acc.pairwise_loss(torch.zeros(3), torch.zeros(2)),
    lambda: ref.kl_penalty(np.zeros(2), np.zeros(2), "k2"),
    lambda: ref.ppo_clip_objective(np.zeros(2), np.zeros(2), np.zeros(2), clip=1.5),
    lambda: ref.masked_nll(np.zeros((2, 3)), np.zeros(2, dtype=int), np.zeros(2)),
    lambda: PPO.loo_advantages(torch.zeros(3)),
):
    try:
        bad()
    except (TypeError, ValueError) as err:
        print(f"{type(err).__name__}: {err}")
