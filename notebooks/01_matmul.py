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

    course_lib.colab.setup("01_matmul")

# %% [markdown]
# # 1. Matrix multiplication
#
# Almost every number a Transformer computes comes out of a matrix product: the projections
# to queries, keys and values, the attention scores, the feed-forward layers, the output
# logits. Before we build any of them, this chapter makes the product itself familiar from
# four angles, because each angle is the natural way to read a later idea.
#
# **After this chapter you can**
#
# - compute $XY$ entry by entry, column by column, row by row and as a sum of outer products,
#   and say which view explains which later idea (attention outputs, low-rank updates);
# - translate between the *row-vector* convention of the notes ($XW$) and the
#   *column-vector* convention of the slides ($W\mathbf{x}$);
# - write batched products with broadcasting and `einsum`, with the shapes in your head;
# - count the floating-point operations of a product and compare what your machine achieves
#   with what it could achieve in theory.
#
# **Assumes**: Python and NumPy basics (arrays, slicing, `@`), and what a matrix is.
# **Core path**: about 26 minutes (sections marked core); the optional sections add about 16
# minutes, the exercises about 55.
# The optional quiz that ends the lesson takes about 17 minutes more.
#
# The chapter follows section 1.1 of the lecture notes {cite}`strabel2023transformers`,
# equations (1)–(3), and then goes further.

# %%
import matplotlib.pyplot as plt
import numpy as np

import course_lib.matmul.reference as ref
from course_lib import seed_everything
from course_lib.checker import check_prediction
from course_lib.matmul import exercises as check
from course_lib.matmul.cost import (
    estimate_peak,
    load_stored_sweep,
    matmul_flops,
    matmul_setups,
    steady_sweep,
)
from course_lib.measure import steady
from course_lib.plotting import heatmap, new_axes, use_style

rng = seed_everything(0)
use_style()
np.set_printoptions(precision=3, suppress=True)

# %% [markdown]
# Two modules hold the same functions under the same names: `ref` (NumPy, written to be read
# next to the equations) and `fast` (PyTorch, written to be batched and quick). `check` holds
# the exercise checkers. PyTorch is imported at the first cell that needs it, so the NumPy
# half of the chapter runs where it is not installed.

# %% [markdown]
# ## 1.1 The definition: one entry at a time (core, 5 min)
#
# Take $X \in \mathbb{R}^{n \times m}$ and $Y \in \mathbb{R}^{m \times k}$. The product
# $XY \in \mathbb{R}^{n \times k}$ is defined entry by entry
# {cite}`strabel2023transformers` (eq. 1):
#
# $$(XY)_{ij} = \sum_{l=1}^{m} X_{il} Y_{lj} = X_{i\cdot}\, Y_{\cdot j}.$$
#
# Entry $(i, j)$ is the dot product of **row $i$ of $X$** with **column $j$ of $Y$**. The
# shared index $l$ runs over the *inner* dimension $m$, which is why the number of columns of
# $X$ must equal the number of rows of $Y$. We will use one small example throughout:


# %%
def matmul_by_entries(X, Y):
    """Eq. (1): entry (i, j) is row i of X dotted with column j of Y."""
    n, m = X.shape
    k = Y.shape[1]
    out = np.zeros((n, k))  # (n, k)
    for i in range(n):
        for j in range(k):
            out[i, j] = sum(X[i, l] * Y[l, j] for l in range(m))  # the shared index l
    return out


X = np.array([[1.0, 2.0, 0.0], [0.0, 1.0, 3.0]])  # (n, m) = (2, 3)
Y = np.array([[1.0, 4.0], [2.0, 0.0], [1.0, 1.0]])  # (m, k) = (3, 2)

XY = matmul_by_entries(X, Y)  # (2, 2)
print(XY)

# %% [markdown]
# Check one entry by hand: row 0 of $X$ is $(1, 2, 0)$ and column 1 of $Y$ is $(4, 0, 1)$,
# so $(XY)_{01} = 1\cdot 4 + 2 \cdot 0 + 0 \cdot 1 = 4$. The function above is a double loop
# over $(i, j)$ with the sum over $l$ inside, exactly eq. (1). It is the library's NumPy
# reference, `course_lib.matmul.reference.matmul_entries`, and it equals NumPy's own `@`:

# %%
assert XY[0, 1] == 1 * 4 + 2 * 0 + 0 * 1 == 4
np.testing.assert_allclose(XY, X @ Y)
np.testing.assert_allclose(XY, ref.matmul_entries(X, Y))

