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

    course_lib.colab.setup("12_number_formats_quantisation")

# %% [markdown]
# # 12. Quantisation: int8 and NF4 (number formats, part 2)
#
# Part 1, [`12_number_formats`](12_number_formats.ipynb), took the float formats apart and showed
# how they round. A float spends bits on an exponent so that it can hold numbers of any size;
# the weights of a trained layer do not need that, because they sit in a narrow range around
# zero. **Quantisation** stores each weight as a small integer code and keeps one floating-point
# scale per block of weights: 8 bits a weight with absmax int8, 4 with NF4, the data type of
# QLoRA, which chapter 13 fine-tunes through. The lecture notes name QLoRA but leave its section
# (11.2) an empty heading; this part fills it in.
#
# **After this chapter you can**
#
# - quantise a weight matrix to absmax int8 with one scale per block, explain why per-block
#   scales contain outliers, and why the arithmetic must not be done in bfloat16;
# - derive the 16 levels of NF4 from the quantiles of a normal distribution, reproduce the
#   published code book and bitsandbytes' packed bytes, and quantise a block to NF4 codes;
# - count the memory per parameter of each scheme, scales and double quantisation included, and
#   compare their errors on random and on trained weights.
#
# **Assumes**: part 1 of this chapter (the float formats and rounding to nearest) and a little
# probability (a normal distribution's quantiles).
# **Core path**: about 56 minutes, two exercises included; every section is core (the optional
# sections add about 0 minutes), and the exercises at the end take about 20 more.
# The optional quiz that ends the lesson takes about 17 minutes more.

# %%
import matplotlib.pyplot as plt
import numpy as np
import torch

import course_lib.number_formats.accelerated as fast
import course_lib.number_formats.reference as ref
from course_lib import seed_everything
from course_lib.checker import check_prediction
from course_lib.number_formats import exercises as check
from course_lib.plotting import PALETTE, new_axes, use_style

seed_everything(0)
gen = torch.Generator().manual_seed(0)
use_style()
np.set_printoptions(precision=6, suppress=False)

# %% [markdown]
# As in part 1, `ref` holds the NumPy references and `fast` their PyTorch twins (same names and
# signatures).
#
#
# Storing weights in fewer bits than any float format needs a different idea: keep a small
# integer **code** per weight and one floating-point **scale** per group of weights.
#
# ## 12.10 Absmax int8 (core, 20 min)
#
# The simplest scheme maps the largest magnitude of a group to the largest integer
# {cite}`dettmers2022llmint8`. For a group (a *block*) of weights $w_1, \dots, w_B$ and $b$-bit
# signed codes,
#
# $$s = \frac{\max_i |w_i|}{2^{b-1} - 1}, \qquad q_i = \operatorname{round}\Big(\frac{w_i}{s}\Big)
# \in \{-127, \dots, 127\}, \qquad \hat w_i = s\, q_i, \qquad \text{(12.6)}$$
#
# so each weight is off by at most $s/2$. With one scale for the whole tensor, a single large
# weight (an *outlier*) inflates $s$ for everybody; with one scale per block of $B = 64$
# consecutive weights, only its own block suffers {cite}`dettmers2022optimizers`.
#
# The library converts each block to float32 before it computes the scale and the codes (so does
# bitsandbytes), whatever the weights' own format is; the exercise below asks why. A matrix of a
# million weights of a typical scale, and the same matrix with 16 of them replaced by outliers of
# 1.0:

# %% tags=["needs-torch", "worksheet"]
W = 0.02 * torch.randn(1024, 1024, generator=gen)  # (d_out, d_in), typical weight scale
W_out = W.clone()
W_out.view(-1)[torch.randperm(W.numel(), generator=gen)[:16]] = 1.0  # 16 outliers
print(f"{'':<24}{'per tensor':>12}{'per block of 64':>17}")
for label, M in (("no outliers", W), ("16 outliers of 1.0", W_out)):
    errs = []
    for block in (None, 64):
        q, scale = fast.absmax_quantize(M, block_size=block)
        M_hat = fast.absmax_dequantize(q, scale, block_size=block)
        step = scale.repeat_interleave(64 if block else M.numel())[: M.numel()].view(M.shape)
        assert ((M - M_hat).abs() <= step / 2 + 1e-9).all()  # at most half a step each
        errs.append(((M - M_hat).pow(2).mean().sqrt() / W.std()).item())
    print(f"{label:<24}{errs[0]:>12.2%}{errs[1]:>17.2%}")
    assert errs[1] < errs[0]

