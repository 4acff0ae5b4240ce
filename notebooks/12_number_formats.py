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

    course_lib.colab.setup("12_number_formats")

# %% [markdown]
# # 12. Number formats: float32, float16, bfloat16, fp8 and mixed precision
#
# A transformer is trained and served in a handful of number formats, and most of the tricks of
# modern training (mixed precision, loss scaling, float32 accumulation) exist because each format
# trades range for precision in its own way. This chapter opens the bit patterns, derives every
# property of a format from three numbers, and follows the consequences into training: what
# rounding does to small updates, long sums and small gradients, and the standard fix for each.
# Its second part, [`12_number_formats_quantisation`](12_number_formats_quantisation.ipynb),
# stores weights in 8 and 4 bits (int8 and NF4) for chapter 13's QLoRA.
#
# **After this chapter you can**
#
# - read a bit pattern of float32, float16, bfloat16 or one of the two 8-bit float formats by
#   hand, including zeros, subnormal numbers, infinities and NaNs;
# - derive a format's range, precision and spacing from the widths of its fields;
# - round a number to a format the way hardware does (to nearest, ties to even), with integer
#   operations on its bits;
# - explain why mixed-precision training keeps a float32 copy of the weights, accumulates matrix
#   products in float32 and scales float16 losses, and run a model under `torch.autocast`.
#
# **Assumes**: chapters 1 and 2 only (it can be read right after chapter 2), binary numbers,
# and what a gradient is.
# **Core path**: about 59 minutes (the sections marked core); the optional sections add about
# 27 minutes, the exercises about 45.
# The optional quiz that ends the lesson takes about 22 minutes more.
#
# The chapter follows section 15 of the lecture notes {cite}`strabel2023transformers` (the
# binary32 layout and its worked example) and their bfloat16 figure (figure 13, in section 11),
# then covers what mixed-precision training needs.

# %%
import math

import matplotlib.pyplot as plt
import ml_dtypes
import numpy as np

import course_lib.number_formats.reference as ref
from course_lib import seed_everything
from course_lib.checker import check_prediction
from course_lib.number_formats import exercises as check
from course_lib.number_formats.formats import FORMAT_NAMES, format_table, get_format
from course_lib.plotting import new_axes, use_style

rng = seed_everything(0)
use_style()
np.set_printoptions(precision=6, suppress=False)

# %% [markdown]
# `ref` holds the NumPy reference, which decodes and encodes bit patterns with integer
# operations on the fields; `fast` holds the PyTorch twins, which use PyTorch's own dtypes. Both
# have the same functions under the same names. `get_format(name)` describes a format.
#
# ## 12.1 The binary32 layout (core, 7 min)
#
# A float32 (IEEE 754 *binary32*) number is 32 bits: a **sign** bit $b_{31}$, an 8-bit **biased
# exponent** $E = (b_{30} \dots b_{23})_2$ and a 23-bit **fraction** $b_{22} \dots b_0$. When
# $1 \le E \le 254$ the notes give its value as {cite}`strabel2023transformers` (section 15),
# {cite}`ieee2019754`
#
# $$\text{value} = (-1)^{b_{31}} \times 2^{E - 127} \times \Big(1 + \sum_{i=1}^{23} b_{23-i}\,
# 2^{-i}\Big).
# \qquad \text{(12.1)}$$
#
# The leading 1 is not stored (the *hidden bit*); the fraction bits are the binary digits after
# the point, $b_{22}$ worth $2^{-1}$, $b_{21}$ worth $2^{-2}$, and so on. The **bias** 127 lets
# the stored exponent be an unsigned number while the true exponent $E - 127$ runs from $-126$ to
# $127$. Every format in this chapter has the same shape with other widths: $E_\text{bits}$
# exponent bits, $M$ fraction bits, bias $2^{E_\text{bits} - 1} - 1$.
#
# The notes' example has sign 0, exponent $E = 124$ and one fraction bit set, the one worth
# $2^{-2}$. We assemble the pattern from its fields and take it apart again, step by step:

# %%
sign, E, fraction = 0, 124, 1 << 21  # the fraction bit worth 2**-2 is b21
bits = sign << 31 | E << 23 | fraction
print(f"bits = {bits:032b}")
print(f"     = {bits:08X} in hexadecimal")

# %%
f32 = get_format("float32")
s = bits >> 31  # 0
e = (bits >> 23) & 0xFF  # 124
frac = bits & (2**23 - 1)  # 2**21
significand = 1 + frac / 2**23  # 1 + 2**-2
value = (-1) ** s * 2.0 ** (e - f32.bias) * significand
print(f"sign {s}, exponent {e} - {f32.bias} = {e - f32.bias}, significand {significand}")
print(f"value = (+1) x 2^{e - f32.bias} x {significand} = {value}")
assert value == 0.15625 and bits == 0x3E200000

# %% [markdown]
# The value is $(+1) \times 2^{-3} \times 1.25 = 0.15625$, as in the notes. Three independent
# readings agree: the reference decoder (integer operations on the fields, eq. 12.1), NumPy
# reinterpreting the same 32 bits as a float32, and PyTorch doing the same. And encoding
# 0.15625 gives the pattern back.

# %%
assert ref.decode(bits, "float32") == 0.15625
assert np.array([bits], dtype=np.uint32).view(np.float32)[0] == 0.15625
assert int(ref.encode(0.15625, "float32")) == bits
print("0x3E200000 is 0.15625 for the reference and NumPy")

# %% [markdown]
# and for the PyTorch twin, `fast` (imported here, at the first cell that needs PyTorch: the
# NumPy cells run where it is not installed):

# %% tags=["needs-torch"]
import torch

import course_lib.number_formats.accelerated as fast
from course_lib import get_device

device = get_device()
assert fast.decode(torch.tensor([bits]), "float32").item() == 0.15625

# %% [markdown]
# Which fraction bit is set matters: the sum in eq. (12.1) gives bit $b_{23-i}$ the weight
# $2^{-i}$, so the notes' term $1 \cdot 2^{-2}$ is $i = 2$, bit $b_{21}$. Setting the *first*
# fraction bit $b_{22}$ instead would give the significand 1.5 and the value 0.1875:

# %%
assert ref.decode(124 << 23 | 1 << 22, "float32") == 0.1875

# %% [markdown]
# ## 12.2 Zeros, subnormal numbers, infinities and NaNs (core, 6 min)
#
# Eq. (12.1) covers only $1 \le E \le 254$. The two remaining exponent values are reserved
# {cite}`ieee2019754`:
#
# | exponent field | fraction $= 0$ | fraction $\ne 0$ |
# | --- | --- | --- |
# | $0$ | $\pm 0$ | subnormal: $(-1)^s\, 2^{1 - \text{bias}}\, (0.b_{22}\dots b_0)_2$, eq. (12.2) |
# | $1 \dots 254$ | normal, eq. (12.1) | normal, eq. (12.1) |
# | $255$ (all ones) | $\pm\infty$ | NaN (not a number), eq. (12.3) |
#
# A **subnormal** number has no hidden 1 and keeps the smallest exponent, $1 - 127 = -126$, so the
# numbers between $0$ and the smallest normal number $2^{-126}$ are evenly spaced $2^{-149}$
# apart: *gradual underflow* instead of a jump to zero. Here are the landmarks of float32, decoded
# by the reference and checked against NumPy:

# %%
landmarks = {
    "+0": 0x00000000,
    "-0": 0x80000000,
    "smallest subnormal": 0x00000001,
    "largest subnormal": 0x007FFFFF,
    "smallest normal": 0x00800000,
    "one": 0x3F800000,
    "largest finite": 0x7F7FFFFF,
    "+infinity": 0x7F800000,
    "-infinity": 0xFF800000,
    "quiet NaN": 0x7FC00000,
}
patterns = np.array(list(landmarks.values()))
ours = ref.decode(patterns, "float32")
numpy_view = patterns.astype(np.uint32).view(np.float32).astype(np.float64)
np.testing.assert_array_equal(ours, numpy_view)  # NaN equals NaN here
for (name, b), v in zip(landmarks.items(), ours, strict=True):
    print(f"{name:>19}  {b:032b}  {v:.9g}")

# %% [markdown]
# Three facts to notice. The smallest subnormal is $2^{-149} \approx 1.4 \times 10^{-45}$, far
# below the smallest normal $2^{-126} \approx 1.2 \times 10^{-38}$. There are two zeros, equal
# as numbers but told apart by division. And a NaN is not equal to anything, itself included:

# %%
with np.errstate(divide="ignore"):
    print(
        "+0 == -0:", 0.0 == -0.0, "| 1/+0 =", np.float64(1) / 0.0, "| 1/-0 =", np.float64(1) / -0.0
    )
nan = ref.decode(0x7FC00000, "float32")
print("NaN == NaN:", bool(nan == nan))
assert 0.0 == -0.0 and not nan == nan

# %% [markdown]
# ## 12.3 Five formats (core, 7 min)
#
# The notes show bfloat16 only as a figure (figure 13); here are the five formats a transformer
# meets, all with the same structure and different widths:
#
# - **float16** (IEEE binary16): 5 exponent bits, 10 fraction bits. Precise, but its range ends
#   at 65504.
# - **bfloat16** ("brain float"): float32 with the last 16 fraction bits dropped. It keeps
#   float32's 8 exponent bits, hence its whole range, and has only 7 fraction bits
#   {cite}`kalamkar2019study`.
# - **float8 E4M3** and **E5M2**: two 8-bit formats proposed for training
#   {cite}`micikevicius2022fp8` and standardised as the OCP 8-bit floating point formats
#   {cite}`ocp2023ofp8`, E4M3 for weights and activations (more precision), E5M2 for gradients
#   (more range). The standard's E4M3, `float8_e4m3fn` in the libraries, has no infinities: it
#   reuses the all-ones exponent for normal numbers and keeps only S.1111.111 as NaN (one pattern
#   per sign, `0x7F` and `0xFF`: two in all), which raises its largest value from 240 to 448.
#
# Every number in the table below is **computed** from the three numbers that define a format
# (exponent width, fraction width, and whether the all-ones exponent is reserved): the largest
# finite value $2^{e_{\max}}(2 - 2^{-M})$ (one step less for E4M3FN), the smallest normal
# $2^{1-\text{bias}}$, the smallest subnormal $2^{1-\text{bias}-M}$, the machine epsilon $2^{-M}$
# (the gap between 1 and the next number) and the decimal digits $(M+1)\log_{10} 2$.

# %%
table = format_table()
head = f"{'format':<14}{'bits':>5}{'exp':>4}{'frac':>5}{'bias':>5}{'largest':>12}{'min normal':>12}"
head += f"{'min subnormal':>15}{'epsilon':>11}{'digits':>8}"
print(head)
for r in table:
    print(
        f"{r['format']:<14}{r['bits']:>5}{r['exponent bits']:>4}{r['fraction bits']:>5}"
        f"{r['bias']:>5}{r['largest finite']:>12.5g}{r['smallest normal']:>12.4g}"
        f"{r['smallest subnormal']:>15.4g}{r['machine epsilon']:>11.4g}{r['decimal digits']:>8.2f}"
    )

# %% [markdown]
# Every entry agrees with what NumPy, ml_dtypes and PyTorch report for their own types, and
# the reference decoder agrees with PyTorch on every bit pattern of the four small formats (the
# appendix, "How this chapter is tested", runs both checks).
#
# bfloat16 is literally the top half of a float32. Dropping the low 16 bits, though, *truncates*
# (rounds toward zero); a proper conversion rounds to the nearest bfloat16, which for 0.1 is the
# next pattern up (the find-the-bug exercise at the end of the chapter asks you to write that
# conversion with integer operations):

# %%
b32 = int(ref.encode(0.1, "float32"))
truncated = b32 >> 16  # keep the top 16 bits
rounded = int(ref.encode(0.1, "bfloat16"))
print(f"0.1 as float32: {b32:032b}")
print(f"truncated:      {truncated:016b} = {ref.decode(truncated, 'bfloat16'):.10f}")
print(f"rounded:        {rounded:016b} = {ref.decode(rounded, 'bfloat16'):.10f}")
assert rounded == truncated + 1

# %% tags=["needs-torch"]
assert fast.encode(torch.tensor([0.1]), "bfloat16").item() == rounded  # PyTorch rounds too

# %% [markdown]
# float16 and bfloat16 spend many patterns on NaN (2046 and 254): every pattern with an all-ones
# exponent and a non-zero fraction. E4M3FN spends only two, one per sign:

# %%
all_fp8 = np.arange(256, dtype=np.uint8)  # every E4M3FN bit pattern
nan_fp8 = [int(b) for b in all_fp8 if np.isnan(ref.decode(int(b), "float8_e4m3fn"))]
assert nan_fp8 == [0x7F, 0xFF]
assert nan_fp8 == np.flatnonzero(np.isnan(all_fp8.view(ml_dtypes.float8_e4m3fn))).tolist()
print("E4M3FN NaN patterns:", [hex(b) for b in nan_fp8])

# %% [markdown]
# ## 12.4 How far apart are neighbouring numbers? (core, 5 min)
#
# Within one binade $[2^k, 2^{k+1})$ a format has $2^M$ evenly spaced numbers, $2^{k-M}$ apart;
# the spacing doubles at every power of two. The *relative* spacing therefore stays between
# $2^{-M-1}$ and $2^{-M}$ over the whole normal range, and grows in the subnormal range, where the
# spacing stays fixed at the smallest subnormal. We measure the spacing directly: the gap between
# the value of a pattern and the value of the next pattern.

