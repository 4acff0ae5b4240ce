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

    course_lib.colab.setup("11_long_sequences")

# %% [markdown]
# # 11. Long sequences: Transformer-XL, sparse, Longformer, BigBird, FlashAttention
#
# Attention compares every token with every other one, so its weights take $L^2$ numbers per
# head: 16 GiB in float32 for a book chapter of 65,536 tokens. This chapter is about the ways
# around that wall, and it measures memory at every step. Some methods change *which* pairs are
# compared (sparse patterns: the Sparse Transformer, Longformer, BigBird); one changes *how*
# the same exact attention is computed (FlashAttention, blocks and the online softmax); one
# changes what the model carries from one piece of text to the next (Transformer-XL's memory).
#
# **After this chapter you can**
#
# - write the strided and fixed index sets of the Sparse Transformer, Longformer's (dilated)
#   window with global tokens and BigBird's blocks as masks, and count what each computes;
# - compute attention under a pattern without ever forming the $L \times L$ matrix, and show
#   with the memory tracker that its memory grows linearly with $L$;
# - write FlashAttention's forward pass with the online softmax, check it against
#   `torch.nn.functional.scaled_dot_product_attention`, and say what it saves (memory, and
#   main-memory traffic by a constant factor) and what it does not (FLOPs, quadratic time),
#   and what FlashAttention-2 and -3 changed;
# - write Transformer-XL's segment recurrence and prove it equals one masked pass; (optional)
#   compute its four-term relative score with the "relative shift";
# - (optional) predict from a pattern's mask which questions of a long-range task a trained
#   layer can answer, and check the prediction by training one under each pattern.
#
# **Assumes**: chapter 2 (the online softmax), chapter 4 (masked attention, its cost) and
# chapter 6 (relative positions). NumPy and a little PyTorch.
# **Core path**: about 45 minutes of sections, and about 65 with the exercise marked core (the
# sliding window by blocks, about 20); the optional sections add about 44 minutes, the optional
# exercises about 45.
# The optional quiz that ends the lesson takes about 20 minutes more.
#
# The chapter follows section 9 of Strabel's notes {cite}`strabel2023transformers` (Transformer-XL,
# eq. 25; the Sparse Transformer, eqs. 26–28; Longformer; BigBird) and the "sub-quadratic
# self-attention" part of the handwritten lecture notes (local attention and FlashAttention
# {cite}`dao2022flashattention`).

# %%
import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F

from course_lib import seed_everything
from course_lib.attention import accelerated as att_acc
from course_lib.attention import reference as att_ref
from course_lib.checker import check_prediction
from course_lib.long_sequences import accelerated as acc
from course_lib.long_sequences import exercises as check
from course_lib.long_sequences import reference as ref
from course_lib.long_sequences import task as recall
from course_lib.long_sequences.reach import layers_to_reach, receptive_field
from course_lib.long_sequences.transformer_xl import TransformerXL, recurrence_mask
from course_lib.long_sequences.widget import pattern_explorer
from course_lib.measure import peak_tensor_memory
from course_lib.plotting import heatmap, use_style

rng = seed_everything(0)
use_style()
plt.rcParams["image.interpolation"] = "nearest"  # one flat colour per cell


def mib(n_bytes: int) -> float:
    return round(n_bytes / 2**20, 2)


# %% [markdown]
# ## 11.1 Why the square hurts (core, 3 min)
#
# Chapter 4's attention holds the logits and the weights, each (L, L), at once. The memory
# tracker of the course counts every tensor PyTorch creates while a function runs; here it
# follows one head of width 64 for growing L:


# %%
def extra_memory(fn, L: int, d: int = 64) -> int:
    """Peak bytes of tensors fn(q, k, v) creates beyond its inputs and its result."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(L, d, generator=g) for _ in range(3))
    return peak_tensor_memory(lambda: fn(q, k, v), exclude_result=True)


dense = {L: extra_memory(att_acc.scaled_dot_product_attention, L) for L in (256, 512, 1024, 2048)}
for L, peak in dense.items():
    print(f"L = {L:5}: {mib(peak):7.2f} MiB  ({peak / (L * L * 4):.1f} float32 (L, L) matrices)")
assert all(3.8 < dense[2 * L] / dense[L] < 4.4 for L in (256, 512, 1024))

# %% [markdown]
# Each doubling of L multiplies the memory by 4: two (L, L) matrices live at once. At
# L = 65,536 one such matrix takes $65{,}536^2 \times 4$ bytes = 16 GiB, per head and per layer,
# more than a laptop has. The time grows the same way (chapter 4 measured it, and showed that
# below $L = 2d$ the feed-forward network costs more than attention, though never more than
# twice as much).

# %% [markdown]
# ## 11.2 The Sparse Transformer's index sets (core, 12 min)
#
# Strabel's notes (eqs. 26–28, after Child et al. {cite}`child2019generating`) let query $i$
# attend to a *set* of keys $S_i$ only:
#
# $$\text{Attend}(X, S) = \big(a(x_i, S_i)\big)_{i}, \qquad
#   a(x_i, S_i) = \text{softmax}\!\left(\frac{(W_q x_i)^\top K_{S_i}^\top}{\sqrt{d}}\right) V_{S_i},$$
#
# with $K_{S_i}$ and $V_{S_i}$ the keys and values of the positions in $S_i$, stacked as rows
# (section 11.11 says what the notes print instead). Written as code, one query at a time:


# %%
def attend(q, k, v, sets):
    """Eqs. (26)-(28): out_i = softmax(q_i K_{S_i}^T / sqrt(d)) V_{S_i}; q, k, v (L, d)."""
    out = np.zeros((q.shape[0], v.shape[1]))
    for i, S_i in enumerate(sets):
        logits = q[i] @ k[S_i].T / np.sqrt(q.shape[1])  # (|S_i|,): only the keys in S_i
        w = np.exp(logits - logits.max())
        out[i] = (w / w.sum()) @ v[S_i]  # (d_v,)
    return out


L, l = 16, 4
q, k, v = rng.standard_normal((3, L, 8))
causal_sets = [list(range(i + 1)) for i in range(L)]  # S_i = {j : j <= i}: full attention
assert np.allclose(
    attend(q, k, v, causal_sets),
    att_ref.scaled_dot_product_attention(q, k, v, mask=att_ref.causal_mask(L)),
)

# %% [markdown]
# With $S_i = \{j : j \le i\}$ this is ordinary causal attention. The Sparse Transformer
# instead splits the work between two heads with small sets. With stride $l$:
#
# - **strided**: $A^{(1)}_i = \{t, \dots, i\}$ with $t = \max(0, i - l)$ (the recent past) and
#   $A^{(2)}_i = \{j \le i : (i - j) \bmod l = 0\}$ (every $l$-th position before);
# - **fixed**: $A^{(1)}_i = \{j \le i : \lfloor j/l \rfloor = \lfloor i/l \rfloor\}$ (the
#   own block) and $A^{(2)}_i = \{j \le i : j \bmod l \in \{l - c, \dots, l - 1\}\}$ (the last
#   $c$ positions of every block, "summaries").
#
# Two heads in a row connect any $j \le i$ to $i$ (head 2 jumps in steps of $l$, head 1 covers
# the rest), so nothing is out of reach. The library builds both as boolean masks:

# %%
fig, axes = plt.subplots(2, 3, figsize=(11, 7))
for row, (name, make) in enumerate(
    [
        ("strided", lambda h: ref.strided_mask(L, l, h)),
        ("fixed", lambda h: ref.fixed_mask(L, l, 1, h)),
    ]
):
    for col, (head, title) in enumerate([(1, "head 1"), (2, "head 2"), (0, "both heads")]):
        m = make(head)
        heatmap(
            axes[row, col],
            m.astype(float),
            title=f"{name}, {title}: {m.sum()} entries",
            xlabel="key j",
            ylabel="query i",
            cmap="Blues",
            colorbar=False,
        )
fig.suptitle(f"The Sparse Transformer's patterns, L = {L}, stride l = {l}, c = 1")
fig.tight_layout()
plt.show()
sets = [list(np.flatnonzero(row)) for row in ref.strided_mask(L, l)]
assert np.allclose(
    attend(q, k, v, sets),
    att_ref.scaled_dot_product_attention(q, k, v, mask=ref.strided_mask(L, l)),
)

# %% [markdown]
# Eq. (27) over these sets equals dense attention with the pattern as its mask (the last
# assertion). With $l \approx \sqrt{L}$ each query sees about $l$ recent keys and at most
# $L / l$ strided ones (about half that on average, since a query sees only the past): up to
# $2\sqrt{L}$ each, about $1.5\,L\sqrt{L}$ entries for the whole matrix (the cell below counts
# them). The cost is $O(L \sqrt{L})$ instead of $O(L^2)$, provided only the
# allowed entries are computed. A mask alone saves nothing: dense attention under the
# pattern's mask still computes all $L^2$ logits and then throws most of them away.

# %%
for L_ in (256, 1024, 4096):
    n = int(acc.strided_mask(L_, int(np.sqrt(L_))).sum())
    causal_entries = L_ * (L_ + 1) // 2
    print(f"L = {L_:5}: {n:9,} of {causal_entries:10,} causal entries, {n / L_**1.5:.2f} L sqrt(L)")
    assert n < 2 * L_**1.5 + 2 * L_

# %% [markdown]
# Which pattern suits which data? The notes, after Child et al., say the strided pattern works
# best where the data's structure lines up with the stride: an image of width 32 flattened row
# by row, with $l = 32$, puts the pixel above position $i$ at $i - 32$, a stride away. Text has
# no such period, and there the fixed pattern, whose "summary" positions every later token can
# read, worked better.

# %% [markdown]
# ## 11.3 Block-sparse attention that never forms the matrix (optional, 6 min)
#
# Computing only the allowed entries is what saves, and hardware likes them in blocks. So the
# patterns are usually stated over blocks of `block` positions: a boolean
# *layout* (L / block, L / block) says which query block sees which key block.
# `block_sparse_attention` takes the P pairs the layout names, computes their (block, block)
# logits as one batch, and runs each query block's softmax across its pairs (the maxima and sums
# are collected per query block). Here the strided pattern over 8 blocks of 16:

# %%
block, n_blocks = 16, 8
layout = ref.strided_mask(n_blocks, 2)  # (8, 8): the pattern over blocks
L = n_blocks * block
q, k, v = rng.standard_normal((3, 2, L, 8))  # (B, L, d)
mask = ref.expand_layout(layout, block) & att_ref.causal_mask(L)  # (L, L)
dense_out = att_ref.scaled_dot_product_attention(q, k, v, mask=mask)
ours = acc.block_sparse_attention(*map(torch.from_numpy, (q, k, v)), layout, block, causal=True)
np.testing.assert_allclose(ours.numpy(), dense_out, atol=1e-12)
np.testing.assert_allclose(
    ref.block_sparse_attention(q, k, v, layout, block, causal=True), dense_out, atol=1e-12
)
print(f"{layout.sum()} of {n_blocks**2} blocks computed")

# %% [markdown]
# The memory now follows the number of blocks computed, not $L^2$. With a fixed number of key
# blocks per row (BigBird's layout, section 11.5) it grows linearly:

# %%
sparse = {}
for L_ in (512, 1024, 2048):
    lay = ref.bigbird_layout(L_ // 64, 2, 1, 0)
    sparse[L_] = extra_memory(
        lambda q, k, v, lay=lay: acc.block_sparse_attention(q, k, v, lay, 64), L_
    )
    print(f"L = {L_:5}: block sparse {mib(sparse[L_]):6.2f} MiB, dense {mib(dense[L_]):6.2f} MiB")
assert (
    sparse[2048] / sparse[1024] < 2.2
    and dense[2048] / dense[1024] > 4
    and sparse[2048] < dense[2048]
)

# %% [markdown]
# Each doubling of L roughly doubles the block-sparse memory (a little more at these sizes:
# the first and last blocks are global and see everything) while the dense memory quadruples.
# The block-sparse version starts higher, since it copies the queries, keys and values of
# every pair of blocks it computes, and wins only at L = 2048 here, by a factor of about 1.2.
# If the two trends hold (an extrapolation from three lengths), the factor doubles with every
# further doubling of L.

# %% [markdown]
# ## 11.4 Longformer: a sliding window, dilation and global tokens (core, 10 min)
#
# Longformer {cite}`beltagy2020longformer` gives every token a window of $w$ neighbours on each
# side, $O(L w)$ work.
#
# **One meaning of $w$ in this chapter**: the number of neighbours on *each* side, so a window
# covers $2w + 1$ positions (or $w + 1$ when it is causal). The Longformer paper's $w$ is the
# whole window, $w/2$ on each side; section 11.11 quotes the notes in the paper's convention and
# says so where it does.
#
# A *dilated* window skips positions: with dilation $d$, query $i$ sees
# $i \pm d, i \pm 2d, \dots$, reaching $d$ times further for the same cost. A few **global**
# tokens (a classification token, the question in question answering) attend to everything and
# are attended by everything. As masks:

# %%
L = 24
patterns = {
    "window w = 2": ref.sliding_window_mask(L, 2),
    "dilated, w = 2, d = 3": ref.sliding_window_mask(L, 2, dilation=3),
    "window + global {0, 12}": ref.sliding_window_mask(L, 2) | ref.global_mask(L, [0, 12]),
}
fig, axes = plt.subplots(1, 3, figsize=(12, 4))
for ax, (title, m) in zip(axes, patterns.items(), strict=True):
    heatmap(
        ax,
        m.astype(float),
        title=f"{title}: {m.sum()}",
        xlabel="key j",
        ylabel="query i",
        cmap="Blues",
        colorbar=False,
    )
fig.tight_layout()
plt.show()

# %% [markdown]
# The window is computed without the $L \times L$ matrix by cutting the queries into blocks of $w$:
# block $a$ needs only the keys of blocks $a-1$, $a$ and $a+1$, so each block multiplies a $(w, d)$
# matrix by a $(d, 3w)$ one, and a mask inside those $3w$ keys keeps $|i - j| \le w$ (the first
# exercise asks you to write it). A dilated window is an ordinary window on each of the $d$
# interleaved subsequences $r, r+d, r+2d, \dots$ Both equal dense attention under the mask:

# %%
q, k, v = rng.standard_normal((3, L, 8))
t = [torch.from_numpy(a) for a in (q, k, v)]
for w, dil in [(2, 1), (2, 3), (5, 2)]:
    want = att_ref.scaled_dot_product_attention(q, k, v, mask=ref.sliding_window_mask(L, w, dil))
    np.testing.assert_allclose(acc.sliding_window_attention(*t, w, dil).numpy(), want, atol=1e-12)
    np.testing.assert_allclose(ref.sliding_window_attention(q, k, v, w, dil), want, atol=1e-12)
window_peaks = [
    extra_memory(lambda q, k, v: acc.sliding_window_attention(q, k, v, 32), L_)
    for L_ in (512, 1024, 2048)
]
print("sliding window (w = 32), MiB:", [mib(p) for p in window_peaks])
assert all(1.9 < b / a < 2.1 for a, b in zip(window_peaks, window_peaks[1:], strict=False))

# %% [markdown]
# Twice the length, twice the memory. The global tokens add a few full rows and columns; they
# are cheap to compute separately (a dense attention for $g$ queries, and $g$ extra keys for
# everyone), which is what Longformer does, with **separate projections** for the global
# queries, keys and values (`course_lib.long_sequences.longformer` writes that layer; it equals
# Hugging Face's, see the appendix).
#
# Longformer does not use one window everywhere. Its language models grow the window with
# depth, small in the lowest layers and larger higher up, and dilate only in the higher layers,
# on 2 heads, keeping the lower layers' full attention to their immediate neighbours: the reach
# grows layer by layer (section 11.6 counts it) while every layer still costs $O(L w)$.
#
# Move the controls to see each pattern's mask and how many of the $L^2$ entries it computes
# (on the website the explorer responds at a few precomputed settings; run the notebook for
# any):

# %%
pattern_explorer(L=32)

# %% [markdown]
# ## 11.5 BigBird: window, global and random blocks (optional, 6 min)
#
# BigBird {cite}`zaheer2020bigbird` works on blocks and combines three parts: each block row sees
# its window (itself and its two neighbours), the global blocks (the first and the last) and
# $r$ **random** blocks. The random links make the graph of who-sees-whom a good expander: any
# two tokens are a few layers apart. The notes' figure caption lists the three parts ($r = 2$,
# $w = 3$, $g = 2$; that $w$ counts the whole window of 3 blocks, one neighbour on each side in
# this chapter's convention) but section 9.4 has no text.
#
# The paper's case for this design is theoretical as well as practical. With the global tokens,
# the sparse attention is still a universal approximator of sequence-to-sequence functions, as
# full attention is, and Turing complete; both proofs route information through the global
# tokens, which the paper finds essential. Global tokens come in two kinds: existing tokens made
# global (ITC, the "internal transformer construction") or extra tokens added to the sequence,
# like a classification token (ETC, "extended"). The paper also proves the price: some tasks
# that one full-attention layer solves need many layers of a sparse one.

# %%
layout = ref.bigbird_layout(12, 2, 1, seed=0)
fig, ax = plt.subplots(figsize=(4.5, 4.2))
heatmap(
    ax,
    layout.astype(float),
    title="BigBird over 12 blocks (r = 2)",
    xlabel="key block",
    ylabel="query block",
    cmap="Blues",
    colorbar=False,
)
plt.show()
print("blocks per row:", layout.sum(axis=1).tolist())

# %% [markdown]
# A middle row sees 2 global + 3 window + 2 random = 7 blocks, whatever the length: linear cost.
# The rows beside a global block (1 and 10) see 6, because their window already holds that
# global block, and the two global rows see all 12. The library's `block_sparse_attention`
# under Hugging Face's pattern gives the outputs of its `BigBirdBlockSparseAttention` (the
# appendix says how this is checked). One trap: the random blocks are drawn in training mode
# only. In evaluation mode the helper returns an
# all-zero list (its comment reads "During inference (eval) no randomness"), so both random
# blocks of every row become block 0, which is global already. Block 0 is then attended
# **three times**: the output is not attention under any mask, but attention with a bias of
# $\log(1 + r) = \log 3$ on block 0's keys, and an evaluated BigBird has window and global
# attention only, with the first block over-weighted.

# %% [markdown]
# ## 11.6 How far does information travel? (optional, 5 min)
#
# A sparse layer sees little, but layers stack: after $n$ layers position $i$ has heard from
# every $j$ joined to it by $n$ allowed steps (the boolean $n$-th power of the mask). A task
# that needs position $i$ to read position $j$, such as copying a token from far back or
# recalling the value stored with a key, is out of reach with fewer layers than that path,
# whatever the training. For L = 256, how many layers until the last token has heard from the
# first, and token 200 from token 60 (none of them global)?

# %%
L = 256
reach_patterns = {
    "window w = 8": ref.sliding_window_mask(L, 8, causal=True),
    "dilated window w = 8, d = 4": ref.sliding_window_mask(L, 8, dilation=4, causal=True),
    "strided l = 16, both heads": ref.strided_mask(L, 16),
    "strided l = 16, head 1 only": ref.strided_mask(L, 16, head=1),
    "fixed l = 16, c = 1, both heads": ref.fixed_mask(L, 16, 1),
    "fixed l = 16, head 1 only": ref.fixed_mask(L, 16, 1, head=1),
    "window w = 8 + global token 0": ref.sliding_window_mask(L, 8) | ref.global_mask(L, [0]),
    "BigBird, blocks of 16, r = 2": ref.expand_layout(ref.bigbird_layout(16, 2, 1, 0), 16),
}
reach_table = {}  # name -> layers for 0 -> 255 and for 60 -> 200 (None: never)
for name, m in reach_patterns.items():
    reach_table[name] = (layers_to_reach(m, 255, 0), layers_to_reach(m, 200, 60))
    first, middle = reach_table[name]
    print(f"{name:32} {int(m.sum()):6,} entries; layers 0 -> 255: {first}, 60 -> 200: {middle}")
assert reach_table["window w = 8"] == (32, 18)
assert reach_table["strided l = 16, both heads"] == (2, 2)
assert reach_table["dilated window w = 8, d = 4"] == (None, 5)

# %% [markdown]
# A window of 8 needs 32 layers to carry the first token to the last: it sees locally and
# forgets globally. The two factorised heads of the Sparse Transformer connect anything in 2
# layers, and each head alone does not (the fixed pattern's head 1 never leaves its block). A
# dilated window alone **never** connects positions whose distance is not a multiple of $d$
# (255 is not a multiple of 4; 140 is, and takes 5 layers): the $d$ interleaved subsequences
# never meet, which is why Longformer dilates only some heads and keeps others undilated. A
# global token connects everything in 2 layers, through itself; so do BigBird's global blocks
# (at this small L its 16 blocks still cover half of the matrix; the share falls as 7 / (L /
# block) for longer sequences).

# %% [markdown]
# ## 11.7 A task that needs long range, trained under each pattern (optional, 15 min)
#
# Counting paths says what a pattern *could* carry; training says what a model *does* with it.
# The task is **associative recall at a distance**. A sequence of $L = 128$ tokens is mostly
# filler. Two positions each hold a *pair*: one token that stands for a key together with its
# value (written `k3=v5`, a single token, not three). The last token asks for one of the keys
# (`k3?`). The answer is the value stored with it, one of 8, so
# guessing gets 1/8 right. The pair lies anywhere before the question, from 1 to 127 positions
# away. Seeded generation gives the same examples on every machine; here is a short one:

# %%
small = recall.RecallTask(L=12, n_pairs=2, n_keys=4, n_values=4, n_filler=2)
example = recall.make_recall(1, small, seed=3)  # (tokens (1, L), answer (1,), position (1,))
text = recall.describe_recall(example.tokens[0], small)
key, answer = int(example.tokens[0, -1]) - small.first_query, int(example.answer[0])
print(text, f"-> v{answer}")
assert text.endswith(f"k{key}?") and f"k{key}=v{answer}" in text

# %% [markdown]
# The model is as small as it gets: token embeddings, **one** attention layer with one head
# under the pattern's mask, read at the last position, and a linear layer from there to the 8
# values (`course_lib/long_sequences/task.py`, `RecallModel`). Read at the last position, only
# the **last row** of the mask matters, so the model computes keys and values for that row's
# positions only: a sparse pattern's saving, in miniature. That is the same as running the
# whole masked layer and keeping its last row:

# %%
task = recall.RecallTask()  # L = 128, 2 pairs, 8 keys, 8 values, 16 filler tokens
patterns = recall.recall_patterns(task.L)  # name -> (L, L) mask, from this chapter's functions
tokens = recall.make_recall(4, task, seed=0).tokens  # (4, L)
mask = patterns["sliding window w=32"]
model = recall.RecallModel(mask[-1], task.vocab_size, task.n_values)
with torch.no_grad():
    x = model.embed(tokens)  # (B, L, d)
    layer = att_acc.scaled_dot_product_attention(
        model.W_q(x), model.W_k(x), model.W_v(x), mask=mask
    )
    torch.testing.assert_close(model(tokens), model.readout(x[:, -1] + layer[:, -1]))

# %% [markdown]
# Now one model per pattern, each with the same initial weights and the same 300 batches of 64
# fresh examples (Adam, one CPU thread, about 15 seconds in all), then 2000 test questions.
# "reachable" is the share of questions whose pair lies in the query's row of the mask; the
# accuracy is split between those and the rest, and by the distance from the pair to the
# question. This is one training run per pattern (one seed). The effects below are far larger
# than the sampling error of 2000 questions (a standard error of at most 0.011 on an accuracy,
# more in the distance bins, which hold fewer questions), and the claims are about which
# questions can be answered at all.

# %% tags=["nbval-ignore-output"]
rows = recall.compare_patterns(patterns, task)  # trains 7 models
bins = recall.BIN_NAMES  # ('d 1-16', 'd 17-32', 'd 33-63', 'd 64+'): distance to the pair
print(f"{'pattern':32} {'keys':>4} {'reach':>5} {'acc':>5} {'in row':>6} {'not':>5}", *bins)
for r in rows:
    print(
        f"{r['pattern']:32} {r['keys_seen']:4} {r['reachable']:5.2f} {r['accuracy']:5.2f}"
        f" {r['acc_reachable']:6.2f} {r['acc_unreachable']:5.2f}",
        *(f"{r[b]:{len(b)}.2f}" for b in bins),
    )

# %%
fig, ax = plt.subplots(figsize=(8, 4.2))
heatmap(
    ax,
    np.array([[r[b] for b in bins] for r in rows]),
    title=f"Recall accuracy by distance, one layer (chance {task.chance})",
    xlabel="distance from the pair to the question",
    ylabel="pattern",
    xticklabels=[b.removeprefix("d ") for b in bins],
    yticklabels=[r["pattern"] for r in rows],
    annotate=True,
)
fig.tight_layout()
plt.show()
by = {r["pattern"]: r for r in rows}
window = by["sliding window w=32"]
assert window["d 64+"] < task.chance + 0.05 and window["acc_unreachable"] < task.chance + 0.05
assert window["acc_reachable"] > 0.5  # it learned: what it can see, it answers
for name in ("dense (causal)", "Longformer w=32 + global query", "BigBird blocks 16, r=2"):
    assert by[name]["reachable"] == 1 and by[name]["d 64+"] > 0.6

# %% [markdown]
# Every model learned the task (look at the column "in row"); what differs is *where* it can
# answer, and the mask's last row says where: right inside the row, chance outside it.
#
# - **Dense** sees every position: it answers at every distance (about 0.9 after 300 steps;
#   more steps would raise it everywhere alike).
# - **The sliding window** ($w = 32$) answers the questions whose pair is at most 32 back
#   about 0.8 of the time (dense: about 0.9; one seed, so read the gap as "somewhat lower", not
#   as a measured difference), and is at chance beyond. That is not a failure of training:
#   for those questions, nothing inside its row says anything about the answer. Section 11.6's
#   count says a window of 32 needs 4 layers to carry position 0 to position 127.
# - **Strided** and **fixed** see their local part (16 back, or the own block of 16) and a few
#   columns beyond (every 16th position; the last 2 of every block): right on those, chance on
#   the rest, so a little above chance far away. Their promise, that *two* layers reach
#   everything, needs the second layer.
# - **Longformer** with the question as a global token sees everything from the question:
#   this is how Longformer does question answering, with the question's tokens global. A global
#   token elsewhere (a classification token at position 0) would need a second layer to pass on
#   what it gathered.
# - **BigBird** looks dense here for the same reason: the question sits in the last block,
#   which is global. A middle position sees its window, the two global blocks and 2 random
#   blocks, and would miss most pairs.
# - **Transformer-XL** with segments and memory of 32: the question, the last position of its
#   segment, sees its own segment and the memory before it, 63 positions back. Right up to 63,
#   chance from 64 on. Each more layer reaches further back (section 11.9).
#
# The number of layers each pattern would need to carry the first token to the question, from
# section 11.6:

# %%
needed = {name: layers_to_reach(m, task.L - 1, 0) for name, m in patterns.items()}
for name, n in needed.items():
    print(f"{name:32} {n} layer{'s' if n > 1 else ''}")
assert (
    needed["sliding window w=32"] == 4
    and needed["strided l=16"] == 2
    and needed["dense (causal)"] == 1
)

# %% [markdown]
# ## 11.8 FlashAttention: exact attention in blocks (core, 12 min)
#
# The handwritten notes: "can get around quadratic memory cost by being clever (Flash
# Attention)". FlashAttention {cite}`dao2022flashattention` computes *exactly* the dense
# attention, but never stores the (L, L) weights. Keys and values arrive in blocks; for each
# query it keeps three running numbers, chapter 2's online softmax {cite}`milakov2018online`
# with a vector attached: the maximum $m$ of the logits so far, the sum $s$ of $e^{x_j - m}$
# and the sum $\text{acc}$ of $e^{x_j - m} v_j$. When a block raises the maximum, the old sums
# are rescaled by $e^{m_\text{old} - m_\text{new}}$. At the end, $\text{out} = \text{acc} / s$:


# %%
def flash_forward(q, k, v, block=4):
    """softmax(q k^T / sqrt(d)) v by blocks of keys; q (L_q, d), k (L_k, d), v (L_k, d_v)."""
    m = np.full(q.shape[0], -np.inf)  # (L_q,): running max of the logits
    s = np.zeros(q.shape[0])  # (L_q,): running sum of exp(logit - m)
    acc_ = np.zeros((q.shape[0], v.shape[1]))  # (L_q, d_v): running sum of exp(logit - m) v_j
    for start in range(0, k.shape[0], block):
        logits = q @ k[start : start + block].T / np.sqrt(q.shape[1])  # (L_q, block)
        m_new = np.maximum(m, logits.max(axis=1))  # (L_q,)
        p = np.exp(logits - m_new[:, None])  # (L_q, block)
        scale = np.exp(m - m_new)  # (L_q,): 0 for the first block
        s = scale * s + p.sum(axis=1)
        acc_ = scale[:, None] * acc_ + p @ v[start : start + block]
        m = m_new
    return acc_ / s[:, None]  # (L_q, d_v)


q, k, v = rng.standard_normal((3, 10, 8))
mine = flash_forward(q, k, v, block=3)
np.testing.assert_allclose(mine, att_ref.scaled_dot_product_attention(q, k, v), atol=1e-12)
np.testing.assert_allclose(mine, ref.flash_attention(q, k, v, block_size=3), atol=1e-12)
t = [torch.from_numpy(a) for a in (q, k, v)]
np.testing.assert_allclose(mine, acc.flash_attention(*t, block_size=3).numpy(), atol=1e-12)
np.testing.assert_allclose(mine, F.scaled_dot_product_attention(*t).numpy(), atol=1e-12)

# %% [markdown]
# The function on the page, the library's NumPy reference (which also loops over blocks of
# queries), its PyTorch twin and PyTorch's fused `scaled_dot_product_attention` agree to
# rounding. Only a (L_q, block) tile of logits exists at any time; the library's version also
# tiles the queries, so the tile is (block, block). The query blocks do not depend on one
# another (each has its own running maximum, sum and output), so they can be computed at the
# same time, which is how a GPU keeps all its cores busy.
#
# The backward pass needs the weights again. Storing them would bring back the $L^2$ memory, so
# the library's `torch.autograd.Function` saves only the output and one number per query, the
# log-sum-exp $\ell_i = m_i + \log s_i$, and recomputes each tile's weights
# $P_{ij} = e^{x_{ij} - \ell_i}$ block by block. The softmax's backward needs
# $\sum_j P_{ij}\, dP_{ij}$, which equals $dO_i \cdot O_i$: it also comes from the output alone.
# Forward and backward together, against the explicit attention of chapter 4:


# %%
def step(attend_fn, L_, d=64):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(L_, d, generator=g, requires_grad=True) for _ in range(3))
    return peak_tensor_memory(lambda: attend_fn(q, k, v).sum().backward())


for L_ in (1024, 2048):
    explicit = step(
        lambda q, k, v: att_acc.scaled_dot_product_attention(
            q, k, v, mask=att_acc.causal_mask(q.shape[0])
        ),
        L_,
    )
    flash = step(lambda q, k, v: acc.flash_attention(q, k, v, causal=True, block_size=256), L_)
    print(f"L = {L_}: forward + backward, explicit {mib(explicit):6.2f} MiB,", end=" ")
    print(f"blockwise {mib(flash):5.2f} MiB")
assert flash < explicit / 10

# %% [markdown]
# **What FlashAttention saves, and what it does not.**
#
# - *Arithmetic*: the forward pass does the same multiplications as dense attention, and the
#   backward pass a little more, because it recomputes the logits. It does not beat the
#   $O(L^2 d)$ FLOPs, so its time still grows as $L^2$.
# - *Memory*: the $O(L^2)$ weights are gone; beyond its inputs and output it keeps $O(L)$
#   numbers (the log-sum-exp per query), as the measurement above shows.
# - *Traffic*: on a GPU it is faster anyway, because moving numbers between the large, slow main
#   memory (HBM) and the small on-chip memory (SRAM, room for $M$ numbers) was the slow part.
#   Standard attention writes the (L, L) logits, reads them back for the softmax, writes the
#   weights and reads them again: $\Theta(L d + L^2)$ accesses. FlashAttention needs
#   $\Theta(L^2 d^2 / M)$ (Dao et al., Theorem 2, with $N = L$). That is **still quadratic in
#   $L$**, only smaller by a factor of order $M / d^2$ (a few to a few tens for head widths of
#   64 to 128 on current GPUs). Only if all the keys and values fit on chip ($M \ge L d$) does
#   the traffic fall to $\Theta(L d)$. The paper also proves that no exact attention can need
#   asymptotically fewer accesses for every $M$ between $d$ and $L d$.
#
# **Three versions, two loop orders.** The first FlashAttention (FA-1) runs its outer loop over
# blocks of keys and values: it loads one such block on chip, then streams every block of queries
# past it, reading each query block's running output, maximum and sum from main memory and
# writing them back, once per key block (the derivation exercise counts that traffic).
# FlashAttention-2 {cite}`dao2024flashattention2` swaps the loops: a block of queries is loaded
# once and stays on chip with its statistics while the keys and values stream past. That is the
# order of `flash_forward` above (one block holding every query) and of the library (blocks of
# queries). FA-2 also leaves the output unnormalised until the end and divides by the sum once,
# as `acc / s` does, which saves FLOPs outside the matrix products, and it spreads the query
# blocks over the GPU's cores as well as the batch and heads: about twice FA-1's speed on an
# A100. Both orders move $\Theta(L^2 d^2 / M)$ numbers; the query-outer order streams K and V
# once per query block instead of Q and O once per key block. FlashAttention-3
# {cite}`shah2024flashattention3` keeps FA-2's algorithm and fits it to NVIDIA's H100: its tensor
# cores and memory copies run asynchronously, so one block's softmax overlaps the next block's
# matrix products, and it adds an FP8 path; the paper reports up to 75% of the H100's peak in
# FP16. The course's kernel is FA-2's algorithm written as a loop of PyTorch operations: it
# shows the memory saving, not the speed, which needs a fused kernel that keeps its tiles on chip.

# %% [markdown]
# ## 11.9 Transformer-XL: a memory of the previous segment (core, 8 min)
#
# A model trained on segments of length L sees nothing before its segment ("context
# fragmentation"). At evaluation, the notes' vanilla model (their Figure 6) gives every
# prediction a full context by sliding its window one position at a time: each new token costs
# a whole forward pass over L positions, most of which the previous step had just computed.
# Transformer-XL {cite}`dai2019transformerxl` keeps the hidden states of the previous segment
# as a **memory** and reuses them, in training and at evaluation; Dai et al. report evaluation
# up to about 1,800 times faster than the vanilla model's sliding window. Eq. (25) of Strabel's
# notes, for layer $n$ and segment $\tau + 1$:
#
# $$\tilde h^{n-1}_{\tau+1} = [\text{SG}(h^{n-1}_\tau) \circ h^{n-1}_{\tau+1}], \qquad
#   q = h^{n-1}_{\tau+1} W_q,\; k = \tilde h^{n-1}_{\tau+1} W_k,\; v = \tilde h^{n-1}_{\tau+1} W_v .$$
#
# The queries come from the current segment only; the keys and values also from the memory,
# and SG (stop-gradient) means no gradient flows back into it. Every layer keeps its own
# memory: the last `mem_len` states of its *input*. The whole loop, for a stack of `layers`
# (each called as `layer(queries' states, [memory; states], mask)`):


# %%
def segments_with_memory(layers, x, L, mem_len):
    """Eq. (25), segment by segment; x (B, T, d) with T a multiple of the segment length L."""
    mems = [x[:, :0]] * len(layers)  # one memory per layer, empty before the first segment
    outs = []
    for start in range(0, x.shape[1], L):
        h = x[:, start : start + L]  # (B, L, d): this segment's input to layer 1
        for n, layer in enumerate(layers):
            context = torch.cat([mems[n], h], dim=1)  # (B, K, d): [SG(memory); h]
            mems[n] = context[:, -mem_len:].detach() if mem_len else x[:, :0]  # SG: next memory
            K = context.shape[1]  # the memory's K - L positions, then the segment's L
            sees = torch.arange(K)[None, :] <= torch.arange(L)[:, None] + K - L  # (L, K)
            h = layer(h, context, sees)  # (B, L, d): queries from h only
        outs.append(h)
    return torch.cat(outs, dim=1)  # (B, T, d)


model = TransformerXL(d_model=16, n_heads=2, n_layers=3, seed=0).double()
x = torch.randn(2, 12, 16, dtype=torch.float64)  # (B, T, d): three segments of 4
by_segment = segments_with_memory(model.layers, x, L=4, mem_len=4)  # (B, T, d)
torch.testing.assert_close(by_segment, model.forward_segments(x, segment_len=4, mem_len=4))

# %% [markdown]
# The mask `sees` lets query $i$ of the segment, which sits at position $K - L + i$ of the
# context, see every memory position and the segment's positions up to its own. A claim worth
# proving: running segment by segment with the memory gives **exactly** what one pass over the whole
# sequence gives under a mask that lets position $i$ see $j \le i$ back to `mem_len` positions
# before its segment's start (with an empty memory for the first segment). Here is that mask
# for 8 positions, segments of 2 and a memory of 2, and the check for the model above:

# %%
print(recurrence_mask(8, segment_len=2, mem_len=2).int().numpy())
one_pass = model.forward_full(x, segment_len=4, mem_len=4)  # (B, T, d), that mask
torch.testing.assert_close(by_segment, one_pass)

# %% [markdown]
# Through three layers the two agree: layer $n$ of a segment reads layer $n-1$ of the memory,
# which was computed, in its own segment, with the same mask. So each extra layer reaches
# `mem_len` positions further back (one more segment when the memory is a segment long): the
# context grows with the depth, about `mem_len` times the number of layers, at the cost of one
# segment's attention. The stop-gradient (the `.detach()` in the loop) is the difference in
# training: a loss on the second segment sends no gradient into the first.

# %%
x.requires_grad_(True)
probe = torch.randn(16, dtype=torch.float64)  # a loss on segment 2: a random read-out of it


def grad_into_segment_1(out):
    (g,) = torch.autograd.grad((out[:, 4:8] @ probe).sum(), x)
    return g[:, :4].abs().max().item()  # the largest gradient on segment 1's inputs


with_sg = grad_into_segment_1(segments_with_memory(model.layers, x, 4, 4))  # the page's loop
one_pass = grad_into_segment_1(model.forward_full(x, 4, 4))
print(f"largest gradient on segment 1: with SG {with_sg}, one masked pass {one_pass:.2f}")
assert with_sg == 0 and one_pass > 0.1

# %% [markdown]
# ## 11.10 Transformer-XL's relative positions (optional, 6 min)
#
# Eq. (25) is silent about positions, but they matter: with absolute encodings, position 3 of the
# memory and position 3 of the current segment would look the same. Transformer-XL scores query $i$
# and key $j$ with the embedding $R_{i-j}$ of their distance (a sinusoid, chapter 6), projected by
# its own matrix $W_{k,R}$, and two learned vectors $u$ and $v$ that replace the query's position
# (Dai et al., section 3.3, with $q_i = W_q x_i$ and the content key $k_j = W_{k,E}\, x_j$):
#
# $$A_{ij} = \underbrace{q_i^\top k_j}_{(a)\text{ content}} + \underbrace{q_i^\top W_{k,R} R_{i-j}}_{(b)\text{ content-position}}
#   + \underbrace{u^\top k_j}_{(c)\text{ global content}} + \underbrace{v^\top W_{k,R} R_{i-j}}_{(d)\text{ global position}} .$$
#
# The two key matrices are the paper's separation of content and position: a key's content is
# projected by $W_{k,E}$, a distance by $W_{k,R}$ (the library's `w_r`). Write
# $\tilde R_{i-j} = W_{k,R} R_{i-j}$ for the projected distances. Terms (a) and (c) are one
# product, $(q + u) K^\top$; terms (b) and (d) are $(q + v) \tilde R^\top$, but with
# $\tilde R$'s rows ordered by distance ($\tilde R_{K-1}, \dots, \tilde R_0$), not by key. The
# **relative shift** moves row $i$ left by $L_q - 1 - i$ to line distances up with keys, by
# padding a zero column and reading the numbers in another shape (no gather):

# %%
L_q, L_mem = 3, 2
bd = np.arange(1.0, L_q * (L_mem + L_q) + 1).reshape(L_q, L_mem + L_q)  # (L_q, K): by distance
padded = np.pad(bd, ((0, 0), (1, 0)))  # (L_q, K + 1)
raw = padded.reshape(L_mem + L_q + 1, L_q)[1:].reshape(L_q, L_mem + L_q)  # (L_q, K): shifted
print(bd, raw, ref.rel_shift(bd), sep="\n\n")
band = np.tril(np.ones((L_q, L_mem + L_q)), L_mem) == 1  # (L_q, K): keys up to the query's own
assert (ref.rel_shift(bd) == np.where(band, raw, 0)).all()

# %% [markdown]
# Row 2 (the last query) does not move; row 0 moves two places. Above the band (keys in the
# query's future) the trick leaves the padding zero and numbers of the next row; the library
# sets them to 0, and the causal mask hides them anyway. The two-product form equals the four
# terms written out one by one, with the projected distances indexed by distance (random rows
# stand in for $\tilde R = W_{k,R} R$; in the library's layer `w_r` makes them from the
# sinusoids):

# %%
d = 4
q, k = rng.standard_normal((L_q, d)), rng.standard_normal((L_mem + L_q, d))
R_by_distance, u, v_pos = (  # term (d)'s learned vector (not the window's w)
    rng.standard_normal((L_mem + L_q, d)),
    rng.standard_normal(d),
    rng.standard_normal(d),
)
four_terms = np.zeros((L_q, L_mem + L_q))
for i in range(L_q):
    for j in range(L_mem + i + 1):  # keys up to the query's own position L_mem + i
        R = R_by_distance[L_mem + i - j]
        four_terms[i, j] = q[i] @ k[j] + q[i] @ R + u @ k[j] + v_pos @ R
fast = acc.xl_relative_logits(*map(torch.from_numpy, (q, k, R_by_distance[::-1].copy(), u, v_pos)))
allowed = np.tril(np.ones((L_q, L_mem + L_q), dtype=bool), L_mem)
np.testing.assert_allclose(fast.numpy()[allowed], four_terms[allowed], atol=1e-12)

# %% [markdown]
# ## 11.11 What the notes get wrong (optional, 6 min)
#
# **The fixed pattern's set has one value too many** (Strabel's notes, section 9.2, as in the
# paper): $A^{(2)}_i = \{j : j \bmod l \in \{t, t+1, \dots, l\}\}$ with $t = l - c$ lists
# $c + 1$ values, but $j \bmod l$ never equals $l$. The set means the last $c$ positions of
# each block, $\{l - c, \dots, l - 1\}$:

# %%
l, c = 4, 1
printed = set(range(l - c, l + 1))  # {3, 4}
reachable = {j % l for j in range(64)} & printed
print("printed:", sorted(printed), "reachable:", sorted(reachable))
assert len(printed) == c + 1 and reachable == set(range(l - c, l))

# %% [markdown]
# **Eq. (27)'s product does not type-check as printed.** The notes write
# $(W_q X_{\cdot i}) K'_{S_i}$ with $X_{\cdot i}$ a column, so $W_q X_{\cdot i}$ is a
# $(d \times 1)$ column, and $K_{S_i} = (W_k X_{\cdot j})_{j \in S_i}$ stacks columns into a
# $(d \times |S_i|)$ matrix: column times $K'$, $(|S_i| \times d)$, is undefined. The logits
# are $(W_q X_{\cdot i})^\top K_{S_i}$, a row of $|S_i|$ numbers (the formula in 11.2 writes it
# with rows):

# %%
d_, S = 8, [0, 2, 5]
X = rng.standard_normal((d_, 10))  # (d, L): tokens as columns, as the notes index them
W_q, W_k = rng.standard_normal((2, d_, d_))
q_col = W_q @ X[:, [3]]  # (d, 1)
K_S = W_k @ X[:, S]  # (d, |S|): the keys of S_i as columns
try:
    q_col @ K_S.T  # as printed: (d, 1) @ (|S|, d)
except ValueError:
    print(f"as printed: {q_col.shape} @ {K_S.T.shape} is undefined")
print("corrected:", (q_col.T @ K_S).shape)
assert (q_col.T @ K_S).shape == (1, len(S))

# %% [markdown]
# **Mixed index bases.** The notes number positions $1, \dots, L$ in eq. (26) but use
# $t = \max(0, i - l)$ in the strided head, which only makes sense from 0 (the paper does the
# same). And that head holds $l + 1$ positions, $\{i - l, \dots, i\}$, not $l$. This chapter
# numbers from 0 throughout:

# %%
assert ref.strided_mask(16, 4, head=1)[10].sum() == 4 + 1

# %% [markdown]
# **Longformer's dilation.** "Gaps of size dilation $d$": with dilation $d$ the attended
# positions are $d$ apart, so the gaps hold $d - 1$ skipped positions; and in the receptive
# field "$l \times d \times w$", $l$ is the number of *layers*, not the stride $l$ of the
# section before. **This $w$ is the Longformer paper's**: the whole window, both sides
# together, twice this chapter's $w$. So a layer reaches $d \cdot w / 2$ positions each way in
# the paper's terms, $d \cdot w$ in this chapter's:

# %%
row = ref.sliding_window_mask(20, 2, dilation=3)[10]  # this chapter's w = 2 (the paper's 4)
print("query 10 sees", np.flatnonzero(row).tolist())
assert np.flatnonzero(row).tolist() == [4, 7, 10, 13, 16]  # 2 skipped between neighbours

# %% [markdown]
# **Left vague**: eq. (25) says nothing about positions (the relative encoding of 11.10 is what
# makes the memory usable), and BigBird's section 9.4 is empty apart from the figure. The
# handwritten notes' "compute for FFN ≫ compute for MHA" for $T < 1000$ is corrected in
# chapter 4 (section 4.11): the FFN costs at most twice the attention.

# %% [markdown]
# ## Exercises
#
# One exercise is on the core path, about 20 minutes: the window by blocks, the chapter's
# central algorithm written from its description. The other five are optional, about 45
# minutes: the online-softmax bug (10), the window count (2), Transformer-XL's reach (3),
# FlashAttention's traffic (10) and the stretch (20).
# Kinds: implement (a checker names what is wrong), debugging, predict then check, a derivation
# and a stretch problem. Solutions are folded below each exercise.
#
# ```{exercise} Core: the sliding window without the (L, L) matrix
# :label: ex-long_sequences-window
#
# Write `window_attention(q, k, v, w)` for NumPy arrays q, k, v of shape (L, d): query $i$
# attends to the keys $j$ with $|i - j| \le w$ (not causal, logits divided by $\sqrt{d}$), as
# section 11.4 describes it. Cut the queries into blocks of $w$; block $a$ needs the keys of
# blocks $a - 1$, $a$ and $a + 1$ only. Pad the sequence so that every block has its two
# neighbours, and mind what the padding does. The checker compares your function with dense
# attention under the mask, names the usual mistakes, and measures that no (L, L) matrix was
# made.
# ```


# %%
def window_attention(q, k, v, w):
    raise NotImplementedError  # your code here


check.window_attention(window_attention)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-long_sequences-window
# :class: dropdown
# ```


# %% tags=["solution"]
def window_attention(q, k, v, w):
    L, d = q.shape
    n_blocks = -(-L // w)  # the last block may be partial
    pad = n_blocks * w - L
    Q = np.pad(q, ((0, pad), (0, 0))).reshape(n_blocks, w, d)  # (n_blocks, w, d)
    K = np.pad(k, ((w, w + pad), (0, 0)))  # (L + 2w + pad, d): block a's keys at a w .. a w + 3w
    V = np.pad(v, ((w, w + pad), (0, 0)))
    K3 = np.stack([K[a * w : (a + 3) * w] for a in range(n_blocks)])  # (n_blocks, 3w, d)
    V3 = np.stack([V[a * w : (a + 3) * w] for a in range(n_blocks)])  # (n_blocks, 3w, d_v)
    i = np.arange(n_blocks * w).reshape(n_blocks, w, 1)  # query positions
    j = (np.arange(n_blocks) * w - w).reshape(n_blocks, 1, 1) + np.arange(3 * w)  # key positions
    keep = (np.abs(i - j) <= w) & (j >= 0) & (j < L)  # the band, and no padding
    logits = np.where(keep, Q @ K3.transpose(0, 2, 1) / np.sqrt(d), -np.inf)  # (n_blocks, w, 3w)
    p = np.exp(logits - logits.max(axis=-1, keepdims=True))
    out = (p / p.sum(axis=-1, keepdims=True)) @ V3  # (n_blocks, w, d_v)
    return out.reshape(n_blocks * w, -1)[:L]


check.window_attention(window_attention, require=True)

# %% [markdown] tags=["solution"]
# Two masks are needed inside the blocks. The band $|i - j| \le w$ removes the up to $2w$ keys
# of the neighbouring blocks that lie too far away. The padding positions $j < 0$ and $j \ge L$
# are zero vectors: left in, each would get the logit 0 and a weight $e^0$, pulling every
# output near the ends towards the zero value. Memory: $3 L w$ logits instead of $L^2$.
#
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Optional, find the bug: an online softmax that is right only sometimes
# :label: ex-long_sequences-debug
#
# Here is an `update` for the running statistics of section 11.8, used by
# `check.attend_in_blocks` (the loop of `flash_forward` with `update` as its body). It agrees
# with exact attention in some runs and not in others. Run the cell, then: (a) explain why
# one block, or keys sorted by falling logit, hide the bug; (b) find the wrong line and fix
# `update`; (c) run `check.online_softmax_update(update)`, which names a mistake if one is
# left.
# ```


# %%
def update(m, s, acc, logits, values):
    """Fold one block of keys into the running max m (B_q,), sum s (B_q,) and acc (B_q, d_v)."""
    m_new = np.maximum(m, logits.max(axis=1))  # (B_q,)
    p = np.exp(logits - m_new[:, None])  # (B_q, B_k)
    scale = np.exp(m - m_new)  # (B_q,)
    return m_new, scale * s + p.sum(axis=1), acc + p @ values


gen = np.random.default_rng(5)
q1, k12 = gen.standard_normal((1, 8)), gen.standard_normal((12, 8))  # one query, 12 keys
v12 = gen.standard_normal((12, 3))  # (12, d_v)
exact = att_ref.scaled_dot_product_attention(q1, k12, v12)  # (1, 3)
by_logit = np.argsort(-(k12 @ q1[0]))  # the keys, largest logit first
runs = {
    "one block of 12": (k12, v12, 12),
    "blocks of 4": (k12, v12, 4),
    "blocks of 4, keys by falling logit": (k12[by_logit], v12[by_logit], 4),
}
for name, (k_, v_, size) in runs.items():
    error = np.abs(check.attend_in_blocks(update, q1, k_, v_, size) - exact).max()
    print(f"{name:36} largest error {error if error > 1e-12 else 0:.2g}")  # 0: to rounding

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-long_sequences-debug
# :class: dropdown
# ```


# %% tags=["solution"]
def update(m, s, acc, logits, values):
    m_new = np.maximum(m, logits.max(axis=1))
    p = np.exp(logits - m_new[:, None])
    scale = np.exp(m - m_new)  # what the old sums were measured against
    return m_new, scale * s + p.sum(axis=1), scale[:, None] * acc + p @ values  # both rescaled


check.online_softmax_update(update, require=True)
assert np.allclose(check.attend_in_blocks(update, q1, k12, v12, 4), exact)

# %% [markdown] tags=["solution"]
# The last line rescales `s` but not `acc`: when a block raises the maximum, the old terms of
# `acc` stay measured against the old, smaller maximum, too large by $e^{m_\text{new} -
# m_\text{old}}$ compared with `s`. In the first block `acc` is zero, so one block cannot show
# the bug; with the keys sorted by falling logit the maximum is reached in the first block and
# never rises, so `scale` is 1 ever after and the missing factor does not matter. A test with
# one block, or with the largest logit first, passes a wrong implementation: test with several
# blocks and a maximum that rises late.
#
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Optional, predict then check: how many entries does a window compute?
# :label: ex-long_sequences-predict
#
# A sliding window with $w = 2$ neighbours on each side (not causal) over $L = 16$ tokens:
# how many of the 256 entries of the mask are True? Write your number, then run the cell.
# ```

# %%
prediction = None  # your prediction here
check_prediction(
    prediction,
    int(ref.sliding_window_mask(16, 2).sum()),
    what="the number of computed entries",
    rtol=0,
    explanation=(
        "a middle row sees 2w + 1 = 5 keys, but rows 0 and 15 see only 3 and rows 1 and 14 only "
        "4: 16 * 5 - 2 * (2 + 1) = 74. 80 forgets the ends; 45 counts one side only (causal)"
    ),
)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-long_sequences-predict
# :class: dropdown
# ```

# %% tags=["solution"]
prediction = 16 * 5 - 2 * (2 + 1)  # 5 per row, minus the 2 + 1 missing at each end
assert check_prediction(
    prediction, int(ref.sliding_window_mask(16, 2).sum()), what="the count", rtol=0
).passed

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Optional, predict then check: how far back does Transformer-XL see?
# :label: ex-long_sequences-reach
#
# A Transformer-XL with 3 layers, segments of 4 and a memory of 4 reads 24 tokens. The
# output of the last layer at the last position, 23, depends on the inputs at positions
# $23 - r, \dots, 23$: what is $r$? Write your number, then run the cell.
# ```

# %%
prediction = None  # your prediction here
heard = receptive_field(recurrence_mask(24, segment_len=4, mem_len=4).numpy(), 3)[23]  # (24,)
check_prediction(
    prediction,
    23 - int(np.flatnonzero(heard)[0]),
    what="the reach r",
    rtol=0,
    explanation=(
        "its own segment reaches 3 back, and each of the 3 layers adds the memory's 4: 3 + 3 * 4 "
        "= 15. 7 counts one layer only; 12 forgets the own segment; 23 assumes the whole past"
    ),
)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-long_sequences-reach
# :class: dropdown
# ```

# %% tags=["solution"]
prediction = 3 + 3 * 4  # its own segment (3 back), then 4 more per layer
assert check_prediction(prediction, 23 - int(np.flatnonzero(heard)[0]), what="r", rtol=0).passed

# %% [markdown] tags=["solution"]
# Layer 1's output at 23 depends on the inputs 16–23 (its segment 20–23 and the memory 16–19):
# 7 back. Layer 2's output at 23 reads layer 1's outputs at 16–23, and layer 1's output at 16
# depends on the inputs 12–16: 11 back. Layer 3 adds 4 more, down to 8. So
# $r = (L - 1) + (\text{layers}) \cdot L_\text{mem} = 3 + 3 \cdot 4 = 15$, with $L_\text{mem}$ =
# `mem_len`: the context grows by the memory length with every layer, which is what a
# one-segment window of a vanilla model cannot do.
#
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Optional, a derivation: FlashAttention's traffic
# :label: ex-long_sequences-concept
#
# The on-chip memory holds $M$ numbers, with $d \le M \le L d$. FlashAttention in its first
# version's loop order (FA-1, section 11.8) loads a block of $B_c$ keys and values
# ($B_c \approx M / (4d)$, so the block and a block of queries fit on chip), and for each such
# block streams every block of queries, with their running statistics and outputs, through the
# chip. (a) Count the numbers moved between main memory and
# chip in terms of $L$, $d$ and $M$, and compare with standard attention, which writes and
# reads the (L, L) logits and weights. (b) When does FlashAttention move only $O(L d)$ numbers?
# (c) Why does a sparse pattern combine with it only at the level of blocks?
# ```

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-long_sequences-concept
# :class: dropdown
# ```
#
# (a) There are $L / B_c$ blocks of keys; each is read once ($\Theta(B_c d)$, $\Theta(L d)$ in
# all), and for each of them all $L$ queries, outputs and statistics pass through the chip once,
# $\Theta(L d)$. In total $\Theta(L d \cdot L / B_c) = \Theta(L^2 d^2 / M)$, Theorem 2 of Dao et
# al. Standard attention reads Q, K, V and writes O, $\Theta(L d)$, and moves the (L, L) logits
# and weights a few times, $\Theta(L^2)$. The ratio is about $M / d^2$: a constant for a given
# chip and head width, so the traffic is still quadratic in $L$; FlashAttention wins because
# $M$ is many times $d^2$. FA-2's order (queries outer) gives the same count with the roles
# swapped: $L / B_r$ query blocks, each streaming all of K and V. (b) When $B_c$ covers all
# $L$ keys, $M \ge 4 L d$ or so: then one pass suffices and the traffic is $\Theta(L d)$, the
# size of the inputs. (c) A tile is loaded and computed as a whole; a block layout can skip
# whole tiles (block-sparse FlashAttention), but an irregular element pattern would leave most
# of each loaded tile unused, moving the same numbers for less work.
#
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Stretch: Longformer's global tokens without the dense matrix
# :label: ex-long_sequences-stretch
#
# `sliding_window_attention` handles the window only. Add $g$ global tokens so that the whole
# Longformer pattern costs $O(L(w + g))$: the global queries attend densely to all keys, and
# every query sees the global keys in addition to its window. Check your function against
# `att_ref.scaled_dot_product_attention` with the mask `sliding_window_mask | global_mask`.
# ```

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-long_sequences-stretch
# :class: dropdown
# ```
#
# For the ordinary queries, concatenate two groups of keys: the window (as in the library's
# blocks) and the $g$ global keys, with the global keys that already lie in the window masked
# out of the second group so that no key counts twice; one softmax runs over both groups (the
# online-softmax update of the exercise above merges them). Then overwrite the $g$ global
# queries' rows with dense attention over all keys, $O(g L)$. Hugging Face's
# `LongformerSelfAttention` does exactly this, and uses separate projections
# (`query_global`, `key_global`, `value_global`) for the global part.
#
# ```{solution-end}
# ```

# %% [markdown]
# ## Summary
#
# - Dense attention's memory grows 4 times per doubling of L: two (L, L) tensors live at once.
# - Sparse patterns choose index sets $S_i$ (eqs. 26–28): strided and fixed (Sparse
#   Transformer, $O(L\sqrt L)$), the (dilated) window plus global tokens (Longformer), window,
#   global and random blocks (BigBird). Each equals dense attention under its mask, and,
#   computed by blocks, costs memory linear in L.
# - Layers stack: two factorised heads connect any pair in 2 layers, a window of $w$ needs
#   about $L / w$, a dilated window alone never mixes its $d$ subsequences, and a global token
#   joins everything through itself.
# - Trained on associative recall, a one-layer model answers exactly the questions whose pair
#   lies in its query's row of the mask, and guesses the rest: a window fails beyond $w$,
#   Transformer-XL beyond its segment and memory, while dense attention and a global question
#   answer at any distance.
# - FlashAttention computes exact attention in tiles with the online softmax and recomputes
#   the weights in the backward pass: slightly more FLOPs than dense attention (the backward
#   recomputes the logits), $O(L)$ extra memory, and $\Theta(L^2 d^2 / M)$ main-memory traffic
#   against $\Theta(L d + L^2)$: fewer accesses by a factor of order $M / d^2$, still quadratic
#   in $L$. FA-1 loops over key blocks outside, FA-2 (the order on the page) over query blocks,
#   with the same traffic and fewer non-matmul FLOPs; FA-3 fits FA-2 to the H100's asynchrony.
# - Transformer-XL's memory loop equals one masked pass over the whole sequence, minus the
#   gradient into the past; each layer reaches `mem_len` positions further back. Its relative
#   score has four terms, computed as two products and a shift.
# - The notes' fixed set lists $c + 1$ values for $c$ positions; eq. (27) needs a transpose on
#   the query; the notes mix positions from 0 and from 1; Longformer's gaps hold $d - 1$
#   positions, and its receptive field counts the window in the paper's convention (both
#   sides), not this chapter's.
#
# **Beyond this chapter.** Other routes around the square: low-rank and kernel attention
# (Linformer, Performer, linear Transformers) approximate the softmax to reach $O(L)$;
# Reformer groups similar keys by locality-sensitive hashing; compressive memories extend
# Transformer-XL's. At inference the memory that grows with $L$ is the cache of keys and values
# of the past tokens, which grouped- and multi-query attention shrink by sharing keys and values
# among heads; several current models (Mistral 7B, for example) use a sliding window in every
# layer. Relative position schemes that extrapolate (ALiBi, chapter 6) and rescaled rotary
# positions let a trained model read longer inputs than it saw.

# %% [markdown]
# ## Quiz (optional, 20 min)
#
# Test yourself on this chapter's sections: multiple choice and numeric questions, each
# naming the section it tests. Choose or type an answer and check it: the quiz says whether it
# is right and why, for the wrong options too. The cell below needs nothing from the cells
# above it, so it also runs on its own when you come back to the chapter.

# %%
from course_lib import quiz

quiz.show("11_long_sequences")

# %% [markdown]
# ## References
#
# - G. Strabel, *Transformers*, lecture notes, 2023, section 9 {cite}`strabel2023transformers`.
# - The handwritten lecture notes, *The Transformer*, "sub-quadratic self-attention".
# - R. Child, S. Gray, A. Radford and I. Sutskever, "Generating long sequences with sparse
#   transformers", 2019 {cite}`child2019generating`.
# - Z. Dai et al., "Transformer-XL: attentive language models beyond a fixed-length context",
#   ACL 2019 {cite}`dai2019transformerxl`.
# - I. Beltagy, M. E. Peters and A. Cohan, "Longformer: the long-document transformer", 2020
#   {cite}`beltagy2020longformer`.
# - M. Zaheer et al., "Big Bird: transformers for longer sequences", NeurIPS 2020
#   {cite}`zaheer2020bigbird`.
# - T. Dao et al., "FlashAttention: fast and memory-efficient exact attention with IO-awareness",
#   NeurIPS 2022 {cite}`dao2022flashattention`.
# - T. Dao, "FlashAttention-2: faster attention with better parallelism and work partitioning",
#   ICLR 2024 {cite}`dao2024flashattention2`.
# - J. Shah et al., "FlashAttention-3: fast and accurate attention with asynchrony and
#   low-precision", NeurIPS 2024 {cite}`shah2024flashattention3`.
# - M. Milakov and N. Gimelshein, "Online normalizer calculation for softmax", 2018
#   {cite}`milakov2018online`.

# %% [markdown]
# ## How this chapter is tested
#
# `course_lib/long_sequences/spec.py` registers the eleven mirrored functions (the five masks
# and layouts, `expand_layout`, the sliding-window, block-sparse and blockwise attentions,
# `rel_shift` and `xl_relative_logits`); the conformance suite checks the NumPy and PyTorch
# sides on random inputs in float64, float32, float16 and bfloat16 and runs `gradcheck`
# (through the custom backward of `flash_attention`). `tests/test_long_sequences.py` checks the
# masks against the notes' index sets written as set comprehensions; every attention against
# chapter 4's dense attention under the matching mask; `flash_attention` against
# `F.scaled_dot_product_attention`, values and gradients, causal or not; the recurrence against
# the masked pass for several segment and memory lengths, and that the memory gets no
# gradient; the four terms against their definitions; memory growth per doubling (dense x4,
# window and block-sparse x2, blockwise only its O(L d) statistics); the recall task of section
# 11.7 (the same examples for the same seed, every pair where it should be, the one-row model
# equal to the whole masked layer's last row, and the section's claims retrained with margins:
# a window at chance beyond its reach, dense attention and a global question well above it);
# the exercise checkers (each accepts a right answer and names each mistake it knows, the
# zero padding that receives attention and the accumulator left unscaled among them); and clear
# errors for bad input.
#
# Against Hugging Face's transformers:
#
# - **Longformer** (section 11.4): the test copies the weights of a `LongformerSelfAttention`
#   built from a config with random weights, the three global projections included, into
#   `course_lib.long_sequences.longformer.longformer_self_attention` and gets the same outputs.
# - **BigBird** (section 11.5): the test reads the pattern that `BigBirdBlockSparseAttention`
#   draws (from the attention weights it returns), runs `block_sparse_attention` under it, and
#   gets its outputs to $10^{-15}$ in training mode (dropout 0); in evaluation mode it checks
#   the tripled block 0, attention with a bias of $\log 3$ on block 0's keys.
#
# The recall table of section 11.7 is not compared digit by digit (its cell is tagged
# `nbval-ignore-output`): another CPU's kernels move a few of 2000 answers. Its assertions, the
# same claims with margins, are the check. For long inputs on a CPU with several threads, the
# library's `flash_attention` shares its query blocks among threads, one core each; the results
# do not depend on the number of threads. Three of the input checks:

# %%
for call in (
    lambda: acc.block_sparse_attention(
        torch.ones(10, 4), torch.ones(10, 4), torch.ones(10, 4), np.ones((3, 3), bool), 4
    ),
    lambda: ref.sliding_window_mask(8, 8),
    lambda: ref.global_mask(5, [0, 5]),
):
    try:
        call()
    except ValueError as err:
        print("ValueError:", err)

# %% [markdown]
# `python -m benchmarks.run long_sequences` measures time and extra peak memory against L for
# the explicit attention, the blockwise one, `F.scaled_dot_product_attention`, the sliding
# window and BigBird's block-sparse pattern, and the blockwise attention at L = 65,536 (target:
# under 64 MiB of extra memory, where the dense matrix alone would take 16 GiB). Timings vary
# with the machine and its load. The library's blockwise attention is a loop of PyTorch
# operations, not a fused kernel that keeps its tiles on chip, so the benchmark shows
# FlashAttention's memory saving, not the speed-up section 11.8 explains.
