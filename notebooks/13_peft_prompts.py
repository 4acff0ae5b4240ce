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

    course_lib.colab.setup("13_peft_prompts")

# %% [markdown]
# # 13. Prompt tuning and prefix tuning (parameter-efficient fine-tuning, part 2)
#
# The first part of this chapter, [`13_peft`](13_peft.ipynb), fine-tuned chapter 8's Shakespeare
# GPT by changing its weights a little: LoRA trained a low-rank update beside every frozen
# matrix and taught the model to write words backwards. This part leaves every weight alone and
# trains **vectors in front of the input** instead: input embeddings that no token has (prompt
# tuning), or keys and values in every layer (prefix tuning). A written prompt is one point in
# the space these methods search, so they can start from it. What can such vectors make a
# frozen model do? We steer a model towards a task it half-does already, and towards one it
# cannot do at all, and measure both.
#
# **After this part you can**
#
# - write prompt tuning's and prefix tuning's forward passes, and say what each lets the frozen
#   model see (prefix tuning is a key-value cache that is trained);
# - start a soft prompt from a real prompt written as text, and say why that start is exactly
#   the discrete prompt;
# - run and read a fair steering experiment: a learning-rate grid whose best value is interior,
#   two starts, two seeds, a budget stated, and a reference that shows the task is learnable;
# - say which tasks these methods can and cannot be trained for, with Petrov et al.'s argument
#   for why (a hypothesis for our model).
#
# **Assumes**: part 1 of this chapter, sections 13.1 to 13.5 (LoRA, the reversal task);
# chapter 8, section 8.9 (the in-context model and its secret codes); attention with a KV cache
# (chapter 8). **Core path**: about 58 minutes (sections marked core, the prediction of 13.14
# included) and 4 for the core exercise; the optional sections add about 7 minutes, the other
# exercises about 35.
# The optional quiz that ends the lesson takes about 19 minutes more.
#
# This part follows section 13 of Strabel's notes {cite}`strabel2023transformers` ("Prompt
# design and tuning"), the two papers it lists, prompt tuning {cite}`lester2021power` and
# prefix tuning {cite}`li2021prefix`, and Petrov, Torr and Bibi's analysis of what they can do
# {cite}`petrov2024prompting`.

# %%
import math

import matplotlib.pyplot as plt
import numpy as np
import torch

from course_lib import seed_everything
from course_lib.checker import check_prediction
from course_lib.gpt import incontext as icl
from course_lib.peft import accelerated as fast
from course_lib.peft import elicit, steer
from course_lib.peft import exercises as check
from course_lib.peft import reference as ref
from course_lib.plotting import new_axes, use_style

seed_everything(0)
use_style()
torch.set_num_threads(1)  # these models are tiny: one thread is faster than two on a small CPU

# %% [markdown]
# ## 13.12 Prompt tuning and prefix tuning (core, 11 min)
#
# Section 13 of the notes ("Prompt design and tuning") names the two papers and nothing more
# (section 13.18). Both methods freeze every weight and train extra **vectors**:
#
# - **Prompt tuning** {cite}`lester2021power` learns $n$ vectors $P \in \mathbb{R}^{n \times d}$
#   placed before the token embeddings, as if $n$ tokens with trainable embeddings came first.
#   Only the first layer sees them as inputs; later layers see what the frozen network makes of
#   them. It trains $n \cdot d$ numbers.
# - **Prefix tuning** {cite}`li2021prefix` learns, for every layer and head, $n$ keys and $n$
#   values put in front of the keys and values computed from the tokens. Every layer's attention
#   reads its own trained prefix. It trains $n_\text{layers} \cdot 2 \cdot n \cdot d$ numbers.
#
# This part steers chapter 8's **in-context model**, the 2-layer GPT (width 64, rotary
# positions) that was pre-trained on Shakespeare with secret-code episodes mixed in. Here are
# the two forward passes. Prompt tuning puts the trained vectors before the embeddings and runs
# the frozen blocks over both (`steer.frozen_blocks` is the model's own blocks and final norm);
# prefix tuning is chapter 8's key-value cache, filled with trained keys and values instead of
# those of earlier tokens:

# %% tags=["worksheet"]
model, tok, _ = icl.load_incontext()  # chapter 8's in-context model, frozen
cfg = model.config


def prompt_forward(model, prompt, tokens):
    """Prompt tuning: trained vectors (n, d) before the tokens (B, L) -> logits (B, L, V)."""
    emb = model.tok_emb[tokens]  # (B, L, d): the frozen embeddings
    h = torch.cat([prompt.expand(len(tokens), -1, -1), emb], dim=1)  # (B, n + L, d)
    h = steer.frozen_blocks(model, h)  # (B, n + L, d): positions 0 .. n + L - 1
    return h[:, len(prompt) :] @ model.tok_emb.T  # (B, L, V): the real tokens, tied head


def prefix_forward(model, prefix, tokens):
    """Prefix tuning: trained keys and values (layers, 2, h, n, d_head) -> logits (B, L, V)."""
    B = len(tokens)
    cache = model.new_cache()  # a KV cache, filled with the trained prefix of every layer
    cache.layers = [(k.expand(B, -1, -1, -1), v.expand(B, -1, -1, -1)) for k, v in prefix]
    return model(tokens, cache)  # (B, L, V): the tokens sit at positions n .. n + L - 1


# %% [markdown]
# Inside each layer, a cached prefix means attention over $P + T$ keys with a causal mask shifted
# by $P$: every token sees the whole prefix and the tokens up to itself. Written out for one
# layer (the same function, in NumPy and PyTorch, is `ref.prefix_attention` and
# `fast.prefix_attention`):


# %%
def attention_with_prefix(q, k, v, pk, pv):
    """Causal attention of T tokens with P trained keys and values in front of theirs."""
    B, h, T, dk = q.shape  # q, k, v (B, h, T, dk): computed from the tokens
    P = pk.shape[-2]  # pk, pv (h, P, dk): trained, the same for every example
    k = torch.cat([pk.expand(B, -1, -1, -1), k], dim=-2)  # (B, h, P + T, dk)
    v = torch.cat([pv.expand(B, -1, -1, -1), v], dim=-2)  # (B, h, P + T, dk)
    scores = q @ k.transpose(-2, -1) / dk**0.5  # (B, h, T, P + T)
    sees = torch.ones(T, P + T, dtype=torch.bool).tril(diagonal=P)  # (T, P + T)
    scores = scores.masked_fill(~sees, float("-inf"))  # token i: the prefix and tokens 0 .. i
    return scores.softmax(dim=-1) @ v  # (B, h, T, dk)