# %%
fig, (ax_abs, ax_rel) = plt.subplots(1, 2, figsize=(11, 4.2))
for name in FORMAT_NAMES:
    fmt = get_format(name)
    step = max(1, fmt.max_finite_pattern // 3000)  # at most ~3000 points per format
    b = np.arange(1, fmt.max_finite_pattern, step)  # positive, finite patterns
    v = ref.decode(b, name)
    gap = ref.decode(b + 1, name) - v  # (n,)
    ax_abs.loglog(v, gap, label=name, lw=1.2)
    ax_rel.loglog(v, gap / v, label=name, lw=1.2)
    one = int(ref.encode(1.0, name))
    assert ref.decode(one + 1, name) - 1 == fmt.epsilon  # the gap above 1 is epsilon
    assert ref.decode(2, name) - ref.decode(1, name) == fmt.min_subnormal
ax_abs.set(title="Spacing between neighbouring numbers", xlabel="value", ylabel="gap to next")
ax_rel.set(title="Relative spacing (gap / value)", xlabel="value", ylabel="gap / value")
ax_rel.legend(fontsize=8)
fig.tight_layout()
plt.show()

# %% [markdown]
# Left: each format is a staircase of doubling gaps, and the lines end at each format's largest
# value (448 for E4M3FN, 65504 for float16, about $3.4 \times 10^{38}$ for bfloat16 and float32).
# Right: the relative gap is a saw-tooth between $2^{-M-1}$ and $2^{-M}$, flat in the normal range
# and climbing in the subnormal range on the left, where precision drains away. bfloat16 covers
# float32's whole range with 8 significant bits; float16 has three bits more (11) but covers only
# $6 \times 10^{-8}$ to $65504$.
#
# ## 12.5 Play with the bits (optional, 2 min)
#
# The **bit editor** shows a pattern with its fields coloured (sign, exponent, fraction). Click a
# bit to flip it; the formula updates, and the table below shows the same value stored in every
# format. Changing the format keeps the value and re-encodes it. The **value box** goes the other
# way: type a number, see its bits and the rounding error in each format. (On the website the
# value box responds for ten numbers and the bit editor shows its stored state; run the
# notebook to use both.)

# %%
from course_lib.number_formats.widget import bit_editor, value_box

bit_editor("float32", 0x3E200000)

# %%
value_box("0.1")

# %% [markdown]
# Things to try: set every exponent bit of a float16 to 1 and the fraction to 0 (infinity), then
# flip one fraction bit (NaN); type `65520` (float16 and both fp8 formats overflow, differently),
# `1e-7` (float16 keeps it only as a subnormal, with a large relative error), `448` and `464`.
#
# ## 12.6 Rounding (core, 12 min)
#
# ### Round to nearest, ties to even
#
# A number that is not representable is replaced by a neighbour. The default of IEEE 754 is
# **round to nearest, ties to even** {cite}`ieee2019754`:
#
# $$\operatorname{rn}(x) = \text{the representable number nearest to } x\text{; on a tie, the one
# whose last fraction bit is } 0. \qquad \text{(12.4)}$$
#
# In the normal range this makes the relative error at most the *unit roundoff* $u = 2^{-M-1}$,
# half the machine epsilon. The tie rule matters more than it seems: always rounding ties up
# would bias long computations upward. Near 1, bfloat16's numbers are $2^{-7}$ apart: $1$,
# $1 + 2^{-7}$, $1 + 2 \cdot 2^{-7}$, ..., and the fraction field of $1 + k \cdot 2^{-7}$ is $k$ in
# binary.

# %% [markdown] tags=["worksheet"]
# ```{exercise} Predict, then check: one plus a little in bfloat16
# :label: ex-formats-predict
#
# What is $1 + 2^{-8}$ when it is rounded to bfloat16? And $1 + 3 \cdot 2^{-9}$? Write the two
# values as a pair of floats, then run the cell.
# ```

# %% tags=["worksheet"]
prediction = None  # your prediction here: (first, second)
actual = tuple(float(ref.round_to_format(v, "bfloat16")) for v in (1 + 2**-8, 1 + 3 * 2**-9))
check_prediction(
    prediction,
    actual,
    what="the two bfloat16 values",
    rtol=0,
    explanation="1 + 2^-8 lies exactly half-way between 1 and 1 + 2^-7: a tie, which goes to the "
    "neighbour whose last fraction bit is 0, the 1; 3 x 2^-9 is 0.75 of a step above 1, nearer "
    "to 1 + 2^-7 than to 1. Predicting 1 + 2^-7 for the first rounds ties up; predicting 1 for "
    "the second truncates",
)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-formats-predict
# :class: dropdown
# ```

# %% tags=["solution"]
prediction = (1.0, 1.0078125)  # a tie to even (1.0); 0.75 of a step rounds up to 1 + 2**-7
assert check_prediction(prediction, actual, what="the two bfloat16 values", rtol=0).passed

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# Two exact ties, $1 + 2^{-8}$ and $1 + 3 \cdot 2^{-8}$, show the rule at work:

# %%
ties = np.array([1 + 2**-8, 1 + 3 * 2**-8])
print("ties:   ", ties)
print("rounded:", ref.round_to_format(ties, "bfloat16"))
np.testing.assert_array_equal(ref.round_to_format(ties, "bfloat16"), [1.0, 1 + 2**-6])

# %% tags=["needs-torch"]
np.testing.assert_array_equal(  # PyTorch's cast rounds the ties the same way
    torch.tensor(ties, dtype=torch.float32).bfloat16().double(), [1.0, 1 + 2**-6]
)

# %% [markdown]
# The first tie goes down to 1 (fraction `0000000`), the second up to $1 + 2^{-6}$ (fraction
# `0000010`), because $1 + 2^{-7}$ between them ends in a 1. The reference implements eq. (12.4)
# with integers: it shifts the significand right and looks at the bits that fall off (more than
# half: up; less: down; exactly half: to even); the appendix checks it against PyTorch on a million
# random patterns and on every tie.

# %% [markdown]
# ### Overflow and underflow
#
# A value that rounds past the largest finite number **overflows**: to infinity in the IEEE
# formats. float16's largest value is 65504 and the next step would be 65536, so anything from
# the half-way point 65520 up becomes infinity (65520 itself is a tie, and the even side is the
# infinite one). E4M3FN has no infinity: the OCP specification provides a saturating conversion,
# which clamps to the largest value, 448, and a non-saturating one, which gives NaN
# {cite}`ocp2023ofp8`. Libraries choose differently, and have changed their choice between
# versions: ml_dtypes gives NaN, and the PyTorch the course pins (2.13) saturates its cast, even
# infinity; check what your version does before you rely on it. The reference does either, chosen
# by `saturate`.

# %% tags=["needs-torch"]
print("float16:", ref.round_to_format([65504.0, 65519.0, 65520.0], "float16"))
x_fp8 = np.array([448.0, 464.0, 465.0, np.inf])
print("E4M3FN, no saturation: ", ref.round_to_format(x_fp8, "float8_e4m3fn"))
print("E4M3FN, saturate=True: ", ref.round_to_format(x_fp8, "float8_e4m3fn", saturate=True))
print("ml_dtypes:             ", x_fp8.astype(ml_dtypes.float8_e4m3fn).astype(np.float64))
print("PyTorch cast:          ", torch.tensor(x_fp8).to(torch.float8_e4m3fn).double().numpy())

# %% [markdown]
# At the other end, a value below the smallest normal number keeps only the fraction bits that
# still fit (a subnormal), with fewer significant bits the smaller it gets, until it rounds to
# zero: **underflow**. In float16 the smallest subnormal is $2^{-24} \approx 6 \times 10^{-8}$:

# %%
small = np.array([1e-4, 1e-5, 1e-6, 1e-7, 4e-8, 2e-8])
stored = ref.round_to_format(small, "float16")
for x_, y_ in zip(small, stored, strict=True):
    print(f"{x_:8.0e} -> {y_:.6e}   relative error {abs(y_ - x_) / x_:6.1%}")
assert stored[-1] == 0 and stored[-2] == 2.0**-24

# %% [markdown]
# The relative error is below $u = 2^{-11} \approx 0.05\%$ for the normal number $10^{-4}$ and
# grows steadily through the subnormal range, until $2 \times 10^{-8}$ (less than half the
# smallest subnormal) vanishes. Gradients in float16 underflow exactly like this (section 12.7).

# %% [markdown]
# ## 12.7 Mixed-precision training (core, 22 min)
#
# Rounding to a 16-bit format has three consequences for training, each with a standard fix;
# together the fixes are **mixed-precision training** {cite}`micikevicius2018mixed`, and
# `torch.autocast` applies them for you.
#
# ### Updates smaller than half a step
#
# A weight of 1.0 stored in bfloat16 receives 1000 updates of $+10^{-3}$ (a learning rate times a
# gradient). The bfloat16 step at 1 is $2^{-7} \approx 0.0078$, so each update is below half a
# step. Mixed-precision training keeps a float32 **master copy** of the weights, applies every
# update to it, and gives the forward pass a bfloat16 copy rounded from it:

# %% tags=["needs-torch"]
gen = torch.Generator().manual_seed(0)
steps, delta = 1000, 1e-3
master, w_bf16 = torch.tensor(1.0), torch.tensor(1.0)  # float32 scalars
history = {"float32 master copy": [], "bfloat16, updated in bfloat16": [], "bfloat16 copy": []}
for _ in range(steps):
    master = master + delta  # the update, applied in float32
    w_bf16 = fast.round_to_format(w_bf16 + delta, "bfloat16")  # applied to the bfloat16 weight
    copy = fast.round_to_format(master, "bfloat16")  # what the forward pass uses
    for key, w in zip(history, (master, w_bf16, copy), strict=True):
        history[key].append(w.item())
print({k: round(v[-1], 4) for k, v in history.items()})

# %% tags=["needs-torch"]
fig, ax = new_axes(
    "1000 updates of +0.001 to a weight of 1.0", "update step", "weight", figsize=(7, 4)
)
for key, values in history.items():
    ax.plot(np.arange(1, steps + 1), values, label=key)
ax.legend()
fig.tight_layout()
plt.show()


# %% [markdown]
# Updated in bfloat16, the weight never moves: each of the 1000 updates is rounded away. The
# float32 master copy keeps all of them, and the bfloat16 copy rounded from it follows in steps of
# $2^{-7}$. (Section 12.8 shows the other fix, stochastic rounding, for weights that must live in
# low precision.)
#
# ### A matrix product with bfloat16 inputs and float32 accumulation
#
# Matrix units on GPUs take bfloat16 (or float16, or fp8) **inputs** but **accumulate** the
# products in float32. Products of two bfloat16 numbers are exact in float32 (8 + 8 significant
# bits fit in 24), so the only errors are those of the float32 sum. We compare three ways of
# computing $XY$ for $X \in \mathbb{R}^{32 \times K}$, $Y \in \mathbb{R}^{K \times 32}$ from the
# same bfloat16 inputs, against the exact product of those inputs:


# %% tags=["needs-torch", "nbval-ignore-output"]
def matmul_errors(K: int) -> dict[str, float]:
    Xb = torch.randn(32, K, generator=gen).bfloat16()  # (n, K) bfloat16 inputs
    Yb = torch.randn(K, 32, generator=gen).bfloat16()  # (K, k)
    exact = Xb.double() @ Yb.double()  # (n, k): the inputs' exact product
    scale = exact.abs().mean().item()
    products = Xb.float().unsqueeze(-1) * Yb.float().unsqueeze(0)  # (n, K, k), exact in float32
    outputs = {
        "float32 accumulation": Xb.float() @ Yb.float(),
        "PyTorch bfloat16 matmul": (Xb @ Yb).float(),  # accumulates in float32, rounds the output
        "bfloat16 accumulation": fast.naive_sum(products.transpose(1, 2), "bfloat16"),  # (n, k)
    }
    return {key: (out.double() - exact).abs().mean().item() / scale for key, out in outputs.items()}


Ks = [16, 64, 256, 1024, 4096]
results = {K: matmul_errors(K) for K in Ks}
final = results[4096]
print("mean relative error at K = 4096:", {k: f"{v:.0e}" for k, v in final.items()})

# %% tags=["needs-torch"]
fig, ax = new_axes(
    "Error of a 32 x K x 32 product with bfloat16 inputs",
    "inner dimension K",
    "mean |error| / mean |XY|",
    logx=True,
    logy=True,
    figsize=(7, 4),
)
for key in final:
    ax.plot(Ks, [results[K][key] for K in Ks], marker="o", label=key)
ax.legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# With float32 accumulation the error stays near float32's precision for every $K$. PyTorch's
# bfloat16 matmul accumulates in float32 too, and then rounds each output to bfloat16 once: its
# error is at most half a bfloat16 step per output, independent of $K$. Accumulating in bfloat16
# itself loses more with every term: several percent at $K = 4096$, and still growing. Hardware
# does not always accumulate in a full float32: on CUDA, cuBLAS may use reduced precision for
# parts of a bfloat16 reduction unless
# `torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction` is turned off, and
# DeepSeek-V3's authors measured the FP8 matrix products of NVIDIA's H800 accumulating in about 14
# bits, so they moved the partial sums to float32 every 128 products themselves
# {cite}`deepseek2024v3`.
#
# ### Loss scaling for float16 gradients
#
# Many gradients of a network are tiny. Stored in float16 everything below $2^{-25} \approx
# 3 \times 10^{-8}$ becomes zero, and values below $2^{-14}$ lose bits. The fix of mixed-precision
# training is **loss scaling** {cite}`micikevicius2018mixed`: multiply the loss by a factor $S$
# before the backward pass, so that every gradient is multiplied by $S$ (the chain rule is
# linear), and divide by $S$ in float32 before the update. Too large an $S$ makes the largest
# gradients overflow instead. We take gradient magnitudes spread evenly (on a log scale) from
# $10^{-12}$ to $10^{-1}$:

# %%
g = 10 ** rng.uniform(-12, -1, 100_000) * rng.choice([-1.0, 1.0], 100_000)  # (N,) gradients
log2_scales = np.arange(0, 41, 2)
lost = [np.mean(ref.round_to_format(g * 2.0**k, "float16") == 0) for k in log2_scales]
overflow = [np.mean(np.isinf(ref.round_to_format(g * 2.0**k, "float16"))) for k in log2_scales]
print(
    f"no scaling: {lost[0]:.1%} of the gradients are zero in float16,",
    f"{np.mean(ref.round_to_format(g, 'bfloat16') == 0):.1%} in bfloat16",
)
assert lost[0] > 0.3 and lost[8] == 0 and overflow[8] == 0 and overflow[-1] > 0.3

# %%
fig, ax = new_axes(
    "Loss scaling: gradients lost when stored in float16",
    "log2 of the loss scale S",
    "fraction of gradients",
    figsize=(7, 4),
)
ax.plot(log2_scales, lost, marker="o", label="underflow to 0")
ax.plot(log2_scales, overflow, marker="s", label="overflow to inf")
safe = [k for k, a, b in zip(log2_scales, lost, overflow, strict=True) if a == 0 and b == 0]
ax.axvspan(min(safe), max(safe), color="grey", alpha=0.2, label="nothing lost")
ax.legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# Without scaling, about 40% of these gradients vanish. Around $S = 2^{16}$ nothing underflows and
# nothing overflows. Real gradients change during training, so *dynamic* loss scaling starts with
# a large $S$, halves it whenever an infinity appears (and skips that step), and doubles it again
# after a run of clean steps; `torch.amp.GradScaler` implements this. bfloat16 does not need it:
# with float32's exponent range none of these gradients underflow.
#
# ### Mixed precision with `torch.autocast`
#
# `torch.autocast` runs selected operations (matrix products, linear layers, convolutions) in a
# low-precision dtype and keeps precision-sensitive ones (reductions, normalisations, losses) in
# float32, while the parameters stay float32 {cite}`micikevicius2018mixed`. It works on the CPU as
# well as on CUDA; we use bfloat16, which needs no loss scaling.

# %% tags=["needs-torch"]
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64)).to(
    device
)
h = torch.randn(8, 16, 64, device=device)  # (B, L, d)
reference = model(h)  # float32
with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
    out = model(h)  # (B, L, d) in bfloat16
    loss = out.float().pow(2).mean()
