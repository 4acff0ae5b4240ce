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

    course_lib.colab.setup("04_attention")

# %% [markdown]
# # 4. Attention
#
# Attention is the one layer of a Transformer that lets tokens exchange information. Every
# other layer (the feed-forward network, the norms) works on each token by itself; attention
# builds each token's new representation as a weighted average over *all* the tokens it is
# allowed to see, with weights it computes on the fly from the tokens themselves. This chapter
# derives it one query at a time, then in matrix form, then with several heads; puts the whole
# multi-head layer on one page; trains a tiny model to watch a head learn; and checks the
# numbers the lecture notes print about attention.
#
# **After this chapter you can**
#
# - compute scaled dot-product attention by hand for one query and as a matrix expression, and
#   explain every shape in $\operatorname{softmax}(QK^\top/\sqrt{d_k})\,V$;
# - say why the logits are divided by $\sqrt{d_k}$, and show what goes wrong without it;
# - build causal and padding masks and apply them correctly (to the logits, before the
#   softmax);
# - write a multi-head attention module (project, split heads, attend, merge, project) and say
#   why two heads can do what one head cannot, and what multi-query and grouped-query attention
#   share between heads;
# - say how attention's time and memory grow with the sequence length, and when the
#   feed-forward network costs more.
#
# **Assumes**: chapter 1 (the row view of a matrix product: each row of $AV$ mixes the rows
# of $V$) and chapter 2 (a stable softmax, and masking with $-\infty$); a little PyTorch
# (`nn.Module`, `nn.Linear`).
# **Core path**: about 59 minutes (sections marked core); the optional sections add about 37
# minutes, the exercises about 70.
# The optional quiz that ends the lesson takes about 18 minutes more.
#
# The chapter follows section 2 of Strabel's notes {cite}`strabel2023transformers` (Definition
# 2.1, eqs. 13–18), the step-by-step derivation of the lecture slides
# {cite}`marlin2022transformers`, the keys, queries and values, worked example, mask and
# multiple heads of May's notes {cite}`may2024transformer` (sections 1.1–1.2), and the
# handwritten notes' view of attention as a comparison function followed by a reduction.
# Attention in this form comes from {cite}`vaswani2017attention`.

# %%
import math

import matplotlib.pyplot as plt
import numpy as np

import course_lib.attention.reference as ref
from course_lib import seed_everything
from course_lib.attention import as_printed
from course_lib.attention import exercises as check
from course_lib.attention.examples import HEAD_NAMES, may_worked_example, toy_sentence
from course_lib.attention.flops import attention_flops, crossover_length, ffn_flops
from course_lib.checker import check_prediction
from course_lib.plotting import heatmap, new_axes, use_style
from course_lib.softmax.reference import softmax

rng = seed_everything(0)
use_style()
np.set_printoptions(precision=3, suppress=True)

# %% [markdown]
# As in every chapter, `ref` holds the NumPy references (float64, written like the equations)
# and `fast` their PyTorch twins (same names and signatures; batched, any device, autograd).
# `softmax` is chapter 2's: stable, and a row whose entries are all $-\infty$ gives zeros.

# %% [markdown]
# ## 4.1 Keys, queries and values, one query at a time (core, 5 min)
#
# The lecture slides {cite}`marlin2022transformers` start from a collection of $M$ objects, each a
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
# convention (chapter 1, section 1.7): objects are the rows of $X \in \mathbb{R}^{M \times D}$
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
# the four values: it lies in their convex hull (the smallest convex set that holds them), so
# in every coordinate it lies between the smallest and the largest value.
# `ref.attention_per_query` runs this loop for every query:

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
# ## 4.2 The matrix form: eq. (13) (core, 4 min)
#
# From here on we use Strabel's names. $K$ stops being a width (the slides' $K$, our `Kdim`)
# and becomes the matrix of keys; the width of a key is $d_k$. Stack the queries as rows of
# $Q \in \mathbb{R}^{d_l \times d_k}$, the keys of
# $K \in \mathbb{R}^{d_s \times d_k}$ and the values of $V \in \mathbb{R}^{d_s \times d_v}$
# (the notes' names: $d_l$ queries, $d_s$ keys and values). All the dot products at once are
# $QK^\top \in \mathbb{R}^{d_l \times d_s}$, and Definition 2.1 of the notes
# {cite}`strabel2023transformers` reads
#
# $$\operatorname{Attention}(Q, K, V) =
# \operatorname{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right)
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
# and values of another of a different length (this is *cross-attention*; the first exercise
# builds it), and $d_v$ need not equal $d_k$:

# %%
Qc = rng.standard_normal((2, 5))  # (d_l, d_k) = (2, 5)
Kc = rng.standard_normal((7, 5))  # (d_s, d_k) = (7, 5)
Vc = rng.standard_normal((7, 3))  # (d_s, d_v) = (7, 3)
print(ref.scaled_dot_product_attention(Qc, Kc, Vc).shape)  # (d_l, d_v)

# %% [markdown]
# The PyTorch side, `fast.scaled_dot_product_attention`, computes the same on stacks of
# matrices (any leading batch and head dimensions broadcast); the appendix shows it agrees
# with the reference and with PyTorch's own fused kernel.