# %% [markdown]
# The numbers are the root-mean-square error relative to the weights' standard deviation. Without
# outliers int8 is accurate either way. With 16 outliers among a million weights, the per-tensor
# scale becomes $1/127$, coarser than most weights, and the error grows tenfold;
# per block, only the 16 blocks that hold an outlier are affected.

# %% [markdown]
# The explorer below stores a smaller matrix (65,536 weights of the same scale) with each scheme
# at each block size, with or without outliers. Things to try: int8 with one scale for the whole
# matrix, then 16 outliers (one ordinary weight in six becomes 0; in int4, nearly all of them);
# the same with blocks of 64; int4 and NF4 at blocks of 16, 64 and 256, where smaller blocks cost
# more bits for the scales and buy a smaller error. (On the website it responds for every
# setting.)

# %%
from course_lib.number_formats.quantisation_widget import explorer

explorer("NF4", 64, 16)


# %% [markdown] tags=["worksheet"]
# ```{exercise} Find the bug: absmax int8 of bfloat16 weights
# :label: ex-formats-bug-int8
#
# Weights are often stored in bfloat16. `absmax_int8_bf16` below applies eq. (12.6) to a bfloat16
# tensor as it comes, and a test compares its codes with the nearest integers to the exact
# quotients $w_i / s$ (computed in float64 from the same bfloat16 values). Run it: what share of
# the codes is wrong, and why? Then write `absmax_int8(W, block_size)`: `W` is a 1-D bfloat16
# tensor whose length is a multiple of `block_size`; return `(q, scale)`, the codes (one per
# weight, integers) and one scale per block, $\max_i |w_i| / 127$, kept in float32. A block of
# zeros gets scale 0 and codes 0.
# ```


# %% tags=["needs-torch", "worksheet"]
def absmax_int8_bf16(W, block_size):
    """Eq. (12.6), applied to a bfloat16 tensor as it comes."""
    blocks = W.view(-1, block_size)  # (n_blocks, B), bfloat16
    scale = blocks.abs().amax(dim=1, keepdim=True) / 127  # (n_blocks, 1), bfloat16
    return torch.round(blocks / scale).view(-1), scale.view(-1)


W16 = (0.02 * torch.randn(64 * 1024, generator=gen)).to(torch.bfloat16)  # (n,) bfloat16 weights
exact = W16.double().view(-1, 64)  # the same numbers, exactly, in float64
quotients = exact / (exact.abs().amax(dim=1, keepdim=True) / 127)  # exact w / s, (n_blocks, 64)


def share_wrong(q):  # codes farther than half a step (and a little rounding) from w / s
    return ((q.double().view(-1, 64) - quotients).abs() > 0.5 + 1e-4).double().mean().item()


q_bug, _ = absmax_int8_bf16(W16, 64)
print(f"codes that are not the nearest integer: {share_wrong(q_bug):.0%}")  # varies a little by CPU


def absmax_int8(W, block_size):
    raise NotImplementedError  # your code here


check.absmax_int8_in_float32(absmax_int8)


# %% [markdown] tags=["solution"]
# ```{solution-start} ex-formats-bug-int8
# :class: dropdown
# ```
#
# The arithmetic happens in bfloat16. The scale $s$ is rounded to 8 significant bits, and so is
# every quotient $w_i / s$ *before* `round` sees it: near the top of the range, where the codes
# are in the hundreds, neighbouring bfloat16 numbers are 0.5 or 1 apart, so the quotient is
# already off by up to half a code when it is rounded to an integer (and one can even reach 128,
# beyond int8). Convert each block to float32 first; the quotients are then accurate to about
# $10^{-7}$ relative, and keep the scales in float32 too (a bfloat16 scale would put every weight
# of the block off by up to $2^{-9}$ of itself). bitsandbytes does the same.


