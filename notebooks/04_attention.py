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

# %% [markdown]
# # 4. Attention
#
# Attention is the one layer of a Transformer that lets tokens exchange information. Every
# other layer (the feed-forward network, the norms) works on each token by itself; attention
# builds each token's new representation as a weighted average over *all* the tokens it is
# allowed to see, with weights it computes on the fly from the tokens themselves. This chapter
# derives it three times (one query at a time, in matrix form, with several heads), checks
# every number the lecture notes print, and measures what it costs.
#
# **After this chapter you can**
#
# - compute scaled dot-product attention by hand for one query and as a matrix expression, and
#   explain every shape in $\operatorname{softmax}(QK^\top/\sqrt{d_k})\,V$;
# - say why the logits are divided by $\sqrt{d_k}$, and show what goes wrong without it;
# - build causal and padding masks, combine them, and apply them correctly (before the
#   softmax, not after it);
# - write multi-head attention with per-head matrices and with one fused projection, and
#   prove that they compute the same thing, and that both match `torch.nn.MultiheadAttention`;
# - count attention's FLOPs and memory, and say for which sequence lengths attention or the
#   feed-forward network dominates.
#
# **Assumes**: chapter 1 (the row view of a matrix product: each row of $AV$ mixes the rows
# of $V$) and chapter 2 (a stable softmax, and masking with $-\infty$).
# **Time**: about 60 minutes, plus the exercises.
#
# The chapter follows section 2 of the notes {cite}`strabel2023transformers` (Definition 2.1,
# eqs. 13–18), the step-by-step derivation of the lecture slides {cite}`marlin2022transformers`,
# the worked example and the mask of the lecture notes on keys, queries and values
# {cite}`may2024transformer` (sections 1.1–1.2), and the handwritten notes' view of attention
# as a comparison function followed by a reduction. Attention in this form comes from
# {cite}`vaswani2017attention`.

# %%

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F

import course_lib.attention.accelerated as fast
import course_lib.attention.reference as ref
from course_lib import device_for, get_device, seed_everything
from course_lib.attention import exercises as check
from course_lib.attention.cost import (
    attention_flops,
    crossover_length,
    ffn_flops,
    measure_attention,
)
from course_lib.attention.examples import HEAD_NAMES, notes_004_example, toy_sentence
from course_lib.attention.module import MultiHeadAttention, to_torch_multihead
from course_lib.plotting import heatmap, new_axes, use_style
from course_lib.softmax.reference import softmax

rng = seed_everything(0)
use_style()
np.set_printoptions(precision=3, suppress=True)
device = get_device()

# %% [markdown]
# As in every chapter, `ref` holds the NumPy references (float64, written like the equations)
# and `fast` their PyTorch twins (same names and signatures; batched, any device, autograd).
# `softmax` is chapter 2's: stable, and a row whose entries are all $-\infty$ gives zeros.
#
# ## 4.1 Keys, queries and values, one query at a time
#
# The slides {cite}`marlin2022transformers` start from a collection of $M$ objects, each a
# vector $\mathbf{x}_i$ of length $D$, and give every object three new vectors of length $K$
# by three linear maps: a **query** $\mathbf{q}_i = W^q \mathbf{x}_i$ (what object $i$ is
# looking for), a **key** $\mathbf{k}_i = W^k \mathbf{x}_i$ (what it offers to be found by)
# and a **value** $\mathbf{v}_i = W^v \mathbf{x}_i$ (what it hands over once found). Object
# $i$ then scores every object $j$ by comparing its query with $j$'s key, turns the scores into
# weights with a softmax,
#
# $$a_{ij} = \frac{\exp\!\big(\mathbf{q}_i^\top \mathbf{k}_j / \sqrt{K}\big)}
#   {\sum_{j'=1}^{M} \exp\!\big(\mathbf{q}_i^\top \mathbf{k}_{j'} / \sqrt{K}\big)},$$
#
# and outputs the weighted average of the values, $\mathbf{h}_i = \sum_{j=1}^{M} a_{ij}
# \mathbf{v}_j$. The handwritten notes name the two halves: a **comparison function**
# $\alpha(\mathbf{q}_i, \mathbf{k}_j) = \mathbf{q}_i^\top \mathbf{k}_j / \sqrt{d_k}$ and a
# **reduction**, the softmax-weighted average. We write everything in the notes' row
# convention (chapter 1, section 1.8): objects are the rows of $X \in \mathbb{R}^{M \times D}$
# and $W_Q = (W^q)^\top \in \mathbb{R}^{D \times K}$, so $Q = X W_Q$ holds one query per row.

# %%
M, D, Kdim = 4, 3, 2
X = rng.standard_normal((M, D))  # (M, D): four objects as rows
W_Q, W_K, W_V = (rng.standard_normal((D, Kdim)) for _ in range(3))  # (D, K) each
Q, K, V = X @ W_Q, X @ W_K, X @ W_V  # (M, K): row i is q_i, k_i, v_i

i = 2
scores = np.array([Q[i] @ K[j] / np.sqrt(Kdim) for j in range(M)])  # comparison, (M,)
a_i = softmax(scores)  # weights a_i1 ... a_iM
h_i = sum(a_i[j] * V[j] for j in range(M))  # reduction: weighted average of the values
print("weights a_2j:", a_i, " sum:", a_i.sum().round(12))
print("h_2 =", h_i)

# %% [markdown]
# The weights are positive and sum to one, so $\mathbf{h}_2$ is a *convex combination* of
# the four values: it lies inside the region they span, and can be no larger in any
# coordinate than the largest value. `ref.attention_per_query` runs this loop for every query:

# %%
H_loop = ref.attention_per_query(Q, K, V)  # (M, K): row i is h_i
np.testing.assert_allclose(H_loop[i], h_i)
assert np.all(H_loop.max(axis=0) <= V.max(axis=0)) and np.all(H_loop.min(axis=0) >= V.min(axis=0))

# %% [markdown]
# A single attention head has exactly three weight matrices of $D \times K$ entries, $3DK$
# parameters, whatever the number of objects $M$: the same maps are applied to every object,
# which is what lets one layer handle sequences of any length.

# %%
n_params = sum(w.size for w in (W_Q, W_K, W_V))
assert n_params == 3 * D * Kdim
print(f"3DK = 3 * {D} * {Kdim} = {n_params} parameters, for any M")

# %% [markdown]
# ## 4.2 The matrix form: eq. (13)
#
# Stack the queries as rows of $Q \in \mathbb{R}^{d_l \times d_k}$, the keys of
# $K \in \mathbb{R}^{d_s \times d_k}$ and the values of $V \in \mathbb{R}^{d_s \times d_v}$
# (the notes' names: $d_l$ queries, $d_s$ keys and values). All the dot products at once are
# $QK^\top \in \mathbb{R}^{d_l \times d_s}$, and Definition 2.1 of the notes
# {cite}`strabel2023transformers` reads
#
# $$\operatorname{Attention}(Q, K, V) = \operatorname{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right)
#   V \in \mathbb{R}^{d_l \times d_v}, \tag{13}$$
#
# with the softmax taken along each row. The weight matrix $A = \operatorname{softmax}(\cdot)$
# has $a_{ij}$ in row $i$, column $j$, and by the row view of chapter 1, row $i$ of $AV$ is
# $\sum_j a_{ij} V_{j\cdot}$: the loop above, all rows at once.

