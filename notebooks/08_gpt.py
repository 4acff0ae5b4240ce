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
# # 8. GPT, part 1: pre-training and generation
#
# GPT is the decoder-only Transformer of chapter 5 trained on one task: predict the next token.
# That task needs no labels, so any text will do, and a model that has learned it can write
# (sample one token at a time), can be fine-tuned for a labelled task with a small head, and,
# at GPT-3's scale, can do a task it is shown in its prompt. In this first part you pre-train a
# small GPT on Shakespeare on your own machine and sample from it; the second part,
# [`08_gpt_practice`](08_gpt_practice.ipynb), fine-tunes it, prompts it, and trains it faster.
#
# **After this part you can**
#
# - write the causal language-model loss with its shifted targets, and say why it is not a
#   "masked" language model;
# - read a GPT's forward pass (embeddings, causal blocks, tied output layer) and check it
#   against a NumPy version and against Hugging Face's GPT-2;
# - train one with AdamW, warm-up and cosine decay, gradient clipping and a held-out split, and
#   judge its loss against a uniform guess and a bigram count;
# - write the generation loop's sampling filters (temperature, top-k, top-p) and a KV cache
#   yourself, and check them against the library and against recomputation without the cache;
# - find a shifted-targets bug, and compare losses across tokenizers in the right unit.
#
# **Assumes**: chapters 2 (softmax, sampling), 4 (causal attention), 5 (the block and the
# decoder-only model), 6 (positions) and 7 (tokenisers); PyTorch's autograd and optimisers.
# **Core path**: about 53 minutes, every section of this part (its optional sections add about
# 0 minutes; part 2 has them), and the exercises at the end about 60 (the two implementations
# of the chapter's signature algorithms, 20 minutes each, take most of it).
# The optional quiz that ends the lesson takes about 18 minutes more.
#
# The chapter follows sections 4 to 6 of Strabel's notes {cite}`strabel2023transformers` (GPT
# {cite}`radford2018improving`, GPT-2 {cite}`radford2019language`, GPT-3
# {cite}`brown2020language`) and the next-word model of the lecture slides
# {cite}`marlin2022transformers`.

# %%
import copy
import json
import math

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
# ## 8.1 The objective: predict the next token (core, 4 min)
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
# context as it has. Training on random windows of the corpus (section 8.4) covers every
# position of every window: that is what makes pre-training cheap per token. The first number
# to check when a training run starts is this loss before any step; section 8.4 asks you to
# predict it for our character model.

# %% [markdown]
# ## 8.2 The model of eq. (21), on the page (core, 8 min)
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
#   last token $m$ (the GPT paper reuses $l$ there). Section 8.7 (in part 2) reads it at the
#   last *real* token, which matters once sequences are padded.
# - Eq. (21)'s "$\forall i$" (for the index $l$) and its $W'_e$ (which is $W_e^\top$, tied) are
#   corrected in chapter 5, section 5.10.
# - Two statements about GPT-2, that WebText was "based on Common Crawl" and that it reached
#   "state-of-the-art performance on many tasks without the need to fine-tune", are corrected
#   in section 8.8 (in part 2).

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
# ## 8.4 Pre-training on Shakespeare (core, 24 min)
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
# biases (`'bias': True` below); part 2's `modern` recipe (section 8.10) drops them.

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

# %% tags=["worksheet"]
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
# A fresh baseline GPT for our 77 characters, its weights drawn with a standard deviation of
# 0.02, has seen no text. Before running the next cell, write down its
# mean loss over 100 windows of the training text, in nats per character, to two decimals. Is
# it above or below the unigram's? (Within 2% counts as right.)
# ```

# %% tags=["worksheet"]
prediction = None  # your prediction here
fresh = GPT(RECIPES["baseline"].model_config(tok.vocab_size), seed=0)
with torch.no_grad():
    start_loss = float(fresh.loss(train_ids[:6400].reshape(100, 64)))  # 100 windows