# %% [markdown]
# Its PyTorch twin, `fast.matmul_entries`, computes the same numbers (the appendix, "How this
# chapter is tested", says what the twins add):

# %% tags=["needs-torch"]
import torch

import course_lib.matmul.accelerated as fast

XY_torch = fast.matmul_entries(torch.from_numpy(X), torch.from_numpy(Y))  # (2, 2)
np.testing.assert_allclose(XY, XY_torch.numpy())

# %% [markdown]
# ## 1.2 The column view: columns of $XY$ mix the columns of $X$ (core, 2 min)
#
# Fix a column $j$ of the result and collect eq. (1) over all rows $i$ at once
# {cite}`strabel2023transformers` (eq. 2):
#
# $$(XY)_{\cdot j} = \sum_{l=1}^{m} Y_{lj}\, X_{\cdot l}.$$
#
# Column $j$ of the product is a **linear combination of the columns of $X$**, and the
# weights are the entries of column $j$ of $Y$. So every column of $XY$ lies in the column
# space of $X$: multiplying on the right can never produce a direction that $X$'s columns do
# not already span.

# %%
j = 1
weights = Y[:, j]  # (m,) = (4, 0, 1)
column = sum(weights[l] * X[:, l] for l in range(X.shape[1]))  # (n,)
print("weights:", weights, " column 1 of XY:", column)
np.testing.assert_allclose(column, XY[:, j])
np.testing.assert_allclose(ref.matmul_columns(X, Y), X @ Y)

# %% [markdown]
# Column 1 of $XY$ is $4 \times$ (column 0 of $X$) $+\ 0 \times$ (column 1) $+\ 1 \times$
# (column 2) $= 4\,(1, 0) + (0, 3) = (4, 3)$.

# %% [markdown]
# ## 1.3 The row view: rows of $XY$ mix the rows of $Y$ (core, 2 min)
#
# The same move with a fixed row $i$ gives {cite}`strabel2023transformers` (eq. 3):
#
# $$(XY)_{i\cdot} = \sum_{l=1}^{m} X_{il}\, Y_{l\cdot}.$$
#
# Row $i$ of the product is a **linear combination of the rows of $Y$**, weighted by row $i$
# of $X$. This is the view to keep for attention (chapter 4): there $Y$ holds one *value*
# vector per row, $X$ holds attention weights that sum to one per row, and each output row is
# a weighted average of the value rows.

# %%
i = 0
row = sum(X[i, l] * Y[l, :] for l in range(X.shape[1]))  # (k,)
print("weights:", X[i], " row 0 of XY:", row)
np.testing.assert_allclose(row, XY[i, :])
np.testing.assert_allclose(ref.matmul_rows(X, Y), X @ Y)

# %% [markdown]
# Eqs. (2) and (3) are the same statement seen through a transpose: the rows of $XY$ are the
# columns of $(XY)^\top = Y^\top X^\top$, so the row view of $XY$ is the column view of
# $Y^\top X^\top$.

# %%
np.testing.assert_allclose(ref.matmul_rows(X, Y), ref.matmul_columns(Y.T, X.T).T)

# %% [markdown]
# ## 1.4 The outer-product view: a sum of rank-1 matrices (core, 8 min)
#
# The notes stop at eq. (3); a fourth reading completes the picture. Instead of fixing an
# entry, a column or a row, fix the inner index $l$. Column $l$ of $X$ (a vector of length
# $n$) times row $l$ of $Y$ (length $k$) is an $n \times k$ *outer product*, a matrix of rank
# at most one, and
#
# $$XY = \sum_{l=1}^{m} X_{\cdot l}\, Y_{l \cdot}.$$
#
# Each entry of the right-hand side is $\sum_l X_{il} Y_{lj}$, which is eq. (1) again. The
# inner dimension $m$ now counts *terms*: a product is a sum of as many rank-1 matrices as its
# inner dimension is long. One of the four readings carries a later chapter; an exercise below
# asks which.

# %%
terms = ref.outer_terms(X, Y)  # (m, n, k) = (3, 2, 2): one rank-1 matrix per l
print("rank of each term:", [int(np.linalg.matrix_rank(t)) for t in terms])
np.testing.assert_allclose(terms.sum(axis=0), X @ Y)
np.testing.assert_allclose(ref.matmul_outer(X, Y), X @ Y)

# %% [markdown]
# A picture of the same sum: three rank-1 matrices add up to $XY$. In each term every row is a
# multiple of one row of $Y$ and every column a multiple of one column of $X$. Term 0 has an
# empty second row because $X_{10} = 0$; term 1 has an empty second column because
# $Y_{11} = 0$.