# %% tags=["needs-torch", "solution"]
def absmax_int8(W, block_size):
    blocks = W.float().view(-1, block_size)  # (n_blocks, B): float32 from here on
    scale = blocks.abs().amax(dim=1) / 127  # (n_blocks,), float32
    safe = torch.where(scale > 0, scale, 1.0)  # a block of zeros divides by 1, not 0
    q = torch.round(blocks / safe[:, None]).to(torch.int8)  # ties to even, as torch.round does
    return q.view(W.shape), scale


q_ok, _ = absmax_int8(W16, 64)
print(f"computed in float32: {share_wrong(q_ok):.0%} of the codes are not the nearest integer")
check.absmax_int8_in_float32(absmax_int8, require=True)

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ## 12.11 NF4: four bits placed where normal weights are (core, 23 min)
#
# Four bits give 16 codes. Absmax int4 spaces its 15 levels evenly, but trained weights are
# roughly normally distributed, so most of them sit near zero and the outer levels are rarely used.
# **4-bit NormalFloat** (NF4), the data type of QLoRA {cite}`dettmers2023qlora`, places the
# levels at quantiles of the standard normal distribution $\Phi$, so that each level is used
# about equally often. The published code book comes from bitsandbytes' `create_normal_map`: 8
# positive levels at the quantiles $\Phi^{-1}(p)$ for 8 probabilities $p$ evenly spaced from
# $\delta = 0.9677083$ down to $\tfrac12$ (excluded), 7 negative levels the same way, an exact zero,
# and everything divided by the largest, so the levels span $[-1, 1]$:
#
# $$\ell^{+}_j = \Phi^{-1}\Big(\delta - j\,\frac{\delta - 1/2}{8}\Big),\; j = 0..7, \qquad
# \ell^{-}_j = -\Phi^{-1}\Big(\delta - j\,\frac{\delta - 1/2}{7}\Big),\; j = 0..6, \qquad
# \text{NF4} = \frac{\{\ell^-\} \cup \{0\} \cup \{\ell^+\}}{\Phi^{-1}(\delta)}. \qquad
# \text{(12.7)}$$
#
# Some cut-off $\delta < 1$ is needed because the quantile at probability 1 is infinite. The value
# used equals $1 - \tfrac12(\tfrac1{30} + \tfrac1{32})$ rounded to 7 decimals: the mean of the
# centres $1 - \tfrac1{30}$ and $1 - \tfrac1{32}$ of the outermost of 15 and of 16 equal-probability
# bins. The asymmetry (8 positive levels, 7 negative) buys an exact zero. Both sides of the library
# compute the code book; we check them against the 16 values published with QLoRA (typed in below,
# from the paper's appendix and bitsandbytes):

# %%
PUBLISHED_NF4 = [
    float(v)
    for v in """
-1.0 -0.6961928009986877 -0.5250730514526367 -0.39491748809814453
-0.28444138169288635 -0.18477343022823334 -0.09105003625154495 0.0
0.07958029955625534 0.16093020141124725 0.24611230194568634 0.33791524171829224
0.44070982933044434 0.5626170039176941 0.7229568362236023 1.0
""".split()
]  # the 16 levels as printed in the paper, four to a line
levels = ref.nf4_codebook()  # (16,) float64, eq. (12.7)
print(np.round(levels, 3))
np.testing.assert_allclose(levels, PUBLISHED_NF4, rtol=0, atol=2.0**-23)  # float32 precision

# %% tags=["needs-torch"]
assert torch.equal(fast.nf4_codebook(), torch.tensor(PUBLISHED_NF4, dtype=torch.float32))