print("which keys each token sees (T = 4 tokens, P = 2 prefix positions):")
print(torch.ones(4, 6, dtype=torch.int64).tril(diagonal=2))
qkv = torch.randn(3, 2, cfg.n_heads, 5, cfg.d_head)  # (3, B, h, T, dk)
pk, pv = torch.randn(2, cfg.n_heads, 7, cfg.d_head)  # (h, P, dk) each
page = attention_with_prefix(*qkv, pk, pv)  # (2, 4, 5, 16)
np.testing.assert_allclose(
    page.numpy(), ref.prefix_attention(*(t.numpy() for t in (*qkv, pk, pv))), atol=1e-5
)
torch.testing.assert_close(page, fast.prefix_attention(*qkv, pk, pv))
print("the page's prefix attention = reference = accelerated, shape", tuple(page.shape))

# %% [markdown]
# **Starting from text.** A written prompt is a point of both methods' search spaces: its token
# embeddings are a prompt $P$, and the keys and values it leaves in every layer's cache are a
# prefix. `steer.SoftPrompt(model, method, text)` starts the trained vectors there, so before any
# training the model computes exactly what it computes on the text followed by the input:

# %%
text = torch.tensor(tok.encode("\n\nkR\ncB\n"))  # (n,) = (8,): a written prompt
x = torch.tensor([tok.encode("k"), tok.encode("c")])  # (B, L) = (2, 1): two inputs
with torch.no_grad():
    on_text = model(torch.cat([text.expand(2, -1), x], dim=1))[:, len(text) :]  # (2, 1, V)
    for method in ("prompt", "prefix"):
        soft = steer.SoftPrompt(model, method, text)
        page_forward = prompt_forward if method == "prompt" else prefix_forward
        torch.testing.assert_close(page_forward(model, soft.vectors, x), soft(x))
        torch.testing.assert_close(soft(x), on_text)
        print(f"{method}: {tuple(soft.vectors.shape)}, {soft.trainable_parameters():,} trained")
print("answers after the written prompt:", tok.decode(on_text.argmax(-1).flatten().tolist()))

# %% [markdown]
# The page's two functions equal the library's `SoftPrompt`, and a soft prompt started from the
# text `\n\nkR\ncB\n` is that text: the model answers `R` after `k` and `B` after `c`, copying
# from the prompt as chapter 8 showed it does. Prefix tuning trains four times as many numbers
# here (2 layers, a key and a value each, against one input vector), and every layer reads its
# prefix directly. The appendix checks the course's prompt and prefix tuning against `peft`.

# %% [markdown]
# ## 13.13 Li and Liang's reparameterisation (optional, 3 min)
#
# Li and Liang report that optimising the prefix directly was unstable and did slightly worse
# (their section 4.3). They train instead a matrix $P'$ with one row per prefix position,
# narrower than the keys and values of all layers, and an MLP that maps each row to that
# position's keys and values in every layer: $P = \text{MLP}(P')$. After training only the MLP's
# output is kept, so inference is unchanged; during training the MLP ties the prefix's many
# numbers together. `peft` calls this `prefix_projection=True` and gives $P'$ the model's width
# $d$; part 1's `AdaptedGPT(base, prefix_tokens=8, prefix_projection=128)` does the same with a
# hidden width of 128 on the Shakespeare model (the appendix checks it against `peft`):

# %%
from course_lib.peft.model import AdaptedGPT
from course_lib.peft.task import load_base

base, _ = load_base()  # part 1's model: chapter 8's Shakespeare GPT
mlp_m = AdaptedGPT(base, prefix_tokens=8, prefix_projection=128)
print(mlp_m.prefix_mlp)
n_prefix = AdaptedGPT(base, prefix_tokens=8).trainable_parameters()
print(f"trained: {mlp_m.trainable_parameters():,}; kept for inference: {n_prefix:,}")

# %% [markdown]
# The MLP and $P'$ train about eighteen times as many numbers as the prefix they make. A second
# remedy for an unstable random start is the one of section 13.12: start the prefix from the
# activations of real words (the keys and values a written prompt leaves), which Li and Liang
# found clearly better than a random start when training data is scarce. The experiments below
# start from text or from random characters and train the prefix directly.

# %% [markdown]
# ## 13.14 A task the model half-does: a secret code without shots (core, 11 min)
#
# Chapter 8's in-context model answers a secret code by finding the query's letter among the
# lines of its prompt and copying what followed. Here is a task for it: **one fixed code of 16
# letters**, to be answered with **no shots** in the input, which is a single lower-case letter
# whose code letter must come next. Written out as an episode, the code is 50 characters
# (two newlines, then 16 lines `xY`), and the study below trains a soft prompt of that length,
# started from that text or from 50 random characters. The four codes the study uses come from
# a seed; here is the first, written out, and the zero-shot model:

# %% tags=["worksheet"]
study = elicit.load_study("code")
grid = [r for r in study["runs"] if r["steps"] == study["settings"]["steps"]]  # the 100-step grid
codes = study["codes"]  # 4 codes of 16 letters each
code = codes[0]
written = steer.written_code(code, seed=0)  # the code as episode text, in an order from seed 0
print(repr(written[:23]), "...", f"({len(written)} characters)")
xq, yq = steer.code_queries(code, tok)  # (16, 1) letters and (16,) their code letters
newlines = torch.tensor(tok.encode("\n\n")).expand(16, -1)
zero_shot = []  # (accuracy, loss) of each code, no shots
for c in codes:
    x_c, y_c = steer.code_queries(c, tok)
    with torch.no_grad():
        logits = model(torch.cat([newlines, x_c], dim=1))[:, -1]  # (16, V): the next character
    loss = torch.nn.functional.cross_entropy(logits, y_c).item()
    zero_shot.append(((logits.argmax(-1) == y_c).double().mean().item(), loss))
acc0, loss0 = np.mean(zero_shot, axis=0)
print(f"zero-shot, the four codes: accuracy {acc0:.2f}, loss {loss0:.2f}")
print(f"a uniform guess among 26 letters: accuracy {1 / 26:.2f}, loss ln 26 = {math.log(26):.2f}")

# %% [markdown]
# Zero-shot the model guesses: it knows that an upper-case letter comes next, not which, and its
# loss is about that of a uniform guess among the 26 upper-case letters. With the written code in
# front, every answer is somewhere in the prompt.