# %%
A = ref.attention_weights(Q, K)  # (d_l, d_s) = (4, 4)
H = ref.scaled_dot_product_attention(Q, K, V)  # (d_l, d_v) = (4, 2)
np.testing.assert_allclose(A.sum(axis=1), 1.0)
np.testing.assert_allclose(H, A @ V)
np.testing.assert_allclose(H, H_loop)
print(A)

# %% [markdown]
# Nothing requires as many queries as keys. Queries from one sequence can attend over the keys
# and values of another of a different length (this is *cross-attention*, section 4.6), and
# $d_v$ need not equal $d_k$:

# %%
Qc = rng.standard_normal((2, 5))  # (d_l, d_k) = (2, 5)
Kc = rng.standard_normal((7, 5))  # (d_s, d_k) = (7, 5)
Vc = rng.standard_normal((7, 3))  # (d_s, d_v) = (7, 3)
print(ref.scaled_dot_product_attention(Qc, Kc, Vc).shape)  # (d_l, d_v)

# %% [markdown]
# The PyTorch side computes the same thing on stacks of matrices: any leading dimensions
# (batch, heads) broadcast. PyTorch ships its own fused version,
# `torch.nn.functional.scaled_dot_product_attention`; ours is the *explicit* computation (two
# products and a softmax), and the two agree:

# %%
dev64 = device_for(torch.float64)  # float64 stays on the CPU on Apple MPS (no float64 there)
q, k, v = (torch.randn(2, 3, 5, 4, dtype=torch.float64, device=dev64) for _ in range(3))
ours = fast.scaled_dot_product_attention(q, k, v)  # (B, h, L, d_v) = (2, 3, 5, 4)
theirs = F.scaled_dot_product_attention(q, k, v)
torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)
torch.testing.assert_close(
    fast.attention_per_query(q, k, v), ours, rtol=1e-12, atol=1e-12
)  # the slides' loop, batched
print(tuple(ours.shape), ours.dtype)

# %% [markdown]
# The conformance suite (`tests/test_conformance.py`) checks every function of this chapter
# against its reference on hundreds of random shapes, masks and biases in float64, float32,
# float16 and bfloat16, and checks the PyTorch gradients with `torch.autograd.gradcheck`.
#
# ## 4.3 Why divide by $\sqrt{d_k}$
#
# Suppose the components of a query and a key are independent with mean 0 and variance 1.
# Their dot product $\mathbf{q}^\top\mathbf{k} = \sum_{l=1}^{d_k} q_l k_l$ is a sum of $d_k$
# independent terms, each of mean 0 and variance $\mathbb{E}[q_l^2]\,\mathbb{E}[k_l^2] = 1$, so
#
# $$\operatorname{Var}(\mathbf{q}^\top\mathbf{k}) = d_k, \qquad
#   \operatorname{Var}\!\big(\mathbf{q}^\top\mathbf{k}/\sqrt{d_k}\big) = 1.$$
#
# Wide heads produce logits of standard deviation $\sqrt{d_k}$: 8 for $d_k = 64$. Let us check
# the formula by sampling.

# %%
d_ks = [4, 16, 64, 256, 1024]
for d_k in d_ks:
    qs, ks = rng.standard_normal((2, 10_000, d_k))  # 10,000 pairs
    dots = np.einsum("nd,nd->n", qs, ks)  # (10000,)
    print(
        f"d_k = {d_k:5d}: var(q.k) = {dots.var():8.1f}  var(q.k / sqrt(d_k)) = {(dots / np.sqrt(d_k)).var():.2f}"
    )
    np.testing.assert_allclose(dots.var() / d_k, 1.0, rtol=0.08)

# %% [markdown]
# Why large logits are a problem: the softmax of logits that are far apart is nearly one-hot,
# and a one-hot softmax has almost no gradient. Its Jacobian is $\operatorname{diag}(\mathbf{a})
# - \mathbf{a}\mathbf{a}^\top$ (chapter 2), which is exactly zero when $\mathbf{a}$ is one-hot;
# the query and key weights then stop learning. Below, for 16 random keys, we measure the
# largest weight of each query and the size of the softmax Jacobian, with and without the
# scaling.


# %%
def saturation(d_k: int, scaled: bool, n: int = 400, L: int = 16) -> tuple[float, float]:
    """Mean largest weight and mean Frobenius norm of the softmax Jacobian, n random queries."""
    qs, ks = rng.standard_normal((n, d_k)), rng.standard_normal((n, L, d_k))
    logits = np.einsum("nd,nld->nl", qs, ks) / (np.sqrt(d_k) if scaled else 1.0)  # (n, L)
    a = softmax(logits)  # (n, L)
    jac = np.einsum("nl,lm->nlm", a, np.eye(L)) - np.einsum("nl,nm->nlm", a, a)  # (n, L, L)
    return a.max(axis=1).mean(), np.linalg.norm(jac, axis=(1, 2)).mean()


stats = {s: np.array([saturation(d, s) for d in d_ks]) for s in (True, False)}
for s, rows in stats.items():
    print("scaled  " if s else "unscaled", "max weight:", rows[:, 0], " |Jacobian|:", rows[:, 1])
assert stats[False][-1, 0] > 0.9 and stats[True][-1, 0] < 0.5
assert stats[False][-1, 1] < stats[True][-1, 1] / 2

# %%
fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
for s, label in ((True, "q.k / sqrt(d_k)"), (False, "q.k (unscaled)")):
    axes[0].plot(d_ks, stats[s][:, 0], marker="o", label=label)
    axes[1].plot(d_ks, stats[s][:, 1], marker="o", label=label)
axes[0].set(
    title="Largest attention weight (16 keys)", xlabel="d_k", ylabel="mean max_j a_ij", xscale="log"
)
axes[1].set(
    title="Size of the softmax Jacobian",
    xlabel="d_k",
    ylabel="mean Frobenius norm",
    xscale="log",
)
axes[0].axhline(1 / 16, color="grey", ls=":", lw=1, label="uniform (1/16)")
axes[0].legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# Without the scaling, the weights become one-hot as $d_k$ grows and the Jacobian shrinks
# towards zero; with it, both stay where they were at $d_k = 4$. Attention Is All You Need
# {cite}`vaswani2017attention` gives this reason (section 3.2.1); the scaling is a choice of
# initial temperature, and nothing stops a trained model from learning larger logits where it
# needs sharp attention.
#
# ## 4.4 The worked example of the lecture notes, checked
#
# The lecture notes on keys, queries and values {cite}`may2024transformer` (section 1.1) print
# three $4 \times 3$ matrices, which they call $K$, $Q$ and $V$, and state that for the first
# input the scores are $[2, 4, 4]$, the weights $\operatorname{softmax}([2,4,4]) = [.06, .47,
# .47]$ and the result $[1.9, 6.7, 1.6]$. The matrices are *projection weights* (what eq. 16
# of {cite}`strabel2023transformers` calls $W_K, W_Q, W_V$), and the notes never give the
# inputs they are applied to. Three inputs reproduce every printed number:
# $\mathbf{x}_1 = [1,0,1,0]$, $\mathbf{x}_2 = [0,2,0,2]$, $\mathbf{x}_3 = [1,1,1,1]$.