# %%
fig, axes = plt.subplots(1, 4, figsize=(11, 2.8))
for l, ax in enumerate(axes[:3]):
    heatmap(
        ax,
        terms[l],
        title=f"term {l}: X[:, {l}] Y[{l}, :]",
        xlabel="column j",
        ylabel="row i",
        annotate=True,
        fmt="{:.0f}",
        colorbar=False,
        cmap="Blues",
    )
heatmap(
    axes[3],
    XY,
    title="sum = XY",
    xlabel="column j",
    ylabel="row i",
    annotate=True,
    fmt="{:.0f}",
    colorbar=False,
    cmap="Greens",
)
fig.suptitle("The outer-product view: XY is the sum of m = 3 rank-1 matrices")
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 1.5 Explore the four views (optional, 2 min)
#
# Choose a view and an index: the explorer highlights the parts of $X$ and $Y$ that produce
# the highlighted part of the result, and prints the formula. (On the website the explorer
# responds at a few precomputed settings; run the notebook to choose any.)

# %%
from course_lib.matmul.widget import explorer

explorer(X, Y)

# %% [markdown]
# Things to try: in the `column` view, move $j$ and watch all of $X$ stay highlighted (every
# column of $X$ may contribute); in the `outer` view, each term touches *every* entry of the
# result.

# %% [markdown]
# ## 1.6 Batches, broadcasting and `einsum` (core, 4 min)
#
# A Transformer never multiplies one matrix: it processes a **batch** of $B$ sequences of $L$
# tokens, each a vector of width $d$, so activations are tensors of shape $(B, L, d)$. A linear
# layer with weight $W \in \mathbb{R}^{d \times d_\text{out}}$ maps it with one `@`:
# the last dimension of the left operand meets the second-to-last of the right one, and
# every other (leading) dimension is a batch dimension that **broadcasts** (a missing or size-1
# dimension is repeated to match).

# %% tags=["needs-torch"]
Bsz, L, d, d_out = 2, 5, 8, 3
H = torch.randn(Bsz, L, d)  # (B, L, d): a batch of sequences of token vectors
W = torch.randn(d, d_out)  # (d, d_out): one weight matrix shared by every token
out = H @ W  # (B, L, d_out): W broadcast over B
print(tuple(out.shape))
# the same as applying W to each token separately
torch.testing.assert_close(out[1, 3], H[1, 3] @ W)

# %% [markdown]
# `einsum` names every dimension with a letter and says which ones are summed: letters that
# appear in the inputs but not in the output are summed over. It makes the shapes explicit,
# which is why attention code often uses it:

# %% tags=["needs-torch"]
out_einsum = torch.einsum("bld,de->ble", H, W)  # sum over d
torch.testing.assert_close(out_einsum, out)

Q = torch.randn(Bsz, L, d)
K = torch.randn(Bsz, L, d)
scores = torch.einsum("bid,bjd->bij", Q, K)  # (B, L, L): every query with every key
torch.testing.assert_close(scores, Q @ K.transpose(-2, -1))
print(tuple(scores.shape))

# %% [markdown]
# The second product is the heart of attention (chapter 4): for each sequence $b$, entry
# $(i, j)$ is the dot product of token $i$'s query with token $j$'s key. Note the shared batch
# letter `b`: it is carried through, not summed. Forgetting to share it (`"bid,cjd->bcij"`)
# would compare queries of one sequence with keys of *every* sequence.

# %% [markdown]
# ## 1.7 Two conventions: $XW$ (the notes) and $W\mathbf{x}$ (the slides) (core, 3 min)
#
# The notes store data as **rows**: $X \in \mathbb{R}^{L \times d}$ has one token per row and
# a layer computes $XW$ {cite}`strabel2023transformers`. The lecture slides store each object
# as a **column** vector $\mathbf{x}_i \in \mathbb{R}^{D}$ and write $\mathbf{k}_i =
# W^k \mathbf{x}_i$ with $W^k \in \mathbb{R}^{K \times D}$. The two are transposes of each
# other: $(W^k \mathbf{x}_i)^\top = \mathbf{x}_i^\top (W^k)^\top$, so the row-convention
# weight is $W = (W^k)^\top \in \mathbb{R}^{D \times K}$, and stacking the rows gives
# $K_\text{rows} = X (W^k)^\top$.

# %%
D, Kdim, M = 4, 3, 5
Wk = rng.standard_normal((Kdim, D))  # slides: K x D, acts on column vectors
Xrows = rng.standard_normal((M, D))  # notes: one object per row, (M, D)