# %% [markdown]
# The float64 reference agrees with the published values to within $2^{-23}$, one float32 step
# just below 1. The PyTorch side follows bitsandbytes' arithmetic exactly (the probabilities
# computed in float32, the levels stored in float32) and reproduces the published float32 values
# bit for bit.
#
# To quantise a block, divide it by its absmax (so it lies in $[-1, 1]$) and replace each value by
# the index of the nearest level. The picture compares the levels with those of absmax int4 over
# the distribution of one block's normalised weights:

# %% tags=["needs-torch"]
int4_levels = np.arange(-7, 8) / 7  # absmax int4: 15 evenly spaced levels
block = W.view(-1, 64)  # (n_blocks, 64)
normalised = (block / block.abs().amax(dim=1, keepdim=True)).numpy().ravel()
fig, ax = new_axes(
    "Where the 4-bit levels sit (weights normalised by their block's absmax)",
    "normalised weight",
    "density",
    figsize=(8, 4),
)
ax.hist(normalised, bins=120, density=True, color="#cccccc", label="normalised weights")
ax.vlines(levels, 0, 1.15, color="#0072B2", lw=1.5, label="NF4 levels")
ax.vlines(int4_levels, 0, 0.55, color="#D55E00", lw=1.5, ls="--", label="int4 levels")
ax.legend(fontsize=8, loc="upper right")
fig.tight_layout()
plt.show()

# %% [markdown]
# NF4's levels crowd where the weights are; int4 wastes levels on the tails.
#
# This is the NF4 that QLoRA runs: on the same weights, bitsandbytes' own `quantize_4bit`
# (which runs on the CPU too) produces the very same packed bytes and scales as
# `fast.nf4_quantize` followed by `fast.pack_4bit`:

# %% tags=["needs-torch"]
import logging

# bitsandbytes logs a notice about optional kernels on some CPUs only: keep outputs machine-free
logging.getLogger("bitsandbytes").setLevel(logging.ERROR)
import bitsandbytes.functional as bnb

packed_bnb, state = bnb.quantize_4bit(W, blocksize=64, quant_type="nf4", compress_statistics=False)
codes, absmax = fast.nf4_quantize(W, block_size=64)
assert torch.equal(fast.pack_4bit(codes).reshape(-1), packed_bnb.reshape(-1))
assert torch.equal(absmax, state.absmax)
print("bitsandbytes and course_lib: identical NF4 codes and scales for", W.numel(), "weights")

# %% [markdown] tags=["worksheet"]
# ```{exercise} NF4 codes
# :label: ex-formats-nf4
#
# This section described NF4 quantisation in words: divide each block by its absmax, so that it
# lies in $[-1, 1]$, and replace each value by the index of the nearest of the 16 levels. Write
# `nf4_codes(W, block_size)` with NumPy for a 1-D array `W` whose length is a multiple of
# `block_size`. Return `(codes, absmax)`: the codes (integers 0 to 15, one per weight; on an exact
# tie take the lower level) and the absmax of each block. `levels = ref.nf4_codebook()` gives the
# 16 levels in increasing order. A block of zeros has absmax 0; its values are 0, the level with
# index 7. The checker compares with the library, which matches bitsandbytes.
# ```

# %% tags=["worksheet"]
levels = ref.nf4_codebook()  # (16,), increasing, levels[7] == 0


def nf4_codes(W, block_size):
    raise NotImplementedError  # your code here


check.nf4_codes(nf4_codes)


# %% [markdown] tags=["solution"]
# ```{solution-start} ex-formats-nf4
# :class: dropdown
# ```


# %% tags=["solution"]
def nf4_codes(W, block_size):
    blocks = np.asarray(W, dtype=float).reshape(-1, block_size)  # (n_blocks, B)
    absmax = np.abs(blocks).max(axis=1)  # (n_blocks,)
    x = blocks / np.where(absmax > 0, absmax, 1.0)[:, None]  # in [-1, 1]
    codes = np.abs(x[..., None] - levels).argmin(axis=-1)  # (n_blocks, B): the lower on a tie
    return codes.reshape(-1), absmax