# %% [markdown] tags=["worksheet"]
# ```{exercise} Predict, then check: how much of the written code does the model read? (core, 3 min)
# :label: ex-prompts-predict
#
# Put the whole code, written out (50 characters), in front of each query. What share of the 16
# letters does the model answer right, averaged over the study's four codes and two line orders?
# Chapter 8, section 8.9.1, measured how far back the model finds a shot. Write a number
# between 0 and 1 (the check accepts within 0.1).
# ```

# %% tags=["worksheet"]
prediction = None  # your prediction: the share of the 16 letters answered right

read = []  # the share answered right after the written code: 4 codes, 2 line orders
for c in codes:
    x_c, y_c = steer.code_queries(c, tok)
    for seed in (0, 1):
        text_c = torch.tensor(tok.encode(steer.written_code(c, seed))).expand(16, -1)  # (16, 50)
        with torch.no_grad():
            logits = model(torch.cat([text_c, x_c], dim=1))[:, -1]  # (16, V)
        read.append((logits.argmax(-1) == y_c).double().mean().item())
share_read = float(np.mean(read))
reach = icl.accuracy_by_distance(model, tok, n_shots=8, n_episodes=200)  # chapter 8's reach
check_prediction(
    prediction,
    share_read,
    what="the share of the code the model reads",
    rtol=0,
    atol=0.1,
    explanation=check.written_code_explanation({d: reach[d] for d in (1, 3, 5, 8)}),
)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-prompts-predict
# :class: dropdown
# ```

# %% tags=["solution"]
prediction = 0.3  # 16 lines, of which the model reaches the last three or four
print(check_prediction(prediction, share_read, what="the share", rtol=0, atol=0.1))

# %% [markdown] tags=["solution"]
# The model finds a line reliably only when it is within about three lines of the query
# (chapter 8); the code has 16 lines. So roughly the letters whose lines come last are answered,
# a quarter to a third of them.
#
# ```{solution-end}
# ```

# %% [markdown]
# ## 13.15 Steering it: from the written code and from random characters (core, 16 min)
#
# So the written code is a prompt the model half-reads. Now train. The live cell below takes the
# first code and trains prompt tuning for 60 steps, every step on all 16 letters, with Adam at
# the learning rate the study found best for each start (shown below), once from the written
# code and once from 50 random characters:

# %% tags=["nbval-ignore-output"]
live = {}
for init in ("text", "random"):
    lr = elicit.best_code_lr(grid, "prompt", init)
    start = steer.start_text(init, written, seed=0, tokenizer=tok)  # (50,) token ids
    soft = steer.SoftPrompt(model, "prompt", start)
    live[init] = steer.steer_code(soft, xq, yq, steps=60, lr=lr, eval_every=5)
    print(f"from {init!r:<9} lr {lr:g}: {tok.decode(start.tolist())[:20]!r}...")

# %%
fig, ax = new_axes("Prompt tuning on one code (live)", "step", "accuracy on the 16 letters")
for init, c in live.items():
    ax.plot(c["steps"], c["accuracy"], marker="o", ms=3, label=f"from {init}")
ax.axhline(1 / 26, color="grey", ls=":", label="a guess (1/26)")
ax.legend()
plt.show()
for init, c in live.items():
    print(f"from {init}: step 0 accuracy {c['accuracy'][0]:.2f}, loss {c['loss'][0]:.1f};", end="")
    print(f" step 60 accuracy {c['accuracy'][-1]:.2f}")

# %% [markdown]
# Started from the written code, the soft prompt begins where the text does and gets every
# letter within a few dozen steps. Started from random characters it begins below chance (a
# random string sends the model far off: the loss starts near 10) and still gets there. One code
# and one run prove little; the study (`python -m course_lib.peft.elicit code`, its command and
# settings printed below) ran every combination of method, start and learning rate on the four
# codes with two seeds (a seed draws the line order of the written code, or the random
# characters), 100 steps each. The learning rates form a grid with steps of about 3, from
# $10^{-3}$ to 10; for each method and start, the table gives the rate with the lowest loss
# averaged over the run, and the accuracy at steps 0, 10, 20 and 100, one value per seed
# (averaged over the four codes):

# %%
print(study["command"], f"({study['settings']['steps']} steps; then 500 at the best rate)")
print(f"{'method':<8}{'start':<8}{'best lr':>8}   accuracy at step 0 | 10 | 20 | 100 (seeds 0, 1)")
for method in steer.METHODS:
    for init in steer.INITS:
        lr = elicit.best_code_lr(grid, method, init)
        by_seed = elicit.code_curves(grid, method=method, init=init, lr=lr)
        cells = " | ".join(
            " ".join(f"{c['accuracy'][c['steps'].index(s)]:.2f}" for c in by_seed.values())
            for s in (0, 10, 20, 100)
        )
        print(f"{method:<8}{init:<8}{lr:>8g}   {cells}")
long = [r for r in study["runs"] if r["steps"] > study["settings"]["steps"]]  # 500 steps
print("\nat the best rate, the eight runs of each method and start (4 codes, 2 seeds):")
for method in steer.METHODS:
    for init in steer.INITS:
        lr = elicit.best_code_lr(grid, method, init)
        runs = [r["curve"] for r in grid if (r["method"], r["init"], r["lr"]) == (method, init, lr)]
        by = max(c["steps"][c["accuracy"].index(1)] for c in runs)  # the last to get all 16
        again = [r["curve"]["accuracy"] for r in long if (r["method"], r["init"]) == (method, init)]
        low = min(min(a[a.index(1) :]) for a in again)  # after all 16, in the 500-step runs
        print(f"{method:<8}{init:<8} all 16 letters by step {by}; ", end="")
        print(f"then, in 500 steps, never below {round(low * 16)} of 16")

# %% [markdown]
# And the whole grid: the loss averaged over each run, against the learning rate, for every
# method and start (both seeds and four codes averaged), drawn and then printed:

# %%
fig, ax = new_axes(
    "Secret code: learning-rate grid (100 steps)", "learning rate", "mean loss over the run"
)
lrs = sorted({r["lr"] for r in grid})
table = []  # (method, start, the mean loss at each learning rate)
for method in steer.METHODS:
    for init in steer.INITS:
        mean = [elicit.grid_loss(grid, method=method, init=init, lr=lr) for lr in lrs]
        ax.plot(
            lrs, mean, marker="o", ls="-" if init == "text" else "--", label=f"{method}, {init}"
        )
        table.append((method, init, mean))