keys_columns = np.stack([Wk @ Xrows[i] for i in range(M)], axis=1)  # (K, M): k_i as columns
keys_rows = Xrows @ Wk.T  # (M, K): k_i as rows
np.testing.assert_allclose(keys_rows, keys_columns.T)
print(keys_rows.shape, keys_columns.shape)

# %% [markdown]
# PyTorch's `torch.nn.Linear` stores its weight in the slides' orientation, `(out_features,
# in_features)`, and computes `x @ weight.T`: the column convention on paper, the row
# convention in memory. Copying weights between conventions is where layers silently go wrong;
# an exercise below has such a bug to find.

# %% tags=["needs-torch"]
lin = torch.nn.Linear(D, Kdim, bias=False, dtype=torch.float64)
with torch.no_grad():
    lin.weight.copy_(torch.from_numpy(Wk))  # (out, in) = (K, D)
np.testing.assert_allclose(lin(torch.from_numpy(Xrows)).detach().numpy(), keys_rows)

# %% [markdown]
# ## 1.8 What a product costs (optional, 14 min)
#
# Each of the $n k$ entries of $XY$ needs $m$ multiplications and $m - 1$ additions, so the
# exact count is $nk(2m - 1)$. Modern processors execute a **fused multiply-add** (FMA),
# $a \leftarrow a + bc$, as one instruction, and by convention it counts as two floating-point
# operations (FLOPs), giving the figure quoted everywhere:
#
# $$\text{FLOPs}(XY) = 2\,n\,m\,k.$$

# %%
n, m, k = 2, 3, 2
exact = n * k * (2 * m - 1)
print("exact:", exact, " convention 2nmk:", matmul_flops(n, m, k))
assert matmul_flops(1024, 1024, 1024) == 2 * 1024**3

# %% [markdown]
# A useful rule of thumb follows: a linear layer applied to $T$ tokens with a weight of $P$
# parameters costs $2PT$ FLOPs in the forward pass, because each weight is used in one
# multiply-add per token.
#
# How fast can a machine do them? The theoretical **peak** of one core is clock $\times$ FLOPs
# per cycle. A core with two FMA units, each working on a SIMD register of $w$ single-precision
# numbers, does $2 \times w \times 2$ FLOPs per cycle: 32 with AVX2 ($w = 8$), 64 with AVX-512
# ($w = 16$), half that in double precision. The estimate below reads the processor's features
# and clock from the operating system, so it is a **nominal** peak, good to an order of
# magnitude and no better: a virtual machine or a CPU with boost reports a clock below the one
# its cores run at (then real code can beat the "peak"), and cores that split 512-bit operations
# into two halves, or wait for memory, stay well below it.

# %% tags=["nbval-ignore-output"]
print(estimate_peak(cores=1).explain("float32"))  # this machine, one core
print(estimate_peak(cores=1).explain("float64"))

# %% [markdown]
# Now measure. The course ships one sweep, stored in `data/matmul_gflops.json` by
# `python -m course_lib.matmul.cost`: square $n \times n$ products timed for a pure-Python
# triple loop, two of the NumPy reference views, `np.matmul` and `torch.matmul`, in float32 and
# float64, on **one thread** (so that the numbers are per core, like the peak above). It ran on
# a machine shared with other jobs, so it timed each product by the CPU time of its thread,
# which leaves out the time spent waiting for a core; every point is the best of 7 interleaved
# rounds, and a point whose second-best round is more than 25% slower would be flagged
# "unsteady" (none is). GFLOP/s $= 2n^3 / t / 10^9$:

# %%
stored = load_stored_sweep()
machine = stored["machine"]
print(f"{machine['cpu']} ({machine['simd']}), {stored['threads']} thread, reported clock", end="")
print(f" {machine['ghz_reported']:.2f} GHz: nominal peak per core ", end="")
print(", ".join(f"{v:.0f} GFLOP/s in {d}" for d, v in machine["nominal_gflops"].items()))
sweep = {}  # implementation -> {n: GFLOP/s}
for r in stored["records"]:
    sweep.setdefault(r["implementation"], {})[r["n"]] = r["gflops"]
print("unsteady points:", [r["n"] for r in stored["records"] if not steady(r)] or "none")

# %%
fig, ax = new_axes(
    "Achieved GFLOP/s of an n x n product, one thread (the stored run)",
    "n (matrix size)",
    "GFLOP/s (log scale)",
    logx=True,
    logy=True,
    figsize=(7.5, 4.5),
)
for name, points in sweep.items():
    ax.plot(list(points), list(points.values()), marker="o", label=name)