loss.backward()
rel_error = ((out.float() - reference).norm() / reference.norm()).item()
dtypes = (out.dtype, model[0].weight.dtype, model[0].weight.grad.dtype)
print("output, weight and gradient dtypes:", *dtypes)
print(f"relative difference from the float32 forward pass: below {math.ceil(rel_error * 100)}%")

# %% [markdown]
# The forward pass produced bfloat16 activations from float32 weights (cast on the fly), the
# relative difference from the float32 result is below one percent, and the gradients arrive in
# float32, ready for a float32 optimizer step on the master copy.

# %% [markdown]
# ## 12.8 More on rounding and sums (optional, 21 min)
#
# ### Stochastic rounding
#
# Round to nearest is deterministic, and that hurts when many small changes are added to a large
# number: a change smaller than half a step is lost **every** time. **Stochastic rounding**
# rounds up or down at random, with probabilities that make the result right on average
# {cite}`gupta2015deep`. With $\lfloor x \rfloor$ and $\lceil x \rceil$ the neighbours of $x$ in
# the format,
#
# $$\operatorname{sr}(x) = \begin{cases} \lceil x \rceil & \text{with probability } p = \dfrac{x -
# \lfloor x \rfloor}{\lceil x \rceil - \lfloor x \rfloor}, \\[4pt] \lfloor x \rfloor & \text{with
# probability } 1 - p, \end{cases} \qquad \mathbb{E}[\operatorname{sr}(x)] = x. \qquad
# \text{(12.5)}$$
#
# The library takes the uniform random numbers as an argument, so both sides make the same
# choices. Take $x = 1 + 2^{-10}$, one eighth of a bfloat16 step above 1:

# %% tags=["needs-torch"]
x = torch.full((200_000,), 1 + 2**-10, dtype=torch.float64)
u = torch.rand(x.shape, generator=gen, dtype=torch.float64)
draws = fast.stochastic_round(x, "bfloat16", u)  # each is 1 or 1 + 2**-7
print("values drawn:", sorted(set(draws.tolist())))
print(f"fraction rounded up: {(draws > 1).double().mean():.3f} (p = 1/8 = 0.125)")
print(f"mean: {draws.mean():.5f}, x = {1 + 2**-10:.5f}")
sigma = 2**-7 * math.sqrt(0.125 * 0.875 / x.numel())  # standard error of the mean
assert abs(draws.mean().item() - (1 + 2**-10)) < 4 * sigma

# %% [markdown]
# Every single result is off by at least $2^{-10}$, but their mean is $x$ to within the sampling
# error. This is what a weight that lives in low precision needs: section 12.7's 1000 updates of
# $+10^{-3}$, now to 64 bfloat16 weights that round stochastically:

# %% tags=["needs-torch"]
w_sr = torch.ones(64)  # 64 independent runs of stochastic rounding
for _ in range(steps):
    w_sr = fast.stochastic_round(w_sr + delta, "bfloat16", torch.rand(64, generator=gen))
w32 = history["float32 master copy"][-1]
print(f"after 1000 updates: mean {w_sr.mean():.3f} (float32: {w32:.3f})")

# %% [markdown]
# Each run ends on a bfloat16 number, but on average they follow the float32 weight: rounding up
# with probability proportional to the remainder keeps the expected update. This is the alternative
# to a master copy when the weights themselves live in low precision {cite}`gupta2015deep`.
#
# ### Rounding twice
#
# A trap for anyone who converts between formats: rounding to float32 and then to float16 is not
# always the same as rounding to float16 once. A value just above a float16 tie can become the
# tie itself in float32, which then goes to even, the wrong way. PyTorch converts float64 to
# float16 through float32, so it rounds twice:

# %% tags=["needs-torch"]
x = 1 + 2**-11 + 2**-40  # just above the tie between 1 and 1 + 2**-10
print("correct (reference):  ", ref.round_to_format(x, "float16") - 1)
print("NumPy float64->float16:", float(np.float16(x)) - 1)
print("PyTorch cast:          ", torch.tensor(x, dtype=torch.float64).half().item() - 1)
print(
    "fast.round_to_format:  ",
    fast.round_to_format(torch.tensor(x, dtype=torch.float64), "float16").item() - 1,
)
assert ref.round_to_format(x, "float16") == np.float16(x) == 1 + 2**-10
assert torch.tensor(x, dtype=torch.float64).half().item() == 1.0

# %% [markdown]
# The PyTorch side of this chapter avoids the trap by rounding float64 to float32 **to odd**
# first: an inexact result takes the neighbour whose last bit is 1, which can never be a tie of
# the coarser format, so the second rounding is correct {cite}`boldo2008emulation`. The reverse
# case is harmless: rounding a *sum or product of two low-precision numbers* first to float32
# and then to a format with $p$ significant bits gives the correctly rounded result whenever
# float32's 24 bits are at least $2p + 2$ {cite}`figueroa1995double`, which holds for float16
# ($p = 11$) and bfloat16 ($p = 8$). That is why computing in float32 and storing in bfloat16
# simulates bfloat16 arithmetic exactly.

# %% [markdown]
# ### Long sums
#
# A transformer adds up long lists of numbers everywhere: dot products of width $d$, the
# normaliser of a softmax over thousands of keys, the mean of a loss over a batch. Adding $n$
# numbers left to right (the *naive* sum) can accumulate an error that grows with $n$, and worse,
# once the running total is large, an addend smaller than half its step disappears. Two classic
# remedies {cite}`higham1993accuracy`: **pairwise** summation adds in a balanced tree, so each
# number meets only $\log_2 n$ roundings; **Kahan**'s compensated summation carries the rounding
# error of each addition in a second variable and feeds it back {cite}`kahan1965further`. The
# library's sums round *every* intermediate result to the chosen format, which simulates adding
# in that format.

# %% tags=["needs-torch"]
x = torch.rand(4, 4096, generator=gen)  # (R, n): 4 repetitions of 4096 numbers in [0, 1)
print(f"{'format':<15}{'naive':>10}{'pairwise':>10}{'Kahan':>10}{'best possible':>15}")
errors = {}
for name in FORMAT_NAMES:
    addends = fast.round_to_format(x.double(), name)  # the numbers as stored in the format
    exact = addends.sum(dim=-1)  # float64: exact enough to measure the others
    rel = {}
    for label, fn in (
        ("naive", fast.naive_sum),
        ("pairwise", fast.pairwise_sum),
        ("Kahan", fast.kahan_sum),
    ):
        rel[label] = ((fn(x, name).double() - exact).abs() / exact).max().item()
    rel["best"] = ((fast.round_to_format(exact, name) - exact).abs() / exact).max().item()
    errors[name] = rel
    print(
        f"{name:<15}"
        + "".join(f"{rel[k]:>10.1e}" for k in ("naive", "pairwise", "Kahan"))
        + f"{rel['best']:>15.1e}"
    )
assert errors["bfloat16"]["naive"] > 0.5  # more than half of the sum is lost
assert math.isnan(errors["float8_e4m3fn"]["best"])  # about 2048 > 448: not even representable
assert errors["bfloat16"]["Kahan"] < 0.01 and errors["float16"]["Kahan"] < 1e-3