ax.set_xscale("log")
ax.set_yscale("log")
ax.legend()
plt.show()
print(f"{'learning rate':<16}" + "".join(f"{lr:>6g}" for lr in lrs))
for method, init, mean in table:
    print(f"{method:<8}{init:<8}" + "".join(f"{loss:>6.2f}" for loss in mean))

# %% [markdown]
# What the study shows, at its budget (100 steps, every step on all 16 letters; Adam at a
# constant rate; four codes, two seeds; nine learning rates from $10^{-3}$ to 10):
#
# - **Both methods learn every code.** At each method's and start's best rate, every one of the
#   32 runs answered all 16 letters by step 50 at the latest, and the same settings run for 500
#   steps (the study's long runs) stayed there, but for one run that dropped to 14 of 16 letters
#   for a moment. Started from the written code, the model first answers by
#   the procedure it has, looking the letter up in the prompt. What the trained vectors hold
#   after training we have not looked at; the stretch exercise shows that far fewer vectors
#   suffice, so they need not spell the code out line by line.
# - **The written start is a head start, and only that.** It begins at about 0.3 (what the model
#   reads of the text, as predicted above), a random start at 0 with a loss far above the
#   zero-shot model's. At small learning rates the written start stays far ahead: at $10^{-3}$,
#   prompt tuning's loss averaged over the run is 1.26 from the text and 4.00 from random
#   characters. At each start's best rate the head start is gone within ten or twenty
#   steps, and by step 10 the random starts are ahead. On a task this easy, how far a step goes
#   matters more than where the search begins. Lester et al. found that starting from real
#   tokens' embeddings beats random vectors on harder tasks with small T5 models; this task cannot
#   test that.
# - **The best rates differ by method and lie inside the grid**: $3 \cdot 10^{-2}$ and 0.1 for
#   prompt tuning, 0.3 and 1 for prefix tuning. Section 13.17 says why prefix tuning wants
#   larger steps.

# %% [markdown]
# ## 13.16 ... and a task it cannot do: reversal (core, 15 min)
#
# Part 1 taught the Shakespeare model to write words backwards (`stone:enots;`) with LoRA. Can
# trained vectors make the in-context model do it? First, does the frozen model copy or reverse
# letters in context at all? The standard test of copying is Olsson et al.'s
# {cite}`olsson2022context`: feed a random string twice; a model that copies from its context
# predicts the repeat far better than the first occurrence. And the reversal task's answer
# letters, before any training:

# %%
from course_lib.peft.task import HELD_OUT_SEED, answer_loss, reverse_examples

letters = "abcdefghijklmnopqrstuvwxyz"
gen = torch.Generator().manual_seed(0)
strings = [
    "".join(letters[i] for i in row) for row in torch.randint(0, 26, (200, 10), generator=gen)
]
twice = torch.tensor([tok.encode("\n\n" + w + w) for w in strings])  # (200, 22)
with torch.no_grad():
    logp = model(twice[:, :-1]).log_softmax(-1)  # (200, 21, V)
nll = -logp.gather(-1, twice[:, 1:, None])[..., 0]  # (200, 21): loss of each next character
print(f"loss on the first copy {nll[:, 2:11].mean():.2f}, on the repeat {nll[:, 11:].mean():.2f}")
held_out = reverse_examples(512, seed=HELD_OUT_SEED)  # (512, 12): part 1's held-out words
with torch.no_grad():
    frozen_loss = answer_loss(model, held_out).item()
print(f"reversal, frozen model: loss on the answer letters {frozen_loss:.2f}")
print(f"ln 26 = {math.log(26):.2f} (any letter), ln 5 = {math.log(5):.2f} (the word's letters)")

# %% [markdown]
# The repeat is no easier than the first copy: the model does not copy letters in general. Its
# in-context skill is the narrow one its pre-training taught, an upper-case letter after a
# lower-case one found earlier in an episode. Reversal asks for more: from each answer position
# the model must find a letter whose position moves with the answer's (the last letter first,
# then the one before it), a pattern of attention among the input's own letters. The reference
# lines for its loss: $\ln 26 = 3.26$, a uniform guess among the letters, and $\ln 5 = 1.61$,
# a uniform guess among the word's own five letters, which needs copying from the input but not
# the order.
#
# The study's second part (`python -m course_lib.peft.elicit reverse`) trains, on part 1's
# reversal task (batches of 32 fresh words, the loss and accuracy on 512 held-out words every
# 100 steps):
#
# - **full fine-tuning** of the same model (every weight, learning rate $10^{-3}$, seeds 0 and
#   1), the reference that shows the network can learn the task;
# - **prompt and prefix tuning** started from two written examples (24 characters, e.g.
#   `iipxt:txpii;zqyum:muyqz;`), at eight learning rates from $10^{-3}$ to 3 in steps of about 3,
#   1000 steps each (seed 0); then each method's best rate (lowest held-out loss at the end)
#   again with seed 1, and run four times as long (4000 steps, seed 0).

# %%
rev = elicit.load_study("reverse")
print(rev["command"])
rev_runs = rev["runs"]
trained = {run["method"]: run["trainable"] for run in rev_runs}
print("trained numbers:", {method: f"{n:,}" for method, n in trained.items()})
for run in rev_runs:
    if run["method"] == "full":
        c = run["curve"]
        at = next(s for s, a in zip(c["steps"], c["accuracy"], strict=True) if a >= 0.9)
        print(f"full fine-tuning, seed {run['seed']}: accuracy {run['accuracy']:.2f}, 0.9 at {at}")
print(f"\n{'method':<8}{'lr':>7}{'seed':>6}{'steps':>7}{'held-out loss':>15}{'accuracy':>10}")
for run in rev_runs:
    if run["method"] != "full":
        end = elicit.final_held_out(run)
        print(f"{run['method']:<8}{run['lr']:>7g}{run['seed']:>6}{run['steps']:>7}", end="")
        print(f"{end:>15.2f}{run['accuracy']:>10.2f}")

# %% [markdown]
# The held-out loss is the mean over the last three evaluations (on the same 512 held-out words
# the accuracy counts). The curves of each method's best learning rate (seed 0 run long, seed 1
# dashed) beside full fine-tuning, with the two reference lines:

# %%
fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4))
colours = {"prompt": "C0", "prefix": "C1", "full": "k"}
for run in rev_runs:
    best = run["method"] == "full" or run["lr"] == elicit.best_reverse_lr(rev_runs, run["method"])
    if best and (run["seed"] == 1 or run["steps"] > 1000 or run["method"] == "full"):
        c = run["curve"]
        label = f"{run['method']}, lr {run['lr']:g}, seed {run['seed']}"
        style = dict(ls="--" if run["seed"] == 1 else "-", color=colours[run["method"]])
        ax.plot(c["steps"], c["held_out_loss"], label=label, **style)
        ax2.plot(c["steps"], c["accuracy"], label=label, **style)