for dtype, style in (("float32", "--"), ("float64", ":")):
    nominal = machine["nominal_gflops"][dtype]
    ax.axhline(nominal, color="grey", ls=style, lw=1, label=f"nominal {dtype} peak")
ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1, 0.5))
fig.tight_layout()
plt.show()

# %%
f32, f64 = sweep["np.matmul float32"], sweep["np.matmul float64"]  # {n: GFLOP/s}
ratios = ", ".join(f"{f32[n] / f64[n]:.1f}" for n in (512, 1024, 2048))
print("np.matmul, float32 / float64 at n = 512, 1024, 2048:", ratios)
loop = max(sweep["pure Python triple loop"].values())
print(f"best np.matmul float64 / best pure-Python loop: {max(f64.values()) / loop:,.0f}")
share = max(f32.values()) / machine["nominal_gflops"]["float32"]
print(f"best np.matmul float32 / nominal float32 peak: {share:.0%}")

# %% [markdown]
# What to notice in the stored run (another machine gives other numbers, the same shape):
#
# - **About three orders of magnitude** separate the pure-Python loop (each multiply-add is
#   several interpreted bytecodes and two boxed floats) from `np.matmul`: the best float64
#   product runs about 1,400 times as fast on the same core. The NumPy views sit in between:
#   they hand NumPy a whole row or outer product at a time, so the interpreter's cost is paid
#   $n$ or $n^2$ times rather than $n^3$ times.
# - `np.matmul` and `torch.matmul` call an optimised BLAS. Small products are dominated by
#   fixed overheads (a call costs a few microseconds), so GFLOP/s rises with $n$ until the
#   arithmetic fills the core, and from $n \approx 256$ it levels off: that plateau is the
#   **practical peak**. Here it is *above* the nominal one (about 118% in float32), most likely
#   because the clock the system reports is below the one the core runs at (boost). BLAS
#   libraries reach the plateau by blocking the product into tiles that fit in cache and registers
#   {cite}`goto2008anatomy`: a product does $2n^3$ FLOPs on $3n^2$ numbers, so each number
#   loaded can be reused about $n$ times: its *arithmetic intensity* grows with $n$, which is
#   what lets a large product run at the compute roof rather than the memory roof of the
#   roofline model {cite}`williams2009roofline`.
# - **float32 runs about twice as fast as float64** on the plateau (2.1 to 2.2 times): a SIMD
#   register holds twice as many float32 numbers, so each instruction does twice the work.
#   This is the first reason Transformers are trained in low precision (chapter 12).
#
# On your own machine, the cell below measures a few sizes live, on all the threads your
# libraries use and by the wall clock (what you wait for). On a laptop running other programs
# the numbers move from run to run; the unsteady ones are flagged.

# %% tags=["needs-torch", "nbval-ignore-output", "remove-output"]
live = steady_sweep(matmul_setups(["cpu"], with_slow=False), [64, 512], rounds=3)
for r in live:
    flag = "" if steady(r) else "  (unsteady: rerun on a quieter machine)"
    print(f"{r['implementation']:28} n = {r['n']:4d}: {r['gflops']:7.1f} GFLOP/s{flag}")

# %% [markdown]
# ## 1.9 What the notes get right, and what they leave out (core, 2 min)
#
# Equations (1)–(3) of the notes are correct as printed, and every one is checked above.
# Two things they leave implicit are worth saying. First, eq. (1) writes an entry as
# $X_{i\cdot} Y_{\cdot j}$, a $1 \times m$ row times an $m \times 1$ column: a $1 \times 1$
# matrix, the inner product. The same two kinds of vector in the other order, a column of $X$
# times a row of $Y$, give the $n \times k$ rank-1 matrices of section 1.4, a reading the notes
# never use. Second, the notes use the row convention ($XW$)
# while the slides use the column convention ($W\mathbf{x}$) without saying so; section 1.7
# shows the translation. The later chapters follow the notes' row convention throughout.

# %% [markdown]
# ## Exercises
#
# Two functions to write and a bug to find, each with a checker that runs your code on several
# inputs, edge cases included, and tells you what is wrong; then a prediction, a question in
# words and a stretch problem. The cells with a checker start with a stub that raises
# `NotImplementedError`; replace its body and run the cell. Solutions are folded below each
# exercise (on the website) or in cells tagged `solution` (in the notebook).
#
# ```{exercise} The product from outer products
# :label: ex-matmul-outer
#
# Write `outer_matmul(X, Y)` that computes $XY$ **only** with `np.outer` and addition, as the
# sum over $l$ of column $l$ of $X$ times row $l$ of $Y$ (section 1.4). It must work for any
# compatible shapes, including an inner dimension of 1.
# ```