check.nf4_codes(nf4_codes, require=True)


# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ## 12.12 Double quantisation, and the memory per parameter (core, 13 min)
#
# A float32 scale per block of 64 weights costs $32/64 = 0.5$ extra bits per weight. QLoRA's
# **double quantisation** quantises these scales too: subtract their mean, then quantise them to
# 8 bits in blocks of 256, which costs $8/64 + 32/(64 \cdot 256) \approx 0.127$ bits per weight
# {cite}`dettmers2023qlora`. (QLoRA, and bitsandbytes with `compress_statistics=True`, store the
# second level in an 8-bit *dynamic* float code with one float32 scale per 256 scales; we use absmax
# int8 from above, which takes the same memory but is another format, so the second-level bytes
# differ from bitsandbytes' while the 4-bit codes of the weights are the same.) Finally the codes
# are stored two per byte.


# %% tags=["slides-skip", "needs-torch", "worksheet"]
def nf4_double_quant(M: torch.Tensor, block: int = 64) -> tuple[torch.Tensor, float]:
    """NF4 with double-quantised scales: returns (dequantised M, bits per parameter)."""
    codes, absmax = fast.nf4_quantize(M, block_size=block)
    packed = fast.pack_4bit(codes)  # (d_out, d_in / 2) bytes
    offset = absmax.mean()
    q2, scale2 = fast.absmax_quantize(absmax - offset, block_size=256)  # int8 scales
    bits_used = 8 * (packed.numel() + q2.numel()) + 32 * (scale2.numel() + 1)
    absmax_hat = fast.absmax_dequantize(q2, scale2, block_size=256) + offset
    M_hat = fast.nf4_dequantize(fast.unpack_4bit(packed), absmax_hat, block_size=block)
    return M_hat, bits_used / M.numel()


def compare_schemes(M: torch.Tensor) -> list[tuple[str, float, float]]:
    """(scheme, bits per parameter, RMS error / std of M) for each way of storing M."""
    n, rows = M.numel(), []

    def add(name: str, M_hat: torch.Tensor, bits: float) -> None:
        rows.append((name, bits, ((M - M_hat).pow(2).mean().sqrt() / M.std()).item()))

    add("bfloat16", fast.round_to_format(M, "bfloat16"), 16)
    add("float16", fast.round_to_format(M, "float16"), 16)
    s = M.abs().max() / 448  # float8 E4M3 with one float32 scale per tensor
    add("float8_e4m3fn, tensor scale", fast.round_to_format(M / s, "float8_e4m3fn") * s, 8 + 32 / n)
    for label, block, b in (
        ("int8, per tensor", None, 8),
        ("int8, blocks of 64", 64, 8),
        ("int4, blocks of 64", 64, 4),
    ):
        q, scale = fast.absmax_quantize(M, block_size=block, bits=b)
        add(label, fast.absmax_dequantize(q, scale, block_size=block), b + 32 * scale.numel() / n)
    codes, absmax = fast.nf4_quantize(M, block_size=64)
    add("NF4, blocks of 64", fast.nf4_dequantize(codes, absmax, block_size=64), 4 + 32 / 64)
    add("NF4 + double quantisation", *nf4_double_quant(M))
    return rows


def kurtosis(M: torch.Tensor) -> float:
    """E[(w - mean)^4] / std^4: 3 for a normal distribution, more for heavier tails."""
    z = M.double().flatten() - M.double().mean()
    return (z.pow(4).mean() / z.pow(2).mean().square()).item()


from course_lib.gpt.pretrained import load_pretrained  # chapter 8's trained model