# %%
ex = notes_004_example()
X4 = ex["X"]  # (3, 4): x1, x2, x3 as rows
Q4, K4, V4 = X4 @ ex["W_Q"], X4 @ ex["W_K"], X4 @ ex["W_V"]  # (3, 3) each
print("W_K =\n", ex["W_K"], "\nqueries Q =\n", Q4, "\nkeys K =\n", K4, "\nvalues V =\n", V4)

# %%
logits_1 = Q4[0] @ K4.T  # x1's query against the three keys, unscaled
w_1 = softmax(logits_1)
out_unscaled = ref.scaled_dot_product_attention(Q4, K4, V4, scale=1.0)  # no 1/sqrt(d_k)
print("scores:", logits_1, " weights:", w_1.round(2), " result:", out_unscaled[0].round(1))
np.testing.assert_array_equal(logits_1, [2, 4, 4])
np.testing.assert_array_equal(w_1.round(2), [0.06, 0.47, 0.47])
np.testing.assert_array_equal(out_unscaled[0].round(1), [1.9, 6.7, 1.6])

# %% [markdown]
# Every printed number is reproduced, but **only without the scaling**. The notes' own
# footnote says the scores should be divided by the square root of the key dimension, here
# $d_k = 3$, and eq. (13) does so. With it, the weights are softer and the result is different:

# %%
out_scaled = ref.scaled_dot_product_attention(Q4, K4, V4)  # eq. (13), scale 1/sqrt(3)
print("scaled weights:", ref.attention_weights(Q4, K4)[0].round(2))
print("scaled result: ", out_scaled[0].round(2))
np.testing.assert_array_equal(out_scaled[0].round(2), [1.86, 6.32, 1.70])
assert not np.array_equal(out_scaled[0].round(1), out_unscaled[0].round(1))

# %% [markdown]
# Other things are odd about these matrices, and each is checked below:
#
# - **Rows 1 and 3 are equal, and so are rows 2 and 4**, in all three matrices. Each has rank
#   at most 2, and an input enters only through $x_1 + x_3$ and $x_2 + x_4$. So the inputs we
#   found are *not* the only ones: $[2, 0, 0, 0]$ gives the same query, key and value as
#   $[1, 0, 1, 0]$. No set of inputs is "the" answer.
# - **The query matrix has two zero rows**, so $\mathbf{x}_2 = [0, 2, 0, 2]$ has a zero query:
#   its scores are all 0 and it attends uniformly, whatever the keys.
# - **$\mathbf{x}_1$ and $\mathbf{x}_3$ get the same query** ($[1, 0, 2]$), so they get the
#   same weights and the same output although they are different inputs.
# - The footnote says to "divide by the dimension of K" while its formula divides by
#   $\sqrt{|K|}$; the square root is right, and "the dimension" must mean $d_k = 3$ (the width
#   of a key), not the size of the $4 \times 3$ matrix the notes also call $K$.

# %%
for name in ("W_K", "W_Q", "W_V"):
    W = ex[name]
    assert np.array_equal(W[0], W[2]) and np.array_equal(W[1], W[3])
    assert np.linalg.matrix_rank(W) <= 2
other = np.array([2.0, 0, 0, 0])
for name in ("W_K", "W_Q", "W_V"):
    np.testing.assert_array_equal(other @ ex[name], X4[0] @ ex[name])
np.testing.assert_array_equal(Q4[1], 0)
np.testing.assert_allclose(ref.attention_weights(Q4, K4)[1], [1 / 3] * 3)
np.testing.assert_array_equal(Q4[0], Q4[2])
np.testing.assert_array_equal(out_scaled[0], out_scaled[2])

# %% [markdown]
# ## 4.5 Masks
#
# A language model that predicts the next token must not look at it. During training all
# positions are processed at once, so each position $i$ must be stopped from attending to the
# later positions $j > i$. The lecture notes {cite}`may2024transformer` write the rule as a
# lower-triangular matrix of ones, $M$, and propose to multiply it element-wise into the
# weights $\alpha$ after the softmax. As booleans (True = may attend) $M$ is the **causal
# mask**:

# %%
L = 5
M5 = ref.causal_mask(L)  # (L, L) boolean: True on and below the diagonal
print(M5.astype(int))

# %% [markdown]
# Multiplying the *probabilities* by $M$ zeroes the forbidden weights but leaves the others as
# they were, so the rows no longer sum to one: the output is no longer an average, and early
# positions (which lose the most weight) get outputs shrunk towards zero. The correct way is to
# mask the **logits**: set the forbidden ones to $-\infty$ *before* the softmax, which then
# spreads all the weight over the allowed positions.

# %%
S = rng.standard_normal((L, L))  # (L, L) logits
multiplied = softmax(S) * M5  # the notes' recipe: mask after the softmax
masked = softmax(np.where(M5, S, -np.inf))  # mask the logits, then softmax
print("row sums, multiplied:", multiplied.sum(axis=1))
print("row sums, masked:    ", masked.sum(axis=1))
np.testing.assert_allclose(masked.sum(axis=1), 1.0)
assert np.all(multiplied.sum(axis=1)[:-1] < 1)

# %% [markdown]
# The two differ by exactly one thing, the normalisation: dividing each multiplied row by its
# sum gives the masked softmax. So the notes' recipe is repaired by renormalising, and the
# $-\infty$ form does the same in one step without computing weights only to throw them away.

# %%
np.testing.assert_allclose(multiplied / multiplied.sum(axis=1, keepdims=True), masked)
Vm = rng.standard_normal((L, 3))
print("output of token 0, multiplied:", (multiplied @ Vm)[0], " masked:", (masked @ Vm)[0])
np.testing.assert_allclose((masked @ Vm)[0], Vm[0])  # token 0 can only see itself

# %% [markdown]
# Token 0 may only attend to itself, so its output must be its own value. With the masked
# softmax it is; with the multiplied weights it is its value times a weight below one.
#
# A **padding mask** handles batches of sequences of different lengths: shorter sequences are
# filled up with padding tokens, which no query may attend to. `padding_mask(lengths, L)`
# returns a (B, 1, L) mask (the middle axis broadcasts over the queries); the `&` of the two
# masks applies both.

# %%
lengths = [5, 3]
pad = ref.padding_mask(lengths, L)  # (B, 1, L)
both = M5 & pad  # (L, L) & (B, 1, L) -> (B, L, L)
print(both.shape)
print(both[1].astype(int))  # sequence 1 has 3 real tokens