# %%
def outer_matmul(X, Y):
    raise NotImplementedError  # your code here


check.outer_product_sum(outer_matmul)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-matmul-outer
# :class: dropdown
# ```


# %% tags=["solution"]
def outer_matmul(X, Y):
    X, Y = np.asarray(X, dtype=float), np.asarray(Y, dtype=float)
    out = np.zeros((X.shape[0], Y.shape[1]))
    for l in range(X.shape[1]):
        out += np.outer(X[:, l], Y[l, :])
    return out


check.outer_product_sum(outer_matmul, require=True)

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Find the bug: weights copied into nn.Linear
# :label: ex-matmul-debug
#
# A colleague moves a layer written in the notes' convention, $y = xW$ with $W$ of shape
# $(d_\text{in}, d_\text{out})$, into PyTorch. `notes_to_linear(W)` returns the array they copy
# into `torch.nn.Linear(d_in, d_out).weight`. Their test used a square, symmetric $W$ and
# passed; with the real weights the layer computes something else. Run the cell, find the bug,
# and write the fixed function as `to_linear_weight(W)` (a NumPy array in, a NumPy array out).
# The checker applies your weight the way `nn.Linear` does, `x @ weight.T`, and compares it with
# `x @ W`.
# ```


# %%
def notes_to_linear(W):
    d_in, d_out = W.shape
    return W.reshape(d_out, d_in)  # nn.Linear stores (out_features, in_features)


x_demo = rng.standard_normal((5, 3))  # (B, d_in)
W_sym = np.array([[2.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 4.0]])  # their test: symmetric
for W_demo in (W_sym, rng.standard_normal((3, 4))):  # (d_in, d_out)
    weight = notes_to_linear(W_demo)  # (d_out, d_in)
    same = np.allclose(x_demo @ weight.T, x_demo @ W_demo)
    print(f"W of shape {W_demo.shape}: weight {weight.shape}, x @ weight.T == x @ W: {same}")


def to_linear_weight(W):
    raise NotImplementedError  # your code here


check.linear_weight(to_linear_weight)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-matmul-debug
# :class: dropdown
# ```


# %% tags=["solution"]
def to_linear_weight(W):
    return np.asarray(W).T.copy()  # (d_out, d_in): nn.Linear computes x @ weight.T = x @ W


check.linear_weight(to_linear_weight, require=True)

# %% [markdown] tags=["solution"]
# `reshape` keeps the numbers in their memory order and cuts them into rows of a new length;
# only a transpose swaps the roles of the two axes. So the colleague's weight has the right
# shape and the wrong entries. Their test could not see it: for a square $W$ the reshape returns
# $W$ itself, and for a *symmetric* $W$, $W = W^\top$, so `x @ W.T` equals `x @ W` whatever the
# bug. Test conversions on a non-square matrix with distinct entries (and on a non-symmetric
# square one): both bugs a copy can carry, a reshape and a forgotten transpose, show there.
#
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} The FLOPs of a linear layer
# :label: ex-matmul-flops
#
# A linear layer computes $XW + b$ for activations $X$ of shape $(\text{batch}, \text{seq\_len},
# d_\text{in})$, a weight $W$ of shape $(d_\text{in}, d_\text{out})$ and a bias $b$ of length
# $d_\text{out}$. Write `linear_flops(batch, seq_len, d_in, d_out)` returning the number of
# FLOPs of the forward pass as an `int`, counting a multiply-add as two FLOPs and each bias
# addition as one. Then use it: how many GFLOPs does the first feed-forward layer of GPT-2
# small ($d_\text{in} = 768$, $d_\text{out} = 3072$) cost for one sequence of 1024 tokens?
# ```


# %%
def linear_flops(batch, seq_len, d_in, d_out):
    raise NotImplementedError  # your code here


check.layer_flops(linear_flops)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-matmul-flops
# :class: dropdown
# ```


# %% tags=["solution"]
def linear_flops(batch, seq_len, d_in, d_out):
    tokens = batch * seq_len
    return 2 * tokens * d_in * d_out + tokens * d_out  # multiply-adds + bias