ax.axhline(math.log(26), color="grey", ls="-.", lw=0.8, label="ln 26: any letter")
ax.axhline(math.log(5), color="grey", ls=":", lw=0.8, label="ln 5: the word's letters")
ax.set(title="Reversal: held-out loss", xlabel="step", ylabel="loss on the answer letters")
ax.set_yscale("log")
ax2.set(title="Reversal: held-out accuracy", xlabel="step", ylabel="exact-match accuracy")
ax.legend(fontsize=7)
fig.tight_layout()
plt.show()

# %% [markdown]
# What was observed, at this budget (1000 steps at eight learning rates from $10^{-3}$ to 3,
# seed 0; each method's best rate again with seed 1, and with seed 0 for 4000 steps):
#
# - **Full fine-tuning learns it** within a few hundred steps, with both seeds: the network can
#   hold the task.
# - **Prompt tuning did not.** At every rate its held-out loss fell from 8.0 (the two written
#   examples in front, which this model cannot use) to about $\ln 26$, between 2.86 and 3.36,
#   and not one held-out word came out right, with either seed or after 4000 steps (2.82). It
#   learned that a lower-case letter comes next, and little about which.
# - **Prefix tuning learned it, slowly.** At $3 \cdot 10^{-2}$ and 0.1 its held-out loss went below
#   $\ln 5$ within 1000 steps (1.09 and 1.11; 1.03 with seed 1), so it had learned which letters
#   to write and partly in which order: 2% and 22% of the words came out whole (2% with seed 1).
#   Run for 4000 steps, from about step 2000 to 3800 its loss stayed between 0.66 and 0.76 and
#   it wrote at most 12% of the words whole; then it jumped: 0.28 of the words at step 3900,
#   0.81 at step 4000, still rising when the run stopped. At the other rates it ended between
#   2.5 and 3.9, around $\ln 26$. The long run is one seed, and when such a jump comes varies
#   with the seed (part 1's LoRA runs jumped hundreds of steps apart).
#
# So on this model prefix tuning, with 6,144 trained numbers, can be trained to reverse words,
# more than ten times slower than full fine-tuning in steps; prompt tuning, with 1,536, could
# not in this budget.

# %% [markdown]
# ## 13.17 Budgets, learning rates and a hypothesis (core, 5 min)
#
# **The papers' budgets.** Our runs are small beside the papers', and their learning rates do
# not carry over. Lester et al. trained prompts of 100 vectors (they tried 1 to 150) on T5 models
# of 60 million to 11 billion parameters for 30,000 steps at learning rate 0.3 with Adafactor,
# and prompt tuning matched full fine-tuning only near 10 billion parameters. Li and Liang
# trained GPT-2 Medium and Large (345 and 774 million parameters) with prefixes of 10 positions
# for table-to-text, for 10 epochs at batch size 5 and learning rate $5 \cdot 10^{-5}$ with
# AdamW. A learning rate means something only next to the size of what it moves: with Adam,
# each step moves every trained number by about the learning rate, whatever the gradient's
# size. The trained numbers of our two methods differ in size:

# %%
start = steer.start_text("text", written, seed=0, tokenizer=tok)  # the written code, (50,)
for method in steer.METHODS:
    vectors = steer.SoftPrompt(model, method, start).vectors.detach()
    print(f"{method}: root mean square of the trained numbers {vectors.pow(2).mean().sqrt():.2f}")

# %% [markdown]
# Prompt tuning's vectors are embeddings, about 0.12 per coordinate: Lester et al.'s 0.3 would
# move each of them by more than twice its size in one step, Li and Liang's $5 \cdot 10^{-5}$ by
# 0.04% of it (125 steps to move it by a twentieth). Prefix tuning's keys and values are about
# thirteen times larger, and its best learning rates in section 13.15 were three to thirty times
# larger than prompt tuning's. Hence one grid wide enough, from $10^{-3}$ to 10, that each
# method's best rate lies inside it. Li and Liang's rate lies far below it: in our 100 steps it
# would move prompt tuning's vectors by about 4% of their size.
#
# **Why?** A **hypothesis**, not a result of these runs. Petrov, Torr and Bibi
# {cite}`petrov2024prompting` show that in one attention layer a prefix cannot change how
# attention is distributed among the tokens themselves: each token's output becomes a mix of
# what it would have been without the prefix and of the prefix's values, in proportions set by
# how strongly it attends to the prefix (an optional exercise derives the mix). They argue that
# prompting, prompt tuning and prefix tuning can therefore draw out and combine skills the
# frozen model has, but can hardly teach it a new pattern of attention. The code needs no new
# pattern: its answer is a function of the current letter alone, which the frozen layers can
# compute from that letter and what the trained vectors add to it, and which the model's own skill
# gives at once from the written code. Reversal needs a new pattern among the input's own letters,
# and the single-layer argument shows its limit here: what layer 1's prefix adds to each letter
# changes the queries and keys that layer 2 computes from it, so layer 2's pattern among the
# letters can change. Prefix tuning sets keys and values in both layers directly; prompt tuning
# reaches them only through what the frozen layers compute from its input vectors. That may be why
# one learned reversal and the other did not; we have not looked inside the trained vectors to see.

# %% [markdown]
# ## 13.18 What the notes leave out (optional, 2 min)
#
# Section 13 of Strabel's notes, "Prompt design and tuning", is a heading and one line: "Need to
# cover [LL21] and [LARC21]", Li and Liang's prefix tuning and Lester, Al-Rfou and Constant's
# prompt tuning. Sections 13.12 to 13.17 cover both. Prompt *design*, writing the prompt by hand
# as chapter 8 wrote its shots, appears here as the starting point of the trained vectors; the
# notes say nothing of how either method is initialised or why the learning rates of the two
# papers differ by four orders of magnitude.

# %% [markdown]
# ## 13.19 Explore (optional, 2 min)
#
# Choose a method, a start and a learning rate of the code study's grid: the widget shows the
# accuracy on the 16 letters, step by step, for each seed (averaged over the four codes).

# %%
from course_lib.peft.widget import steer_explorer

steer_explorer(grid)