# %% [markdown]
# In sequence 1, the padding rows 3 and 4 can still attend to the real tokens (their outputs
# are discarded later anyway). A mask can also leave a query with **nothing** to attend to,
# for example a padding query in a cross-attention whose keys are all padding. The softmax of
# an all-$-\infty$ row is $0/0$; the course's softmax returns zeros there, so such a query
# outputs zeros and passes zero gradients. `torch.nn.MultiheadAttention` returns NaN instead,
# which then spreads into every later sum:

# %%
x3 = torch.randn(1, 3, 4, dtype=torch.float64)
w_heads = [torch.randn(2, 4, 2, dtype=torch.float64) for _ in range(3)]
w_out = torch.randn(4, 4, dtype=torch.float64)
nothing = torch.tensor([[True, True, True], [False, False, False], [True, False, False]])
ours = fast.multi_head_attention(x3, x3, x3, *w_heads, w_out, mask=nothing)  # (1, 3, 4)
mha = to_torch_multihead(*w_heads, w_out)
theirs = mha(x3, x3, x3, attn_mask=~nothing)[0]  # PyTorch's bool mask: True = may NOT attend
print("ours, query 1:  ", ours[0, 1].tolist())
print("PyTorch, query 1:", theirs[0, 1].tolist())
assert torch.all(ours[0, 1] == 0) and torch.isnan(theirs[0, 1]).all()
torch.testing.assert_close(ours[0, [0, 2]], theirs[0, [0, 2]])

# %% [markdown]
# Notice the flipped convention in that call: in `torch.nn.MultiheadAttention`, a boolean
# `attn_mask` marks the positions that may **not** be attended to, the opposite of
# `F.scaled_dot_product_attention` and of this course. Copying a mask between the two without
# `~` silently inverts it.
#
# ## 4.6 Multi-head attention: eqs. (14)–(18)
#
# One head produces one set of weights per query: one way of deciding what is relevant. The
# notes {cite}`strabel2023transformers` run $h$ heads side by side, each with its own
# projections. Given sources $X_Q \in \mathbb{R}^{d_l \times d_g}$, $X_K \in \mathbb{R}^{d_s
# \times d_w}$, $X_V \in \mathbb{R}^{d_s \times d_u}$ and weights $W_Q^i \in \mathbb{R}^{d_g
# \times d_k}$, $W_K^i \in \mathbb{R}^{d_w \times d_k}$, $W_V^i \in \mathbb{R}^{d_u \times
# d_v}$ for $i = 1, \dots, h$ and $W_O \in \mathbb{R}^{h d_v \times d_o}$ (eqs. 14–15),
#
# $$Q^i = X_Q W_Q^i,\quad K^i = X_K W_K^i,\quad V^i = X_V W_V^i, \tag{16}$$
#
# $$A^i = \operatorname{Attention}(Q^i, K^i, V^i) \in \mathbb{R}^{d_l \times d_v}, \tag{17}$$
#
# $$\operatorname{Multihead}(X_Q, X_K, X_V) = \operatorname{concat}(A^1, \dots, A^h)\, W_O \in
#   \mathbb{R}^{d_l \times d_o}. \tag{18}$$
#
# The reference `ref.multi_head_attention` is these equations with a loop over $i$, the
# per-head weights stacked into arrays of shape $(h, d_g, d_k)$ and so on. We try it on
# self-attention ($X_Q = X_K = X_V$, section 2.3 of the notes):

# %%
h, d_model, d_k = 4, 16, 4
x = rng.standard_normal((6, d_model))  # (L, d_model): 6 tokens
w_q, w_k, w_v = (rng.standard_normal((h, d_model, d_k)) / 4 for _ in range(3))  # (h, d, d_k)
w_o = rng.standard_normal((h * d_k, d_model)) / 4  # (h*d_v, d_o)
out_ref = ref.multi_head_attention(x, x, x, w_q, w_k, w_v, w_o)  # (L, d_o)
print(out_ref.shape)

# %% [markdown]
# Looping over heads is slow on real hardware: $h$ small products instead of one large one.
# The PyTorch side puts the $h$ matrices $W_Q^i$ side by side into one $(d_g, h\,d_k)$ matrix,
# projects all heads with a single product, and *reshapes*: the columns $i\,d_k$ to $(i+1)\,d_k
# - 1$ of $X_Q [W_Q^1 \cdots W_Q^h]$ are exactly $X_Q W_Q^i$. `split_heads` moves those column
# blocks onto a new head axis, $(L, h\,d_k) \to (h, L, d_k)$, and `merge_heads` is the concat
# of eq. (18).

# %%
W_fused = ref.fuse_head_weights(w_q)  # (d_model, h*d_k) = (16, 16)
per_head = ref.split_heads(x @ W_fused, h)  # (h, L, d_k)
for i in range(h):
    np.testing.assert_allclose(per_head[i], x @ w_q[i])  # head i's block is X W_Q^i
np.testing.assert_array_equal(ref.merge_heads(per_head), x @ W_fused)
print(W_fused.shape, per_head.shape)

# %% [markdown]
# So the fused form is the same computation, arranged for speed, and the PyTorch
# implementation (which is built that way) agrees with the per-head loop:

# %%
t = lambda a: torch.as_tensor(a, device=device)  # noqa: E731
out_fast = fast.multi_head_attention(t(x), t(x), t(x), t(w_q), t(w_k), t(w_v), t(w_o))
np.testing.assert_allclose(out_fast.cpu().numpy(), out_ref, rtol=1e-10)

# %% [markdown]
# A watch-out: `split_heads` needs a reshape **and** a transpose. Reshaping $(L, h\,d_k)$
# straight to $(h, L, d_k)$ has the right shape and the wrong content (it cuts the flat
# memory into $h$ chunks of consecutive *tokens*). Exercise 4.4 asks you to get it right.
#
# The slides {cite}`marlin2022transformers` write the combination differently: the output of
# object $i$ is $\sum_{l} W^c_l\, \mathbf{h}'_{li}$, a separate matrix per head applied to that
# head's output, then summed. That is eq. (18) read block by block: $W_O$ split into $h$
# horizontal blocks of $d_v$ rows, head $i$'s output times block $i$, summed over heads, is the
# product $\operatorname{concat}(A^1, \dots, A^h) W_O$ (a block row times a block column).

# %%
heads = [ref.scaled_dot_product_attention(x @ w_q[i], x @ w_k[i], x @ w_v[i]) for i in range(h)]
blocks = [w_o[i * d_k : (i + 1) * d_k] for i in range(h)]  # h blocks of (d_v, d_o)
np.testing.assert_allclose(sum(A_i @ B_i for A_i, B_i in zip(heads, blocks, strict=True)), out_ref)

# %% [markdown]
# **Cross-attention**: the queries come from one sequence and the keys and values from
# another, of a different length and width, as when a translation decoder reads the encoded
# source sentence. Nothing in eqs. (14)–(18) changes:

# %%
x_dec = rng.standard_normal((3, 8))  # (d_l, d_g): 3 target tokens of width 8
x_enc = rng.standard_normal((7, 10))  # (d_s, d_w = d_u): 7 source tokens of width 10
wq_c = rng.standard_normal((2, 8, 5))  # (h, d_g, d_k)
wk_c, wv_c = rng.standard_normal((2, 10, 5)), rng.standard_normal((2, 10, 6))  # d_v = 6
wo_c = rng.standard_normal((12, 8))  # (h*d_v, d_o)
cross = ref.multi_head_attention(x_dec, x_enc, x_enc, wq_c, wk_c, wv_c, wo_c)
print(cross.shape)  # (d_l, d_o)

# %% [markdown]
# **Parameter counts.** The weights of eqs. (14)–(15) hold $h(d_g d_k + d_w d_k + d_u d_v) +
# h d_v d_o$ numbers. In the usual self-attention all widths are $d_\text{model}$ and each head
# gets $d_k = d_v = d_\text{model}/h$, so every projection is $d_\text{model} \times
# d_\text{model}$ in total and the layer has $4 d_\text{model}^2$ weights, *independent of $h$*:
# more heads means narrower heads, not more parameters. `torch.nn.MultiheadAttention` adds a
# bias to each of the four projections, $4 d_\text{model}$ more.


# %%
def mha_params(h, d_g, d_w, d_u, d_k, d_v, d_o):
    return h * (d_g * d_k + d_w * d_k + d_u * d_v) + h * d_v * d_o