# %% [markdown]
# The last column is the error of storing the exact sum in the format at all; no method can beat
# it. In float32 all three methods are fine. In float16 the naive sum is already off by about a
# percent. In bfloat16 it loses most of the total: the sum of 4096 numbers around 0.5 is about
# 2048, but it stops growing long before. The 8-bit formats are storage formats, not
# accumulators: their naive sums stall almost at once, Kahan's correction term is itself too
# coarse to help, and E4M3FN cannot even hold the result (2048 is beyond its largest value, 448),
# so its pairwise sum overflows to NaN. This is why fp8 matrix units accumulate in a wider format
# (not always a full float32, section 12.7). The running bfloat16 total shows where the naive sum
# stalls:

# %% tags=["needs-torch"]
running = torch.zeros(())
path = []
for value in fast.round_to_format(x[0], "bfloat16"):
    running = fast.round_to_format(running + value, "bfloat16")
    path.append(running.item())
fig, ax = new_axes(
    "Naive summation of 4096 numbers in [0, 1) in bfloat16",
    "number of addends n",
    "running sum",
    figsize=(7, 4),
)
ax.plot(np.arange(1, 4097), np.cumsum(x[0].double().numpy()), label="exact")
ax.plot(np.arange(1, 4097), path, label="bfloat16, left to right")
ax.legend()
fig.tight_layout()
plt.show()
print(
    f"the bfloat16 running sum stalls at {path[-1]:g};",
    f"its step there is {2.0 ** (math.floor(math.log2(path[-1])) - 7):g}",
)

# %% [markdown]
# From 128 on the bfloat16 step is 1, so an addend counts only if it is above one half, and then
# as a whole 1; from 256 on the step is 2 and every addend (all are below 1, half a step) is
# rounded away: the sum stalls at 256. PyTorch's
# reductions avoid this on their own: `torch.sum` of a bfloat16 tensor accumulates in float32 and
# rounds only the final result.

# %% tags=["needs-torch"]
xb = x[0].bfloat16()
exact = xb.double().sum().item()
half_step = 2.0 ** (math.floor(math.log2(exact)) - 8)
assert abs(torch.sum(xb).item() - exact) <= half_step
print(f"torch.sum in bfloat16: {torch.sum(xb).item():g} (exact {exact:.2f}, one rounding)")

# %% [markdown]
# ### Softmax in float16
#
# The softmax of chapter 2 exponentiates its inputs. In float16, $e^z$ overflows as soon as
# $z > \ln 65504 \approx 11.09$, and the naive formula then divides infinity by infinity:

# %% tags=["needs-torch"]
z = torch.tensor([12.0, 11.0, 2.0], dtype=torch.float16)  # (L,) attention logits
naive = torch.exp(z) / torch.exp(z).sum()
stable = torch.exp(z - z.max()) / torch.exp(z - z.max()).sum()  # chapter 2: subtract the max
print("exp(z):", torch.exp(z).tolist())
print("naive: ", naive.tolist())
print("stable:", [round(v, 4) for v in stable.tolist()])
assert torch.isnan(naive[0]) and torch.allclose(
    stable.float(), torch.softmax(z.float(), -1), atol=1e-3
)


# %% [markdown]
# Subtracting the maximum (chapter 2) makes every exponent at most $e^0 = 1$, and the result is
# right to float16's precision. `torch.softmax` does this internally. Attention logits larger
# than 11 are common, so this is not a corner case.

# %% [markdown]
# ## 12.9 What the notes get right, and what they leave out (optional, 4 min)
#
# Section 15 of the notes states eq. (12.1) correctly and computes the example right, including
# the range $\{1, \dots, 254\}$ of the biased exponent. What they leave out changes results:
#
# 1. **The formula holds only for normal numbers.** Applied to the exponent fields the notes
#    exclude, it gives wrong values: zero would be $2^{-127} \approx 5.9 \times 10^{-39}$, the
#    smallest subnormal $2^{-127}(1 + 2^{-23})$ instead of $2^{-149}$, and the all-ones exponent,
#    which means infinity or NaN, would be $2^{128}$:


# %%
def notes_formula(b: int) -> float:
    """Eq. (12.1) exactly as printed, applied to any float32 pattern."""
    s, E, f = b >> 31, (b >> 23) & 0xFF, b & (2**23 - 1)
    return (
        (-1) ** s
        * 2.0 ** (E - 127)
        * (1 + sum((f >> (23 - i) & 1) * 2.0**-i for i in range(1, 24)))
    )


for name in ("+0", "smallest subnormal", "+infinity"):
    b = landmarks[name]
    print(
        f"{name:<19} notes' formula: {notes_formula(b):.6g}",
        f"  correct: {ref.decode(b, 'float32'):.6g}",
    )
assert notes_formula(landmarks["one"]) == 1.0 and notes_formula(0) != 0.0


# %% [markdown]
# 2. **Which bit is set in the example.** The notes never print the pattern. Their term
#    $1 \cdot 2^{-2}$ is bit $b_{21}$, so the pattern is `0x3E200000`; reading "the first fraction
#    bit" $b_{22}$ instead gives 0.1875 (section 12.1).
# 3. **The smallest float32 is not $2^{-126}$.** The notes' exponent range $\{2^{-126}, \dots,
#    2^{127}\}$ is that of normal numbers; subnormals reach down to $2^{-149}$.
# 4. **bfloat16 appears only as a figure**, under LoRA, with no layout and no word on how to
#    convert: truncating the low 16 bits of a float32 is not rounding (0.1 becomes 0.0996 instead
#    of 0.1001, section 12.3).
# 5. The QLoRA section (11.2) is an empty heading; NF4 and double quantisation are in part 2
#    of this chapter, and QLoRA itself in chapter 13.

# %% [markdown]
# ## Exercises
#
# Section 12.6 asked a prediction. Here: a bug to find and fix, an implementation checked on
# several inputs including edge cases (the checker says what is wrong), a conceptual question and a
# stretch problem. Replace the body of each stub and run the cell. Solutions are folded below each
# exercise (on the website) or in cells tagged `solution`.

# %% [markdown]
# ```{exercise} Find the bug: bfloat16 as the top half of a float32
# :label: ex-formats-bug
#
# Figure 13 of the notes shows bfloat16 as a float32 with its low 16 bits cut off, and
# `notes_bf16` below converts a float32 bit pattern exactly that way. Run it on 0.1 and compare
# with section 12.3: what is wrong? Then write `to_bf16_bits(bits)`. It takes a float32 bit pattern
# (an int from 0 to $2^{32} - 1$; `np.float32(x).view(np.uint32)` gives one) and returns the
# bfloat16 pattern (an int from 0 to `0xFFFF`) of its value rounded to nearest, ties to even,
# using only integer operations (`>>`, `&`, `+`). An overflow becomes infinity; a NaN must stay a
# NaN (any NaN pattern will do). Hint: adding a constant to the low 16 bits before the shift
# rounds; which constant makes a tie go to the even neighbour?
# ```


# %%
def notes_bf16(bits):
    """float32 pattern -> bfloat16 pattern, as the notes' figure 13 suggests: the top half."""
    return bits >> 16


x32 = np.float32(0.1).view(np.uint32)  # the float32 pattern of 0.1
print(f"0.1 via the notes: {ref.decode(notes_bf16(int(x32)), 'bfloat16'):.6f}")


def to_bf16_bits(bits):
    raise NotImplementedError  # your code here


check.round_to_bfloat16(to_bf16_bits)