# %% [markdown]
# ## Exercises
#
# Four exercises: a conceptual question (core, 4 minutes), a bug to find, a derivation and a
# stretch problem (optional). Checkers run your function on inputs of their own and name the
# mistake; solutions are folded below each exercise. (The prediction of section 13.14 is the
# fifth.)
#
# ```{exercise} Prefixes, prompts and serving (core, 4 min)
# :label: ex-prompts-concept
#
# (a) Why can a trained prefix not be merged into the weights the way LoRA's
# $\frac{\alpha}{r}BA$ can, and what does it cost at inference? (b) A server hosts the soft
# prompts of 100 customers and batches their requests together. Can it? Compare with 100 LoRA
# adapters (part 1's exercise on serving).
# ```

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-prompts-concept
# :class: dropdown
# ```
#
# (a) A prefix is not an update of a matrix: it adds $P$ keys and values that every query
# attends to, inside a softmax, so no change of $W_q, W_k, W_v$ reproduces it. At inference it
# costs what $P$ extra tokens of context cost in every layer (more attention work and $P$ fewer
# positions for real text), though not their projections: the keys and values are stored.
# (b) Yes, and easily: the weights are shared and untouched, so each request in the batch simply
# carries its own prompt vectors (or its own prefix in the cache); the price is $n$ extra
# positions per request. Lester et al. name this mixed-task batching as an advantage of prompt
# tuning. Unmerged LoRA adapters can be batched too, with a pair of small matrix products per
# request and layer; merged ones cannot.
#
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Find the bug: a prefix the first tokens cannot see (optional, 10 min)
# :label: ex-prompts-debug
#
# A colleague wrote prefix attention in NumPy for a model whose prefix trains, yet the first
# tokens of every example seem to ignore it. The cell below calls it with all scores equal
# (zero queries and keys), three prefix positions whose values are 1 and four tokens whose
# values are 0, so that each output is the share of attention a token gives the prefix. Which
# shares should tokens 0 to 3 get? Compare with what the cell prints, find the bug and fix it
# (change as little as you can); then `check.prefix_attention(prefix_attention)` compares your
# function with the library's on inputs of its own (to a relative error of $10^{-6}$).
# ```


# %%
def prefix_attention(q, k, v, pk, pv):
    """q, k, v (B, h, T, dk); pk, pv (h, P, dk) -> (B, h, T, dk)."""
    B, h, T, dk = q.shape
    P = pk.shape[-2]
    k = np.concatenate([np.broadcast_to(pk, (B, h, P, dk)), k], axis=-2)  # (B, h, P + T, dk)
    v = np.concatenate([np.broadcast_to(pv, (B, h, P, dk)), v], axis=-2)
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(dk)  # (B, h, T, P + T)
    causal = np.tril(np.ones((T, P + T), dtype=bool))
    scores = np.where(causal, scores, -np.inf)
    w = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (w / w.sum(axis=-1, keepdims=True)) @ v  # (B, h, T, dk)


zeros = np.zeros((1, 1, 4, 2))  # q = k = v = 0: (B, h, T, dk) with T = 4 tokens
shares = prefix_attention(zeros, zeros, zeros, np.zeros((1, 3, 2)), np.ones((1, 3, 2)))
print("share of attention on the prefix, tokens 0 to 3:", shares[0, 0, :, 0].round(2))

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-prompts-debug
# :class: dropdown
# ```
#
# With equal scores a token spreads its attention evenly over the keys it sees: the whole prefix
# (3 keys) and the tokens up to itself, so token $i$ should give the prefix $3 / (4 + i)$: 0.75,
# 0.6, 0.5, 0.43. The colleague's code prints 1, 1, 1, 0.75. The mask is the bug:
# `np.tril(np.ones((T, P + T)))` lets token $i$ see columns $0 .. i$, the first $i + 1$ *prefix*
# positions; token 0 sees one prefix position and not even itself. Shifting the diagonal by $P$
# fixes it:


# %% tags=["solution"]
def prefix_attention(q, k, v, pk, pv):
    """q, k, v (B, h, T, dk); pk, pv (h, P, dk) -> (B, h, T, dk)."""
    B, h, T, dk = q.shape
    P = pk.shape[-2]
    k = np.concatenate([np.broadcast_to(pk, (B, h, P, dk)), k], axis=-2)  # (B, h, P + T, dk)
    v = np.concatenate([np.broadcast_to(pv, (B, h, P, dk)), v], axis=-2)
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(dk)  # (B, h, T, P + T)
    causal = np.tril(np.ones((T, P + T), dtype=bool), k=P)  # the prefix, then tokens 0 .. i
    scores = np.where(causal, scores, -np.inf)
    w = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (w / w.sum(axis=-1, keepdims=True)) @ v  # (B, h, T, dk)


check.prefix_attention(prefix_attention, require=True)
shares = prefix_attention(zeros, zeros, zeros, np.zeros((1, 3, 2)), np.ones((1, 3, 2)))
print("share of attention on the prefix, tokens 0 to 3:", shares[0, 0, :, 0].round(2))

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Derive: a prefix mixes, it does not re-route (optional, 10 min)
# :label: ex-prompts-derive
#
# Split token $i$'s scores into the prefix's, $s^P_{ij} = q_i \cdot p^k_j / \sqrt{d}$, and the
# tokens', $s^T_{ij} = q_i \cdot k_j / \sqrt{d}$ for $j \le i$. Show that its output with the
# prefix is
#
# $$o_i = (1 - \lambda_i)\, a^T_i + \lambda_i\, a^P_i, \qquad
# \lambda_i = \frac{\sum_j e^{s^P_{ij}}}{\sum_j e^{s^P_{ij}} + \sum_{j \le i} e^{s^T_{ij}}},$$
#
# where $a^T_i$ is causal attention over the tokens alone (no prefix) and $a^P_i$ attention over
# the prefix alone. Then write `prefix_share(q, k, pk)` in NumPy: the share $\lambda$ of every
# token, (B, h, T), for `q`, `k` (B, h, T, d_head) and `pk` (h, P, d_head), computed stably
# (large scores must not overflow). The checker compares it with the library's (to a relative
# error of $10^{-6}$); the cell after it checks the mix numerically. What does the formula say a
# prefix can and cannot change?
# ```


# %%
def prefix_share(q, k, pk):
    raise NotImplementedError  # your code here