assert mha_params(2, 8, 10, 10, 5, 6, 8) == sum(w.size for w in (wq_c, wk_c, wv_c, wo_c))
for heads_ in (1, 8, 16):
    d = 512
    n = mha_params(heads_, d, d, d, d // heads_, d // heads_, d)
    torch_n = sum(p.numel() for p in torch.nn.MultiheadAttention(d, heads_).parameters())
    print(f"h = {heads_:2d}: {n:,} weights; torch.nn.MultiheadAttention: {torch_n:,} = +4 * {d}")
    assert n == 4 * d * d and torch_n == n + 4 * d

# %% [markdown]
# **Parity with PyTorch.** `to_torch_multihead` copies our per-head weights into a
# `torch.nn.MultiheadAttention` (which stores weights transposed, as (out, in), with the
# heads' rows one after another). The two layers then agree, for self- and cross-attention,
# with and without biases and masks; `tests/test_attention.py` runs every combination.

# %%
x_b = torch.randn(3, 6, d_model, dtype=torch.float64)  # (B, L, d_model)
b = {n: torch.randn(*s, dtype=torch.float64) for n, s in (("b_q", (h, d_k)), ("b_k", (h, d_k)))}
b.update(
    b_v=torch.randn(h, d_k, dtype=torch.float64), b_o=torch.randn(d_model, dtype=torch.float64)
)
w_t = {
    n: torch.as_tensor(a)
    for n, a in zip(("w_q", "w_k", "w_v", "w_o"), (w_q, w_k, w_v, w_o), strict=True)
}
torch_mha = to_torch_multihead(**w_t, **b)
pad_t = fast.padding_mask(torch.tensor([6, 4, 2]), 6)  # (B, 1, L)
mask_t = fast.causal_mask(6) & pad_t  # (B, L, L)
ours = fast.multi_head_attention(
    x_b, x_b, x_b, **w_t, **b, mask=mask_t[:, None]
)  # (B, 1, L, L): every head
theirs = torch_mha(x_b, x_b, x_b, attn_mask=~fast.causal_mask(6), key_padding_mask=~pad_t[:, 0])[0]
torch.testing.assert_close(ours, theirs, rtol=1e-10, atol=1e-12)
print("causal + padding self-attention: ours and torch.nn.MultiheadAttention agree")

x_src = torch.randn(3, 9, d_model, dtype=torch.float64)  # cross-attention over 9 source tokens
torch.testing.assert_close(
    fast.multi_head_attention(x_b, x_src, x_src, **w_t, **b),
    torch_mha(x_b, x_src, x_src)[0],
    rtol=1e-10,
    atol=1e-12,
)
print("cross-attention: ours and torch.nn.MultiheadAttention agree")

# %% [markdown]
# Note the mask shapes: with heads, the logits are (B, h, L, L), so the combined (B, L, L)
# mask gets a head axis of size 1, `mask_t[:, None]`, to apply to every head. Without it,
# broadcasting would align the batch axis with the head axis; our functions refuse any mask
# that does not broadcast *to* the logits' shape, which catches most such slips.
#
# For the layers of chapter 5, `course_lib.attention.module.MultiHeadAttention` wraps the same
# computation in a `torch.nn.Module` (one fused $(d, d)$ projection per input, and PyTorch's
# fused attention kernel unless `fused=False`). It also agrees with `torch.nn.MultiheadAttention`:

# %%
layer = MultiHeadAttention(d_model, h, dtype=torch.float64)
torch.testing.assert_close(
    layer(x_b, mask=fast.causal_mask(6)),
    to_torch_multihead(**layer.stacked_weights())(x_b, x_b, x_b, attn_mask=~fast.causal_mask(6))[0],
)
print(layer)

# %% [markdown]
# ## 4.7 Self-attention does not know the order of its inputs
#
# Nothing in eqs. (13)–(18) refers to positions. If we shuffle the tokens of a self-attention
# input, every query still sees the same set of keys and values, so each output is unchanged
# and only moves with its token: self-attention is **permutation-equivariant**,
# $f(PX) = P f(X)$ for every permutation matrix $P$. The handwritten notes put it as
# "self-attention is orderless (a set operation)"; the slides say a Transformer is *invariant*
# to the order of its inputs, which is true of order-free summaries of the outputs (their mean,
# say), while the outputs themselves are permuted along with the inputs.

# %%
perm = rng.permutation(6)
out_perm = ref.multi_head_attention(x[perm], x[perm], x[perm], w_q, w_k, w_v, w_o)
np.testing.assert_allclose(out_perm, out_ref[perm], rtol=1e-12)  # equivariant
np.testing.assert_allclose(out_perm.mean(axis=0), out_ref.mean(axis=0))  # the mean: invariant
print("permutation:", perm, " outputs permuted the same way: True")

# %% [markdown]
# "The dog bit the man" and "the man bit the dog" contain the same tokens, so without extra
# information they get the same outputs (up to order). Chapter 6 adds that information:
# position encodings added to the inputs, or biases on the logits, which is what the `bias`
# argument of every function here is for. A causal mask also breaks the symmetry (the mask
# itself depends on positions).
#
# ## 4.8 Looking at attention: one heatmap per head
#
# A weight matrix is easiest to read as a heatmap: row $i$ shows where query $i$ looks. The
# course downloads no trained model, so the four heads below were *built by hand*
# (`course_lib.attention.examples.toy_sentence`): each token's input vector holds a one-hot of
# its position, of its word and of its part of speech, and each head's $W_Q$ and $W_K$ match one
# feature of the query against one feature of the key. The sentence has two padding tokens,
# masked out.

# %%
sent = toy_sentence()
pad_row = ref.padding_mask([sent.length], len(sent.tokens))[0]  # (1, L)
fig, axes = plt.subplots(1, 4, figsize=(16, 4.2))
for head_i, ax in enumerate(axes):
    Wts = ref.attention_weights(sent.X @ sent.w_q[head_i], sent.X @ sent.w_k[head_i], pad_row)
    heatmap(
        ax,
        Wts,
        title=f"head {head_i}: {HEAD_NAMES[head_i]}",
        xlabel="key (attended to)",
        ylabel="query",
        xticklabels=sent.tokens,
        yticklabels=sent.tokens,
        colorbar=False,
        cmap="Blues",
    )
fig.suptitle("Attention weights of four hand-built heads (padding masked)")
fig.tight_layout()
plt.show()

# %% [markdown]
# Each row is one query's weights and sums to one. Head 0 looks one token back (a diagonal
# just below the main one); head 1 links equal words (the two "the"s find each other); heads 2
# and 3 send every query to the nouns and to the verbs. The padding columns are empty in every
# head. Heads of trained models are rarely this clean: these were written to be readable.
#
# Explore them: choose a head, a mask and a **temperature** $T$, which divides the logits before
# the softmax ($T < 1$ sharpens the weights towards the largest logit, $T > 1$ flattens them
# towards uniform; the $1/\sqrt{d_k}$ of eq. (13) is a fixed temperature). On the website the
# widget shows its stored state; run the notebook to play with it.

# %%
from course_lib.attention.widget import explorer

explorer()

# %% [markdown]
# Things to try: with the `causal` mask, the first rows of head 2 have no noun to look at yet,
# so they spread their weight over what they can see; at temperature 0.1 every head becomes
# a hard lookup; at 10 every head becomes a plain average.
#
# ## 4.9 What attention costs
#
# **FLOPs.** For self-attention over $L$ tokens of width $d = h\,d_k$, counting a multiply-add
# as two FLOPs (chapter 1): the four projections cost $8Ld^2$; the scores $QK^\top$ and the
# weighted sum $AV$ cost $2L^2d$ each; the softmax a few operations per logit. A position-wise
# feed-forward network with hidden width $d_\text{ff} = 4d$ costs $16Ld^2$. The projections and
# the FFN grow linearly with $L$, the scores and weighted sum quadratically.
#
# The handwritten notes claim that *for typical Transformer dimensions and modest sequence
# lengths ($T < 1000$), the compute of the FFN is much greater than that of multi-head
# attention*. Let us count.

# %%
print(" d_model     L   FFN / attention (all)   FFN / attention (L^2 part only)")
for d in (512, 768, 1024):
    for L_ in (128, 512, 1000):
        f = attention_flops(L_, L_, d, d // 64)
        ffn = ffn_flops(L_, d)
        core = f["scores"] + f["weighted_sum"] + f["softmax"]
        print(f"{d:8d} {L_:5d} {ffn / f['total']:18.2f} {ffn / core:27.2f}")
for d in (512, 768, 1024):
    print(
        f"d_model = {d}: equal FLOPs at L = {crossover_length(d):.0f} (all), "
        f"{crossover_length(d, core_only=True):.0f} (L^2 part only)"
    )
assert crossover_length(512) == 1024 and crossover_length(768) == 1536

# %% [markdown]
# The claim holds only in a weak form. Counting the whole attention layer (with its four
# projections), the FFN/attention ratio is $16d^2 / (8d^2 + 4Ld) = 4d/(2d + L)$ (softmax
# aside), which is **never more than 2**: "much greater" is not right for any $L$. The FFN
# does cost more than attention for $L < 2d$, so for $L < 1000$ at $d \ge 512$; at $d = 512$,
# $L = 1000$ the two are already about equal. If "attention" means only the quadratic part
# (scores and weighted sum), the ratio is $4d/L$, which is large for short sequences (16 at
# $d = 512, L = 128$), and the notes' statement is fair. Either way the crossover grows with the
# width, which is why large models spend most of their FLOPs in the FFN until the context gets
# long. A picture for $d = 768$ (GPT-2 small):

# %%
Ls = np.array([64, 128, 256, 512, 1024, 2048, 4096, 8192])
d = 768
proj = [attention_flops(int(L_), int(L_), d, 12)["projections"] / L_ for L_ in Ls]
core = [
    (lambda f: (f["scores"] + f["weighted_sum"] + f["softmax"]) / L_)(
        attention_flops(int(L_), int(L_), d, 12)
    )
    for L_ in Ls
]
fig, ax = new_axes(
    "FLOPs per token of one layer, d_model = 768, 12 heads",
    "sequence length L",
    "GFLOPs per token",
    logx=True,
    logy=True,
)
ax.plot(Ls, np.array(proj) / 1e9, marker="o", label="attention: Q, K, V, O projections (8 d^2)")
ax.plot(Ls, np.array(core) / 1e9, marker="o", label="attention: scores + weighted sum (~4 L d)")
ax.plot(Ls, np.array(proj) / 1e9 + np.array(core) / 1e9, marker="o", label="attention, total")
ax.plot(Ls, [ffn_flops(1, d) / 1e9] * len(Ls), ls="--", label="FFN, d_ff = 4 d (16 d^2)")
ax.axvline(crossover_length(d), color="grey", ls=":", lw=1, label="L = 2 d: FFN = attention")
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()

# %% [markdown]
# **Time and memory, measured.** The explicit computation stores the $(B, h, L, L)$ logits and
# weights (and the backward pass needs them), so its memory grows as $L^2$. PyTorch's fused
# kernel computes the softmax block by block in the manner of FlashAttention
# {cite}`dao2022flashattention`, never storing an $L \times L$ matrix, and recomputes what the
# backward pass needs. Below, forward plus backward for one sequence and 4 heads of 32; the
# memory is the peak of tensor bytes alive at once, counted by following every tensor PyTorch
# creates (`course_lib.measure.peak_tensor_memory`), and the times are the best of two
# measurements (each a loop of at least 50 ms) on one CPU thread of this machine (one thread, so that the curves show the arithmetic
# and not how well small operations spread over cores; yours will differ).

# %%
# NBVAL_IGNORE_OUTPUT
lengths_ = [64, 128, 256, 512, 1024]
threads = torch.get_num_threads()
torch.set_num_threads(1)
rows = measure_attention(lengths_, batch=1, n_heads=4, d_head=32, repeats=2, device=device)
torch.set_num_threads(threads)
for r in rows:
    print(
        f"L = {r['L']:5d}  {r['implementation']:8s}  {1000 * r['seconds']:8.2f} ms  "
        f"peak {r['peak_MiB']:7.2f} MiB  (one (B, h, L, L) tensor: {r['weights_MiB']:6.2f} MiB)"
    )

# %%
mem = {
    name: np.array([r["peak_MiB"] for r in rows if r["implementation"] == name])
    for name in ("explicit", "fused")
}
growth = mem["explicit"][-1] / mem["explicit"][-2]  # L 512 -> 1024
print(f"explicit: peak memory x{growth:.1f} when L doubles (512 -> 1024)")
assert 3.0 < growth < 4.5  # quadratic: x4 per doubling, plus a linear part
assert mem["fused"][-1] / mem["fused"][-2] < 2.5  # linear: x2 per doubling
assert mem["fused"][-1] < mem["explicit"][-1] / 5

# %%
fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
for name in ("explicit", "fused"):
    pts = [r for r in rows if r["implementation"] == name]
    axes[0].plot([r["L"] for r in pts], [r["seconds"] for r in pts], marker="o", label=name)
    axes[1].plot([r["L"] for r in pts], [r["peak_MiB"] for r in pts], marker="o", label=name)
Lx = np.array(lengths_, dtype=float)
axes[1].plot(Lx, mem["explicit"][-1] * (Lx / Lx[-1]) ** 2, ls=":", color="grey", label="~ L^2")
axes[0].set(
    title="Time, forward + backward", xlabel="L", ylabel="seconds", xscale="log", yscale="log"
)
axes[1].set(
    title="Peak tensor memory, forward + backward",
    xlabel="L",
    ylabel="MiB",
    xscale="log",
    yscale="log",
)
for ax in axes:
    ax.legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# The explicit memory follows the $L^2$ line; the fused kernel's grows linearly. Time grows
# as $L^2$ for both once the quadratic products dominate (the fused kernel does the same
# arithmetic, it only avoids the memory traffic). `benchmarks/attention.py` runs the full
# measurement (B = 8, L = 512, $d_\text{model} = 512$, 8 heads, and $L$ up to 4096); its
# results are in section 4.11.
#
# ## 4.10 What the notes get wrong
#
# Every claim above is checked by an assertion; these are the places where the notes and the
# checks disagree, with the correct form.
#
# 1. **The worked example of {cite}`may2024transformer` is unscaled.** Its result $[1.9, 6.7,
#    1.6]$ needs $\operatorname{softmax}(QK^\top)$, contradicting its own footnote and eq. (13);
#    with the $1/\sqrt{d_k}$ scaling ($d_k = 3$) the result is $[1.86, 6.32, 1.70]$ (section
#    4.4). The notes also never give the inputs; $\mathbf{x}_1 = [1,0,1,0]$, $\mathbf{x}_2 =
#    [0,2,0,2]$, $\mathbf{x}_3 = [1,1,1,1]$ reproduce the numbers, and because the matrices have
#    repeated rows, other inputs do as well.
# 2. **The footnote of the same notes says "divide by the dimension of K"**; the divisor is
#    the *square root* of the key width $d_k$ (section 4.3 shows why).
# 3. **The causal mask is multiplied into the probabilities** ("element-wise multiplied with
#    $\alpha$"). That leaves rows that do not sum to one; the mask must be applied to the
#    logits ($-\infty$ before the softmax), or the product renormalised (section 4.5).
# 4. **"$V\alpha$ would give the result"** in the same notes has the factors in the wrong
#    order: with one query per row of $\alpha$ ($5 \times 5$) and one value per row of $V$, the
#    result is $\alpha V$; $V\alpha$ is not even defined unless $d_v = 5$. Checked below.
# 5. **The slides' sums run over the wrong index range** {cite}`marlin2022transformers`: the
#    softmax denominator sums $j'$ from 1 to $T$ and the output $\mathbf{h}_i = \sum_{j=1}^{K}
#    a_{ij}\mathbf{v}_j$ sums to $K$, but there are $M$ objects ($T$ is never defined and $K$ is
#    the width of a vector). Both sums run over $j = 1, \dots, M$. The slides also use $L$ for
#    the number of heads. Checked below: summing only the first $K$ values gives a different
#    answer.
# 6. **The handwritten notes' "FFN compute $\gg$ MHA compute for $T < 1000$"** holds for the
#    quadratic part of attention only; against the whole layer the FFN is at most twice as
#    expensive, and they are equal at $L = 2d$ (section 4.9).
# 7. A smaller point of naming: section 2.1 of {cite}`strabel2023transformers` calls eq. (13)
#    "Dot-Product Attention", though it is the *scaled* form, and eq. (18) writes
#    $\operatorname{concat}(A_1, \dots, A_h)$ for the heads defined as $A^i$ in eq. (17).

# %%
alpha = masked  # (5, 5) weights, one query per row
V5 = rng.standard_normal((5, 3))  # (5, d_v = 3): one value per row
print("alpha V:", (alpha @ V5).shape)
try:
    V5 @ alpha
except ValueError:
    print(f"V alpha: undefined, a {V5.shape} matrix times a {alpha.shape} one")

# The slides' output sum, h_i = sum_{j=1}^{K} a_ij v_j, with M = 4 objects of width K = 2:
h_slides = sum(A[i, j] * V[j] for j in range(Kdim))  # sums over j = 1..K only
h_right = sum(A[i, j] * V[j] for j in range(M))  # sums over all M objects
np.testing.assert_allclose(h_right, H[i])
assert not np.allclose(h_slides, H[i])

# %% [markdown]
# ## 4.11 Parity and benchmark results
#
# **Parity** (all in float64, `tests/test_attention.py` and the conformance suite): the NumPy
# reference and the PyTorch implementation agree to $10^{-10}$ on every function; our explicit
# attention agrees with `F.scaled_dot_product_attention` (with and without boolean masks,
# additive biases and custom scales); our multi-head attention agrees with
# `torch.nn.MultiheadAttention` after copying the weights, for self- and cross-attention (with
# different key and value widths), with and without biases, causal and padding masks; the
# course's `MultiHeadAttention` module agrees with both, with the fused kernel and without; and
# `torch.autograd.gradcheck` passes on every function and on the module.
#
# **Benchmark** (`python -m benchmarks.run attention`: forward + backward, float32, on a
# shared 2-core x86 CPU with PyTorch 2.13 and 2 threads; the layers: best of 5 interleaved
# rounds; the sweep: best of 3 measurements, each a loop of at least 50 ms, so that a short
# call is not timed alone; your machine will give other times):
#
# | B | L | $d_\text{model}$, heads | what | seconds | peak MiB |
# | --- | --- | --- | --- | --- | --- |
# | 8 | 512 | 512, 8 | `torch.nn.MultiheadAttention` | 0.199 | 97 |
# | 8 | 512 | 512, 8 | course `MultiHeadAttention` (fused kernel) | 0.178 | 76 |
# | 8 | 512 | 512, 8 | course `MultiHeadAttention` (explicit) | 0.262 | 228 |
# | 8 | 512 | 512, 8 | `F.scaled_dot_product_attention` alone | 0.074 | 40 |
# | 8 | 512 | 512, 8 | explicit attention alone | 0.152 | 216 |
#
# The target, the course's module within 1.3x of `torch.nn.MultiheadAttention`, is met (0.90x:
# both use the same fused kernel and one packed input projection). The explicit attention takes
# 2.1x the time of the fused kernel and 5.4x its peak memory. Over $L$ (B = 1, 8 heads of 64):
#
# | L | explicit: seconds | explicit: peak MiB | fused: seconds | fused: peak MiB |
# | --- | --- | --- | --- | --- |
# | 128 | 0.00096 | 2.2 | 0.00099 | 1.2 |
# | 256 | 0.0025 | 7.5 | 0.0027 | 2.5 |
# | 512 | 0.010 | 27 | 0.0097 | 5 |
# | 1024 | 0.068 | 102 | 0.036 | 10 |
# | 2048 | 0.32 | 396 | 0.12 | 20 |
# | 4096 | 1.71 | 1560 | 0.58 | 40 |
#
# The explicit computation's memory grows 3.9x per doubling of $L$ at the top of the range
# (quadratic), the fused kernel's 2x (linear): at $L = 4096$ it is 40 MiB against 1.5 GiB.
#
# ## Exercises
#
# Each exercise gives you a function to write and a checker that runs it on several inputs,
# including edge cases, and tells you what is wrong. Replace the body of the stub and run the
# cell. Solutions are folded below each exercise (on the website) or in cells tagged
# `solution` (in the notebook).
#
# ```{exercise} Attention for one query
# :label: ex-attention-one-query
#
# Write `attend(q, K, V)` for one query `q` of shape $(d_k,)$, keys `K` of shape $(L, d_k)$ and
# values `V` of shape $(L, d_v)$: return $\operatorname{softmax}(K\mathbf{q}/\sqrt{d_k})^\top V$,
# of shape $(d_v,)$, using NumPy only. One of the checker's inputs has logits near 2800, so
# make your softmax stable (chapter 2).
# ```


# %%
def attend(q, K, V):
    raise NotImplementedError  # your code here


check.attention_one_query(attend)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-attention-one-query
# :class: dropdown
# ```


# %% tags=["solution"]
def attend(q, K, V):
    q, K, V = (np.asarray(a, dtype=float) for a in (q, K, V))
    s = K @ q / np.sqrt(q.shape[0])  # (L,): one logit per key
    e = np.exp(s - s.max())  # stable: the largest becomes exp(0) = 1
    a = e / e.sum()  # (L,): the weights a_j
    return a @ V  # (d_v,): sum_j a_j v_j


check.attention_one_query(attend, require=True)

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} The causal mask
# :label: ex-attention-causal
#
# Write `my_causal_mask(L)` returning a boolean NumPy array of shape $(L, L)$ that is True
# where query $i$ may attend to key $j$ in a next-token model: on and below the diagonal.
# ```


# %%
def my_causal_mask(L):
    raise NotImplementedError  # your code here


check.causal_mask(my_causal_mask)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-attention-causal
# :class: dropdown
# ```


# %% tags=["solution"]
def my_causal_mask(L):
    i = np.arange(L)[:, None]  # (L, 1): query positions
    j = np.arange(L)[None, :]  # (1, L): key positions
    return j <= i  # (L, L) boolean: no peeking at later tokens


check.causal_mask(my_causal_mask, require=True)

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Masking done right
# :label: ex-attention-masked-softmax
#
# Write `masked_weights(logits, mask)`: the softmax of `logits` over the last axis where the
# boolean `mask` (which broadcasts to `logits`) is True, and exactly 0 where it is False. Every
# row with at least one True must sum to 1; a row with no True must be all zeros, not NaN. (The
# checker recognises the recipe of the lecture notes, multiplying after the softmax.)
# ```


# %%
def masked_weights(logits, mask):
    raise NotImplementedError  # your code here


check.masked_softmax(masked_weights)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-attention-masked-softmax
# :class: dropdown
# ```


# %% tags=["solution"]
def masked_weights(logits, mask):
    s = np.where(mask, logits, -np.inf)  # forbidden logits become -inf
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)  # a fully masked row: shift by 0, not -inf
    e = np.exp(s - m)  # exp(-inf) = 0
    total = e.sum(axis=-1, keepdims=True)
    return e / np.where(total == 0, 1.0, total)  # 0 / 1 = 0 on a fully masked row