# %% [markdown] tags=["solution"]
# ```{solution-start} ex-formats-bug
# :class: dropdown
# ```
#
# Dropping the low 16 bits always rounds toward zero, so 0.1 becomes 0.0996 instead of 0.1001 and
# every conversion is biased toward zero. Round to nearest instead: add half of the last kept
# bit's weight, `0x8000`, before shifting, except that a tie (low half exactly `0x8000`) must go
# to even, which adding `0x7FFF` plus the lowest kept bit does in one step. The addition can carry
# into the exponent, which is right for numbers (the largest float32 becomes infinity, a subnormal
# can become the smallest normal number), but it turns a NaN whose fraction bits are all in the
# low half into infinity: handle NaN first.


# %% tags=["solution"]
def to_bf16_bits(bits):
    if (bits >> 23) & 0xFF == 0xFF and bits & 0x7FFFFF:  # NaN: keep it a (quiet) NaN
        return (bits >> 16) | 0x40
    lowest_kept = (bits >> 16) & 1
    return (bits + 0x7FFF + lowest_kept) >> 16  # round to nearest, ties to even


check.round_to_bfloat16(to_bf16_bits, require=True)


# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Decode a bfloat16 by hand
# :label: ex-formats-decode
#
# Write `decode_bf16(bits)` that returns the value (a Python float) of a 16-bit bfloat16 pattern
# given as an int, using only integer operations (`>>`, `&`) and arithmetic: no NumPy, no
# PyTorch, no `struct`. Handle all cases of section 12.2: normal and subnormal numbers, both
# zeros (`0x8000` is `-0.0`: build the sign as a float, `-1.0` or `1.0`), infinities and NaN.
# ```


# %%
def decode_bf16(bits):
    raise NotImplementedError  # your code here


check.decode_bfloat16(decode_bf16)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-formats-decode
# :class: dropdown
# ```


# %% tags=["solution"]
def decode_bf16(bits):
    s, e, f = bits >> 15, (bits >> 7) & 0xFF, bits & 0x7F  # 1 + 8 + 7 bits
    sign = -1.0 if s else 1.0
    if e == 0xFF:  # all ones: infinity or NaN, eq. (12.3)
        return sign * math.inf if f == 0 else math.nan
    if e == 0:  # zero or subnormal: no hidden 1, exponent 1 - 127, eq. (12.2)
        return sign * (f / 2**7) * 2.0**-126
    return sign * (1 + f / 2**7) * 2.0 ** (e - 127)  # eq. (12.1)


print(decode_bf16(0x3E20), decode_bf16(0x0001), decode_bf16(0x8000))
check.decode_bfloat16(decode_bf16, require=True)

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Why has E4M3 no infinity?
# :label: ex-formats-concept
#
# The OCP standard's E4M3 gives up its infinities to gain one more binade (its largest value is
# 448 instead of 240), and a cast may saturate to 448 instead of overflowing. What can go wrong in
# training when a value overflows E4M3 this way, and what must a framework that trains in fp8 do
# so that its tensors stay within range? (Think of section 12.7's loss scaling.)
# ```

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-formats-concept
# :class: dropdown
# ```
#
# With 4 exponent bits E4M3 covers only about $2^{-9}$ to 448, so the activations, weights and
# gradients of a network do not fit without help, and a value beyond 448 is either clamped to 448
# (saturation) or becomes NaN. Clamping is silent: a layer whose outputs grew past 448 trains on
# wrong numbers with no infinity to flag the overflow (an infinity at least makes dynamic loss
# scaling skip the step, section 12.7). So fp8 training scales every tensor before the cast, as
# loss scaling does for float16 gradients, but per tensor and in both directions: a factor chosen
# from the tensor's largest magnitude maps it into E4M3's range, the factor is kept in float32,
# and it is divided out after the matrix product {cite}`micikevicius2022fp8`. Once every tensor is
# scaled to fit, infinities are of little use, and one more binade is the better trade.
#
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Stretch: where rounding to nearest runs ahead
# :label: ex-formats-stretch
#
# Add 0.01 to itself 1,000 times, rounding every partial sum to bfloat16 to nearest
# (`ref.round_to_format`); the exact sum is 10. (a) Before you run anything, predict from the
# spacing of bfloat16 numbers (section 12.4) where the sum stops growing. (b) Plot the rounded
# partial sums against the exact ones: in one range the rounded sum grows *faster* than the exact
# one. Find the range and explain it. (c) Repeat with stochastic rounding (`ref.stochastic_round`,
# section 12.8) in 32 independent runs, and show that the result is right on average.
# ```

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-formats-stretch
# :class: dropdown
# ```

# %% tags=["solution"]
nearest, path = 0.0, []
for _ in range(1_000):
    nearest = float(ref.round_to_format(nearest + 0.01, "bfloat16"))
    path.append(nearest)
path, exact = np.array(path), 0.01 * np.arange(1, 1001)  # (1000,) each
print(f"to nearest: stalls at {path[-1]}, reached after {np.argmax(path >= 4) + 1} additions")
fig, ax = new_axes("0.01 added 1000 times in bfloat16", "additions", "sum", figsize=(7, 4))
ax.plot(exact, label="exact"), ax.plot(path, label="rounded to nearest")
ax.legend()
fig.tight_layout()
plt.show()
gen_sr = np.random.default_rng(7)
runs = np.zeros(32)  # 32 independent runs of stochastic rounding
for _ in range(1_000):
    runs = ref.stochastic_round(runs + 0.01, "bfloat16", gen_sr.random(32))
print(f"stochastic, 32 runs: mean {runs.mean():.1f}, from {runs.min():.2f} to {runs.max():.2f}")

# %% [markdown] tags=["solution"]
# (a) Rounded to nearest, an addend is lost once it is less than half a step of the running sum.
# From 4 on the bfloat16 step is $2^{-5} = 0.03125$, and 0.01 is less than half of it: the sum
# stalls at 4. (b) Between 2 and 4 the step is $2^{-6} \approx 0.0156$ and 0.01 is more than half
# of it, so every addition rounds *up* to a whole step: the rounded sum gains 0.0156 where the
# exact one gains 0.01, runs ahead, and reaches 4 after 350 additions instead of 400. Between 1
# and 2 it is the other way round: the step is $2^{-7} \approx 0.0078$, each addition rounds down
# to one step, and the sum falls behind. Rounding to nearest is biased in both directions, by
# whatever the addend's remainder is at the current step. (c) Stochastic rounding rounds up with
# probability proportional to the remainder, so each addition adds 0.01 on average: the 32 runs
# end near 10 on average (9.9), though a single run can be 10% off (9.00 to 10.75).
#
# ```{solution-end}
# ```

# %% [markdown]
# ## Summary
#
# - A binary float is $(-1)^s\, 2^{e - \text{bias}}\, (1.f)_2$ for normal numbers (eq. 12.1); the
#   exponent field 0 holds zeros and subnormals (eq. 12.2), the all-ones field infinities and NaNs
#   (eq. 12.3), except in E4M3FN, which trades its infinities for one more binade.
# - Range comes from exponent bits, precision from fraction bits: float16 (5, 10) is precise but
#   ends at 65504; bfloat16 (8, 7) has float32's range with 2-3 decimal digits; fp8 E4M3 and E5M2
#   split 7 bits differently for activations and gradients.
# - Rounding is to nearest, ties to even (eq. 12.4); overflow goes to infinity, or to NaN or 448
#   for E4M3FN; truncating a float32 to its top 16 bits is not rounding.
# - Mixed-precision training keeps a float32 master copy of the weights (bfloat16 loses updates
#   below half a step), multiplies bfloat16 inputs with float32 accumulation, scales float16 losses
#   so that small gradients survive, and lets `torch.autocast` pick the precision per operation.
# - Beyond the core: stochastic rounding (eq. 12.5) is unbiased and keeps small updates alive;
#   rounding twice can be wrong and rounding to odd first fixes it; long sums need pairwise or
#   compensated summation or a float32 accumulator; softmax in float16 must subtract the maximum.
#
# Part 2, [`12_number_formats_quantisation`](12_number_formats_quantisation.ipynb), stores
# weights as int8 and NF4 codes with per-block scales.