check.prefix_share(prefix_share)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-prompts-derive
# :class: dropdown
# ```
#
# Token $i$'s softmax runs over both groups of keys. Its weights on the tokens are
# $e^{s^T_{ij}} / Z$ with $Z = Z^P + Z^T$, the sums of the exponentials of each group; since
# causal attention over the tokens alone uses $e^{s^T_{ij}} / Z^T$, the tokens' part is
# $\frac{Z^T}{Z} a^T_i = (1 - \lambda_i) a^T_i$, and the prefix's part is $\frac{Z^P}{Z} a^P_i$
# in the same way. In log-sum-exp form, $\lambda_i = \sigma(\log Z^P - \log Z^T)$, stable for any
# scores:


# %% tags=["solution"]
def prefix_share(q, k, pk):
    T, dk = q.shape[-2:]
    s_p = q @ np.swapaxes(pk, -1, -2) / np.sqrt(dk)  # (B, h, T, P)
    s_t = q @ np.swapaxes(k, -1, -2) / np.sqrt(dk)  # (B, h, T, T)
    s_t = np.where(np.tril(np.ones((T, T), dtype=bool)), s_t, -np.inf)  # causal
    log_zp = np.logaddexp.reduce(s_p, axis=-1)  # (B, h, T)
    log_zt = np.logaddexp.reduce(s_t, axis=-1)  # (B, h, T)
    return 1 / (1 + np.exp(log_zt - log_zp))  # sigma(log Z^P - log Z^T)


check.prefix_share(prefix_share, require=True)
g = np.random.default_rng(0)
q, k, v = g.normal(size=(3, 2, 2, 5, 4))  # (B, h, T, dk) each
pk, pv = g.normal(size=(2, 2, 3, 4))  # (h, P, dk) each
lam = prefix_share(q, k, pk)[..., None]  # (B, h, T, 1)
tokens_only = ref.prefix_attention(q, k, v, pk[:, :0], pv[:, :0])  # causal, no prefix
prefix_only = np.exp(q @ np.swapaxes(pk, -1, -2) / 2)  # (B, h, T, P), sqrt(dk) = 2
prefix_only = prefix_only / prefix_only.sum(-1, keepdims=True) @ pv  # attention over the prefix
mix = (1 - lam) * tokens_only + lam * prefix_only
np.testing.assert_allclose(ref.prefix_attention(q, k, v, pk, pv), mix, atol=1e-12)
print("prefix attention = (1 - lambda) tokens-only + lambda prefix-only: checked")

# %% [markdown] tags=["solution"]
# The prefix enters only through $\lambda_i$ and $a^P_i$. It can decide how much attention each
# token gives the prefix (through the query) and what the prefix's values add, but the tokens'
# own pattern $a^T_i$, which token attends to which, is the frozen model's, merely scaled by
# $1 - \lambda_i$. That is the core of Petrov et al.'s argument: a new pattern among the tokens,
# such as reversal's, is not something one layer's prefix can create. (Across layers the prefix
# does change what later layers receive, so the argument for a whole model is subtler; that is
# why the chapter calls it a hypothesis for ours.)
#
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Stretch: how few vectors hold the code? (optional, 15 min)
# :label: ex-prompts-stretch
#
# The soft prompts of section 13.15 have 50 vectors, the length of the written code. Train prompt
# tuning on the first code from random characters with 1, 4, 16 and 50 vectors (100 steps at the
# learning rate the study found best for random starts, `elicit.best_code_lr(grid, "prompt",
# "random")`; section 13.15's live cell shows the calls) and report the accuracy. What is the
# smallest length that holds all 16 letters, and what does that say about what a trained vector
# stores, compared with a written character?
# ```

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-prompts-stretch
# :class: dropdown
# ```

# %% tags=["solution"]
lr_random = elicit.best_code_lr(grid, "prompt", "random")
for n in (1, 4, 16, 50):
    start = steer.start_text("random", "x" * n, seed=0, tokenizer=tok)  # (n,) random characters
    c = steer.steer_code(steer.SoftPrompt(model, "prompt", start), xq, yq, steps=100, lr=lr_random)
    print(f"{n:>3} vectors: accuracy {c['accuracy'][-1]:.2f} after 100 steps")

# %% [markdown] tags=["solution"]
# One trained vector already gets most letters right and four hold all 16 within 100 steps: a
# trained vector is not a character, and the prompt need not spell the code out line by line.
# What the frozen network computes from the query letter plus a few well-chosen vectors in front
# of it is enough, a function of the current letter (section 13.17). (One code, one seed: the
# exact counts vary.)
#
# ```{solution-end}
# ```

# %% [markdown]
# ## Summary
#
# - Prompt tuning trains $n$ input vectors in front of the embeddings; prefix tuning trains $n$
#   keys and values in every layer, a key-value cache that is trained. Both leave every weight
#   alone, and both can start from a written prompt, which they then equal exactly.
# - On chapter 8's in-context model, prompt and prefix tuning learned a secret code of 16
#   letters with no shots in the input, every code within 50 steps at the best learning rate,
#   from the written code or from random characters; the written start is exactly the discrete
#   prompt, a head start that matters most at small learning rates.
# - Trained on reversal, which the frozen model cannot do at all, prompt tuning got no held-out
#   word right in 4000 steps (its loss stayed near $\ln 26$); prefix tuning, which sets keys and
#   values in every layer, learned it slowly (0.81 of the held-out words after 4000 steps, one
#   run), where full fine-tuning needed a few hundred steps.
# - Learning rates do not carry over between models: with Adam a step moves each trained number
#   by about the learning rate, so what matters is its size next to the vectors' own scale.
# - Petrov et al.'s argument: in one layer a prefix takes a share of each token's attention and
#   adds its values, but cannot re-route attention among the tokens; across layers what it adds
#   changes the next layer's queries and keys, which may be how prefix tuning learned reversal
#   here (a hypothesis).

# %% [markdown]
# ## Quiz (optional, 19 min)
#
# Test yourself on this chapter's sections: multiple choice and numeric questions, each
# naming the section it tests. Choose or type an answer and check it: the quiz says whether it
# is right and why, for the wrong options too. The cell below needs nothing from the cells
# above it, so it also runs on its own when you come back to the chapter.

# %%
from course_lib import quiz

quiz.show("13_peft_prompts")

# %% [markdown]
# ## References
#
# - G. Strabel, *Transformers*, lecture notes, 2023, section 13 {cite}`strabel2023transformers`.
# - B. Lester, R. Al-Rfou and N. Constant, "The power of scale for parameter-efficient prompt
#   tuning", EMNLP 2021 {cite}`lester2021power`.
# - X. L. Li and P. Liang, "Prefix-tuning: optimizing continuous prompts for generation", ACL 2021
#   {cite}`li2021prefix`.
# - A. Petrov, P. H. S. Torr and A. Bibi, "When do prompting and prefix-tuning work? A theory of
#   capabilities and limitations", ICLR 2024 {cite}`petrov2024prompting`.
# - C. Olsson et al., "In-context learning and induction heads", 2022 {cite}`olsson2022context`.