check.masked_softmax(masked_weights, require=True)

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Splitting heads
# :label: ex-attention-split-heads
#
# Write `my_split_heads(x, h)` that takes a NumPy array of shape $(B, L, h\,d)$ (a fused
# projection of a batch) and returns shape $(B, h, L, d)$, where head $i$ holds columns
# $i\,d$ to $(i+1)\,d - 1$ of every token. Use `reshape` and `transpose`.
# ```


# %%
def my_split_heads(x, h):
    raise NotImplementedError  # your code here


check.split_heads(my_split_heads)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-attention-split-heads
# :class: dropdown
# ```


# %% tags=["solution"]
def my_split_heads(x, h):
    B, L, width = x.shape
    return x.reshape(B, L, h, width // h).transpose(0, 2, 1, 3)  # (B, L, h, d) -> (B, h, L, d)


check.split_heads(my_split_heads, require=True)

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ## Summary
#
# - Attention turns each query into weights over the keys, $a_{ij} =
#   \operatorname{softmax}_j(\mathbf{q}_i^\top\mathbf{k}_j/\sqrt{d_k})$, and outputs the
#   weighted average of the values; in matrix form $\operatorname{softmax}(QK^\top/\sqrt{d_k})V$
#   (eq. 13). A head has $3DK$ parameters, whatever the sequence length.
# - Dividing by $\sqrt{d_k}$ keeps the logits' variance at 1; without it wide heads saturate
#   the softmax and its gradient vanishes.
# - The notes' worked example reproduces only without the scaling; with it the result is
#   $[1.86, 6.32, 1.70]$.
# - Masks act on the logits ($-\infty$ before the softmax). Multiplying the probabilities by
#   a mask, as the notes do, breaks the normalisation. Causal and padding masks combine with
#   `&`; a query with nothing to attend to gets zeros here, NaN in `torch.nn.MultiheadAttention`.
# - Multi-head attention (eqs. 14–18) is $h$ attentions with their own projections, concatenated
#   and mixed by $W_O$; one fused projection and a reshape compute the same thing faster. The
#   layer has $4d^2$ weights whatever $h$ is.
# - Self-attention is permutation-equivariant: positions must be added (chapter 6).
# - Attention's $L^2$ part overtakes the FFN at $L = 4d$, the whole layer at $L = 2d$; the
#   explicit computation needs $L^2$ memory, fused kernels do not.
#
# ## References
#
# - G. Strabel, *Transformers*, lecture notes, 2023, section 2 {cite}`strabel2023transformers`.
# - J. May, *Transformer language models*, lecture notes, 2024, sections 1.1–1.2
#   {cite}`may2024transformer`.
# - B. M. Marlin, *Transformers*, COMPSCI 689 lecture 23 slides, University of Massachusetts
#   Amherst {cite}`marlin2022transformers`.
# - A. Vaswani et al., "Attention is all you need", *NeurIPS* 2017 {cite}`vaswani2017attention`.
# - T. Dao et al., "FlashAttention: fast and memory-efficient exact attention with
#   IO-awareness", *NeurIPS* 2022 {cite}`dao2022flashattention`.
#
# The full bibliography of the course is on the [References](../book/references.md) page.