check_prediction(
    prediction,
    round(start_loss, 2),
    what="the loss at initialisation",
    rtol=0.02,
    explanation=(
        "small weights make every logit close to 0, so every one of the 77 characters gets "
        "about 1/77 and the loss is ln 77 = 4.34 nats, above the unigram's 3.29. A guess near "
        "6.27 is log2 77, in bits; near 3.3, the unigram, would need the model to know the "
        "characters' frequencies already; near 0, a model that knows the text."
    ),
)

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
# `train` runs the same step with a progress bar and evaluates on the whole validation split
# every 50 steps here. Given `out=DIR`, it also saves a checkpoint at each evaluation, written to
# a temporary file and renamed, so that a crash never leaves half a file, and `resume=True`
# continues from it to exactly the losses of an uninterrupted run (the appendix's test). Its
# numbers vary slightly from CPU to CPU, and the cell prints how long it took on yours:

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

# %% tags=["worksheet"]
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
# ## 8.5 Sampling: greedy, temperature, top-k, top-p (core, 8 min)
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
# ## 8.6 The KV cache (core, 5 min)
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
# above does not slide: past 64 positions the model refuses the input with a `ValueError`);
# models with relative positions (RoPE) can instead keep a rolling cache (the stretch
# exercise). An exercise asks you to write the
# inside of the cache yourself: one new token through every layer of the model of section 8.2.

# %% [markdown]
# ## Exercises
#
# Six exercises: two implementations of the chapter's signature algorithms (a checker tells
# you what is wrong), a bug to find, a prediction from shipped data, a conceptual question and
# a stretch problem; the first prediction sat in section 8.4. Solutions are folded below each
# exercise. The two implementations take about 20 minutes each, the bug 10, the prediction and
# the question 5 each, the stretch problem 10.
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
# Each step costs one position's work in every layer, plus reading T cached keys and values;
# a causal mask is not needed, since the only query is the newest token, which may see
# everything. (Passing `is_causal=True` to PyTorch's attention with one query row would be a
# bug: its mask is aligned top-left, so the query would see key 0 only.)
#
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Find the bug: a trained model that scores worse than a guess
# :label: ex-gpt-findbug
#
# A classmate cuts windows and scores the shipped model of section 8.4 with the code below. It
# reports a validation loss far above the unigram's 3.29, although the same model scores about
# 1.9 nats per character in section 8.4. The model is fine. Find the bug, then write
# `loss_fn(logits, x, y)`: the mean cross-entropy over all L positions of every window, where
# `logits` (B, L, V) is the model's output on `x` (B, L) and `y` (B, L) holds the token that
# follows each position. The checker tries random batches in float32 and float64, and names
# known mistakes.
# ```


# %%
def windows(ids, starts, L):
    x = torch.stack([ids[s : s + L] for s in starts])  # (B, L)
    y = torch.stack([ids[s + 1 : s + L + 1] for s in starts])  # (B, L): the next tokens
    return x, y


def loss_colleague(logits, x, y):  # logits (B, L, V) of the model on x
    return A.causal_lm_loss(logits, y)  # the mean -log P of the next tokens


val = torch.as_tensor(val_ids)
x_val, y_val = windows(val, range(0, 64 * 50, 64), 64)  # 50 windows of the validation split
with torch.no_grad():
    print(f"the classmate's loss: {float(loss_colleague(model(x_val), x_val, y_val)):.2f}")


def loss_fn(logits, x, y):
    raise NotImplementedError  # your code here


check.next_token_loss(loss_fn)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-gpt-findbug
# :class: dropdown
# ```
#
# `causal_lm_loss` (section 8.1) shifts for you: it scores the logits at positions 0..L-2
# against the tokens at 1..L-1 *of what it is given*. Given `y`, which is already shifted, it
# scores position $i$ against `y[:, i + 1]`, the token *two* places ahead, which the model was
# never trained to predict. Shift once: either `causal_lm_loss(logits, x)` (L - 1 predictions
# per window), or all L positions against `y`, as asked. Libraries differ on this point:
# Hugging Face's `GPT2LMHeadModel(..., labels=...)` shifts inside, like `causal_lm_loss`, so
# it wants the inputs as labels, not targets shifted already.


# %% tags=["solution"]
def loss_fn(logits, x, y):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))  # all L