gpt, _ = load_pretrained()
W_real = torch.cat([getattr(b, n).detach().reshape(-1) for b in gpt.blocks for n in ("w_1", "w_2")])
W_real = W_real.view(512, 1024)  # the feed-forward weights of its 4 blocks, 524,288 numbers
rows = {"N(0, 0.02^2)": compare_schemes(W), "chapter 8's weights": compare_schemes(W_real)}
print(f"kurtosis: N(0, 0.02^2) {kurtosis(W):.1f}, chapter 8's weights {kurtosis(W_real):.1f}")
print(f"{'scheme':<30}{'bits/param':>11}{'RMS error / std: N(0, 0.02^2)':>31}{'trained':>9}")
for (name, bits, err), (_, _, err_real) in zip(*rows.values(), strict=True):
    print(f"{name:<30}{bits:>11.3f}{err:>31.3g}{err_real:>9.3g}")
err = {name: e for name, _, e in rows["N(0, 0.02^2)"]}
bits = {name: b for name, b, _ in rows["N(0, 0.02^2)"]}
assert bits["NF4, blocks of 64"] == 4.5 and round(bits["NF4 + double quantisation"], 3) == 4.127

# %% tags=["needs-torch"]
fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
for ax, (title, table) in zip(axes, rows.items(), strict=True):
    labels = [f"{name} ({b:.3g})" for name, b, _ in table]
    colours = [PALETTE[0] if b > 5 else PALETTE[3] for _, b, _ in table]
    ax.barh(labels, [e for _, _, e in table], color=colours)
    ax.set(title=title, xlabel="RMS error / std of the weights (log scale)", xscale="log")
axes[0].set_ylabel("scheme (bits per parameter, scales included)")
axes[0].invert_yaxis()  # first scheme on top
fig.tight_layout()
plt.show()

# %% [markdown]
# On the random normal weights, at the same 4.5 bits per parameter, NF4's error is about 15%
# smaller than evenly spaced int4's, because its levels follow the weights' distribution; double
# quantisation saves 0.37 bits per parameter at no visible cost. int8 with block scales is about
# fifteen times more accurate again, for twice the memory. At 8 bits, int8 with a scale beats
# float8 E4M3 with a scale: for weights in a narrow, known range, evenly spaced levels use the
# bits better than an exponent does.
#
# The trained weights of chapter 8 are not normal: their kurtosis is about 4.7, heavier tails than
# a normal distribution's 3. (They are shipped in float16, which therefore stores them exactly.)
# One scale for the whole matrix suffers most: the largest weight sits further out, and the
# per-tensor int8 error doubles. The block schemes change little, and the ranking stays: NF4
# remains the best 4-bit scheme, by a little more than on the random weights (about 19% below
# int4), because its levels are densest near zero, where most of these weights are after the
# division by their block's absmax. One
# small model's weights are one example, not a law; the stretch exercise asks whether another
# code book would do better. Chapter 13 fine-tunes a frozen NF4 model (with double
# quantisation) through LoRA adapters: QLoRA.

# %% [markdown]
# ## Exercises
#
# Sections 12.10 and 12.11 asked you to find a bug and to implement NF4. Three more: a
# prediction, a conceptual question and a stretch problem. Solutions are folded below each
# exercise (on the website) or in cells tagged `solution`.

# %% [markdown]
# ```{exercise} Predict, then check: a 7-billion-parameter model on one GPU
# :label: ex-formats-model
#
# A model has $7 \times 10^9$ weights. How many gigabytes ($10^9$ bytes) do they take in
# float32, in bfloat16, in int8 with one float32 scale per block of 64, and in NF4 with double
# quantisation, at the bits per parameter that section 12.12 measured (scales included)? Write
# the four numbers as a tuple, rounded to one decimal, then run the cell. Which of them fit on a
# GPU with 16 GB, leaving room for the activations?
# ```

# %% tags=["needs-torch"]
prediction = None  # your prediction here: (float32, bfloat16, int8, NF4) in GB
per_param = (32, 16, 8.5, 4.127)  # bits per weight, scales included (section 12.12)
actual = tuple(round(7e9 * b / 8 / 1e9, 1) for b in per_param)
check_prediction(
    prediction,
    actual,
    what="the weights' memory in GB",
    explanation="bytes = 7e9 x bits / 8: 32, 16, 8 + 32/64 and about 4.127 bits per weight. "
    "7.0 for int8 forgets its scales (0.5 bits a weight); 3.5 for NF4 forgets the scales and "
    "the double quantisation's second level",
)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-formats-model
# :class: dropdown
# ```