print(
    "GPT-2 small, first FFN layer, 1024 tokens:",
    f"{linear_flops(1, 1024, 768, 3072) / 1e9:.2f} GFLOPs",
)
check.layer_flops(linear_flops, require=True)

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Predict, then check: the shape of a batched product
# :label: ex-matmul-predict
#
# Before running the cell, write down the shape of `A @ B` for `A` of shape (4, 1, 5, 3) and
# `B` of shape (2, 3, 6), as a tuple. Then run it.
# ```

# %%
prediction = None  # your prediction here, e.g. (1, 2, 3)
shape = (np.ones((4, 1, 5, 3)) @ np.ones((2, 3, 6))).shape
check_prediction(prediction, shape, what="the shape", explanation=check.WHY_SHAPE)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-matmul-predict
# :class: dropdown
# ```

# %% tags=["solution"]
prediction = (4, 2, 5, 6)  # the last two dimensions multiply: (5, 3) @ (3, 6) -> (5, 6);
# the batch dimensions (4, 1) and (2,) broadcast, aligned from the right, to (4, 2)
assert check_prediction(prediction, shape, what="the shape", explanation=check.WHY_SHAPE).passed

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Which view explains a low-rank update?
# :label: ex-matmul-concept
#
# Chapter 13 adapts a frozen weight $W$ ($d \times d$) by adding $BA$ with $B$ of shape
# $d \times r$ and $A$ of shape $r \times d$, $r \ll d$. Which of the four views of a product
# shows at once that $BA$ has rank at most $r$, and how many numbers does the update store
# compared with a full $d \times d$ matrix?
# ```

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-matmul-concept
# :class: dropdown
# ```
#
# The outer-product view (section 1.4): $BA = \sum_{l=1}^{r} B_{\cdot l} A_{l \cdot}$, a sum of $r$
# rank-1 matrices, and a sum of $r$ rank-1 matrices has rank at most $r$. The update stores
# $2dr$ numbers instead of $d^2$: for $d = 4096$ and $r = 8$, 65,536 instead of 16,777,216, a
# factor of 256.
#
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Stretch: the cheapest order of a chain of products
# :label: ex-matmul-stretch
#
# $(AB)C = A(BC)$, but the two orders need different numbers of FLOPs. For $A$ of shape
# $10 \times 1000$, $B$ of $1000 \times 10$ and $C$ of $10 \times 1000$, compute both costs with
# `matmul_flops`. Then write `cheapest_chain(shapes)` that, for a chain of matrices given by
# their shapes, returns the smallest number of FLOPs over all orders (dynamic programming over
# sub-chains, $O(n^3)$ for $n$ matrices).
# ```

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-matmul-stretch
# :class: dropdown
# ```

# %% tags=["solution"]
print("(AB)C:", matmul_flops(10, 1000, 10) + matmul_flops(10, 10, 1000))
print("A(BC):", matmul_flops(1000, 10, 1000) + matmul_flops(10, 1000, 1000))


def cheapest_chain(shapes):
    dims = [shapes[0][0]] + [s[1] for s in shapes]  # matrix i is dims[i] x dims[i + 1]
    n = len(shapes)
    best = [[0] * n for _ in range(n)]  # best[i][j]: cheapest product of matrices i..j
    for span in range(1, n):
        for i in range(n - span):
            j = i + span
            best[i][j] = min(
                best[i][s] + best[s + 1][j] + matmul_flops(dims[i], dims[s + 1], dims[j + 1])
                for s in range(i, j)
            )
    return best[0][n - 1]


assert cheapest_chain([(10, 1000), (1000, 10), (10, 1000)]) == 400_000

# %% [markdown] tags=["solution"]
# Grouping as $(AB)C$ costs 400,000 FLOPs, as $A(BC)$ 40,000,000: a factor of 100 from where
# the brackets go. Attention meets the same choice: $(QK^\top)V$ is the only order that allows
# the softmax in between, and linear-attention methods regroup it as $Q(K^\top V)$ precisely to
# avoid the $L \times L$ matrix.
#
# ```{solution-end}
# ```

# %% [markdown]
# ## Summary
#
# - $(XY)_{ij}$ is the dot product of row $i$ of $X$ and column $j$ of $Y$ (eq. 1).
# - Columns of $XY$ are combinations of the columns of $X$ (eq. 2); rows of $XY$ are
#   combinations of the rows of $Y$ (eq. 3): the view behind attention's weighted averages.
# - $XY$ is a sum of $m$ rank-1 outer products: the view behind low-rank adaptation
#   (chapter 13).
# - Leading dimensions are batch dimensions and broadcast; `einsum` names every dimension.
# - The notes write $XW$ with tokens as rows; the slides write $W\mathbf{x}$ with column
#   vectors; `torch.nn.Linear` stores $W$ as (out, in) and computes $xW^\top$.
# - A product costs $2nmk$ FLOPs. Optimised BLAS reaches the core's practical peak from
#   $n \approx 256$ on (the nominal estimate from clock and SIMD width is only an order of
#   magnitude), about twice as fast in float32 as in float64; a pure-Python loop is over a
#   thousand times slower (1,360 times in the stored run).