check.next_token_loss(loss_fn, require=True)
with torch.no_grad():
    print(f"the fixed loss: {float(loss_fn(model(x_val), x_val, y_val)):.2f}")

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
# ```{exercise} Predict, then check: characters or BPE tokens?
# :label: ex-gpt-units
#
# This chapter trains on characters: a 77-symbol vocabulary keeps the embedding small and the
# samples readable letter by letter. What does it cost? `course_lib.gpt.units` trained the
# baseline recipe, unchanged (same width, depth, batch of 12 windows of 64 tokens, 2000 steps),
# on a 512-token BPE of the training part (chapter 7) and on characters, two seeds each (the
# character run of seed 0 is the shipped checkpoint's). The cell prints each run's validation
# loss in nats per *token* and how many characters a token covers. Which model is better? Give
# the BPE model's mean loss in nats per *character*, to two decimals (within 2% counts).
# ```

# %%
units = json.loads(data_path("gpt", "char_vs_bpe.json").read_text())
print(units["command"])
for r in units["rows"]:
    last = r["history"][-1]
    print(
        f"{r['tokenizer']:4} seed {r['seed']}: {r['characters_per_token']:.2f} characters per "
        f"token; after 2000 steps {last['val_loss_per_token']:.2f} nats per token"
    )
bpe = [r["history"][-1]["val_loss_per_char"] for r in units["rows"] if r["tokenizer"] == "bpe"]
bpe_per_char = np.mean(bpe)  # what to predict: the mean of the two seeds
prediction = None  # your prediction here
check_prediction(
    prediction,
    round(float(bpe_per_char), 2),
    what="the BPE model's loss per character",
    rtol=0.02,
    explanation=(
        "a loss per token is the same total -log P of the text spread over fewer, longer units: "
        "divide it by the characters per token (1.92 here). The BPE model's 3.37 nats per "
        "token are about 1.76 per character, below the character model's 1.92. A guess near "
        "3.37 compares tokens with characters; one near 6.5 multiplied instead of dividing."
    ),
)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-gpt-units
# :class: dropdown
# ```

# %% tags=["solution"]
prediction = 1.76  # nats per token / characters per token, averaged over the two seeds
assert check_prediction(
    prediction, round(float(bpe_per_char), 2), what="the loss per character", rtol=0.02
).passed

# %% [markdown] tags=["solution"]
# A loss in nats per token cannot be compared across tokenizers: a BPE token covers about two
# characters here, so predicting it is harder even for a better model. The fair unit is nats
# per *character*, the same total $-\log P$ of the validation text divided by its characters:
# $\text{nats per character} = \text{nats per token} \times \text{tokens} / \text{characters}$.
# Per character, the BPE model is better after the same 2000 steps, with two seeds of each
# that differ by less than 0.01. Part of that is more reading, since each BPE window covers
# about 1.9 times as many characters; but at the same number of characters read (1.5 million,
# the character model's 2000 steps and the BPE model's first 1000 or so), it is still lower,
# about 1.88 against 1.92 (the curves below). This is not a clean comparison of tokenizers,
# and it is not meant to be one: with the model and steps held fixed, BPE changes three
# things at once, the text read per step, the context in characters (64 tokens are about 123
# characters), and the embedding table (512 rows instead of 77, about 55,000 more
# parameters). What it shows is the unit.

# %% tags=["solution"]
_, ax = new_axes(
    title="The same recipe on characters and on BPE tokens",
    xlabel="characters of training text read (millions)",
    ylabel="validation loss (nats per character)",
)
for r in units["rows"]:
    h = r["history"]
    chars_read = [x["step"] * 12 * 64 * r["characters_per_token"] / 1e6 for x in h]
    style = "o-" if r["tokenizer"] == "char" else "s--"
    label = f"{r['tokenizer']} (seed {r['seed']})"
    ax.plot(chars_read, [x["val_loss_per_char"] for x in h], style, label=label)
ax.legend()
plt.show()

