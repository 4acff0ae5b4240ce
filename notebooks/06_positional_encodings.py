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

    course_lib.colab.setup("06_positional_encodings")

# %% [markdown]
# # 6. Positional encodings
#
# Attention compares every token with every other token, and nothing in that comparison says
# where a token sits. This chapter adds the missing information in every way the lecture notes
# describe, and one they list as still to cover, and then asks which of them keep working on
# sequences longer than the ones a model was trained on.
#
# **After this chapter you can**
#
# - explain, and show numerically, why self-attention without positions cannot tell "dog bites
#   man" from "man bites dog";
# - build the slides' one-hot positions, learned absolute embeddings and the sinusoidal table of
#   the original Transformer, and prove that shifting a sinusoidal position is a rotation;
# - write the relative-position variants of the handwritten notes as changes to the attention
#   logits, with clipping, and recognise ALiBi among them;
# - compute the Music Transformer's relative logits with the memory-saving "skewing" trick, and
#   find the bug in the notes' Algorithm 1;
# - apply rotary embeddings in both layouts (RoFormer's and LLaMA's) and show that the attention
#   score then depends on the offset only;
# - read an extrapolation experiment with seeds and tuned learning rates: which encodings
#   survive sequences 2 and 4 times longer than in training, on which kind of task, and why.
#
# **Assumes**: chapter 4 (attention, masks, multi-head attention); chapter 1's matrix views.
# **Core path**: about 59 minutes (sections marked core, two predictions included); the optional
# sections add about 36 minutes (a find-the-bug exercise on Algorithm 1 among them), the
# exercises at the end about 40.
# The optional quiz that ends the lesson takes about 21 minutes more.
#
# The chapter follows the lecture slides {cite}`marlin2022transformers`, Strabel's notes on the
# original Transformer (section 3) and on relative position embeddings (section 12)
# {cite}`strabel2023transformers`, May's notes (section 1.4) {cite}`may2024transformer` and the
# handwritten notes (section 2), and adds rotary
# embeddings {cite}`su2021roformer`.

# %%
import math

import matplotlib.pyplot as plt
import numpy as np

import course_lib.attention.reference as ref_attn
import course_lib.positions.reference as ref
from course_lib import seed_everything
from course_lib.checker import check_prediction
from course_lib.plotting import PALETTE, heatmap, new_axes, use_style
from course_lib.positions import exercises as check
from course_lib.positions.as_printed import (
    algorithm1_steps,
    printed_case_counts,
    sinusoidal_as_printed,
)
from course_lib.positions.indices import alibi_slopes, binary_table, relative_offsets
from course_lib.positions.variants import tensor2tensor_encoding, tensor2tensor_frequencies

rng = seed_everything(0)
use_style()
plt.rcParams["image.interpolation"] = "nearest"  # one flat colour per cell (and small images)
np.set_printoptions(precision=3, suppress=True)

# %% [markdown]
# As in every chapter, `ref` holds the NumPy references (float64, written like the equations)
# and `fast` their PyTorch twins (batched, any device, differentiable). `attn` and `ref_attn`
# are chapter 4's attention functions; we never rewrite them, we feed them positions.
#
# ## 6.1 Why positions: attention does not see order (core, 3 min)
#
# The lecture slides make the point in words {cite}`marlin2022transformers`: a Transformer block
# treats its input as a *collection* of vectors. Take chapter 4's multi-head self-attention,
# shuffle the rows of its input, and compare:

# %%
L, d, h = 6, 8, 2
X = rng.standard_normal((L, d))  # (L, d): six token vectors
W = [rng.standard_normal((h, d, d // h)) for _ in range(3)] + [rng.standard_normal((d, d))]
perm = np.array([3, 0, 5, 1, 4, 2])  # a reordering of the tokens

out = ref_attn.multi_head_attention(X, X, X, *W)  # (L, d)
out_shuffled = ref_attn.multi_head_attention(X[perm], X[perm], X[perm], *W)  # (L, d)
np.testing.assert_allclose(out_shuffled, out[perm], atol=1e-12)
print("shuffling the input shuffles the output the same way:", np.allclose(out_shuffled, out[perm]))

# %% [markdown]
# Shuffling the input rows shuffles the output rows in exactly the same way. Self-attention is
# **permutation-equivariant**: token $i$'s output depends on the *set* of other tokens, not on
# their order. "dog bites man" and "man bites dog" give the same three output vectors, just
# listed in a different order. (The slides say *invariant*; the output is not unchanged, it is
# permuted along with the input. Only something that pools over all positions, such as the
# mean output vector, is invariant. Section 6.11 comes back to this.)

# %%
assert not np.allclose(out_shuffled, out)  # not invariant ...
np.testing.assert_allclose(out_shuffled.mean(0), out.mean(0), atol=1e-12)  # ... unless pooled

# %% [markdown]
# Everything in this chapter breaks that symmetry, in one of two places: **in the input**
# (absolute encodings: a vector that depends on the position is joined to each token) or **in
# the attention logits** (relative encodings: a term that depends on the offset $j - i$ between
# query $i$ and key $j$).
#
# ## 6.2 One-hot positions, concatenated or added (core, 3 min)
#
# The lecture slides start with the simplest absolute encoding {cite}`marlin2022transformers`:
# the one-hot vector $p(i) = e_i$ of position $i$, concatenated to the token vector,
#
# $$\tilde{\mathbf{x}}_i = [\mathbf{x}_i;\ p(i)],$$
#
# and they suggest re-injecting it at the input of every block of a stack.

# %%
X_small = np.array([[0.5, -1.0], [2.0, 0.0], [1.0, 1.0]])  # (L, d) = (3, 2)
print(ref.concat_one_hot_positions(X_small, max_len=4))  # (3, 2 + 4)

# %% [markdown]
# Each row gains `max_len` columns, with a single 1 at its own position. Two costs are visible
# already: the width grows with the longest sequence you want to handle, and a position beyond
# `max_len` has no column at all.
#
# The original Transformer instead **adds** a position vector of the same width,
# $\tilde{\mathbf{x}}_i = \mathbf{x}_i + p(i)$ (the slides; GPT writes it $h_0 = U W_e + W_p$,
# Strabel's notes eq. 21). The two are closer than they look: the first thing a block does with its
# input is multiply it by a weight matrix, and a product with a concatenation splits into a sum,
#
# $$[\mathbf{x}_i;\ e_i] \begin{bmatrix} W \\ P \end{bmatrix} = \mathbf{x}_i W + e_i P = \mathbf{x}_i W + P_{i\cdot}.$$
#
# Concatenating a one-hot position and then projecting is the same as projecting and adding row
# $i$ of a learned table $P$:

# %%
W_in = rng.standard_normal((2, 3))  # (d, d_out): acts on the token part
P = rng.standard_normal((4, 3))  # (max_len, d_out): acts on the one-hot part
lhs = ref.concat_one_hot_positions(X_small, 4) @ np.vstack([W_in, P])  # (3, d_out)
rhs = ref.add_position_table(X_small @ W_in, P)  # (3, d_out): x_i W + P[i]
np.testing.assert_allclose(lhs, rhs)

# %% [markdown]
# So "one-hot, concatenated" and "a learned table, added" express the same family of models;
# adding is the economical way to write it, and it keeps the width $d$ fixed. What the table
# contains (learned, or a fixed formula) is the real design decision, and the next two sections
# take the two options in turn.
#
# ## 6.3 The sinusoidal table (core, 8 min)
#
# The original Transformer uses a fixed table {cite}`vaswani2017attention` (Strabel's notes,
# eq. 19):
#
# $$PE_{(pos,\,2i)} = \sin\!\left(\frac{pos}{10000^{2i/d_\text{model}}}\right), \qquad
# PE_{(pos,\,2i+1)} = \cos\!\left(\frac{pos}{10000^{2i/d_\text{model}}}\right).$$
#
# Column pair $i$ is one sine and one cosine at the angular frequency
# $w_i = 10000^{-2i/d_\text{model}}$, the position **inside** both. For $pos = 1$ and
# $d_\text{model} = 4$ the frequencies are $w_0 = 1$ and $w_1 = 10000^{-1/2} = 0.01$, so the
# row is $[\sin 1, \cos 1, \sin 0.01, \cos 0.01]$:

# %%
row = ref.sinusoidal_encoding([1.0], 4)  # (1, 4)
print(row)
np.testing.assert_allclose(row[0], [np.sin(1), np.cos(1), np.sin(0.01), np.cos(0.01)])

# %% [markdown]
# The PyTorch twins (`fast` for this chapter, `attn` for chapter 4's attention) compute the same
# table (the appendix checks). PyTorch is imported here, at the first cell that needs it, so that
# the NumPy cells run where it is not installed:

# %% tags=["needs-torch", "worksheet"]
import torch

import course_lib.attention.accelerated as attn
import course_lib.positions.accelerated as fast

# %% [markdown]
# The wavelengths $2\pi / w_i$ grow geometrically, from $2\pi \approx 6.3$ positions for the
# first pair to almost $10000 \cdot 2\pi$ (exactly $2\pi \cdot 10000^{(d-2)/d}$) for the last
# one {cite}`vaswani2017attention`: the first
# columns change from one token to the next, the last ones barely move over a whole document.
#
# Two layouts of the same numbers are in use. The paper **interleaves** (sine in column $2i$,
# cosine in $2i+1$); many code bases **concatenate** (all sines, then all cosines). They differ
# by a fixed permutation of the columns. A model trained from scratch learns the same thing with
# either (the permutation only relabels its hidden units), but weights trained with one layout
# must be used with the same layout. (The most copied implementation, tensor2tensor's
# `get_timing_signal_1d`, concatenates **and** spaces the frequencies so that the last one is
# exactly $1/10000$, $w_i = 10000^{-i/(d/2 - 1)}$: its table holds other numbers, not only the
# same ones in another order; the appendix checks it.)

# %%
interleaved = ref.sinusoidal_encoding(50, 128)  # (50, 128): the figure of May's notes
concatenated = ref.sinusoidal_encoding(50, 128, layout="concatenated")  # (50, 128)
np.testing.assert_array_equal(concatenated, interleaved[:, np.r_[0:128:2, 1:128:2]])
wavelengths = 2 * np.pi * 10000 ** (np.arange(64) * 2 / 128)
print("wavelengths (positions):", wavelengths[[0, 1, 2, 63]].round(1))

# %% [markdown]
# May's notes explain the table with a binary counter {cite}`may2024transformer`: write
# 0, 1, 2, ... in binary and the last bit flips at every step, the next one every two steps, the
# next every four. Each column is a square wave whose period doubles from one column to the next.
# The sinusoidal table is a smooth version of the same idea: each column pair is a rotating
# pointer, and the periods grow by the factor $10000^{2/d_\text{model}}$ from one pair to the
# next (1.155 for $d_\text{model} = 128$) instead of 2. Below, the notes' $50 \times 128$ picture
# in both layouts, and the counter:

# %%
fig, axes = plt.subplots(1, 3, figsize=(13, 4), gridspec_kw={"width_ratios": [3, 3, 1.2]})
panels = [
    (interleaved, "Interleaved (eq. 19): sin 2i, cos 2i+1", "column", "RdBu"),
    (concatenated, "Concatenated: 64 sines, then 64 cosines", "column", "RdBu"),
    (binary_table(16, 4)[:, ::-1], "Binary counter, low bit first", "bit (1, 2, 4, 8)", "Greys"),
]
for ax, (table_, title, xlabel, cmap) in zip(axes, panels, strict=True):
    heatmap(ax, table_, title=title, xlabel=xlabel, ylabel="position", cmap=cmap, colorbar=False)
fig.suptitle("The sinusoidal table for 50 positions and d_model = 128, and May's binary counter")
fig.tight_layout()
plt.show()

# %% [markdown]
# Read the left panel column by column: the first columns alternate quickly down the positions,
# the right-hand columns are almost constant (sines near 0, cosines near 1). The counter on the
# right (drawn with its fastest bit first, to match) has the same structure with square waves. In
# the middle panel the fast columns sit at the left of each half.
#
# ## 6.4 A shift of position is a rotation (core, 5 min)
#
# Why sines *and* cosines? Because together they make the encoding of $pos + k$ a fixed linear
# function of the encoding of $pos$, the property May's notes state. By the
# angle-addition formulas, for each pair,
#
# $$\begin{bmatrix} \sin((p+k)w) & \cos((p+k)w) \end{bmatrix}
# = \begin{bmatrix} \sin(pw) & \cos(pw) \end{bmatrix}
# \begin{bmatrix} \cos kw & -\sin kw \\ \sin kw & \cos kw \end{bmatrix},$$
#
# a $2 \times 2$ rotation that depends on $k$ but not on $p$. Stacking one block per pair gives
# a matrix $M_k$ with $PE(p + k) = PE(p)\, M_k$ for **every** position $p$:

# %%
k = 7
M = ref.sinusoidal_shift_matrix(k, 16)  # (16, 16), block diagonal
positions = rng.uniform(0, 500, 20)  # any positions, even non-integer ones
np.testing.assert_allclose(
    ref.sinusoidal_encoding(positions, 16) @ M,
    ref.sinusoidal_encoding(positions + k, 16),
    atol=1e-10,
)
np.testing.assert_allclose(M @ M.T, np.eye(16), atol=1e-14)  # orthogonal: a rotation
np.testing.assert_allclose(
    ref.sinusoidal_shift_matrix(3, 16) @ ref.sinusoidal_shift_matrix(4, 16), M, atol=1e-15
)
print(M[:2, :2])

# %% [markdown]
# $M_7$ is orthogonal, one matrix serves all 20 random positions, and shifts compose:
# $M_3 M_4 = M_7$. A consequence that matters for attention: the dot product of two encodings
# depends only on their offset, $PE(m) \cdot PE(n) = \sum_i \cos((m - n) w_i)$, because a
# rotation does not change dot products. The whole similarity matrix is constant along its
# diagonals:

# %%
pe = ref.sinusoidal_encoding(40, 32)  # (40, 32)
sim = pe @ pe.T  # (40, 40)
for offset in (-3, 0, 5):
    diagonal = np.diagonal(sim, offset)
    np.testing.assert_allclose(diagonal, diagonal[0], atol=1e-12)
print("PE(m) . PE(n) for n - m = 0, 1, 2, 3:", sim[10, 10:14].round(3))

# %% [markdown]
# This is the sense in which the sinusoidal table "contains" relative positions: a layer *could*
# learn a bilinear form $x_m^\top A\, x_n$ whose value depends on the offset. Whether it does, and
# whether that survives positions never seen in training, is a question for section 6.9.
#
# ## 6.5 Learned absolute embeddings (core, 2 min)
#
# GPT learns its table instead, $h_0 = U W_e + W_p$ with one row of $W_p$ per position
# {cite}`radford2018improving` (Strabel's notes, eq. 21); the handwritten notes list this option
# first and add, in brackets, "can't extrapolate" (section 2). The
# reason is mechanical: a table has as many rows as the longest training sequence, and row $n$
# only ever receives a gradient if some training sequence has a token at position $n$.

# %% tags=["needs-torch"]
table = torch.randn(32, 16) * 0.02  # (max_len, d): a freshly initialised W_p
tokens = torch.randn(2, 40, 16)  # (B, L, d): longer than the table
try:
    fast.add_position_table(tokens, table)
except ValueError as err:
    print("ValueError:", err)

# %% [markdown]
# The library refuses rather than guess. A model can be given a longer table than it is trained
# with, and the extrapolation experiment of section 6.9 does exactly that: the rows past the
# training length stay at their random initial values, and the results show what that is worth.
#
# ## 6.6 Relative positions: a change to the logits (core, 11 min)
#
# Relative encodings act inside attention. The handwritten notes list three ways to change the
# comparison of query $i$ with key $j$ (section 2), each
# using "embeddings for each sequence offset up to some maximum offset":
#
# $$\text{(i)}\ \ \alpha(q_i, k_j) = \frac{q_i^\top (k_j + p_{ij})}{\sqrt{d_k}}, \qquad
# \text{(ii)}\ \ \alpha(q_i, k_j) = \frac{q_i^\top k_j}{\sqrt{d_k}} + p_{ij}, \qquad
# \text{(iii)}\ \ \alpha(q_i, k_j) = \frac{q_i^\top k_j}{\sqrt{d_k}} + \lambda (i - j),$$
#
# with $p_{ij}$ a learned vector in (i), a learned scalar in (ii), and a single scalar $\lambda$ in
# (iii). In all three, $p_{ij}$ depends on the offset $j - i$ only. Shaw et al. make "up to some
# maximum offset" precise {cite}`shaw2018self`: offsets are **clipped** to $[-K, K]$, so a table
# of $2K + 1$ entries covers every distance, and all offsets beyond $K$ share one entry.

# %%
print(relative_offsets(6, max_offset=2))  # (L, L): clip(j - i, -2, 2)

# %% [markdown]
# Row $i$ is the query, column $j$ the key; negative offsets look back, and with $K = 2$ the key
# five places back is treated like the one two places back. Variant (i), Shaw et al.'s key term,
# looks this table up in $2K + 1$ learned *vectors* and dots the result with the query (Shaw et
# al. add a second table to the values, `relative_value_term` in the library).

# %%
K_clip, d_k = 2, 4
q_rel = rng.standard_normal((6, d_k))  # (L, d_k): one query per position
rel_keys = rng.standard_normal((2 * K_clip + 1, d_k))  # (2K+1, d_k): a^K for offsets -2..2
S_i = ref.relative_key_logits(q_rel, rel_keys)  # (L, L): q_i . a^K_clip(j-i)
by_hand = q_rel[4] @ rel_keys[0]  # query 4, key 0: offset -4, clipped to -2 (row 0)
assert np.isclose(S_i[4, 0], by_hand)


# %% [markdown]
# Variant (i) is the chapter's centrepiece: a table lookup by clipped offset, then one dot
# product per (query, key) pair. On the page, in NumPy:


# %%
def shaw_key_logits(q, table):
    """q_i . a_clip(j - i) for queries q (L, d_k) and a table (2K+1, d_k) of offsets -K..K."""
    L, K = q.shape[0], (table.shape[0] - 1) // 2
    offsets = np.clip(np.arange(L)[None, :] - np.arange(L)[:, None], -K, K)  # (L, L): j - i
    a = table[offsets + K]  # (L, L, d_k): the vector of each pair's offset
    return np.einsum("id,ijd->ij", q, a)  # (L, L): query i dotted with a_ij


np.testing.assert_allclose(shaw_key_logits(q_rel, rel_keys), S_i, rtol=1e-12)

# %% [markdown]
# The page's version builds the $(L, L, d_k)$ tensor of looked-up vectors, easy to read and
# $L^2 d_k$ in memory; the library's PyTorch version (equal to it, the appendix checks) computes
# the $(L, 2K+1)$ products $q_i \cdot a_r$ first and then gathers. Variant (ii) looks up one
# learned scalar per offset (and head): five numbers for the offsets $-2, \dots, 2$ fill the term.

# %%
values = np.array([-1.0, -0.5, 0.0, 0.2, 0.4])  # (2K+1,): variant (ii)'s scalars, offsets -2..2
S_ii = ref.relative_bias(values, 6)  # (L, L): row i, column j holds values[clip(j - i) + 2]
print(S_ii)

# %% [markdown]
# Each diagonal holds one number, and offsets beyond $\pm 2$ share the end values. T5 uses this
# variant with buckets instead of a hard clip, exact for small offsets and logarithmically wider
# for large ones {cite}`raffel2020exploring` (the stretch exercise builds them); Transformer-XL
# splits the logit into four content and position terms (chapter 11, section 11.10).

# %% [markdown]
# Variant (iii), with a **fixed** slope per head instead of a learned one, is **ALiBi**
# {cite}`press2022train`: head $k$ adds $-m_k (i - j)$, a penalty that grows linearly with the
# distance back, with slopes $m_k$ forming the geometric sequence $2^{-8/h}, 2^{-16/h}, \dots,
# 2^{-8}$ for $h$ heads. Steep heads look only at the last few tokens, shallow heads far back.

# %%
slopes = alibi_slopes(8)
print("ALiBi slopes for 8 heads:", slopes)
assert slopes == [2.0**-n for n in range(1, 9)]
alibi = ref.alibi_bias(np.array(slopes), 6)  # (8, L, L): one bias matrix per head
print(alibi[0])

# %% [markdown]
# Above the diagonal the ALiBi bias is positive, but in a causal model those entries are masked,
# so only the penalties below the diagonal matter. A picture of the three kinds of term, each a
# $12 \times 12$ matrix added to the logits:

# %%
q12, table12 = rng.standard_normal((12, 4)), rng.standard_normal((7, 4))  # (L, d_k), (2K+1, d_k)
terms = {
    "(i) q_i . a_clip(j-i), K = 3": ref.relative_key_logits(q12, table12),
    "(ii) learned scalar, K = 3": ref.relative_bias(np.linspace(-1, 1, 7), 12),
    "(iii) ALiBi, m = 1/4": ref.alibi_bias(np.array([0.25]), 12)[0],
}
fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
for ax, (title, term) in zip(axes, terms.items(), strict=True):
    heatmap(ax, term, title=title, xlabel="key j", ylabel="query i", cmap="RdBu")
fig.suptitle("Relative position terms added to the attention logits")
fig.tight_layout()
plt.show()

# %% [markdown]
# Variant (ii) is constant along each diagonal and, past $\pm K$, altogether: the flat corners.
# Variant (i) changes along a diagonal, because every query dots its own vector with the table.
# ALiBi is a plane through the diagonal. All of these plug into chapter 4's attention through its
# `bias` argument, added after the $1/\sqrt{d_k}$ scaling (PyTorch's fused attention takes the
# same as a float mask; the appendix checks that the two agree).

# %% [markdown]
# ## 6.7 The Music Transformer's relative logits, and skewing (optional, 25 min)
#
# Section 12 of the notes turns to relative attention as the Music Transformer computes it
# {cite}`strabel2023transformers,huang2018music`: a table $E^r \in \mathbb{R}^{L \times d}$ with
# one vector per offset $-(L-1), \dots, -1, 0$ (no clipping, past only, as in a causal model),
# and an extra logit term $S^{rel}_{ij} = q_i \cdot E^r_{j - i}$. Written out, that asks for a
# tensor $R \in \mathbb{R}^{L \times L \times d}$ with $R_{ij} = E^r_{j - i}$, and then one dot
# product per $(i, j)$: $O(L^2 d)$ memory. The notes do not say which row of $E^r$ holds which
# offset; the convention the skewing steps need is **row $r$ holds offset $r - (L - 1)$**, so
# the last row is offset 0.

# %%
L4, d4 = 4, 3
q4 = rng.integers(-3, 4, (L4, d4)).astype(float)  # (L, d): small integers, exact arithmetic
E4 = rng.integers(-3, 4, (L4, d4)).astype(float)  # (L, d): rows = offsets -3, -2, -1, 0
naive = ref.relative_logits_naive(q4, E4)  # builds R (L, L, d) explicitly
assert naive[3, 1] == q4[3] @ E4[1 - 3 + L4 - 1]  # query 3, key 1: offset -2 is row 1
print(naive)

# %% [markdown]
# This is variant (i)'s term restricted to the past, with $K = L - 1$ (so nothing is clipped).
# Huang et al.'s observation is that every number needed is already in the $L \times L$ product
# $A = Q E^{r\top}$, where $A_{ir} = q_i \cdot E^r_r$; the entries are only in the wrong place.
# Row $i$ needs $A_{i,\, j - i + L - 1}$ in column $j$: a shift of row $i$ by $L - 1 - i$ places.
# Algorithm 1 of the notes performs all these shifts at once with a pad and a reshape
# (Strabel's notes, section 12; 1-based indices as printed):
#
# 1. $A \leftarrow X E^{r\top}$;
# 2. $M$: $m_{ij} = 1$ for $i \ge j$, $0$ for $i < j$;
# 3. $A \leftarrow A \odot M$;
# 4. $B \in \mathbb{R}^{L \times (L+1)}$: a zero column, then $A$ ($b_{i1} = 0$, $b_{ij} =
#    a_{i,j-1}$);
# 5. $V \leftarrow \operatorname{vec}(B^\top)$, the rows of $B$ one after another;
# 6. $C \in \mathbb{R}^{(L+1) \times L}$: $c_{ij} = V_{(i-1)L + j}$ for $i \le L$, $j \le L$;
# 7. $D$: $d_{ij} = c_{i+1, j}$, i.e. drop the first row of $C$; return $D$.
#
# Steps 4 to 7 are the trick: reading $L(L+1)$ numbers $L$ at a time instead of $L + 1$ at a time
# shifts each row one place further than the row above. Run the steps as printed and compare:

# %%
printed = algorithm1_steps(q4, E4, mask="as printed")
print("D as printed (lower triangle):\n", np.tril(printed["D"]) + 0.0)  # + 0.0: no -0.0
wrong_rows = np.nonzero((np.tril(printed["D"]) != naive).any(axis=1))[0]
print("rows that differ from the naive logits:", wrong_rows)
np.testing.assert_array_equal(wrong_rows, np.arange(L4 - 1))  # all rows but the last

# %% [markdown]
# Wrong in every row but the last.

# %% [markdown] tags=["worksheet"]
# ```{exercise} Find the bug: Algorithm 1 as printed
# :label: ex-positions-bug-skew
#
# One step of Algorithm 1 keeps the wrong entries. Work out which columns of $A$ row $i$ of the
# result needs (row $r$ of $E^r$ holds offset $r - (L - 1)$, and a query can see offsets from
# $-i$ to 0), compare with what the printed mask keeps, and fix the algorithm: write
# `skew_logits(A)`, which turns $A = Q E^{r\top}$ of shape $(L, L)$ into the relative logits $D$
# with $D_{ij} = A_{i,\,j-i+L-1}$ for $j \le i$ and zeros above the diagonal, using only a mask,
# `np.pad`, `reshape` and slicing (no loops over $i$ or $j$). The checker names the printed mask
# if you keep it.
# ```


# %% tags=["worksheet"]
def skew_logits(A):
    raise NotImplementedError  # your code here


check.skew_step(skew_logits)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-positions-bug-skew
# :class: dropdown
# ```
#
# The culprit is the mask of step 2. Row $i$ (1-based) needs columns $L - i + 1, \dots, L$ of
# $A$: the *right-hand* end of the row, offsets $-(i-1), \dots, 0$. The printed mask keeps the
# *lower-left* triangle $i \ge j$ instead, which throws away offset 0 for every query but the
# last. The mask that fits steps 4-7 keeps the lower-right triangle, $m_{ij} = 1$ for
# $i + j \ge L + 1$ (0-based: $i + j \ge L - 1$): the entries that hold offsets a query can
# actually see {cite}`huang2018music`. (Reversing the order of $E^r$ does not rescue the printed
# mask: the test suite checks that too.)


# %% tags=["solution"]
def skew_logits(A):
    A = np.asarray(A, dtype=float)
    L = A.shape[0]
    i, r = np.indices((L, L))
    masked = A * (i + r >= L - 1)  # step 2 corrected: keep the lower-right triangle
    B = np.pad(masked, ((0, 0), (1, 0)))  # step 4: (L, L + 1), a zero column first
    C = B.reshape(L + 1, L)  # steps 5-6: the same numbers, L at a time
    return C[1:]  # step 7: drop the first row


check.skew_step(skew_logits, require=True)

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# With the mask that keeps the lower-right triangle ($i + j \ge L - 1$, 0-based) the algorithm
# is exact, and its upper triangle comes out as zeros:

# %%
steps = algorithm1_steps(q4, E4)  # the corrected mask
np.testing.assert_array_equal(steps["D"], naive)  # bit for bit
np.testing.assert_array_equal(ref.relative_logits_skewed(q4, E4), naive)
assert steps["V"].size == L4 * (L4 + 1) == steps["C"].shape[0] * L4  # C has L + 1 rows
fig, axes = plt.subplots(1, 4, figsize=(13, 3.2), gridspec_kw={"width_ratios": [4, 5, 4, 4]})
panels = [
    (steps["A_masked"], "steps 1-3: A = Q E_r^T, masked", "column r (offset r - 3)"),
    (steps["B"], "step 4: B, a zero column first", "column"),
    (steps["C"], "steps 5-6: C, read L at a time", "column"),
    (steps["D"], "step 7: D, the first row dropped", "key j"),
]
for ax, (m, title, xlabel) in zip(axes, panels, strict=True):
    heatmap(
        ax,
        m + 0.0,  # + 0.0 turns the -0.0 of masked negative entries into 0.0
        title=title,
        xlabel=xlabel,
        ylabel="row",
        annotate=True,
        fmt="{:.0f}",
        colorbar=False,
    )
fig.suptitle("Skewing (Algorithm 1, corrected mask) on a 4 x 4 example: no (L, L, d) tensor")
fig.tight_layout()
plt.show()

# %% [markdown]
# Follow a value: the diagonal of $D$ (offset 0) is the last column of $A$, and the first column
# of $D$'s last row is the first column of $A$'s last row. Step 6 has a second, smaller slip: its
# index range says $i \le L$, but $C$ must have the $L + 1$ rows its stated shape promises, since
# step 7 reads row $L + 1$; the assertion above checks the count.
#
# The equality is exact for any $L$ and $d$ in float64 (the test suite checks many sizes, and
# on random reals the two agree to rounding). What the trick buys is memory: the naive method
# holds $L^2 d$ numbers in $R$; skewing's largest intermediates are $L \times L$ matrices ($A$,
# its padded copy and the result, about three of them alive at once), never an $(L, L, d)$
# tensor. For one head with $d = 64$ in float32:

# %%
for n in (256, 1024, 4096):
    naive_mb = n * n * 64 * 4 / 2**20  # R: (L, L, d)
    skew_mb = 3 * n * (n + 1) * 4 / 2**20  # about three (L, L + 1) buffers
    print(f"L = {n:5d}: naive R {naive_mb:9.1f} MB   skewing about {skew_mb:6.1f} MB")
assert math.isclose(4096 * 4096 * 64 * 4 / 2**30, 4.0)  # 4 GiB per head at L = 4096

# %% [markdown]
# $O(L^2 d)$ against $O(L^2)$ for the logits that attention needs anyway: beyond those, skewing
# needs only the $L \times d$ table itself, the intermediate memory "linear in the sequence
# length" that the paper claims {cite}`huang2018music`. At $L = 4096$ the naive tensor is 4 GiB
# for a single head of a single sequence. `benchmarks/positions.py` measures time and peak
# memory on the CPU (the table is in the closing note of this chapter: its peak for skewing is
# indeed about three $L \times L$ buffers), and the PyTorch side, batched over sequences and
# heads, agrees with its naive twin and with the reference (the appendix).

# %% [markdown]
# ## 6.8 Rotary embeddings (core, 6 min)
#
# RoFormer, on the notes' list of papers still to cover, moves the rotation of section 6.4 from
# the input to the queries and keys {cite}`su2021roformer`. Each pair of coordinates $(2i, 2i+1)$
# of the query at position $m$ is rotated by the angle $m w_i$, with the frequencies of eq. (19);
# keys likewise. Since rotations compose and preserve dot products,
#
# $$\operatorname{rot}(q, m) \cdot \operatorname{rot}(k, n) = q \cdot \operatorname{rot}(k, n - m),$$
#
# so the score depends on the two positions only through their offset, with no table, no
# clipping and nothing added to the logits.

# %%
q_vec, k_vec = rng.standard_normal((2, 1, 16))  # one query and one key, (1, d)
scores = []
for shift in (0, 1, 10, 1000):  # move both tokens by the same amount
    rq = ref.rotary_embedding(q_vec, np.array([5 + shift]))
    rk = ref.rotary_embedding(k_vec, np.array([2 + shift]))
    scores.append(float(rq[0] @ rk[0]))
print("score at positions (5, 2) shifted by 0, 1, 10, 1000:", np.round(scores, 6))
np.testing.assert_allclose(scores, scores[0], rtol=1e-10)

# %% [markdown]
# A shift of both positions by a thousand leaves the score unchanged. Two more facts, both
# checked: a rotation keeps lengths, so rotary embeddings never change the size of a query; and
# rotating the constant pair $(1, 0)$ gives back the sinusoidal table (cosine first, then sine):
# rotary embeddings are the sinusoidal idea applied multiplicatively, where it acts on the logit
# directly.

# %%
xq = rng.standard_normal((6, 16))  # (L, d)
np.testing.assert_allclose(
    np.linalg.norm(ref.rotary_embedding(xq), axis=1), np.linalg.norm(xq, axis=1)
)
pair = np.tile([1.0, 0.0], (10, 8))  # (L, d): every pair is (1, 0)
swap = np.arange(16) ^ 1  # exchange columns 2i and 2i+1
np.testing.assert_allclose(
    ref.rotary_embedding(pair)[:, swap], ref.sinusoidal_encoding(10, 16), atol=1e-12
)

# %% [markdown]
# **Two layouts.** RoFormer rotates the pairs $(2i, 2i+1)$, as above. GPT-NeoX and LLaMA pair
# $(i, i + d/2)$ instead: their `rotate_half` splits each vector into two halves. It is the same
# rotation with the same frequencies applied to permuted coordinates, the point section 6.3 made
# for the sinusoidal table, and a model trained with one layout gives wrong scores with the
# other: the usual bug when rotary weights are moved between code bases. The library takes
# `layout="concatenated"` for the split-half form:

# %%
half = ref.rotary_embedding(xq, layout="concatenated")  # (L, d): pairs (i, i + d/2)
perm = np.ravel(np.column_stack([np.arange(8), np.arange(8) + 8]))  # 0, 8, 1, 9, ..., 7, 15
np.testing.assert_allclose(ref.rotary_embedding(xq[:, perm]), half[:, perm], atol=1e-12)
print("split-half on x = interleaved on the permuted x:", perm)

# %% [markdown]
# ## 6.9 Train short, test long (core, 21 min)
#
# Which of these encodings lets a model handle sequences longer than it was trained on? Vaswani
# et al. chose the sinusoidal table partly because it "may allow the model to extrapolate to
# sequence lengths longer than the ones encountered during training", having found a learned
# table "nearly identical" in quality at the training length (their Table 3, row (E))
# {cite}`vaswani2017attention`; Press et al. open their ALiBi paper by testing that hypothesis
# {cite}`press2022train`. We test it on two small tasks. Tiny causal Transformers (one block,
# $d = 32$, 4 heads, 600 steps of Adam, batch 32) are trained at length $L = 32$ with five
# position schemes (none, sinusoidal, learned, ALiBi, rotary) and evaluated at $2L$ and $4L$:
#
# - **lag**: random tokens from 16 types; at every position, output the token three places back.
#   This needs an exact relative lookup: attend to the key at offset $-3$, whatever the tokens.
# - **recent**: four of the 16 token types are *markers* (each position holds one with
#   probability 0.15); at every position, output the most recent marker. This needs content
#   (find the markers) plus a preference for the nearest one.
#
# Each (task, scheme) gets its own learning rate, the one of $10^{-3}$, $3 \cdot 10^{-3}$ and
# $10^{-2}$ (extended past an end where the best sat there) with the lowest loss on held-out
# sequences of length 32 (rates within 0.001 nats count as tied; the smallest is taken), then
# three seeds at that rate. The 64 runs take several minutes on one core, so
# `python -m course_lib.positions.experiment` made them; `data/` holds the first seed's weights
# and every seed's evaluation on 256 fresh sequences of length $4L = 128$ (`data/README.md`).

# %% [markdown] tags=["worksheet"]
# ```{exercise} Predict, then check: which scheme extrapolates?
# :label: ex-positions-predict
#
# On the **recent** task, trained at length 32, which of `sinusoidal`, `learned`, `alibi` and
# `rotary` keeps the highest accuracy on sequences of length 128 (the mean of three seeds)?
# Write its name, then run the cell.
# ```

# %% tags=["needs-torch", "worksheet"]
from course_lib.positions import experiment  # the trained models and their evaluation: PyTorch

cfg, models, recorded = experiment.load_experiment()
spread = experiment.seed_spread(recorded)  # {"task/scheme": {length: (mean, min, max)}}
prediction = None  # your prediction here, e.g. "learned"
best_at_128 = max(
    ("sinusoidal", "learned", "alibi", "rotary"), key=lambda sc: spread[f"recent/{sc}"][128][0]
)
check.scheme_prediction(prediction, best_at_128)  # says why, once you have predicted

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-positions-predict
# :class: dropdown
# ```

# %% tags=["needs-torch", "solution"]
prediction = "alibi"  # its bias depends only on the distance, the same at every length
assert check.scheme_prediction(prediction, best_at_128).passed

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# The accuracy is the mean over all positions of a sequence of the given length (a causal model's
# prediction at position $t$ is the same whether the sequence stops at $t$ or goes on): the mean
# of three seeds, and their range.

# %% tags=["needs-torch"]
head = f"{'task':<7}{'scheme':<11}{'lr':>6}" + "".join(
    f"{'acc @ ' + str(n):>20}" for n in cfg.eval_lens
)
print(head)
for key, by_length in spread.items():
    task, scheme = key.split("/")
    cells = "".join(f"{m:>8.3f} ({lo:.2f}-{hi:.2f})" for m, lo, hi in by_length.values())
    print(f"{task:<7}{scheme:<11}{recorded['runs'][key]['lr']:>6g}{cells}")

# %% [markdown]
# The figure shows where it breaks, position by position (the line is the mean of the three
# seeds, the band their range):

# %% tags=["needs-torch"]
fig, axes = plt.subplots(1, 2, figsize=(13, 4), sharey=True)
for ax, task in zip(axes, cfg.tasks, strict=True):
    for colour, scheme in zip(PALETTE, cfg.schemes, strict=False):
        runs = recorded["runs"][f"{task}/{scheme}"]["by_seed"].values()
        curves = np.array([r["per_position"] for r in runs], dtype=float)  # (3, 128), None: NaN
        ax.plot(curves.mean(0), color=colour, lw=1.3, label=scheme)
        ax.fill_between(
            range(curves.shape[1]), curves.min(0), curves.max(0), color=colour, alpha=0.2
        )
    ax.axvline(cfg.train_len, color="black", ls="--", lw=1, label="training length")
    ax.set(title=f"task '{task}'", xlabel="position in the sequence")
axes[0].set_ylabel("accuracy at that position")
axes[0].legend(loc="upper right")  # the empty corner
fig.suptitle("Trained at length 32, evaluated at length 128 (three seeds)")
fig.tight_layout()
plt.show()

# %% [markdown]
# What to notice:
#
# - **No positions** fails the lag task everywhere: the causal mask alone cannot find "three
#   back".
# - **Learned** tables are perfect up to position 31 and at chance (1 in 16) from 32 on, on every
#   seed: those rows were never trained ("can't extrapolate", the handwritten notes).
# - **Sinusoidal** and **rotary** are perfect in training and degrade beyond it. On the lag task
#   at $2L$ rotary is ahead on every seed, but only just (0.62 to 0.64 against 0.54 to 0.61); at
#   $4L$ the ranges overlap and these seeds do not rank the two. On the recent task rotary is
#   clearly ahead at both lengths. Both are defined at every position, but the models learned to
#   use only the positions (or, for rotary, the offsets) they saw.
# - **ALiBi** is flat: its bias sees only offsets, and far keys are penalised. On the recent
#   task it is the only scheme that
#   extrapolates (0.97 or more at $4L$ on every seed). On the lag task it is right 39 to 49% of
#   the time at every length: six to eight times chance, and far from perfect.
#
# Vaswani et al.'s hypothesis fails here for the sinusoidal table: defined everywhere is not the
# same as usable everywhere. What does ALiBi do on the lag task? A penalty that grows with the
# distance can make a head prefer *near* keys, never *the key exactly three back*, yet the model
# is right almost half the time at length 32.

# %% [markdown] tags=["worksheet"]
# ```{exercise} Predict, then check: what ALiBi outputs on the lag task
# :label: ex-positions-predict-alibi
#
# For each query of the lag task, ALiBi's model (seed 0) outputs some token. Which earlier token
# does it output most often: the token $k$ places back for which $k$? Write $k$ (0 is the query's
# own token), then run the cell.
# ```

# %% tags=["needs-torch", "worksheet"]
prediction = None  # your prediction here: k
x_lag, _ = experiment.eval_batch("lag", cfg)  # (256, 128) random tokens
with torch.no_grad():
    output = models["lag/alibi"](x_lag).argmax(-1)  # (256, 128): the token it outputs
t = torch.arange(8, cfg.max_len)  # queries with 8 tokens before them
share = [(output[:, t] == x_lag[:, t - k]).double().mean().item() for k in range(8)]
check_prediction(
    prediction,
    int(np.argmax(share)),
    what="the offset ALiBi's model outputs most often",
    rtol=0,
    explanation="the right one, but only about 4 times in 10; 0 or 1 assumes one head alone",
)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-positions-predict-alibi
# :class: dropdown
# ```

# %% tags=["needs-torch", "solution"]
prediction = 3  # the model aims at the right offset, but cannot isolate it
assert check_prediction(prediction, int(np.argmax(share)), what="the offset", rtol=0).passed

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% tags=["needs-torch"]
print("share of queries whose output is the token k back:")
print("  ".join(f"k={k}: {v:.2f}" for k, v in enumerate(share)))

# %% [markdown]
# The model aims at the right place: it outputs the token three back most often, about 4 times in
# 10, and otherwise mostly its neighbours, two and four back. (The shares add to more than 1
# because tokens repeat: two random tokens agree 1 time in 16, which is also the floor far
# away.) Its four heads have four fixed slopes, and each head's preference falls with the
# distance; a plausible mechanism, which we have not measured, is that the read-out combines the
# heads' differently decaying windows into a bump around offset 3, which a sum of smooth windows
# can make but a spike it cannot. That is the price of ALiBi's extrapolation: it was designed for
# language modelling, where "recent" is what matters {cite}`press2022train`, and it does exactly
# that on the recent task.
#
# The experiment is small (one layer, 600 steps) and the numbers would change with more training
# or other tasks. The part that carries over matches what Press et al. report for language models
# {cite}`press2022train`: sinusoidal and rotary positions degrade beyond the training length,
# ALiBi does not.

# %% [markdown]
# ## 6.10 Where the lag models break (optional, 4 min)
#
# Section 6.9's lag models with learned, sinusoidal and rotary positions are perfect up to the
# training length and fail beyond it. The attention of their best head on the correct key, three
# back, as a function of the query position (seed 0):

# %% tags=["needs-torch"]
fig, ax = new_axes(
    "Attention on the key three back (best head), lag task",
    "query position",
    "mean attention weight",
    figsize=(7.5, 3.8),
)
t = torch.arange(3, cfg.max_len)  # query positions with a target
for scheme, colour in (("sinusoidal", PALETTE[1]), ("learned", PALETTE[2]), ("rotary", PALETTE[4])):
    w = experiment.attention_maps(models[f"lag/{scheme}"], x_lag[:64])[0]  # (B, h, L, L)
    on_target = w[:, :, t, t - 3].mean(0).max(0).values.numpy()  # (L - 3,)
    ax.plot(t.numpy(), on_target, color=colour, label=scheme)
ax.axvline(cfg.train_len, color="black", ls="--", lw=1)
ax.legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# Inside the training length the best head puts most of its weight on the right key; beyond it,
# the weight drains away to keys at unseen positions (learned, sinusoidal) or unseen offsets
# (rotary) within a few positions.
#
# ## 6.11 What the notes get wrong, and what they leave out (optional, 4 min)
#
# **The sinusoidal formula of May's notes** (section 1.4) {cite}`may2024transformer` differs
# from eq. (19) in two places; the find-the-bug exercise at the end of the chapter asks which,
# and what the printed version does to the encodings.
#
# **"No limit to the number of tokens" (May's notes).** The sinusoidal table can be computed for any
# position, but section 6.9 shows that a trained model does not therefore work at positions it
# never saw: the sinusoidal models lose their accuracy within a few dozen positions of the
# training length.
#
# **Algorithm 1 (Strabel's notes, section 12; section 11 of the earlier version).** Step 2's mask
# keeps the wrong triangle for steps 4-7 ($i \ge j$ instead of $i + j \ge L + 1$, 1-based), so the
# printed algorithm returns wrong logits for every query but the last (section 6.7); step 6's range
# $i \le L$ must be $i \le L + 1$ to give $C$ the $(L+1) \times L$ shape it states and that step 7
# reads. Three things are left implicit: which row of $E^r$ holds which offset (the last row is
# offset 0); that the input is the *queries* $Q = X W^Q$ of one head, not $X$; and that $D$ is added
# to $Q K^\top$ before the $1/\sqrt{d}$ scaling and the causal mask, which also hides whatever the
# upper triangle holds {cite}`huang2018music`.
#
# **"Invariant" (the lecture slides).** Self-attention is permutation-*equivariant*, not invariant
# (section 6.1): permuting the input permutes the output.
#
# **Variant (iii) of the handwritten notes.** A term $\lambda (i - j)$, linear in the *signed*
# offset, contributes $\lambda i$, which is the same for every key of query $i$ and cancels in the
# softmax, and $-\lambda j$, a preference for early or late keys by their *absolute* position. It
# acts as a distance penalty only together with a causal mask, where all keys lie on one side; for
# bidirectional attention the penalty must be $-m\,|i - j|$ (`alibi_bias(..., symmetric=True)`).

# %%
qv, kv = rng.standard_normal((2, 7, 4))  # (L, d_k)
i_idx, j_idx = np.indices((7, 7))
w_offset = ref_attn.attention_weights(qv, kv, bias=0.7 * (i_idx - j_idx))
w_key_only = ref_attn.attention_weights(qv, kv, bias=-0.7 * j_idx)
np.testing.assert_allclose(w_offset, w_key_only, atol=1e-12)

# %% [markdown]
# Identical weights: without a mask, variant (iii) as written is a bias on the key's absolute
# position, not on the distance.
#
# ## 6.12 Explore the sinusoidal and rotary encodings (optional, 3 min)
#
# Choose the encoding, the width, the base of the frequencies (the paper's $10^4$, or smaller to
# make every column oscillate) and the number of positions. Left: the encoding, one row per
# position (for rotary, a fixed query rotated to each position). Middle: the similarity of every
# pair of positions, $PE(m) \cdot PE(n)$ or the rotary score $\operatorname{rot}(q, m) \cdot
# \operatorname{rot}(k, n)$, constant along diagonals in both cases. Right: one row of it.

# %%
from course_lib.positions.widget import explorer

explorer(d_model=32, n_positions=50)

# %% [markdown]
# Things to try: with a small base every column oscillates and the similarity has many
# near-repeats (two distant positions look alike); with the paper's base the similarity falls
# smoothly with distance. With rotary, the row of the similarity is the attention score a fixed
# query gives a fixed key as the two move apart.

# %% [markdown]
# ## Exercises
#
# Sections 6.7 and 6.9 asked a find-the-bug exercise and two predictions. Here: another bug to find,
# an implementation the page does not show, a conceptual question and a stretch problem. Each
# checker runs your function against the reference on several inputs, including edge cases, and
# tells you what is wrong. Solutions are folded below each exercise (on the website) or in cells
# tagged `solution` (in the notebook).
#
# ```{exercise} Find the bug: the sinusoid of May's notes
# :label: ex-positions-bug-sinusoid
#
# May's notes (section 1.4) print the sinusoidal encoding as $p_n^{(i)} = n \times \sin(w_k)$ for
# $i = 2k$ and $n \times \cos(w_k)$ for $i = 2k + 2$, with $w_k = 1/10000^{2k/d}$.
# `sinusoidal_as_printed` below reads it literally. Compare it with eq. (19) and find the two
# errors. Then show what the printed version does to the encodings: fix only the index, and
# compute the rank of the $50 \times 128$ table and the length of each row. Why can no linear map
# send the encoding of position 0 to that of position $k$, as section 6.4's $M_k$ does? Finally
# write `sinusoidal_table(num_positions, d_model)`, the correct $(\text{num\_positions},
# d_\text{model})$ table of eq. (19) for positions $0, 1, \dots$, interleaved (sine in even
# columns, cosine in odd ones), with NumPy only.
# ```


# %%
printed = sinusoidal_as_printed(np.arange(50), 128)  # (50, 128), May's formula read literally
print("cases claiming each of the first 8 columns:", printed_case_counts(8))
print("undefined entries:", int(np.isnan(printed).sum()), "of", printed.size)


def sinusoidal_table(num_positions, d_model):
    raise NotImplementedError  # your code here


check.sinusoidal_table(sinusoidal_table)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-positions-bug-sinusoid
# :class: dropdown
# ```
#
# Two things are wrong. The position $n$ multiplies the sine instead of sitting inside it (it must
# be $\sin(n\, w_k)$), and the cosine's index must be $2k + 1$: as printed, the index rule does
# not even define a vector, since column $2k + 2$ is claimed by two cases and the odd columns by
# none. Repairing only the index still leaves the position outside: every row is $n$ times the
# same vector, so all fifty encodings point in one direction and grow without bound. The table
# has rank 1 (the correct one has rank 29 in floating point, and no two of its rows are
# parallel); position 0 is the zero vector, so no linear map can send it to position $k$, and the
# "linear function" property the notes claim fails; and only a vector's length tells positions
# apart, 49 times as long at $n = 49$ as at $n = 1$.


# %% tags=["solution"]
def sinusoidal_table(num_positions, d_model):
    pos = np.arange(num_positions)[:, None]  # (L, 1)
    w = 10000.0 ** (-np.arange(0, d_model, 2) / d_model)  # (d/2,): w_i = 10000^(-2i/d)
    table = np.empty((num_positions, d_model))
    table[:, 0::2] = np.sin(pos * w)  # the position inside the sine
    table[:, 1::2] = np.cos(pos * w)  # and the cosine in column 2i + 1
    return table


check.sinusoidal_table(sinusoidal_table, require=True)
outside = sinusoidal_as_printed(np.arange(50), 128, cos_index="2k+1")  # index fixed, n outside
correct = sinusoidal_table(50, 128)
print("rank: printed", np.linalg.matrix_rank(outside), " eq. (19)", np.linalg.matrix_rank(correct))
print("row norms at n = 1, 49: printed", np.linalg.norm(outside[[1, 49]], axis=1).round(1))
print("row norms of eq. (19):", np.linalg.norm(correct[[1, 49]], axis=1).round(1), "= sqrt(d/2)")
assert not outside[0].any()  # position 0 is the zero vector
fig, axes = plt.subplots(1, 2, figsize=(12, 3.8))
labels = {"xlabel": "column", "ylabel": "position n"}
heatmap(axes[0], outside, title="As printed, index fixed: n sin(w_k), n cos(w_k)", **labels)
heatmap(axes[1], correct, title="Eq. (19): sin(n w_k), cos(n w_k)", cmap="RdBu", **labels)
fig.tight_layout()
plt.show()

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Rotary embeddings, the split-half layout
# :label: ex-positions-rotary-half
#
# Section 6.8 rotated the pairs $(2i, 2i+1)$. Write `apply_rotary_half(x, positions)` for the
# layout of GPT-NeoX and LLaMA, with NumPy: for $x$ of shape $(L, d)$ ($d$ even) and positions of
# shape $(L,)$, column $i < d/2$ of row $m$ is paired with column $i + d/2$, and the pair
# $(x_{m,i}, x_{m,i+d/2})$ is rotated counter-clockwise by the angle
# $\text{positions}[m] \cdot 10000^{-2i/d}$. Then check with your function that the score of a
# query at position 9 and a key at position 4 equals that of positions 105 and 100.
# ```


# %%
def apply_rotary_half(x, positions):
    raise NotImplementedError  # your code here


check.rotary_half(apply_rotary_half)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-positions-rotary-half
# :class: dropdown
# ```


# %% tags=["solution"]
def apply_rotary_half(x, positions):
    x = np.asarray(x, dtype=float)
    half = x.shape[1] // 2
    w = 10000.0 ** (-2 * np.arange(half) / x.shape[1])  # (d/2,): one frequency per pair
    angle = np.asarray(positions, dtype=float)[:, None] * w  # (L, d/2)
    a, b = x[:, :half], x[:, half:]  # the two members of each pair
    return np.concatenate(
        [a * np.cos(angle) - b * np.sin(angle), a * np.sin(angle) + b * np.cos(angle)], axis=1
    )


qx, kx = rng.standard_normal((2, 1, 8))
s1 = apply_rotary_half(qx, [9])[0] @ apply_rotary_half(kx, [4])[0]
s2 = apply_rotary_half(qx, [105])[0] @ apply_rotary_half(kx, [100])[0]
assert np.isclose(s1, s2)
check.rotary_half(apply_rotary_half, require=True)

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Added or concatenated?
# :label: ex-positions-concept
#
# The slides concatenate a one-hot position to each token; the original Transformer adds a
# position vector. Section 6.2 shows that the first layer cannot tell the two apart. What does
# adding cost, and why do models add anyway?
# ```

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-positions-concept
# :class: dropdown
# ```
#
# Adding shares the $d$ dimensions between content and position, so the two can interfere;
# concatenating keeps them apart but makes every vector, and every weight matrix that reads it,
# wider by the number of positions (or by the width of the position code). In a high-dimensional
# space the network can learn to keep the two nearly orthogonal, and adding keeps the residual
# stream at width $d$ through the whole stack, so every model since the original adds (or, with
# relative schemes, moves positions into attention altogether).
#
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Stretch: T5's relative position buckets
# :label: ex-positions-stretch
#
# T5 uses variant (ii) of section 6.6, one learned scalar per head for each *bucket* of offsets
# {cite}`raffel2020exploring`. In a causal model (every key at or before its query), with 32
# buckets and a maximum distance of 128, a key $n = i - j \ge 0$ places back falls in bucket $n$
# if $n < 16$, and otherwise in bucket $16 + \lfloor 16 \log(n/16) / \log(128/16) \rfloor$, at most
# 31. Write `t5_bucket(n)` for an integer array of $n \ge 0$ and compare it with Hugging Face's
# `T5Attention._relative_position_bucket` (in `transformers.models.t5.modeling_t5`; pass the
# relative position $j - i = -n$ and `bidirectional=False`). Which offsets share bucket 31? Why
# might such buckets cope better with sequences longer than in training than a table clipped at
# a fixed $K$, and what can they still not do?
# ```

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-positions-stretch
# :class: dropdown
# ```

# %% tags=["needs-torch", "solution"]
from transformers.models.t5.modeling_t5 import T5Attention


def t5_bucket(n, num_buckets=32, max_distance=128):
    n = np.asarray(n)
    exact = num_buckets // 2  # 16 buckets of one offset each
    far = exact + np.log(np.maximum(n, 1) / exact) / np.log(max_distance / exact) * exact
    far = np.minimum(far.astype(int), num_buckets - 1)  # the floor, then at most 31
    return np.where(n < exact, n, far)


n = np.arange(0, 1000)
theirs = T5Attention._relative_position_bucket(torch.from_numpy(-n), bidirectional=False)
np.testing.assert_array_equal(t5_bucket(n), theirs.numpy())
print("first offset in bucket 31:", n[t5_bucket(n) == 31][0], "and every offset beyond")

# %% [markdown] tags=["solution"]
# Every offset from 113 on shares bucket 31, with one learned scalar: the buckets widen
# logarithmically, so near keys are told apart exactly and far keys only roughly. A model
# trained at length 512 has seen every bucket, and a longer sequence adds only offsets that fall
# into the last bucket, which was trained; a clipped table behaves the same at its clip $K$, but
# T5's buckets spend their 32 numbers where distinctions matter (nearby). Neither can express
# "exactly 300 back": beyond the maximum distance all offsets look alike, so tasks like section
# 6.9's lag task at long offsets are out of reach, as for ALiBi.
#
# ```{solution-end}
# ```

# %% [markdown]
# ## Summary
#
# - Self-attention is permutation-equivariant: without positions, order is invisible.
# - Absolute encodings join a position vector to each token. Concatenating a one-hot position and
#   projecting equals adding a learned table; a learned table has no rows beyond its training
#   length, so it cannot extrapolate.
# - The sinusoidal table (eq. 19) puts the position inside sines and cosines of geometrically
#   spaced frequencies; shifting the position by $k$ is a fixed rotation $M_k$, and dot products
#   of encodings depend on the offset only.
# - Relative encodings change the logits: a vector per clipped offset added to the key (Shaw et
#   al.), a scalar per clipped offset (T5, with logarithmic buckets), or a linear penalty with a
#   fixed slope per head (ALiBi).
# - The Music Transformer's relative logits need an $(L, L, d)$ tensor if computed naively;
#   skewing gets them from $QE^{r\top}$ with a pad and a reshape. The notes' Algorithm 1 masks the
#   wrong triangle and gives step 6 the wrong range; with the corrected mask it is exact.
# - Rotary embeddings rotate queries and keys so that scores depend on the offset only; the
#   pairs are $(2i, 2i+1)$ in RoFormer and $(i, i + d/2)$ in GPT-NeoX and LLaMA, and weights must
#   be used with the layout they were trained with.
# - Trained at length 32, each scheme at its own learning rate, three seeds: learned tables fail
#   at once beyond it, sinusoidal and rotary degrade (rotary ahead on the recent task; on the lag
#   task too close to rank at $4L$), ALiBi is flat, and on the lag task it outputs the right token
#   only four times in ten, aiming near it. No scheme wins on every task, and "defined at every
#   position" (Vaswani et al.'s hope for the sinusoidal table) is not "works at every position".
# - May's notes' sinusoidal formula is wrong twice (position outside the sine, cosine index
#   $2k+2$): the find-the-bug exercise shows that the printed version has rank 1.
#
# **Closing note: the two tables of this chapter.** The extrapolation experiment (section 6.9,
# mean accuracy over all positions of a sequence of the given length, trained at 32; the mean of
# three seeds, whose ranges section 6.9 prints):
#
# | task | none | sinusoidal | learned | ALiBi | rotary |
# | --- | --- | --- | --- | --- | --- |
# | lag, $L$ = 32 | 0.196 | 1.000 | 1.000 | 0.480 | 1.000 |
# | lag, $2L$ = 64 | 0.158 | 0.582 | 0.508 | 0.432 | 0.628 |
# | lag, $4L$ = 128 | 0.132 | 0.337 | 0.280 | 0.399 | 0.340 |
# | recent, $L$ = 32 | 0.755 | 0.993 | 0.997 | 0.984 | 1.000 |
# | recent, $2L$ = 64 | 0.657 | 0.767 | 0.736 | 0.976 | 0.898 |
# | recent, $4L$ = 128 | 0.564 | 0.571 | 0.535 | 0.975 | 0.679 |
#
# The relative-logit benchmark (`python -m benchmarks.run positions`: one head, $d = 64$,
# float32, one CPU thread, on the course's 2-core build machine; peak tensor memory above the
# inputs, measured with `course_lib.measure.peak_tensor_memory`):
#
# | $L$ | naive: time (ms) | naive: peak (MB) | skewing: time (ms) | skewing: peak (MB) |
# | --- | --- | --- | --- | --- |
# | 256 | 5.0 | 17.3 | 0.43 | 0.8 |
# | 512 | 52.7 | 69.1 | 1.45 | 3.3 |
# | 1024 | 227 | 276 | 4.84 | 13.0 |
# | 2048 | 885 | 1104 | 29.6 | 52.0 |
# | 4096 | 3992 | 4417 | 246 | 208 |
#
# Skewing is 12 to 47 times faster at every length and its peak is 21 times lower: the naive peak
# follows $L^2 d$ (4.3 GB at $L = 4096$), skewing's follows $L^2$ (about three $L \times L$ buffers:
# the logits, their padded copy and the result). The times were taken on a shared machine and vary
# from run to run; the ratios hold: less memory at every length, and faster at every length.

# %% [markdown]
# ## Quiz (optional, 21 min)
#
# Test yourself on this chapter's sections: multiple choice and numeric questions, each
# naming the section it tests. Choose or type an answer and check it: the quiz says whether it
# is right and why, for the wrong options too. The cell below needs nothing from the cells
# above it, so it also runs on its own when you come back to the chapter.

# %%
from course_lib import quiz

quiz.show("06_positional_encodings")

# %% [markdown]
# ## References
#
# - G. Strabel, *Transformers*, lecture notes, 2023, sections 3 and 12, and the slides and notes
#   that accompany them {cite}`strabel2023transformers`.
# - A. Vaswani et al., "Attention is all you need", 2017 {cite}`vaswani2017attention`.
# - A. Radford et al., "Improving language understanding by generative pre-training", 2018
#   {cite}`radford2018improving`.
# - P. Shaw, J. Uszkoreit and A. Vaswani, "Self-attention with relative position
#   representations", 2018 {cite}`shaw2018self`.
# - C.-Z. A. Huang et al., "Music Transformer: generating music with long-term structure", 2018
#   {cite}`huang2018music`.
# - O. Press, N. A. Smith and M. Lewis, "Train short, test long: attention with linear biases
#   enables input length extrapolation", 2022 {cite}`press2022train`.
# - J. Su et al., "RoFormer: enhanced Transformer with rotary position embedding", 2021
#   {cite}`su2021roformer`.
# - C. Raffel et al., "Exploring the limits of transfer learning with a unified text-to-text
#   Transformer", 2020 {cite}`raffel2020exploring`.
#
# The full bibliography of the course is on the [References](../book/references.md) page.
#
# ## How this chapter is tested
#
# `tests/test_positions.py` checks every encoding against hand-derived values and an
# independent loop, skewing against the naive gather, the shipped models against their recorded
# evaluation, and retrains one model (comparing losses, accuracies and predictions, never
# weights, also under another CPU's kernels); `tests/test_conformance.py` runs the NumPy
# reference and the PyTorch side on random inputs in four dtypes; `benchmarks/positions.py`
# measures skewing against the naive gather (the table in the closing note above). The cells
# below are the parity checks the lesson leaves out.

# %% [markdown]
# **Section 6.3's tables**: the PyTorch twin of eq. (19), and tensor2tensor's variant, which
# concatenates and changes every frequency but the first (so it is not a permutation of eq. (19)):

# %% tags=["needs-torch"]
torch.testing.assert_close(
    fast.sinusoidal_encoding(torch.tensor([1.0], dtype=torch.float64), 4), torch.from_numpy(row)
)
t2t = tensor2tensor_encoding(50, 128)  # (50, 128): concatenated, other frequencies
assert np.allclose(t2t[:, [0, 64]], concatenated[:, [0, 64]])  # the first pair (w = 1) agrees
assert not np.allclose(t2t, concatenated)  # the others do not
print(
    "last frequency, paper and tensor2tensor:",
    10000 ** (-126 / 128),
    tensor2tensor_frequencies(128)[-1],
)

# %% [markdown]
# **The PyTorch twins** of section 6.6's relative key logits and section 6.8's rotary embedding
# agree with the NumPy side (float32 on the PyTorch side, compared at float32 tolerance):

# %% tags=["needs-torch"]
torch.testing.assert_close(
    fast.relative_key_logits(torch.from_numpy(q_rel), torch.from_numpy(rel_keys)),
    torch.from_numpy(shaw_key_logits(q_rel, rel_keys)),
)
xt = torch.randn(2, 4, 10, 16)  # (B, h, L, d_h)
for layout in ("interleaved", "concatenated"):
    torch.testing.assert_close(
        fast.rotary_embedding(xt, layout=layout),
        torch.from_numpy(ref.rotary_embedding(xt.numpy(), layout=layout)).float(),
    )

# %% [markdown]
# **ALiBi through chapter 4's attention and PyTorch's fused attention** (section 6.6): the bias
# added after the scaling, with a causal mask, equals PyTorch's float mask:

# %% tags=["needs-torch"]
B, H, Lq, dh = 2, 8, 12, 16
qt, kt, vt = torch.randn(3, B, H, Lq, dh, dtype=torch.float64)  # (B, h, L, d_h) each
causal = attn.causal_mask(Lq)  # (L, L), True = may attend
alibi_t = fast.alibi_bias(torch.tensor(slopes, dtype=torch.float64), Lq)  # (h, L, L)
ours = attn.scaled_dot_product_attention(qt, kt, vt, mask=causal, bias=alibi_t)  # (B, h, L, d_h)
theirs = torch.nn.functional.scaled_dot_product_attention(
    qt, kt, vt, attn_mask=alibi_t.masked_fill(~causal, float("-inf"))
)
torch.testing.assert_close(ours, theirs)

# %% [markdown]
# **Skewing in PyTorch** (section 6.7), batched over sequences and heads, against its naive twin
# and the NumPy reference (the test suite also compares their gradients):

# %% tags=["needs-torch"]
from course_lib import device_for

dev64 = device_for(torch.float64)  # float64 stays on the CPU on Apple MPS (no float64 there)
qb = torch.randn(2, 8, 64, 16, dtype=torch.float64, device=dev64)  # (B, h, L, d_h)
Eb = torch.randn(64, 16, dtype=torch.float64, device=dev64)  # (L, d_h), shared by heads
torch.testing.assert_close(fast.relative_logits_skewed(qb, Eb), fast.relative_logits_naive(qb, Eb))
np.testing.assert_allclose(
    fast.relative_logits_skewed(qb, Eb).cpu().numpy(),
    ref.relative_logits_skewed(qb.cpu().numpy(), Eb.cpu().numpy()),
    atol=1e-12,
)
print("relative logits, rotary, ALiBi and skewing: the PyTorch side agrees")

# %% [markdown]
# **The shipped weights** (the first seed of section 6.9) reproduce the evaluation the training
# script recorded for them:

# %% tags=["needs-torch"]
for key, m in models.items():
    again = experiment.summarise(experiment.evaluate(m, key.split("/")[0], cfg), cfg)
    first = recorded["runs"][key]["by_seed"][str(cfg.seeds[0])]["summary"]
    assert all(abs(again[n] - first[str(n)]) < 1e-3 for n in cfg.eval_lens), key
print(len(models), "shipped models reproduce their recorded accuracies")