# %% [markdown]
# ## Quiz (optional, 17 min)
#
# Test yourself on this chapter's sections: multiple choice and numeric questions, each
# naming the section it tests. Choose or type an answer and check it: the quiz says whether it
# is right and why, for the wrong options too. The cell below needs nothing from the cells
# above it, so it also runs on its own when you come back to the chapter.

# %%
from course_lib import quiz

quiz.show("01_matmul")

# %% [markdown]
# ## References
#
# - G. Strabel, *Transformers*, lecture notes, 2023, section 1.1 {cite}`strabel2023transformers`.
# - K. Goto and R. van de Geijn, "Anatomy of high-performance matrix multiplication", *ACM
#   Transactions on Mathematical Software* 34(3), 2008 {cite}`goto2008anatomy`.
# - E. Hu et al., "LoRA: Low-rank adaptation of large language models", 2021
#   {cite}`hu2021lora`.
# - S. Williams, A. Waterman and D. Patterson, "Roofline: an insightful visual performance
#   model for multicore architectures", *Communications of the ACM* 52(4), 2009
#   {cite}`williams2009roofline`.
#
# The full bibliography of the course is on the [References](../book/references.md) page.

# %% [markdown]
# ## How this chapter is tested
#
# `tests/test_matmul.py` checks each view against hand-derived values and `@`, the FLOP counts
# and the peak estimate on synthetic `/proc/cpuinfo` texts, the widget's pure functions, and the
# exercise checkers against their solutions; `tests/test_conformance.py` runs the NumPy
# reference and the PyTorch twin of every view on random shapes in float64, float32, float16 and
# bfloat16, checks their signatures and runs `gradcheck`; `python -m benchmarks.run matmul`
# measures GFLOP/s up to $n = 8192$, and `python -m course_lib.matmul.cost` remakes the stored
# sweep of section 1.8 (`data/matmul_gflops.json`, one thread, CPU time; `data/README.md`).

# %% [markdown]
# The NumPy functions above are written to be read. Their PyTorch twins in
# `course_lib.matmul.accelerated` have the same names and signatures but work on **stacks**
# of matrices (any number of leading batch dimensions, broadcast like `@`), on any device, in
# the input's dtype, and with autograd. Each one vectorises the dimensions its view does not
# single out, so the Python loop that remains is the one the equation names.

# %% tags=["needs-torch"]
from course_lib import device_for, get_device

device = get_device()
dev64 = device_for(torch.float64)  # float64 stays on the CPU on Apple MPS (no float64 there)
Xb = torch.randn(4, 2, 5, 3, dtype=torch.float64, device=dev64)  # (B1, B2, n, m)
Yb = torch.randn(3, 6, dtype=torch.float64, device=dev64)  # (m, k), broadcast over the batch
for name in ("matmul_entries", "matmul_columns", "matmul_rows", "matmul_outer"):
    out = getattr(fast, name)(Xb, Yb)  # (4, 2, 5, 6)
    torch.testing.assert_close(out, Xb @ Yb)
print("shape:", tuple(out.shape), " dtype:", out.dtype)

# %% [markdown]
# The two sides agree on the same inputs. The test suite does this for every function,
# on hundreds of random shapes drawn by hypothesis, in float64, float32, float16 and bfloat16
# (`tests/test_conformance.py`); here is one case by hand:

# %% tags=["needs-torch"]
A = rng.standard_normal((3, 4))
B = rng.standard_normal((4, 2))
for name in ("matmul_entries", "matmul_columns", "matmul_rows", "matmul_outer", "outer_terms"):
    np.testing.assert_allclose(
        getattr(fast, name)(torch.from_numpy(A), torch.from_numpy(B)).numpy(),
        getattr(ref, name)(A, B),
        rtol=1e-12,
    )
print("NumPy reference and PyTorch agree on all five functions")

# %% [markdown]
# Bad input gets an error that says what is wrong, not a stack trace from inside a library:

# %%
try:
    ref.matmul_rows(np.ones((2, 3)), np.ones((4, 5)))
except ValueError as err:
    print("ValueError:", err)