# %% [markdown]
# ## How this chapter is tested
#
# `tests/test_peft.py` checks `SoftPrompt` (both methods, started from text, equal the frozen
# model on the text followed by the input, for a learned-position and a rotary model; equal
# part 1's `AdaptedGPT` on the Shakespeare model, whose prompt and prefix tuning equal `peft`'s);
# the code task's helpers (seeded codes, written text, queries); the study script on a tiny
# setting and the shipped files (every planned run, the commands, budgets and seeds, every best
# learning rate interior to its grid); the checkers of this part (each accepts the right answer
# in every form the text allows, names at least three typical mistakes, and answers garbage with
# a message, never a traceback). `tests/test_conformance.py` runs `prefix_attention` (NumPy
# against PyTorch) on random shapes.
#
# The lesson's claims that rest on `peft` are checked here. **Prompt tuning, prefix tuning and
# the reparameterised prefix against `peft`**, on part 1's `AdaptedGPT` with the trainable
# vectors (and the MLP) copied from `peft`'s models on the Shakespeare GPT's weights. `peft` keeps
# the virtual positions in its logits for prompt tuning, so those are dropped; as in `peft`, the
# real tokens sit at positions $n$ to $n + L - 1$.

# %%
import logging
import warnings

logging.getLogger("transformers").setLevel(logging.ERROR)
warnings.filterwarnings("ignore", module="peft")  # peft notes that GPT-2 stores Conv1D weights
warnings.filterwarnings("ignore", category=FutureWarning)  # deprecation notices of transformers

from peft import PrefixTuningConfig, PromptTuningConfig, get_peft_model

from course_lib.peft.hf import copy_adapters_from_peft, to_hf_gpt2

t = reverse_examples(4, seed=0)  # (4, 12)
cases = (
    (PromptTuningConfig(num_virtual_tokens=8, task_type="CAUSAL_LM"), {"prompt_tokens": 8}),
    (PrefixTuningConfig(num_virtual_tokens=8, task_type="CAUSAL_LM"), {"prefix_tokens": 8}),
    (
        PrefixTuningConfig(
            num_virtual_tokens=8,
            task_type="CAUSAL_LM",
            prefix_projection=True,
            encoder_hidden_size=128,
        ),
        {"prefix_tokens": 8, "prefix_projection": 128},
    ),
)
for config, kw in cases:
    other = get_peft_model(to_hf_gpt2(base), config)
    mine = AdaptedGPT(base, **kw)
    assert sum(p.numel() for p in other.parameters() if p.requires_grad) == (
        mine.trainable_parameters()
    )
    copy_adapters_from_peft(other, mine)
    with torch.no_grad():
        logits = other(t).logits[:, -t.shape[1] :]  # (4, 12, V): the real tokens
        torch.testing.assert_close(mine(t), logits, atol=1e-4, rtol=1e-4)
    print(f"{kw}: agrees with peft")

# %% [markdown]
# **`SoftPrompt` against `AdaptedGPT`** on the Shakespeare model (a learned-position GPT): the
# same prompt vectors, or the same prefix, give the same logits; so the steering study's methods
# are the ones `peft` computes.

# %%
from course_lib.gpt.pretrained import load_pretrained

shakespeare, _ = load_pretrained()
two = torch.tensor(tok.encode(elicit.reverse_start(0)))  # (24,): two written examples
for method, kw in (("prompt", {"prompt_tokens": 24}), ("prefix", {"prefix_tokens": 24})):
    soft = steer.SoftPrompt(shakespeare, method, two)
    theirs = AdaptedGPT(base, **kw)
    with torch.no_grad():
        getattr(theirs, method).copy_(soft.vectors)
        torch.testing.assert_close(soft(t), theirs(t), atol=1e-5, rtol=1e-5)
print("SoftPrompt = AdaptedGPT for both methods")

# %% [markdown]
# **The shipped studies** hold every planned run with its budget; the live cell of section 13.15
# repeats the study's first code at seed 0 for 60 of its 100 steps, and ends where the study's
# run was at step 60 (up to another CPU's rounding of a few hundredths):

# %%
starts = [r["curve"]["accuracy"][0] for r in grid if r["init"] == "text"]
assert abs(np.mean(starts) - share_read) < 0.02  # started from text = the text (up to a tie)
planned = elicit.code_runs()
done = {(r["method"], r["init"], r["lr"], r["seed"], r["code"], r["steps"]) for r in grid}
assert {
    tuple(r[k] for k in ("method", "init", "lr", "seed", "code", "steps")) for r in planned
} == done
assert study["complete"] and rev["complete"]
for init, c in live.items():
    shipped = next(
        r
        for r in grid
        if (r["method"], r["init"], r["seed"], r["code"]) == ("prompt", init, 0, 0)
        and r["lr"] == elicit.best_code_lr(grid, "prompt", init)
    )
    i60 = shipped["curve"]["steps"].index(60)
    assert abs(shipped["curve"]["accuracy"][i60] - c["accuracy"][-1]) <= 2 / 16
lrs = sorted({r["lr"] for r in grid})
for method in steer.METHODS:
    for init in steer.INITS:
        assert lrs[0] < elicit.best_code_lr(grid, method, init) < lrs[-1]
rev_lrs = sorted({r["lr"] for r in rev_runs if r["method"] != "full"})
for method in steer.METHODS:
    assert rev_lrs[0] < elicit.best_reverse_lr(rev_runs, method) < rev_lrs[-1]
print("shipped studies complete; the live run matches; every best rate is interior")

# %% [markdown]
# Bad input is refused with a message:

# %%
for bad in (
    lambda: steer.SoftPrompt(model, "infix", text),
    lambda: steer.SoftPrompt(model, "prompt", torch.zeros(3)),
    lambda: steer.SoftPrompt(model, "prompt", torch.tensor([[1, 2]])),
    lambda: steer.SoftPrompt(base, "prompt", text),
    lambda: steer.SoftPrompt(model, "prefix", text)(torch.zeros(2, 60, dtype=torch.long)),
):
    try:
        bad()
    except (TypeError, ValueError) as err:
        print(f"{type(err).__name__}:", err)