# %% [markdown]
# ## 4.3 Why divide by $\sqrt{d_k}$ (core, 9 min)
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
    scaled = dots / np.sqrt(d_k)  # (10000,)
    print(
        f"d_k = {d_k:5d}: var(q.k) = {dots.var():8.1f}  var(q.k / sqrt(d_k)) = {scaled.var():.2f}"
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

# %% [markdown]
# ## 4.4 The worked example of May's notes (optional, 4 min)
#
# May's notes {cite}`may2024transformer` (section 1.1) print three $4 \times 3$ matrices,
# which they call $K$, $Q$ and $V$, and work out the attention of the first input. The
# matrices are *projection weights* (what eq. 16 of Strabel's notes calls $W_K, W_Q, W_V$),
# and the notes never give the inputs they are applied to. Three inputs reproduce every
# number they print: $\mathbf{x}_1 = [1,0,1,0]$, $\mathbf{x}_2 = [0,2,0,2]$,
# $\mathbf{x}_3 = [1,1,1,1]$. With them, eq. (13) gives:

# %%
ex = may_worked_example()
X4 = ex["X"]  # (3, 4): x1, x2, x3 as rows
Q4, K4, V4 = X4 @ ex["W_Q"], X4 @ ex["W_K"], X4 @ ex["W_V"]  # (3, 3) each
A4 = ref.attention_weights(Q4, K4)  # (3, 3), scaled by 1/sqrt(3)
out4 = ref.scaled_dot_product_attention(Q4, K4, V4)  # (3, 3)
print("queries Q =\n", Q4, "\nkeys K =\n", K4, "\nvalues V =\n", V4)
print("x1: scores", Q4[0] @ K4.T, " weights", A4[0].round(2), " result", out4[0].round(2))
np.testing.assert_array_equal(Q4[0] @ K4.T, [2, 4, 4])
np.testing.assert_array_equal(out4[0].round(2), [1.86, 6.32, 1.70])

# %% [markdown]
# The scores $[2, 4, 4]$ are the notes' own; the weights and the result are not quite the
# ones they print ($[.06, .47, .47]$ and $[1.9, 6.7, 1.6]$): section 4.12 shows where the
# difference comes from. Three things about this example are worth noticing, and each is
# checked below:
#
# - **Rows 1 and 3 are equal, and so are rows 2 and 4**, in all three matrices, so an input
#   enters only through $x_1 + x_3$ and $x_2 + x_4$. The inputs above are therefore *not* the
#   only ones: $[2, 0, 0, 0]$ gives the same query, key and value as $[1, 0, 1, 0]$.
# - **The query matrix has two zero rows**, so $\mathbf{x}_2 = [0, 2, 0, 2]$ has a zero query:
#   its scores are all 0 and it attends uniformly, whatever the keys.
# - **$\mathbf{x}_1$ and $\mathbf{x}_3$ get the same query** $[1, 0, 2]$, so they get the same
#   weights and the same output although they are different inputs.

# %%
for name in ("W_K", "W_Q", "W_V"):
    np.testing.assert_array_equal(np.array([2.0, 0, 0, 0]) @ ex[name], X4[0] @ ex[name])
np.testing.assert_array_equal(Q4[1], 0)
np.testing.assert_allclose(A4[1], [1 / 3] * 3)
np.testing.assert_array_equal(out4[0], out4[2])

# %% [markdown]
# ## 4.5 Masks (core, 7 min)
#
# A language model that predicts the next token must not look at it. During training all
# positions are processed at once, so each position $i$ must be stopped from attending to the
# later positions $j > i$. May's notes write the rule as a lower-triangular matrix of ones,
# $M$. As booleans (True = may attend) $M$ is the **causal mask**:

# %%
L = 5
M5 = ref.causal_mask(L)  # (L, L) boolean: True on and below the diagonal
print(M5.astype(int))

# %% [markdown]
# The mask acts on the **logits**: the forbidden ones become $-\infty$ *before* the softmax,
# whose exponential turns them into exact zeros, and the softmax then spreads all the weight
# over the allowed positions. Every row still sums to one, and token 0, which may only see
# itself, outputs exactly its own value. (May's notes multiply the mask into the weights
# *after* the softmax instead; section 4.12 shows what that breaks.)

# %%
S = rng.standard_normal((L, L))  # (L, L) logits
masked = softmax(np.where(M5, S, -np.inf))  # mask the logits, then softmax
Vm = rng.standard_normal((L, 3))  # (L, d_v)
print(masked.round(2))
np.testing.assert_allclose(masked.sum(axis=1), 1.0)
np.testing.assert_array_equal(masked[~M5], 0.0)
np.testing.assert_allclose((masked @ Vm)[0], Vm[0])  # token 0 can only see itself

# %% [markdown]
# A **padding mask** handles batches of sequences of different lengths: shorter sequences are
# filled up with padding tokens, which no query may attend to. `padding_mask(lengths, L)`
# returns a (B, 1, L) mask (the middle axis broadcasts over the queries); the `&` of the two
# masks applies both.

# %%
pad = ref.padding_mask([5, 3], L)  # (B, 1, L)
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

# %% tags=["needs-torch"]
import torch  # the first PyTorch cell: the cells above need only NumPy

import course_lib.attention.accelerated as fast
from course_lib.attention.module import to_torch_multihead

x3 = torch.randn(1, 3, 4, dtype=torch.float64)  # (B, L, d_model)
w_heads = [torch.randn(2, 4, 2, dtype=torch.float64) for _ in range(3)]  # (h, d_model, d_k)
w_out = torch.randn(4, 4, dtype=torch.float64)  # (h*d_v, d_model)
nothing = torch.tensor([[True, True, True], [False, False, False], [True, False, False]])
ours = fast.multi_head_attention(x3, x3, x3, *w_heads, w_out, mask=nothing)  # (1, 3, 4)
mha = to_torch_multihead(*w_heads, w_out)
theirs = mha(x3, x3, x3, attn_mask=~nothing)[0]  # PyTorch's bool mask: True = may NOT attend
print("ours, query 1:   ", ours[0, 1].tolist())
print("PyTorch, query 1:", theirs[0, 1].tolist())
assert torch.all(ours[0, 1] == 0) and torch.isnan(theirs[0, 1]).all()

# %% [markdown]
# Notice the flipped convention in that call: a boolean `attn_mask` of
# `torch.nn.MultiheadAttention` marks the positions that may **not** be attended to, the
# opposite of `F.scaled_dot_product_attention` and of this course. Copying a mask between the
# two without `~` silently inverts it.

# %% [markdown]
# ## 4.6 Several heads, like several filters: eqs. (14)–(18) (core, 10 min)
#
# One head produces one set of weights per query: one way of deciding what is relevant.
# May's notes (section 1.2) compare self-attention with the filters of a convolutional
# network, and borrow the convolutional answer to "there are different aspects of
# information we might want to attend": **several filters**. A convolutional layer runs many
# filters at each place, each looking for its own pattern; multi-head attention runs $h$
# heads side by side, each with its own learned projections, so each can look for its own
# relation (the previous token, the subject of the verb, the same word earlier on). Instead of
# pooling the filters' outputs, the heads' outputs are concatenated and mixed by a learned
# matrix.
#
# Why one head does not simply do the work of two: a query that needs token $a$ from one place
# and token $b$ from another has a single distribution to split between them, and gets a
# weighted *average* of their values. With equal weights that average forgets which was
# where: the sequences "a b" and "b a" give the same output (with unequal weights the weaker
# token is only a faint trace in the mixture). Two heads, each looking at one place, keep both,
# side by side.

# %%
v_a, v_b = rng.standard_normal((2, 4))  # the values of two tokens a and b
one_head_ab = 0.5 * v_a + 0.5 * v_b  # "a b": half the weight on each
one_head_ba = 0.5 * v_b + 0.5 * v_a  # "b a"
two_heads_ab = np.concatenate([v_a, v_b])  # head 1 looks at place 1, head 2 at place 2
two_heads_ba = np.concatenate([v_b, v_a])
np.testing.assert_allclose(one_head_ab, one_head_ba)  # one head: the order is lost
assert not np.allclose(two_heads_ab, two_heads_ba)  # two heads: it is kept

# %% [markdown]
# Section 4.8 trains a one-head and a two-head model on exactly this task. Strabel's notes
# {cite}`strabel2023transformers` write the layer out. Given sources
# $X_Q \in \mathbb{R}^{d_l \times d_g}$, $X_K \in \mathbb{R}^{d_s \times d_w}$,
# $X_V \in \mathbb{R}^{d_s \times d_u}$ and weights $W_Q^i \in \mathbb{R}^{d_g \times d_k}$,
# $W_K^i \in \mathbb{R}^{d_w \times d_k}$, $W_V^i \in \mathbb{R}^{d_u \times d_v}$ for
# $i = 1, \dots, h$ and $W_O \in \mathbb{R}^{h d_v \times d_o}$ (eqs. 14–15),
#
# $$Q^i = X_Q W_Q^i,\quad K^i = X_K W_K^i,\quad V^i = X_V W_V^i, \tag{16}$$
#
# $$A^i = \operatorname{Attention}(Q^i, K^i, V^i) \in \mathbb{R}^{d_l \times d_v}, \tag{17}$$
#
# $$\operatorname{Multihead}(X_Q, X_K, X_V) = \operatorname{concat}(A^1, \dots, A^h)\, W_O \in
#   \mathbb{R}^{d_l \times d_o}. \tag{18}$$
#
# `ref.multi_head_attention` is these equations with a loop over $i$, the per-head weights
# stacked into arrays of shape $(h, d_g, d_k)$ and so on. For self-attention,
# $X_Q = X_K = X_V$ (section 2.3 of the notes):

# %%
h, d_model, d_k = 4, 16, 4
x = rng.standard_normal((6, d_model))  # (L, d_model): 6 tokens
w_q, w_k, w_v = (rng.standard_normal((h, d_model, d_k)) / 4 for _ in range(3))  # (h, d, d_k)
w_o = rng.standard_normal((h * d_k, d_model)) / 4  # (h*d_v, d_o)
out_ref = ref.multi_head_attention(x, x, x, w_q, w_k, w_v, w_o)  # (L, d_o)
print(out_ref.shape)

# %% [markdown]
# Looping over heads is slow on real hardware: $h$ small products instead of one large one.
# Put the $h$ matrices $W_Q^i$ side by side into one $(d_g, h\,d_k)$ matrix and project all
# heads with a single product: columns $i\,d_k$ to $(i+1)\,d_k - 1$ of
# $X_Q [W_Q^1 \cdots W_Q^h]$ are exactly $X_Q W_Q^i$. `split_heads` moves those column blocks
# onto a new head axis, $(L, h\,d_k) \to (h, L, d_k)$, and `merge_heads` is the concat of
# eq. (18).

# %%
W_fused = ref.fuse_head_weights(w_q)  # (d_model, h*d_k) = (16, 16)
per_head = ref.split_heads(x @ W_fused, h)  # (h, L, d_k)
for i in range(h):
    np.testing.assert_allclose(per_head[i], x @ w_q[i])  # head i's block is X W_Q^i
np.testing.assert_array_equal(ref.merge_heads(per_head), x @ W_fused)

# %% [markdown]
# A watch-out: splitting needs a reshape **and** a transpose. Reshaping $(L, h\,d_k)$ straight
# to $(h, L, d_k)$ has the right shape and the wrong content (it cuts the rows into $h$ chunks
# of consecutive *tokens*); one of the exercises asks you to get it right.

# %% [markdown]
# **Parameters.** In the usual self-attention all widths are $d_\text{model}$ and each head
# gets $d_k = d_v = d_\text{model}/h$, so each of $W_Q, W_K, W_V, W_O$ is
# $d_\text{model} \times d_\text{model}$ in total and the layer has $4 d_\text{model}^2$
# weights *whatever $h$ is*: more heads means narrower heads, not more parameters.

# %% tags=["needs-torch"]
from course_lib.attention.module import MultiHeadAttention

for n_heads in (1, 8, 16):
    layer = MultiHeadAttention(512, n_heads, bias=False)
    n = sum(p.numel() for p in layer.parameters())
    print(f"h = {n_heads:2d}: d_k = {512 // n_heads:3d}, {n:,} weights")
    assert n == 4 * 512**2

# %% [markdown]
# **Sharing keys and values: multi-query and grouped-query attention.** When a model generates
# text one token at a time, it keeps the keys and values of every earlier token (the *KV
# cache*, chapter 5), $2 h d_k$ numbers per token and layer, and reading that cache, not the
# arithmetic, bounds how fast each new token comes out. *Multi-query attention*
# {cite}`shazeer2019fast` keeps $h$ query heads but a single key head and value head that all
# of them share. *Grouped-query attention* {cite}`ainslie2023gqa` sits in between: $g$
# key-value heads, each shared by a group of $h/g$ query heads ($g = h$ is multi-head
# attention, $g = 1$ multi-query). Each shared head is used by its whole group in eq. (17),
# unchanged. Many open models released since 2023 use it. At the width and head count of a
# 7-billion-parameter model:

# %%
d, n_q = 4096, 32  # d_model and the number of query heads, d_k = d / n_q = 128
for g in (32, 8, 1):  # key-value heads: multi-head, grouped (4 queries each), multi-query
    weights = 2 * d * d + 2 * d * g * (d // n_q)  # W_Q and W_O, then W_K and W_V
    cache = 2 * g * (d // n_q)  # keys and values kept per token and layer
    print(f"g = {g:2d}: {weights / 1e6:5.1f}M weights, {cache:5,} cached numbers per token")

# %% [markdown]
# ## 4.7 The multi-head attention module, on one page (core, 9 min)
#
# Here is the whole layer as a PyTorch module, in the manner of nanoGPT: one fused product
# makes the queries, keys and values of every head (the $W_Q^i$, $W_K^i$, $W_V^i$ of all heads
# side by side, as above); a reshape and a transpose split the heads; each head attends,
# eq. (13) with a mask on the logits; the heads are merged back (the concat of eq. 18) and
# projected by $W_O$. `nn.Linear` adds a bias to each projection, as
# `torch.nn.MultiheadAttention` does; Strabel's notes have none.


# %% tags=["needs-torch"]
from torch import nn


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.h, self.d_k = n_heads, d_model // n_heads
        self.w_qkv = nn.Linear(d_model, 3 * d_model)  # [W_Q^1..W_Q^h | W_K^1.. | W_V^1..]
        self.w_o = nn.Linear(d_model, d_model)  # W_O of eq. (18)

    def forward(self, x, mask=None):  # x: (B, L, d); mask: True = may attend
        B, L, d = x.shape
        q, k, v = self.w_qkv(x).split(d, dim=-1)  # 3 x (B, L, d): eq. (16), all heads
        q, k, v = (
            t.view(B, L, self.h, self.d_k).transpose(1, 2) for t in (q, k, v)
        )  # (B, h, L, d_k)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)  # (B, h, L, L)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))  # mask the logits
        a = torch.softmax(scores, dim=-1) @ v  # (B, h, L, d_k): eq. (17), every head
        a = a.transpose(1, 2).reshape(B, L, d)  # (B, L, h*d_k): concat of eq. (18)
        return self.w_o(a)  # (B, L, d)


# %% [markdown]
# The library's `MultiHeadAttention` (which chapter 5's Transformer block imports) stores the
# same weights in the notes' row convention, $x W$, while `nn.Linear` computes $x W^\top + b$;
# copying them across is a transpose. With the same weights, the module above, the library's
# PyTorch module and the NumPy reference of eqs. (14)–(18) compute the same thing:

# %% tags=["needs-torch"]
from course_lib import device_for

dev64 = device_for(torch.float64)  # float64 lives on the CPU where the device has none (MPS)
torch.manual_seed(0)
lib = MultiHeadAttention(d_model, h, dtype=torch.float64, device=dev64)
mine = MultiHeadSelfAttention(d_model, h).to(dtype=torch.float64, device=dev64)
with torch.no_grad():  # nn.Linear stores (out, in): transpose the library's (in, out) weights
    mine.w_qkv.weight.copy_(torch.cat([lib.w_q, lib.w_k, lib.w_v], dim=1).T)
    mine.w_qkv.bias.copy_(torch.cat([lib.b_q, lib.b_k, lib.b_v]))
    mine.w_o.weight.copy_(lib.w_o.T)
    mine.w_o.bias.copy_(lib.b_o)

xb = torch.randn(3, 6, d_model, dtype=torch.float64, device=dev64)  # (B, L, d_model)
causal = fast.causal_mask(6).to(dev64)  # (L, L)
numpy_ref = ref.multi_head_attention(  # eqs. (14)-(18), one head at a time, in NumPy
    xb.cpu().numpy(),
    xb.cpu().numpy(),
    xb.cpu().numpy(),
    mask=causal.cpu().numpy(),
    **{n: w.detach().cpu().numpy() for n, w in lib.stacked_weights().items()},
)
with torch.no_grad():
    ours, library = mine(xb, causal), lib(xb, mask=causal)  # (B, L, d_model) each
torch.testing.assert_close(ours, library)
np.testing.assert_allclose(ours.cpu().numpy(), numpy_ref, rtol=1e-10, atol=1e-12)
print(ours.shape, "- the page, the library module and the NumPy reference agree")

# %% [markdown]
# The library's module adds only what the page leaves out: keys and values from another
# sequence (cross-attention, where $X_K \ne X_Q$ and the three projections are separate
# products), an additive `bias` on the logits (chapter 6), PyTorch's fused attention kernel
# (section 4.11), input checks with plain messages, and zeros instead of NaN for a query with
# nothing to attend to (section 4.5).

# %% [markdown]
# ## 4.8 Heads that were learned (core, 13 min)
#
# A weight matrix is easiest to read as a heatmap: row $i$ shows where query $i$ looks. Nobody
# writes the weights of a real model (section 4.10 shows heads built by hand, for comparison):
# a head **learns** them by gradient descent, and here we watch one do it. The task
# (`course_lib.attention.learned`) is section 4.6's: a
# sequence of 12 random tokens from a vocabulary of 8, and at every position two outputs, the
# token one place back and the token two places back. The model is as small as a layer gets:
# token plus position embeddings, one causal `MultiHeadAttention` of width 32, and a linear
# read-out per output, with no residual connection, so everything the read-out knows has come
# through attention. We train it twice, with one head and with two (the same $4 \cdot 32^2$
# attention weights either way), for 300 steps of Adam on fresh random batches: about a second
# each on an idle CPU. Here is one seed, whose heads we look at below:

# %% tags=["needs-torch"]
from course_lib.attention.learned import (
    attended_offsets,
    best_learning_rate,
    learned_head_weights,
    load_seed_study,
    train_look_back,
)

runs = {n_heads: train_look_back(n_heads, offsets=(1, 2), seed=0) for n_heads in (1, 2)}
for n_heads, run in runs.items():  # the exact low figure moves by a point from CPU to CPU
    acc = ", ".join(
        "100%" if a > 0.99 else f"{a:.0%}" if a > 0.3 else "< 30%" for a in run.accuracy
    )
    print(f"{n_heads} head(s): accuracy on fresh sequences (1 back, 2 back): {acc}")

# %% [markdown]
# One seed is an anecdote. `python -m course_lib.attention.learned` trained both models for
# five seeds at three learning rates (0.003, 0.01, 0.03) and stored the results in `data/`; each
# model is shown at the rate with its best mean accuracy on separate validation sequences, and
# scored on test sequences it never saw. Which head looks where is read off the maps of the
# sequence drawn below:

# %% tags=["needs-torch"]
study = load_seed_study()
for n_heads in (1, 2):
    lr = best_learning_rate(study, n_heads)
    print(f"{n_heads} head(s), learning rate {lr}: test accuracy (1 back, 2 back) per seed")
    for r in study["runs"]:
        if r["n_heads"] == n_heads and r["lr"] == lr:
            acc = ", ".join(f"{a:4.0%}" for a in r["test"])
            print(f"  seed {r['seed']}: {acc}; head(s) look back by {r['looks_back']}")

# %% [markdown]
# Two heads solve both outputs for all five seeds. One head solves one output (95% to 100%)
# and gets 13% to 49% of the other, where chance is 1 in 8: better than guessing, far from
# solved, and which output it favours depends on the seed. At 0.003 the picture is the same;
# 0.03 is too large a rate, and two of the two-head runs there leave an output unfinished (the
# stored file has every run). That is an experiment at this budget, not a proof
# that one head can never do it: a wider head or a longer run might squeeze more out of unequal
# weights, but this is the solution gradient descent finds. Now look at what the heads of seed
# 0 learned, on one sequence:

# %% tags=["needs-torch"]
seq = torch.tensor([3, 1, 4, 1, 5, 2, 6, 5, 3, 5, 0, 7])  # 12 tokens
learned = {n: learned_head_weights(run.model, seq) for n, run in runs.items()}  # (h, L, L)
letters = [("ABCDEFGH"[t]) for t in seq.tolist()]
panels = [(f"2-head model: head {i}", learned[2][i]) for i in range(2)]
panels += [("1-head model: its head", learned[1][0])]
fig, axes = plt.subplots(1, 3, figsize=(12, 4.2))
for ax, (title, weights) in zip(axes, panels, strict=True):
    heatmap(
        ax,
        weights,
        title=title,
        xlabel="key (attended to)",
        ylabel="query",
        xticklabels=letters,
        yticklabels=letters,
        colorbar=False,
        cmap="Blues",
    )
fig.suptitle("Three learned heads, seed 0 (causal mask: nothing above the diagonal)")
fig.tight_layout()
plt.show()
print("offset each learned head looks back by: 2 heads", attended_offsets(learned[2]), end="")
print(", 1 head", attended_offsets(learned[1]))

# %% [markdown]
# The two-head model's heads have split the work: one is a *previous-token head* (the diagonal
# just below the main one), the other looks exactly two places back. Nobody told them which
# head should take which offset (seeds 2 to 4 in the table swap them) or how to find a
# position: each learned, from the position embeddings, a query at position $i$ that matches
# the key of position $i - 1$ (or $i - 2$), sharp enough to put almost all of its weight there.
# The one-head model had to choose, and chose one place: its single distribution cannot serve
# two outputs, as section 4.6 argued. Trained language models have previous-token heads too: in
# the small attention-only models that Elhage et al. take apart {cite}`elhage2021mathematical`,
# one is half of the "induction" circuit that copies what followed an earlier occurrence of the
# current token {cite}`olsson2022context`.

# %% [markdown]
# ## 4.9 Self-attention does not know the order of its inputs (core, 2 min)
#
# Nothing in eqs. (13)–(18) refers to positions. If we shuffle the tokens of a self-attention
# input, every query still sees the same set of keys and values, so each output is unchanged
# and only moves with its token: self-attention is **permutation-equivariant**,
# $f(PX) = P f(X)$ for every permutation matrix $P$. The handwritten notes put it in four
# words: "Self-attention is orderless (set operation)". Order-free summaries of the outputs,
# such as their mean, are *invariant*: they do not change at all (chapter 6 takes up the lecture
# slides' use of that word for the outputs themselves).

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

# %% [markdown]
# ## 4.10 Heads built by hand, and an explorer for your own vectors (optional, 10 min)
#
# The four heads below were **built by hand** (`course_lib.attention.examples.toy_sentence`): each
# token's input vector holds a one-hot of its position, of its word and of its part of speech,
# and each head's $W_Q$ and $W_K$ match one feature of the query against one feature of the
# key. The sentence ends with two padding tokens, masked out.

# %%
sent = toy_sentence()
pad_row = ref.padding_mask([sent.length], len(sent.tokens))[0]  # (1, L)
toy_weights = [  # one (L, L) matrix per head
    ref.attention_weights(sent.X @ sent.w_q[i], sent.X @ sent.w_k[i], pad_row)
    for i in range(sent.n_heads)
]
fig, axes = plt.subplots(1, 4, figsize=(16, 4.2))
for i, ax in enumerate(axes):
    heatmap(
        ax,
        toy_weights[i],
        title=f"head {i}: {HEAD_NAMES[i]}",
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
# Head 0 looks one token back (the diagonal just below the main one); head 1 links equal
# words (the two "the"s find each other); heads 2 and 3 send every query to the nouns and to
# the verbs. The padding columns are empty in every head.

# %%
prev = toy_weights[0]
assert all(prev[i].argmax() == i - 1 for i in range(1, sent.length))  # head 0: one back
assert toy_weights[1][4, 0] == toy_weights[1][4, 4] > 0.3  # the second "the" finds the first
np.testing.assert_array_equal(np.stack(toy_weights)[:, :, sent.length :], 0)  # padding

# %% [markdown]
# The first explorer shows these hand-built heads. Choose a head, a mask and a
# **temperature** $T$, which divides the logits before the softmax ($T < 1$ sharpens the
# weights towards the largest logit, $T > 1$ flattens them towards uniform; the $1/\sqrt{d_k}$
# of eq. (13) is a fixed temperature). On the website the first explorer responds at a few
# precomputed settings and the others show their stored state; run the notebook to use them all.

# %%
from course_lib.attention.widget import explorer, own_explorer

explorer()

# %% [markdown]
# Things to try: with the `causal` mask, the first rows of head 2 have no noun to look at yet,
# so they spread their weight over what they can see; at temperature 0.1 every head becomes
# a hard lookup; at 10 every head becomes a plain average.
#
# The second explorer takes **your own** queries and keys: one vector per line, numbers
# separated by spaces or commas, with an optional label before a colon (`cat: 1 0`). Every
# query is compared with every key by eq. (13). Try a query equal to one of the keys; then
# double every number of that query (the weights sharpen: the logits are dot products, not
# cosines); then add a key that is a multiple of the query.

# %%
own_explorer()

# %% [markdown]
# ## 4.11 What attention costs (optional, 12 min)
#
# **FLOPs.** For self-attention over $L$ tokens of width $d = h\,d_k$, counting a multiply-add
# as two FLOPs (chapter 1): the four projections cost $8Ld^2$; the scores $QK^\top$ and the
# weighted sum $AV$ cost $2L^2d$ each; the softmax a few operations per logit. A position-wise
# feed-forward network (FFN) with hidden width $d_\text{ff} = 4d$ costs $16Ld^2$. So the
# projections and the FFN grow linearly with $L$, the scores and the weighted sum
# quadratically, and the ratio of the two is
#
# $$\frac{\text{FFN}}{\text{attention}} = \frac{16 L d^2}{8 L d^2 + 4 L^2 d} = \frac{4d}{2d + L}
#   \quad\text{(softmax aside)},$$
#
# at most 2 for short sequences and 1 at $L = 2d$: beyond that attention costs more.

# %%
for d in (512, 768, 1024):
    f = attention_flops(512, 512, d, d // 64)
    print(
        f"d_model = {d:4d}: FFN / attention at L = 512 is {ffn_flops(512, d) / f['total']:.2f}; "
        f"equal at L = {crossover_length(d):.0f}"
    )
    assert crossover_length(d) == 2 * d

# %%
Ls = np.array([64, 128, 256, 512, 1024, 2048, 4096, 8192])
d = 768
flops = [attention_flops(int(L_), int(L_), d, 12) for L_ in Ls]
proj = np.array([f["projections"] for f in flops]) / Ls / 1e9  # GFLOPs per token
quad = np.array([f["scores"] + f["weighted_sum"] + f["softmax"] for f in flops]) / Ls / 1e9
fig, ax = new_axes(
    "FLOPs per token of one layer, d_model = 768, 12 heads",
    "sequence length L",
    "GFLOPs per token",
    logx=True,
    logy=True,
)
ax.plot(Ls, proj, marker="o", label="attention: Q, K, V, O projections (8 d^2)")
ax.plot(Ls, quad, marker="o", label="attention: scores + weighted sum (~4 L d)")
ax.plot(Ls, proj + quad, marker="o", label="attention, total")
ax.plot(Ls, [ffn_flops(1, d) / 1e9] * len(Ls), ls="--", label="FFN, d_ff = 4 d (16 d^2)")
ax.axvline(crossover_length(d), color="grey", ls=":", lw=1, label="L = 2 d: FFN = attention")
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()

# %% [markdown]
# **Time and memory, measured.** The explicit computation stores the $(B, h, L, L)$ logits and
# weights (and the backward pass needs them), so its memory grows like $L^2$. PyTorch's fused
# kernel computes the softmax block by block in the manner of FlashAttention
# {cite}`dao2022flashattention`, never storing an $L \times L$ matrix, and recomputes what the
# backward pass needs. Below, forward plus backward for one sequence and 4 heads of 32, at
# three lengths. The memory is the peak of tensor bytes alive at once, counted exactly by
# following every tensor PyTorch creates (`course_lib.measure.peak_tensor_memory`), so it is
# the same on every machine. The time is the best of 5 interleaved rounds on one CPU thread
# (`course_lib.attention.cost.interleaved_times`), counted as the process's CPU time, so that
# time spent waiting for a core on a busy machine is left out; yours will differ. A best time
# that the second-best round does not reproduce within 25% is noise, not data, and is flagged.

# %% tags=["needs-torch", "nbval-ignore-output"]
from course_lib.attention.cost import measure_attention, steady

threads = torch.get_num_threads()
torch.set_num_threads(1)  # one thread: the curves show the arithmetic, not the thread pool
rows = measure_attention([256, 512, 1024], n_heads=4, d_head=32, repeats=5, clock="cpu")
torch.set_num_threads(threads)
cost = {
    (r["implementation"], key): np.array(
        [s[key] for s in rows if s["implementation"] == r["implementation"]]
    )
    for r in rows
    for key in ("seconds", "peak_MiB")
}
for name in ("explicit", "fused"):
    t, m = cost[name, "seconds"], cost[name, "peak_MiB"]
    print(f"{name:8s} L = 256 -> 1024: time x{t[-1] / t[0]:4.1f}, peak memory x{m[-1] / m[0]:4.1f}")
noisy = [f"{r['implementation']} at L = {r['L']}" for r in rows if not steady(r)]
print("unsteady times (rerun on a quieter machine):", ", ".join(noisy) if noisy else "none")

# %% [markdown]
# Quadrupling $L$ multiplies an $L^2$ quantity by 16. The explicit computation's memory grows
# almost that much (about 15-fold: its inputs, outputs and their gradients grow only like $L$),
# and its time by roughly as much (the cell prints your machine's ratio: 14.3 in the stored
# run, whose $L = 1024$ point is flagged unsteady; the course's other runs gave 15 to 21). Where
# it exceeds 16, a likely reason, not measured: at $L = 1024$ each $(h, L, L)$ tensor takes
# 16 MiB, more than a core's cache, so every pass over it waits for main memory. The fused
# kernel does the same arithmetic, so its time grows like $L^2$ too, but its memory grows only
# like $L$: it keeps no $L \times L$ matrix. (Timed by the wall clock on a machine shared with other
# jobs, such a ratio can come out several times too large or too small, because a longer call
# is interrupted more often; that is why these timings count CPU time.)

# %% tags=["needs-torch"]
assert 12 < cost["explicit", "peak_MiB"][-1] / cost["explicit", "peak_MiB"][0] <= 16  # ~ L^2
assert cost["fused", "peak_MiB"][-1] / cost["fused", "peak_MiB"][0] < 4.5  # ~ L

# %% [markdown]
# ## 4.12 What the notes get wrong, and two other ways they write eq. (18) (optional, 11 min)
#
# Every claim above is checked by an assertion; these are the places where the notes and the
# checks disagree. Each statement is reproduced as printed (`course_lib.attention.as_printed`)
# and compared with the correct form.
#
# **1. May's notes, section 1.1: the worked example is computed without the scaling.** Its
# weights $[.06, .47, .47]$ and result $[1.9, 6.7, 1.6]$ are those of
# $\operatorname{softmax}(QK^\top)V$, although the notes' own footnote and eq. (13) of
# Strabel's notes divide the scores by $\sqrt{d_k}$. With the scaling ($d_k = 3$) the weights
# are $[.14, .43, .43]$ and the result $[1.86, 6.32, 1.70]$ (section 4.4). The notes also never
# give the input vectors; section 4.4 gives inputs that reproduce every printed number.

# %%
printed = as_printed.may_worked_example()
np.testing.assert_array_equal(printed["weights"].round(2), [0.06, 0.47, 0.47])  # as printed
np.testing.assert_array_equal(printed["result"].round(1), [1.9, 6.7, 1.6])  # as printed
np.testing.assert_array_equal(A4[0].round(2), [0.14, 0.43, 0.43])  # eq. (13)
np.testing.assert_array_equal(out4[0].round(2), [1.86, 6.32, 1.70])  # eq. (13)

# %% [markdown]
# **2. May's notes, footnote 6: "divide by the dimension of K".** The footnote's formula has
# $\sqrt{|K|}$, but its words say to divide by the dimension; the divisor is the *square root*
# of the key width $d_k$ (section 4.3 shows why), and "the dimension of K" must mean $d_k = 3$,
# the width of a key, not the size of the $4 \times 3$ matrix the notes also call $K$. Dividing
# by $d_k$ makes the weights too soft:

# %%
by_dimension = as_printed.may_footnote_weights(Q4, K4)
print("divided by d_k:", by_dimension[0].round(2), " by sqrt(d_k):", A4[0].round(2))
assert not np.allclose(by_dimension, A4)

# %% [markdown]
# **3. May's notes, section 1.1: the causal mask is "element-wise multiplied with $\alpha$"**,
# the weights after the softmax. That zeroes the forbidden weights but leaves the others as they
# were, so the rows no longer sum to one: the output is no longer an average, and token 0,
# which may only see itself, outputs its value shrunk towards zero. The mask belongs on the
# logits ($-\infty$ before the softmax, section 4.5); renormalising the product repairs it.

# %%
multiplied = as_printed.may_masked_weights(S, M5)  # (5, 5): softmax first, then times M
print("row sums as printed:", multiplied.sum(axis=1).round(3))
assert np.all(multiplied.sum(axis=1)[:-1] < 1)
assert not np.allclose((multiplied @ Vm)[0], Vm[0])  # token 0's output is shrunk
np.testing.assert_allclose(multiplied / multiplied.sum(axis=1, keepdims=True), masked)

# %% [markdown]
# **4. May's notes, section 1.1: "$V\alpha$ would give the result".** With one query per row
# of $\alpha$ ($5 \times 5$) and one value per row of $V$ ($5 \times d_v$), the result is
# $\alpha V$, whose row $i$ averages the values with query $i$'s weights (chapter 1's row view);
# $V\alpha$ is not even defined unless $d_v = 5$.

# %%
V5 = rng.standard_normal((5, 3))  # (5, d_v = 3): one value per row
print("alpha V:", (masked @ V5).shape)
try:
    as_printed.may_v_alpha(V5, masked)
except ValueError as err:
    print(err)

# %% [markdown]
# **5. The lecture slides, "Computing Attention": the sums run over the wrong range.** The
# softmax's denominator sums $j'$ from 1 to $T$ and the output $\mathbf{h}_i = \sum_{j=1}^{K}
# a_{ij}\mathbf{v}_j$ sums to $K$, but there are $M$ objects ($T$ is never defined, and $K$ is
# the width of a vector). Both sums run over $j = 1, \dots, M$, as in section 4.1. (The slides
# also scale by $1/\sqrt{k}$ for vectors of length $K$, and use $L$ for the number of heads.)

# %%
h_slides = as_printed.slides_output(A, V, i, Kdim)  # sums over j = 1..K = 2 only
np.testing.assert_allclose(H[i], sum(A[i, j] * V[j] for j in range(M)))  # all M = 4 objects
assert not np.allclose(h_slides, H[i])

# %% [markdown]
# **6. The handwritten notes, "Sub-quadratic self-attention": "for typical Transformer
# dimensions and modest sequence lengths ($T < 1000$) compute for FFN $\gg$ compute for
# MHA".** Counting the whole attention layer, FFN/attention $= 4d/(2d + L)$ (section 4.11),
# which is **never more than 2**, so "much greater" holds for no $L$; at $d = 512$ the two are
# equal at $L = 1024$. The claim is fair only for the quadratic part of attention alone
# (scores and weighted sum, ratio $4d/L$: 16 at $d = 512$, $L = 128$).

# %%
ratios = [ffn_flops(L_, 512) / attention_flops(L_, L_, 512, 8)["total"] for L_ in (8, 128, 999)]
print("FFN / attention at d = 512, L = 8, 128, 999:", np.round(ratios, 2))
assert max(ratios) < 2 and ratios[-1] > 1  # at most 2; the FFN still costs more below L = 2d

# %% [markdown]
# **7. Smaller points of naming and notation.** Strabel's notes, section 2.1, call eq. (13)
# "Dot-Product Attention", though it is the *scaled* form, and eq. (18) writes
# $\operatorname{concat}(A_1, \dots, A_h)$ for the heads defined as $A^i$ in eq. (17). The
# handwritten notes give the queries their own width, $Q \in \mathbb{R}^{d_q \times d}$, but
# $\mathbf{q}_i^\top\mathbf{k}_j$ is defined only when $d_q = d_k$.

# %% [markdown]
# **Two other ways to write eq. (18)**, both right. The lecture slides
# {cite}`marlin2022transformers` write the combination as
# $\mathbf{h}_i = \sum_{l} W^c_l\, \mathbf{h}'_{li}$: a matrix per head applied to that head's
# output, then summed. That is eq. (18) read block by block: split $W_O$ into $h$ blocks of
# $d_v$ rows; head $i$'s output times block $i$, summed over the heads, is
# $\operatorname{concat}(A^1, \dots, A^h) W_O$ (a block row times a block column).

# %%
heads = [ref.scaled_dot_product_attention(x @ w_q[i], x @ w_k[i], x @ w_v[i]) for i in range(h)]
blocks = [w_o[i * d_k : (i + 1) * d_k] for i in range(h)]  # h blocks of (d_v, d_o)
np.testing.assert_allclose(sum(A_i @ B_i for A_i, B_i in zip(heads, blocks, strict=True)), out_ref)

# %% [markdown]
# The handwritten notes write the same combination with tokens as columns: each head's output
# $h^{(i)}$ is stacked *under* the others into a column of height $H d_v$, and an "output
# matrix" $O \in \mathbb{R}^{d_v \times H d_v}$ multiplies that column from the left. Transpose
# eq. (18) and it takes this form: $\big(\operatorname{concat}(A^1, \dots, A^H)\, W_O\big)^\top
# = W_O^\top\, [A^{1\top}; \dots; A^{H\top}]$, so $O = W_O^\top$, of shape
# $(d_o, H d_v)$. The notes take the layer's output as wide as one head's, $d_o = d_v$; eq. (18)
# lets $d_o$ be anything (here $d_o = 16$ and $d_v = 4$):

# %%
O = w_o.T  # (d_o, h*d_v): the notes' output matrix
stacked = np.vstack([A_i.T for A_i in heads])  # (h*d_v, L): the heads stacked, tokens as columns
np.testing.assert_allclose(O @ stacked, out_ref.T)  # (d_o, L): eq. (18), transposed

# %% [markdown]
# ## Exercises
#
# Five kinds: write a function and let a checker run it on several inputs, including edge
# cases, and tell you what is wrong; find and fix a bug; predict a number, then run the cell;
# answer a question in words; and one stretch problem. Replace the body of each stub and run
# its cell. Solutions are folded below each exercise (on the website) or in cells tagged
# `solution` (in the notebook).
#
# ```{exercise} Cross-attention over padded keys
# :label: ex-attention-cross
#
# A decoder's queries attend over the encoder's outputs (cross-attention, section 4.2), and a
# batch of encoder outputs is padded to one length. Write `cross_attend(x_q, x_kv, kv_lengths,
# w_q, w_k, w_v)` for one head, in NumPy: `x_q` of shape $(B, L_q, d)$ gives the queries,
# `x_kv` of shape $(B, L_{kv}, d)$ the keys and values, and only the first `kv_lengths[b]`
# positions of sequence $b$ of `x_kv` are real (the rest is padding). Return the attention
# output of shape $(B, L_q, d_v)$. Think about which axis of the logits the padding mask acts
# on, and what a sequence with no real position at all should give (the checker has one).
# ```


# %%
def cross_attend(x_q, x_kv, kv_lengths, w_q, w_k, w_v):
    raise NotImplementedError  # your code here


check.cross_attention(cross_attend)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-attention-cross
# :class: dropdown
# ```


# %% tags=["solution"]
def cross_attend(x_q, x_kv, kv_lengths, w_q, w_k, w_v):
    q, k, v = x_q @ w_q, x_kv @ w_k, x_kv @ w_v  # (B, L_q, d_k), (B, L_kv, d_k), (B, L_kv, d_v)
    logits = q @ k.transpose(0, 2, 1) / np.sqrt(q.shape[-1])  # (B, L_q, L_kv)
    real = np.arange(x_kv.shape[1]) < np.asarray(kv_lengths)[:, None]  # (B, L_kv): real keys
    logits = np.where(real[:, None, :], logits, -np.inf)  # mask key columns, for every query
    return softmax(logits) @ v  # (B, L_q, d_v); chapter 2's softmax gives 0 for an empty row


check.cross_attention(cross_attend, require=True)

# %% [markdown] tags=["solution"]
# The mask has shape $(B, 1, L_{kv})$: one row per sequence, broadcast over the queries, as
# `ref.padding_mask` builds it (section 4.5). A fully padded sequence leaves each query with
# nothing to attend to, and chapter 2's softmax returns zeros there instead of $0/0$.
#
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} A previous-token head, by hand
# :label: ex-attention-previous-token
#
# Section 4.8's learned head looks one token back. Build one yourself. The input of a sequence
# of $L$ tokens is $X = I_L$: token $i$ is the one-hot vector of its position. Write
# `previous_token_head(L)` returning a pair `(W_Q, W_K)` of matrices of shape $(L, d_k)$ (you
# choose $d_k$) such that, with the weights $\operatorname{softmax}(XW_Q (XW_K)^\top /
# \sqrt{d_k})$ and no mask, every query $i \ge 1$ puts at least 90% of its weight on key
# $i - 1$. Think about which key each query's vector should match, and how large the logits
# must be for the softmax to be that sharp when $L = 16$.
# ```


# %%
def previous_token_head(L):
    raise NotImplementedError  # your code here


check.previous_token_head(previous_token_head)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-attention-previous-token
# :class: dropdown
# ```


# %% tags=["solution"]
def previous_token_head(L):
    W_K = np.eye(L)  # key j is the one-hot of position j
    W_Q = np.eye(L, k=-1)  # query i is the one-hot of position i - 1: it asks for the key i - 1
    # the right logit is s^2 / sqrt(L), the others 0: with s = 5 and L = 16 that is 6.25, and
    # e^6.25 / (e^6.25 + 15) = 0.97
    return 5 * W_Q, 5 * W_K


check.previous_token_head(previous_token_head, require=True)

# %% [markdown] tags=["solution"]
# Query 0 has no previous token; its query vector is zero, so it attends uniformly. The learned
# heads of section 4.8 do the same job with learned position embeddings instead of one-hots.
#
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} PyTorch's weights, head by head
# :label: ex-attention-torch-weights
#
# `torch.nn.MultiheadAttention` keeps the query, key and value weights of all its heads in one
# matrix, `in_proj_weight`, of shape $(3d, d)$ for $d = d_\text{model}$. Like `nn.Linear`, it
# stores each weight as (out, in) and computes $x W^\top$; its first $d$ rows make the
# queries, the next $d$ the keys and the last $d$ the values, and within each, head $i$'s
# outputs are features $i\,d_k$ to $(i+1)\,d_k - 1$. Write `heads_from_torch(in_proj_weight,
# h)`, in NumPy, returning `(w_q, w_k, w_v)`, each of shape $(h, d, d_k)$, such that `x @ w_q[i]`
# are the queries of head $i$ (eq. 16). This is what the course does to compare its attention
# with PyTorch's.
# ```


# %%
def heads_from_torch(in_proj_weight, h):
    raise NotImplementedError  # your code here


check.torch_head_weights(heads_from_torch)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-attention-torch-weights
# :class: dropdown
# ```


# %% tags=["solution"]
def heads_from_torch(in_proj_weight, h):
    d = in_proj_weight.shape[1]
    per_head = []
    for w in np.split(in_proj_weight, 3):  # W_Q, W_K, W_V as stored: (d_out, d_in) = (d, d)
        fused = w.T  # (d_in, h*d_k): x @ fused holds every head's outputs side by side
        per_head.append(fused.reshape(d, h, d // h).transpose(1, 0, 2))  # (h, d_in, d_k)
    return tuple(per_head)


check.torch_head_weights(heads_from_torch, require=True)

# %% [markdown] tags=["solution"]
# Two traps: reshaping the stored $(d, d)$ matrix without transposing it first cuts it along
# the wrong axis, and `fused.reshape(h, d, d // h)` has the right shape but cuts the *rows*
# (input features) into blocks. Head $i$ is a block of consecutive *columns* of the transposed
# weight; `course_lib.attention.module.from_torch_multihead` does the same in PyTorch.
#
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Find the bug: causal attention as May's notes compute it
# :label: ex-attention-debug
#
# A colleague followed May's notes (section 1.1) to write one causal self-attention head,
# `may_causal_attention(x, w_q, w_k, w_v)` below. It runs, its output has the right shape, and
# the later tokens look plausible; the first token's output is nowhere near its own value,
# although it can only see itself. Find the two bugs (sections 4.3 and 4.5 hold the clues) and
# write the fixed function as `causal_attention(x, w_q, w_k, w_v)`: `x` of shape $(L, d)$,
# `w_q` and `w_k` of shape $(d, d_k)$, `w_v` of shape $(d, d_v)$; it returns $(L, d_v)$.
# ```


# %%
def may_causal_attention(x, w_q, w_k, w_v):
    q, k, v = x @ w_q, x @ w_k, x @ w_v  # (L, d_k), (L, d_k), (L, d_v)
    alpha = softmax(q @ k.T / k.shape[1])  # (L, L): "divide by the dimension of K"
    alpha = alpha * np.tril(np.ones_like(alpha))  # the mask, "element-wise multiplied"
    return alpha @ v  # (L, d_v)


x_bug = rng.standard_normal((5, 8))  # (L, d)
w_bug = [rng.standard_normal((8, 4)) for _ in range(3)]  # W_Q, W_K, W_V: (d, d_k)
print("token 0's output:", may_causal_attention(x_bug, *w_bug)[0].round(3))
print("its value:       ", (x_bug @ w_bug[2])[0].round(3))


def causal_attention(x, w_q, w_k, w_v):
    raise NotImplementedError  # your code here


check.causal_attention(causal_attention)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-attention-debug
# :class: dropdown
# ```


# %% tags=["solution"]
def causal_attention(x, w_q, w_k, w_v):
    q, k, v = x @ w_q, x @ w_k, x @ w_v  # (L, d_k), (L, d_k), (L, d_v)
    logits = q @ k.T / np.sqrt(k.shape[1])  # (L, L): divide by sqrt(d_k)
    future = ~np.tril(np.ones(logits.shape, dtype=bool))  # (L, L): j > i
    return softmax(np.where(future, -np.inf, logits)) @ v  # mask first, then the softmax


check.causal_attention(causal_attention, require=True)

# %% [markdown] tags=["solution"]
# Bug 1, the divisor: $d_k$ instead of $\sqrt{d_k}$ (the footnote's words, section 4.12's
# erratum 2) makes every logit $\sqrt{d_k}$ times too small and the weights too flat. Bug 2, the
# mask: multiplying the weights by the mask *after* the softmax zeroes the future but leaves the
# allowed weights as they were, computed over all $L$ keys, so row $i$ sums to less than 1
# (erratum 3). Token 0 keeps only its share of a softmax over five keys and outputs a fraction
# of its value. Masking the logits with $-\infty$ before the softmax (or renormalising each row
# after the product) gives the right average. Each bug alone is easy to miss: the shapes are
# right, and the last token, which may see everything, is affected only by the divisor.
#
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Predict, then check: a query equal to a key
# :label: ex-attention-predict
#
# Three keys are random unit-variance vectors of width $d_k = 64$, and the query equals the
# first key. Predict (roughly) the attention weight on the first key, then run the cell. (The
# second explorer of section 4.10 lets you try the same thing with your own vectors.)
# ```

# %%
gen_p = np.random.default_rng(3)
keys = gen_p.standard_normal((3, 64))  # (L_k, d_k)
w_first = ref.attention_weights(keys[0][None, :], keys)[0, 0]  # query = key 0
prediction = None  # your prediction here
check_prediction(
    prediction,
    round(float(w_first), 2),
    what="the weight on key 0",
    rtol=0.05,
    explanation=check.WHY_QUERY_IS_KEY,
)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-attention-predict
# :class: dropdown
# ```

# %% tags=["solution"]
prediction = 1.0  # q.k0 = |k0|^2 is about 64, so the scaled score is about 8, while the
# scores of the other keys are about N(0, 1): e^8 dwarfs them
assert check_prediction(
    prediction,
    round(float(w_first), 2),
    what="the weight on key 0",
    rtol=0.05,
    explanation=check.WHY_QUERY_IS_KEY,
).passed

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Predict, then check: logits of wider vectors
# :label: ex-attention-predict-variance
#
# The components of a query and a key of width $d_k = 64$ are independent, with mean 0 and
# standard deviation **2** (not 1). What is the variance of the *scaled* logit
# $\mathbf{q}^\top\mathbf{k} / \sqrt{d_k}$? Predict it, then run the cell, which samples
# 100,000 pairs.
# ```

# %%
gen_v = np.random.default_rng(5)
qs_v, ks_v = 2 * gen_v.standard_normal((2, 100_000, 64))  # components of standard deviation 2
scaled_var = float((np.einsum("nd,nd->n", qs_v, ks_v) / np.sqrt(64)).var())
prediction = None  # your prediction here
check_prediction(
    prediction,
    scaled_var,
    what="the variance of the scaled logit",
    rtol=0.05,
    explanation=check.WHY_WIDE_VARIANCE,
)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-attention-predict-variance
# :class: dropdown
# ```

# %% tags=["solution"]
prediction = 16.0  # each term q_l k_l has variance 4 * 4 = 16; d_k = 64 terms give 64 * 16;
# dividing by sqrt(64) divides the variance by 64: 16, a standard deviation of 4
assert check_prediction(
    prediction,
    scaled_var,
    what="the variance of the scaled logit",
    rtol=0.05,
    explanation=check.WHY_WIDE_VARIANCE,
).passed

# %% [markdown] tags=["solution"]
# The $1/\sqrt{d_k}$ scaling removes the dependence on the width, not on the size of the
# components: logits of standard deviation 4 already make the softmax much sharper than at
# initialisation. The size of the queries and keys matters as much as their width, which is
# one reason the inputs of attention are normalised (chapter 5's layer norm).
#
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Does a large weight mean the token matters?
# :label: ex-attention-concept
#
# Heatmaps like those of section 4.8 are often read as "what the model looks at". Suppose
# head 3 of some layer puts weight 0.95 of query $i$ on key $j$. Give at least two reasons why
# token $j$ may nonetheless have almost no influence on what the layer outputs at position
# $i$. (Hint: follow the computation after the weights: eqs. 17 and 18.)
# ```

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-attention-concept
# :class: dropdown
# ```
#
# The weight only says how the head's average is formed; what reaches the output is the
# weighted *value*, then mixed by $W_O$:
#
# - **The value can be small.** Head $i$'s output is $\sum_j a_{ij}\mathbf{v}_j$; if
#   $\mathbf{v}_j = X_{j\cdot} W_V$ is near zero, weight 0.95 on it contributes almost
#   nothing. Trained models use exactly this: heads that have "nothing to do" park their weight
#   on a token (often the first) whose value is small.
# - **$W_O$ can discard the head.** Eq. (18) multiplies the concatenated heads by $W_O$; if
#   the rows of $W_O$ that read head 3 are small, head 3's output barely reaches the layer's
#   output, however sharp its weights.
# - **Other heads and the residual path** (chapter 5) add their own, possibly much larger,
#   contributions to position $i$.
# - **After the first layer, position $j$ is no longer token $j$**: its vector already mixes
#   information from other tokens, so weight on position $j$ is not weight on the word there.
#
# Influence is better measured by what changes in the output when token $j$ changes (a
# gradient or an ablation) than by $a_{ij}$ alone.
#
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Stretch: attention without the L x L matrix
# :label: ex-attention-stretch
#
# Compute the output of scaled dot-product attention for one query over $L$ keys in blocks of
# 16 keys, keeping only a running maximum, a running sum of exponentials and a running weighted
# sum of values (chapter 2's online softmax), and check it against
# `ref.scaled_dot_product_attention`.
# ```

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-attention-stretch
# :class: dropdown
# ```


# %% tags=["solution"]
def blockwise_attention(q, K, V, block=16):
    m, s, acc = -np.inf, 0.0, np.zeros(V.shape[1])
    for start in range(0, K.shape[0], block):
        scores = K[start : start + block] @ q / np.sqrt(q.size)  # (block,)
        new_m = max(m, scores.max())
        scale = np.exp(m - new_m)  # rescale what was accumulated under the old maximum
        e = np.exp(scores - new_m)
        s = s * scale + e.sum()
        acc = acc * scale + e @ V[start : start + block]
        m = new_m
    return acc / s


qb, Kb, Vb = rng.standard_normal(8), rng.standard_normal((50, 8)), rng.standard_normal((50, 5))
np.testing.assert_allclose(
    blockwise_attention(qb, Kb, Vb), ref.scaled_dot_product_attention(qb[None], Kb, Vb)[0]
)

# %% [markdown] tags=["solution"]
# This is the inner loop of FlashAttention (chapter 11): the memory is $O(d)$ per query
# instead of $O(L)$, and the result is exact.
#
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
# - Masks act on the logits ($-\infty$ before the softmax); causal and padding masks combine
#   with `&`.
# - One head computes one distribution per query; several heads, like several convolution
#   filters, look for several relations at once. In our experiment (five seeds) a one-head
#   model trained to fetch two tokens fetches one and gets 13% to 49% of the other; a two-head
#   model learns a previous-token head and a two-back head every time.
# - Multi-head attention (eqs. 14–18) is a fused projection, a split into heads, attention per
#   head, a merge and an output projection: a dozen lines of PyTorch, $4d^2$ weights whatever
#   $h$ is. Multi-query and grouped-query attention share key and value heads between query
#   heads, which shrinks the cache of keys and values a generating model keeps.
# - Self-attention is permutation-equivariant: positions must be added (chapter 6).
# - Attention's time and the explicit computation's memory grow like $L^2$; fused kernels keep
#   memory linear. The FFN costs at most twice the attention layer, and less beyond $L = 2d$.
# - May's worked example is unscaled, its mask is applied after the softmax and "$V\alpha$"
#   should be $\alpha V$; the slides' sums run to the wrong bound; the FFN does not cost "much
#   more" than attention (section 4.12).

# %% [markdown]
# ## Quiz (optional, 18 min)
#
# Test yourself on this chapter's sections: multiple choice and numeric questions, each
# naming the section it tests. Choose or type an answer and check it: the quiz says whether it
# is right and why, for the wrong options too. The cell below needs nothing from the cells
# above it, so it also runs on its own when you come back to the chapter.

# %%
from course_lib import quiz

quiz.show("04_attention")

# %% [markdown]
# ## References
#
# - G. Strabel, *Transformers*, lecture notes, 2023, section 2 {cite}`strabel2023transformers`.
# - J. May, *Transformer language models*, lecture notes, 2024, sections 1.1–1.2
#   {cite}`may2024transformer`.
# - B. M. Marlin, *Transformers*, COMPSCI 689 lecture 23 slides, University of Massachusetts
#   Amherst {cite}`marlin2022transformers`.
# - A. Vaswani et al., "Attention is all you need", *NeurIPS* 2017 {cite}`vaswani2017attention`.
# - N. Elhage et al., "A mathematical framework for transformer circuits", *Transformer Circuits
#   Thread*, 2021 {cite}`elhage2021mathematical`; C. Olsson et al., "In-context learning and
#   induction heads", 2022 {cite}`olsson2022context`.
# - N. Shazeer, "Fast transformer decoding: one write-head is all you need", 2019
#   {cite}`shazeer2019fast`; J. Ainslie et al., "GQA: training generalized multi-query
#   transformer models from multi-head checkpoints", EMNLP 2023 {cite}`ainslie2023gqa`.
# - T. Dao et al., "FlashAttention: fast and memory-efficient exact attention with
#   IO-awareness", *NeurIPS* 2022 {cite}`dao2022flashattention`.
#
# The full bibliography of the course is on the [References](../book/references.md) page.

# %% [markdown]
# ## How this chapter is tested
#
# `tests/test_attention.py` checks hand-derived values (two keys by hand, the worked example, the
# masks), the errata functions of `as_printed.py`, the cost formulas, the look-back training (a
# short run must reach its accuracies, and the one-head model must fail on one output), the
# interleaved timer and its steadiness rule, the widgets' pure functions (parsing typed vectors,
# bad input included) and every exercise checker against its solution and against the named
# mistakes. `tests/test_conformance.py` runs the NumPy reference and the PyTorch twin of every
# function of this chapter on hundreds of random shapes, masks and biases in float64, float32,
# float16 and bfloat16, checks that their signatures match, and runs `torch.autograd.gradcheck`.
# Parity with established implementations is tested too: our explicit attention against
# `F.scaled_dot_product_attention` (with boolean masks, additive biases and custom scales), and
# our multi-head attention and `MultiHeadAttention` module against `torch.nn.MultiheadAttention`
# with copied weights, for self- and cross-attention, with and without biases, causal and padding
# masks. Two of those checks, by hand:

# %% tags=["needs-torch"]
q, k, v = (torch.randn(2, 3, 5, 4, dtype=torch.float64, device=dev64) for _ in range(3))
torch.testing.assert_close(
    fast.scaled_dot_product_attention(q, k, v),  # (B, h, L, d_v), explicit
    torch.nn.functional.scaled_dot_product_attention(q, k, v),  # PyTorch's fused kernel
)
torch_mha = to_torch_multihead(**{n: w.detach() for n, w in lib.stacked_weights().items()})
with torch.no_grad():
    theirs = torch_mha(xb, xb, xb, attn_mask=~causal)[0]  # their mask: True = may NOT attend
torch.testing.assert_close(library, theirs)
print("explicit = F.scaled_dot_product_attention; MultiHeadAttention = torch.nn.MultiheadAttention")

# %% [markdown]
# Bad input gets an error that names the argument and what was expected:

# %% tags=["needs-torch"]
for bad in (
    lambda: ref.scaled_dot_product_attention(np.ones((2, 3)), np.ones((4, 5)), np.ones((4, 2))),
    lambda: MultiHeadAttention(10, 3),
):
    try:
        bad()
    except ValueError as err:
        print("ValueError:", err)

# %% [markdown]
# **Benchmarks.** `python -m benchmarks.run attention` times forward and backward passes in
# float32 (interleaved rounds, `course_lib.attention.cost.interleaved_times`) and
# measures peak tensor memory: the course's module against `torch.nn.MultiheadAttention` at
# $B = 8$, $L = 512$, $d_\text{model} = 512$, 8 heads (the target: within 1.3 times its time),
# and the explicit computation against the fused kernel for $L$ from 128 to 4096. It writes
# the table to `benchmarks/results/attention.json`. On a busy machine a time can come out
# several times too large, so a time counts only if the second-best round reproduces it within
# 25%: the benchmark marks the others `unsteady` beside them, and the table below (section
# 4.11's measurement) prints "unsteady" in their place.

# %% tags=["needs-torch", "nbval-ignore-output"]
print("    L  implementation  ms (best of 5)  peak MiB  one (B, h, L, L) tensor, MiB")
for r in rows:
    ms = f"{1000 * r['seconds']:.3g}" if steady(r) else "unsteady"
    print(
        f"{r['L']:5d}  {r['implementation']:14s} {ms:>14s} {r['peak_MiB']:9.2f}"
        f" {r['weights_MiB']:14.2f}"
    )