# %% tags=["needs-torch", "solution"]
prediction = (28.0, 14.0, 7.4, 3.6)  # 7e9 x (32, 16, 8 + 32/64, 4.127) bits / 8 bytes
assert check_prediction(prediction, actual, what="the weights' memory in GB").passed


# %% [markdown] tags=["solution"]
# Bytes are bits / 8, so a weight costs 4, 2, 1.0625 and about 0.516 bytes. float32 (28 GB)
# does not fit; bfloat16 (14 GB) leaves almost nothing for the activations and the KV cache;
# int8 (7.4 GB) and NF4 (3.6 GB) fit with room to spare. Training is another matter: Adam in
# mixed precision keeps about 16 bytes per parameter (weights, gradients, a float32 master copy
# and two moments), 112 GB for the same model, which is why chapter 13 freezes the quantised
# weights and trains small adapters instead (QLoRA).
#
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Why not quantise the activations the same way?
# :label: ex-formats-concept-int8
#
# LLM.int8() {cite}`dettmers2022llmint8` found that in language models from about 6.7 billion
# parameters on, a few feature dimensions of the *activations* (the inputs of the matrix
# products) carry values up to about 20 times larger than the rest, in most tokens (75% of them
# at 6.7 billion).
# Why does absmax quantisation with one scale per row of the activations (one token) handle them
# badly, while the weights quantise well? And what did LLM.int8() do about it?
# ```

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-formats-concept-int8
# :class: dropdown
# ```
#
# A token's row of activations holds every feature, outliers included, so its absmax is set by the
# outlier: the scale becomes about 20 times coarser than the other features need, and most of them
# round to a handful of codes or to zero, the per-tensor problem of section 12.10 in every row.
# Blocks do not help, because the outliers sit in the same few columns of every row. The weights
# have no such structure: their blocks are small and their values about normal, so per-block
# scales contain the rare large weight. LLM.int8() splits the matrix product by columns: the few
# outlier feature dimensions (magnitude above a threshold of 6) are multiplied in 16-bit floats,
# the rest with vector-wise int8 scales (one per row of the activations and one per column of the
# weights), and the two parts are added. Chapter 13's QLoRA sidesteps the question: it quantises
# only the stored weights and computes in bfloat16.
#
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Stretch: a code book for the least squared error
# :label: ex-formats-stretch-codebook
#
# NF4 places its levels so that each is used about equally often by normal weights. That is not
# the same as the least squared error. Find the 16 levels with the least squared error for
# section 12.12's trained weights with Lloyd's algorithm (one-dimensional $k$-means): normalise
# each block of 64 of `W_real` by its absmax, as NF4 does; start from NF4's levels; then repeat
# "assign each value to its nearest level, move each level to the mean of the values assigned to
# it" a few dozen times. Compare the RMS error of your code book with NF4's, on `W_real` and on
# the random `W`. How much do you gain, and why would QLoRA keep NF4 anyway?
# ```

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-formats-stretch-codebook
# :class: dropdown
# ```


# %% tags=["needs-torch", "solution"]
def nearest_index(values, codebook):  # codebook sorted: the nearest level, via the midpoints
    return np.searchsorted((codebook[1:] + codebook[:-1]) / 2, values)


def normalised(M, block=64):  # (n_blocks, block) values in [-1, 1] and their absmax
    blocks = M.double().view(-1, block).numpy()
    absmax = np.abs(blocks).max(axis=1, keepdims=True)
    return blocks / absmax, absmax


def rms_error(M, codebook):
    x, absmax = normalised(M)
    w_hat = codebook[nearest_index(x, codebook)] * absmax
    return np.sqrt(np.mean((w_hat - x * absmax) ** 2)) / M.double().std().item()


x = normalised(W_real)[0].ravel()
fitted = ref.nf4_codebook()
for _ in range(30):  # Lloyd's algorithm
    idx = nearest_index(x, fitted)
    fitted = np.bincount(idx, weights=x, minlength=16) / np.bincount(idx, minlength=16)