# %% [markdown]
# ## Quiz (optional, 22 min)
#
# Test yourself on this chapter's sections: multiple choice and numeric questions, each
# naming the section it tests. Choose or type an answer and check it: the quiz says whether it
# is right and why, for the wrong options too. The cell below needs nothing from the cells
# above it, so it also runs on its own when you come back to the chapter.

# %%
from course_lib import quiz

quiz.show("12_number_formats")

# %% [markdown]
# ## References
#
# - G. Strabel, *Transformers*, lecture notes, 2023, section 15 and figure 13
#   {cite}`strabel2023transformers`.
# - IEEE Standard for Floating-Point Arithmetic, IEEE Std 754-2019 {cite}`ieee2019754`.
# - D. Kalamkar et al., "A study of BFLOAT16 for deep learning training", 2019
#   {cite}`kalamkar2019study`.
# - P. Micikevicius et al., "FP8 formats for deep learning", 2022 {cite}`micikevicius2022fp8`.
# - Open Compute Project, "OCP 8-bit floating point specification (OFP8)", revision 1.0, 2023
#   {cite}`ocp2023ofp8`.
# - P. Micikevicius et al., "Mixed precision training", ICLR 2018 {cite}`micikevicius2018mixed`.
# - DeepSeek-AI, "DeepSeek-V3 technical report", 2024 {cite}`deepseek2024v3`.
# - S. Gupta et al., "Deep learning with limited numerical precision", ICML 2015
#   {cite}`gupta2015deep`.
# - S. Boldo and G. Melquiond, "Emulation of FMA and correctly rounded sums: proved algorithms
#   using rounding to odd", 2008 {cite}`boldo2008emulation`.
# - S. A. Figueroa, "When is double rounding innocuous?", 1995 {cite}`figueroa1995double`.
# - N. J. Higham, "The accuracy of floating point summation", 1993 {cite}`higham1993accuracy`.
# - W. Kahan, "Further remarks on reducing truncation errors", 1965 {cite}`kahan1965further`.
#
# The full bibliography of the course is on the [References](../book/references.md) page.
#
# ## How this chapter is tested
#
# `tests/test_number_formats.py` decodes every pattern of float16, bfloat16 and both fp8 formats
# and compares them with ml_dtypes and PyTorch, checks rounding on a million random values and
# every tie, and checks the exercises' checkers on right answers, typical mistakes and garbage;
# `tests/test_conformance.py` compares the NumPy reference and PyTorch on random inputs in four
# dtypes, most bit for bit; `benchmarks/number_formats.py` times decoding and quantisation. The
# cells below are the library checks the lesson leaves out.

# %% [markdown]
# **Every computed entry of section 12.3's table** against the three libraries' own
# descriptions of their types:

# %% tags=["needs-torch"]
ml_types = {
    "float32": np.float32,
    "float16": np.float16,
    "bfloat16": ml_dtypes.bfloat16,
    "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "float8_e5m2": ml_dtypes.float8_e5m2,
}
for r in table:
    ml, pt = ml_dtypes.finfo(ml_types[r["format"]]), torch.finfo(getattr(torch, r["format"]))
    assert r["largest finite"] == float(ml.max) == pt.max
    assert r["smallest normal"] == float(ml.smallest_normal) == pt.smallest_normal
    assert r["smallest subnormal"] == float(ml.smallest_subnormal)
    assert r["machine epsilon"] == float(ml.eps) == pt.eps
    assert r["bits"] == ml.bits == pt.bits
print("the computed table agrees with ml_dtypes.finfo and torch.finfo for all five formats")

# %% [markdown]
# **The reference decoder on every pattern** of the 16-bit and 8-bit formats against PyTorch's
# own reading of the same bits (`Tensor.view(dtype)`), NaNs compared as NaNs and the signs of the
# zeros included (the tests also compare with ml_dtypes):

# %% tags=["needs-torch"]
for name in ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"):
    fmt = get_format(name)
    every = np.arange(2**fmt.bits)  # (65536,) or (256,)
    ours = ref.decode(every, name)
    theirs = fast.decode(torch.from_numpy(every), name).double().numpy()
    np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(np.signbit(ours), np.signbit(theirs))
    finite = np.isfinite(ours)
    sub = finite & (ours != 0) & (np.abs(ours) < fmt.min_normal)
    print(
        f"{name:<14} {every.size:>6} patterns: {finite.sum():>6} finite ({sub.sum()} subnormal), "
        f"{np.isinf(ours).sum()} infinite, {np.isnan(ours).sum():>5} NaN"
    )

# %% [markdown]
# **Rounding to bfloat16** (section 12.6): on a million random float32 bit patterns
# (subnormals, infinities and NaNs included) and on every one of the 65,536 float32 numbers that
# lie exactly half-way between two bfloat16 numbers, the reference agrees with PyTorch's
# conversion:

# %% tags=["needs-torch"]
random32 = rng.integers(0, 2**32, 10**6, dtype=np.uint64).astype(np.uint32).view(np.float32)
all_ties = (np.arange(2**16, dtype=np.uint32) << 16 | 0x8000).view(np.float32)  # low half = half
for name, x32 in (("random", random32), ("ties", all_ties)):
    with np.errstate(invalid="ignore"):  # signalling NaNs among the random patterns
        ours = ref.encode(x32, "bfloat16")
    theirs = fast.encode(torch.from_numpy(x32), "bfloat16").numpy()
    np.testing.assert_array_equal(ours, theirs)
    print(f"{name}: {x32.size:,} float32 -> bfloat16 conversions, all equal to PyTorch's")

# %% [markdown]
# **Overflow to E4M3FN** (section 12.6): the reference without saturation gives what ml_dtypes
# gives, and with `saturate=True` what PyTorch's cast gives:

# %% tags=["needs-torch"]
np.testing.assert_array_equal(
    ref.round_to_format(x_fp8, "float8_e4m3fn"), x_fp8.astype(ml_dtypes.float8_e4m3fn).astype(float)
)
np.testing.assert_array_equal(
    ref.round_to_format(x_fp8, "float8_e4m3fn", saturate=True),
    torch.tensor(x_fp8).to(torch.float8_e4m3fn).double().numpy(),
)

# %% [markdown]
# **Section 12.7's matrix products and autocast** land in the ranges the text describes:

# %% tags=["needs-torch"]
fp32, torch_bf16, bf16 = (final[k] for k in final)  # at K = 4096
assert fp32 < 1e-5 < torch_bf16 < 1e-2 < bf16
assert out.dtype == torch.bfloat16 and model[0].weight.grad.dtype == torch.float32
assert rel_error < 1e-2

# %% [markdown]
# Bad input gets a message, not a stack trace from deep inside NumPy:

# %%
for call in (lambda: ref.decode(0x10000, "float16"), lambda: ref.encode(1.0, "fp8")):
    try:
        call()
    except (TypeError, ValueError) as err:
        print(f"{type(err).__name__}: {err}")