# %% [markdown] tags=["solution"]
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
#   causal, not a masked, language model. Shift exactly once: a loss that shifts for you wants
#   the inputs, not targets shifted already.
# - The model (eq. 21) is token plus position embeddings, pre-LN causal blocks, a final norm and
#   the output layer tied to the token embedding; ours equals its NumPy reference, chapter 5's
#   decoder and Hugging Face's GPT-2 with the same weights.
# - Pre-training uses random windows, AdamW, warm-up and cosine decay (GPT-1's schedule),
#   clipping and a held-out split. A fresh model starts at $\ln V$; a bigram count is the first
#   yardstick to beat (2.52 nats per character here). Losses of different tokenizers compare
#   only per character.
# - Generation is a ten-line loop that samples one token at a time (greedy, temperature, top-k,
#   top-p); a KV cache gives the same tokens with one new position of work per step.
# - Part 2, [`08_gpt_practice`](08_gpt_practice.ipynb), fine-tunes this model, prompts a model
#   in context, and trains faster.

# %% [markdown]
# ## Quiz (optional, 18 min)
#
# Test yourself on this chapter's sections: multiple choice and numeric questions, each
# naming the section it tests. Choose or type an answer and check it: the quiz says whether it
# is right and why, for the wrong options too. The cell below needs nothing from the cells
# above it, so it also runs on its own when you come back to the chapter.

# %%
from course_lib import quiz

quiz.show("08_gpt")

# %% [markdown]
# ## References
#
# - G. Strabel, *Transformers*, lecture notes, 2023, sections 4 to 6 {cite}`strabel2023transformers`.
# - B. Marlin, *Transformers*, COMPSCI 689 lecture 23 slides {cite}`marlin2022transformers`.
# - A. Radford et al., "Improving language understanding by generative pre-training", 2018
#   {cite}`radford2018improving`.
# - A. Radford et al., "Language models are unsupervised multitask learners", 2019
#   {cite}`radford2019language`.
# - A. Fan, M. Lewis and Y. Dauphin, "Hierarchical neural story generation", ACL 2018
#   {cite}`fan2018hierarchical`; A. Holtzman et al., "The curious case of neural text
#   degeneration", ICLR 2020 {cite}`holtzman2020curious`.
# - I. Loshchilov and F. Hutter, "Decoupled weight decay regularization", ICLR 2019 (AdamW);
#   A. Karpathy, nanoGPT (the baseline recipe).
# - L. Liu et al., "On the variance of the adaptive learning rate and beyond", ICLR 2020 (RAdam)
#   {cite}`liu2020variance`; R. Xiong et al., "On layer normalization in the Transformer
#   architecture", ICML 2020 {cite}`xiong2020layer`.

# %% [markdown]
# ## How this chapter is tested
#
# The tests of both parts are listed here; those of fine-tuning, in-context learning and the
# speed-run are also in part 2's appendix.
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
# - **The exercise checkers** accept every form of a solution the exercises allow, name each
#   listed mistake (temperature after the softmax, top-p one token short, a cache position off
#   by one, a causal mask on the one new query, a loss shifted twice, shifted the wrong way or
#   summed), and answer garbage (no `return`, a per-token loss, NaN, a wrong signature) with a
#   message; `tests/test_conformance.py` runs the mirrored functions (`gpt_forward`,
#   `causal_lm_loss`, `classifier_logits`, `fine_tune_loss`) on random inputs in float64 and
#   float32, with `gradcheck`.
# - **On a GPU**: the trainer and the race take `device` and `autocast="bfloat16"`, the
#   attention is `scaled_dot_product_attention` (the flash kernel on CUDA) and a recipe may set
#   `compile=True`. The CPU suite checks bfloat16 autocast against float32, the fused attention
#   against the readable per-head loop, and a compiled training step against eager (skipped,
#   with the reason, where no C compiler is present); `benchmarks/cuda_check.sh` runs the same
#   paths on CUDA, as it did on the H200 of part 2's section 8.11.
# - **Speed**: `benchmarks/gpt.py` times generation with and without the cache and reruns the
#   race of part 2's section 8.10; `tests/test_gpt.py` checks on a tiny model that the race
#   takes turns.
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
assert abs(start_loss - math.log(tok.vocab_size)) < 0.05
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