for name, M in (("chapter 8's weights", W_real), ("N(0, 0.02^2)", W)):
    print(
        f"{name:<20} NF4 {rms_error(M, ref.nf4_codebook()):.4f}, Lloyd {rms_error(M, fitted):.4f}"
    )
print("Lloyd's levels:", fitted.round(2))

# %% [markdown] tags=["solution"]
# The fitted code book lowers the RMS error by a few per cent: 3% on the trained weights it was
# fitted to, and even more, 5%, on the random normal ones: NF4 is built to use its 16 levels
# equally often, which QLoRA argues is optimal for normal data in the information-theoretic sense,
# not to minimise the squared error. The fitted levels move off the ends: they have no exact
# $\pm 1$ (so each block's absmax is no longer stored exactly) and no exact zero (so zero weights
# and padding become small non-zero numbers). QLoRA keeps NF4 for that exactness, and because one
# fixed code book serves every model and every kernel, while a fitted one would have to be
# computed for each model, stored beside it and supported by the kernels, for a gain of a few per
# cent.
#
# ```{solution-end}
# ```

# %% [markdown]
# ## Summary
#
# - Absmax quantisation (eq. 12.6) stores an integer code per weight and one float32 scale per
#   block; per-block scales contain outliers, and the arithmetic must run in float32, not in the
#   weights' bfloat16.
# - NF4 (eq. 12.7) places 16 levels at quantiles of the normal distribution (8 positive, 7
#   negative and an exact zero); the library reproduces the published code book and bitsandbytes'
#   packed bytes and scales.
# - At 4.5 bits per parameter NF4's error is below evenly spaced int4's, on random normal weights
#   and on chapter 8's trained ones; double quantisation brings the cost to about 4.127 bits, and
#   a 7-billion-parameter model's weights to about 3.6 GB.

# %% [markdown]
# ## Quiz (optional, 17 min)
#
# Test yourself on this chapter's sections: multiple choice and numeric questions, each
# naming the section it tests. Choose or type an answer and check it: the quiz says whether it
# is right and why, for the wrong options too. The cell below needs nothing from the cells
# above it, so it also runs on its own when you come back to the chapter.

# %%
from course_lib import quiz

quiz.show("12_number_formats_quantisation")

# %% [markdown]
# ## References
#
# - T. Dettmers et al., "LLM.int8(): 8-bit matrix multiplication for transformers at scale", 2022
#   {cite}`dettmers2022llmint8`.
# - T. Dettmers et al., "8-bit optimizers via block-wise quantization", ICLR 2022
#   {cite}`dettmers2022optimizers`.
# - T. Dettmers et al., "QLoRA: efficient finetuning of quantized LLMs", 2023
#   {cite}`dettmers2023qlora`.
# - G. Strabel, *Transformers*, lecture notes, 2023, section 11.2 (QLoRA, an empty heading)
#   {cite}`strabel2023transformers`.
#
# The full bibliography of the course is on the [References](../book/references.md) page.
#
# ## How this chapter is tested
#
# `tests/test_number_formats.py` quantises 16-bit weights against a float64 computation, checks
# NF4 against bitsandbytes (packed codes, scales and values) and the code book against the
# published values, and checks the exercises' checkers on right answers, typical mistakes and
# garbage; `tests/test_conformance.py` compares the NumPy reference and PyTorch on random inputs;
# `benchmarks/number_formats.py` times quantisation. Bad input gets a message, not a stack trace
# from deep inside NumPy:

# %% tags=["needs-torch"]
for call in (
    lambda: fast.absmax_quantize(torch.tensor([1.0, float("nan")])),
    lambda: ref.nf4_quantize([1.0, float("nan")]),
    lambda: ref.nf4_dequantize([16], [1.0], block_size=1),
):
    try:
        call()
    except (TypeError, ValueError) as err:
        print(f"{type(err).__name__}: {err}")
