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
# # 12. Number formats: float32, float16, bfloat16, fp8, int8 and NF4
#
# A transformer is trained and served in a handful of number formats, and most of the tricks of
# modern training (mixed precision, loss scaling, 8-bit and 4-bit weights) exist because each
# format trades range for precision in its own way. This chapter opens the bit patterns, derives
# every property of a format from three numbers, and then follows the consequences into the
# places where a transformer feels them.
#
# **After this chapter you can**
#
# - read a bit pattern of float32, float16, bfloat16 or one of the two 8-bit float formats by
#   hand, including zeros, subnormal numbers, infinities and NaNs;
# - derive a format's range, precision and spacing from the widths of its fields;
# - round a number to a format the way hardware does (to nearest, ties to even), and explain when
#   stochastic rounding is the better choice;
# - predict where low precision breaks a computation (long sums, softmax, matrix products, small
#   gradients) and apply the standard fix for each;
# - quantise a weight matrix to int8 and to NF4 with per-block scales, and measure the error and
#   the memory per parameter.
#
# **Assumes**: chapters 1 and 2 only (it can be read right after chapter 2), binary numbers,
# and what a gradient is. **Core path**: about 48 minutes of sections, and about 58 with the two
# exercises marked core; the optional sections add about 22 minutes, the optional exercises about
# 30.
#
# The chapter follows section 15 of the lecture notes {cite}`strabel2023transformers` (the
# binary32 layout and its worked example) and their bfloat16 figure (figure 13, in section 11),
# then covers what mixed-precision training and QLoRA (chapter 13) need.

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
from course_lib.plotting import PALETTE, new_axes, use_style

rng = seed_everything(0)
use_style()
np.set_printoptions(precision=6, suppress=False)

# %% [markdown]
# `ref` holds the NumPy reference, which decodes and encodes bit patterns with integer
# operations on the fields; `fast` holds the PyTorch twins, which use PyTorch's own dtypes. Both
# have the same functions under the same names. `get_format(name)` describes a format.
#
# ## 12.1 The binary32 layout (core, 6 min)
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
# ## 12.2 Zeros, subnormal numbers, infinities and NaNs (core, 5 min)
#
# Eq. (12.1) covers only $1 \le E \le 254$. The two remaining exponent values are reserved
# {cite}`ieee2019754`:
#
# | exponent field | fraction $= 0$ | fraction $\ne 0$ |
# | --- | --- | --- |
# | $0$ | $\pm 0$ | subnormal: $(-1)^s\, 2^{1 - \text{bias}}\, (0.b_{22}\dots b_0)_2$ (12.2) |
# | $1 \dots 254$ | normal, eq. (12.1) | normal, eq. (12.1) |
# | $255$ (all ones) | $\pm\infty$ | NaN (not a number) (12.3) |
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
# ## 12.3 Five formats (core, 8 min)
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
#   {cite}`micikevicius2022fp8`, E4M3 for weights and activations (more precision), E5M2 for
#   gradients (more range). The E4M3 variant used in practice, `float8_e4m3fn`, has no
#   infinities: it reuses the all-ones exponent for normal numbers and keeps only S.1111.111 as
#   NaN (one pattern per sign, `0x7F` and `0xFF`: two in all), which raises its largest value
#   from 240 to 448.
#
# Every number in the table below is **computed** from the three numbers that define a format
# (exponent width, fraction width, and whether the all-ones exponent is reserved): the largest
# finite value $2^{e_{\max}}(2 - 2^{-M})$ (one step less for E4M3FN), the smallest normal
# $2^{1-\text{bias}}$, the smallest subnormal $2^{1-\text{bias}-M}$, the machine epsilon $2^{-M}$
# (the gap between 1 and the next number) and the decimal digits $(M+1)\log_{10} 2$.

# %%
table = format_table()
head = f"{'format':<14}{'bits':>5}{'E':>3}{'M':>4}{'bias':>6}{'largest':>12}{'min normal':>12}"
head += f"{'min subnormal':>15}{'epsilon':>11}{'digits':>8}"
print(head)
for r in table:
    print(
        f"{r['format']:<14}{r['bits']:>5}{r['exponent bits']:>3}{r['fraction bits']:>4}"
        f"{r['bias']:>6}{r['largest finite']:>12.5g}{r['smallest normal']:>12.4g}"
        f"{r['smallest subnormal']:>15.4g}{r['machine epsilon']:>11.4g}{r['decimal digits']:>8.2f}"
    )

# %% [markdown]
# Three independent libraries (NumPy, ml_dtypes, PyTorch) describe their own types; every
# computed entry matches:

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
# bfloat16 is literally the top half of a float32. Dropping the low 16 bits, though, *truncates*
# (rounds toward zero); a proper conversion rounds to the nearest bfloat16, which for 0.1 is the
# next pattern up:

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
# The reference decoder is written from eqs. (12.1)-(12.3) with integer operations. To make sure
# it is right everywhere, we decode **every** pattern of the 16-bit and 8-bit formats and compare
# with PyTorch's own reading of the same bits (`Tensor.view(dtype)`), NaNs compared as NaNs and
# the signs of the zeros included. (The tests also compare with ml_dtypes.)

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
# Note how many patterns float16 and bfloat16 spend on NaN (2046 and 254): every pattern with
# an all-ones exponent and a non-zero fraction. E4M3FN spends only two, one per sign:

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
# ## 12.5 Play with the bits (optional, 5 min)
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
# ## 12.6 Rounding (core, 8 min)
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
# would bias long computations upward. Near 1, bfloat16's numbers are $2^{-7}$ apart, so
# $1 + 2^{-8}$ and $1 + 3 \cdot 2^{-8}$ are both exactly half-way:

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
# half: up; less: down; exactly half: to even). On a million random float32 bit patterns
# (subnormals, infinities and NaNs included) and on every one of the 65,536 float32 numbers that
# lie exactly half-way between two bfloat16 numbers, it agrees with PyTorch's conversion:

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
# ### Overflow and underflow
#
# A value that rounds past the largest finite number **overflows**: to infinity in the IEEE
# formats. float16's largest value is 65504 and the next step would be 65536, so anything from
# the half-way point 65520 up becomes infinity (65520 itself is a tie, and the even side is the
# infinite one). E4M3FN has no infinity: the OCP specification lets a conversion either produce
# NaN or **saturate** to the largest value, 448 {cite}`micikevicius2022fp8`. Libraries differ:
# ml_dtypes gives NaN; PyTorch 2.13, the version the course pins, saturates its cast (even
# infinity becomes 448), where PyTorch 2.11 still gave NaN. The reference does either, chosen by
# `saturate`.

# %% tags=["needs-torch"]
print("float16:", ref.round_to_format([65504.0, 65519.0, 65520.0], "float16"))
x = np.array([448.0, 464.0, 465.0, np.inf])
print("E4M3FN, no saturation: ", ref.round_to_format(x, "float8_e4m3fn"))
print("E4M3FN, saturate=True: ", ref.round_to_format(x, "float8_e4m3fn", saturate=True))
print("ml_dtypes:             ", x.astype(ml_dtypes.float8_e4m3fn).astype(np.float64))
print("PyTorch cast:          ", torch.tensor(x).to(torch.float8_e4m3fn).double().numpy())
np.testing.assert_array_equal(
    ref.round_to_format(x, "float8_e4m3fn"), x.astype(ml_dtypes.float8_e4m3fn).astype(float)
)
np.testing.assert_array_equal(
    ref.round_to_format(x, "float8_e4m3fn", saturate=True),
    torch.tensor(x).to(torch.float8_e4m3fn).double().numpy(),
)

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
gen = torch.Generator().manual_seed(0)
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
# error. This is what a low-precision weight update needs. A weight of 1.0 stored in bfloat16
# receives 1000 updates of $+10^{-3}$ (a learning rate times a gradient). The bfloat16 step at 1
# is $2^{-7} \approx 0.0078$, so each update is below half a step:

# %% tags=["needs-torch"]
steps, delta = 1000, 1e-3
w32 = torch.tensor(1.0)
w_rn = torch.tensor(1.0)
w_sr = torch.ones(64)  # 64 independent runs of stochastic rounding
history = {"float32": [], "bfloat16, round to nearest": [], "bfloat16, stochastic (mean of 64)": []}
for _ in range(steps):
    w32 = w32 + delta
    w_rn = fast.round_to_format(w_rn + delta, "bfloat16")
    w_sr = fast.stochastic_round(w_sr + delta, "bfloat16", torch.rand(64, generator=gen))
    for key, w in zip(history, (w32, w_rn, w_sr.mean()), strict=True):
        history[key].append(w.item())
print({k: round(v[-1], 3) for k, v in history.items()})
assert history["bfloat16, round to nearest"][-1] == 1.0
assert abs(history["bfloat16, stochastic (mean of 64)"][-1] - history["float32"][-1]) < 0.05

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
# With round to nearest the bfloat16 weight never moves: every update is rounded away. With
# stochastic rounding it follows the float32 weight on average. Mixed-precision training avoids
# the problem differently, by keeping a float32 *master copy* of the weights and applying the
# updates to it {cite}`micikevicius2018mixed`; stochastic rounding is the alternative when the
# weights themselves live in low precision {cite}`gupta2015deep`.
#
# ## 12.7 Consequences for transformers (optional, 17 min)
#
# ### Rounding twice
#
# A trap of section 12.6's rounding for anyone who converts between formats: rounding to
# float32 and then to float16 is not always the same as rounding to float16 once. A value just
# above a float16 tie can become the tie itself in float32, which then goes to even, the wrong
# way. PyTorch converts float64 to float16 through float32, so it rounds twice:

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
# it. In float32 all three methods are fine. In float16 the naive sum is already off by almost a
# percent. In bfloat16 it loses most of the total: the sum of 4096 numbers around 0.5 is about
# 2048, but it stops growing long before. The 8-bit formats are storage formats, not
# accumulators: their naive sums stall almost at once, Kahan's correction term is itself too
# coarse to help, and E4M3FN cannot even hold the result (2048 is beyond its largest value, 448),
# so its pairwise sum overflows to NaN. This is why fp8 matrix units accumulate in float32. The
# running bfloat16 total shows where the naive sum stalls:

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
assert (
    final["float32 accumulation"]
    < 1e-5
    < final["PyTorch bfloat16 matmul"]
    < 1e-2
    < final["bfloat16 accumulation"]
)
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
# error is half a bfloat16 step, independent of $K$. Accumulating in bfloat16 itself loses more
# with every term: several percent at $K = 4096$, and still growing. (On CUDA, cuBLAS may use
# reduced precision for parts of a bfloat16 reduction unless
# `torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction` is turned off.)
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
print(
    "output dtype:",
    out.dtype,
    "| weight dtype:",
    model[0].weight.dtype,
    "| gradient dtype:",
    model[0].weight.grad.dtype,
)
assert out.dtype == torch.bfloat16 and model[0].weight.grad.dtype == torch.float32
assert rel_error < 2e-2
print(f"relative difference from the float32 forward pass: below {math.ceil(rel_error * 100)}%")

# %% [markdown]
# The forward pass produced bfloat16 activations from float32 weights (cast on the fly), the
# relative difference from the float32 result is below one percent, and the gradients arrive in
# float32, ready for a float32 optimizer step.
#
# ## 12.8 Quantisation: int8 and NF4 (core, 12 min)
#
# Storing weights in fewer bits than any float format needs a different idea: keep a small
# integer **code** per weight and one floating-point **scale** per group of weights.
#
# ### Absmax int8
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

# %% tags=["needs-torch"]
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
#
# **Quantise 16-bit weights in float32.** Weights are often stored in bfloat16. Computing
# $w_i / s$ in bfloat16 rounds the quotient to 8 significant bits *before* `round` sees it: near
# the top of the range, where neighbouring bfloat16 numbers are 0.5 apart, that decides the code.
# So the library (like bitsandbytes) converts a block to float32, computes the scale and the codes
# there, and keeps the scale in float32. Compare both with the exact quotient in float64:

# %% tags=["needs-torch"]
W16 = (0.02 * torch.randn(64 * 1024, generator=gen)).to(torch.bfloat16)  # (n,) bfloat16 weights
exact = W16.double().view(-1, 64)  # the same numbers, exactly, in float64
s_exact = exact.abs().amax(dim=1, keepdim=True) / 127
blocks16 = W16.view(-1, 64)
q_in_bf16 = torch.round(blocks16 / (blocks16.abs().amax(dim=1, keepdim=True) / 127))  # all bf16
q_ours, s_ours = fast.absmax_quantize(W16, block_size=64)  # float32 inside
wrong_bf16 = int((q_in_bf16.double() - exact / s_exact).abs().gt(0.5 + 1e-4).sum())
wrong_ours = int((q_ours.view(-1, 64).double() - exact / s_exact).abs().gt(0.5 + 1e-4).sum())
# the share, not the count: bfloat16's division rounds a few codes differently on other CPUs
print(
    "codes that are not the nearest integer:",
    f"computed in bfloat16 {wrong_bf16 / W16.numel():.0%}, in float32 {wrong_ours}",
)
assert wrong_bf16 > 1000 and wrong_ours == 0 and s_ours.dtype == torch.float32

# %% [markdown]
# ### NF4: four bits placed where normal weights are
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
print(np.round(levels, 4))
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
#
# ### Double quantisation, and the memory per parameter
#
# A float32 scale per block of 64 weights costs $32/64 = 0.5$ extra bits per weight. QLoRA's
# **double quantisation** quantises these scales too: subtract their mean, then quantise them to
# 8 bits in blocks of 256, which costs $8/64 + 32/(64 \cdot 256) \approx 0.127$ bits per weight
# {cite}`dettmers2023qlora`. (QLoRA, and bitsandbytes with `compress_statistics=True`, store the
# second level in an 8-bit *dynamic* float code with one float32 scale per 256 scales; we use absmax
# int8 from above, which takes the same memory but is another format, so the second-level bytes
# differ from bitsandbytes' while the 4-bit codes of the weights are the same.) Finally the codes
# are stored two per byte.


# %% tags=["needs-torch"]
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


rows = compare_schemes(W)
print(f"{'scheme':<30}{'bits/param':>11}{'RMS error / std':>17}")
for name, bits, err in rows:
    print(f"{name:<30}{bits:>11.3f}{err:>17.4f}")
err = {name: e for name, _, e in rows}
bits = {name: b for name, b, _ in rows}
assert err["NF4, blocks of 64"] < err["int4, blocks of 64"]
assert (
    abs(err["NF4 + double quantisation"] - err["NF4, blocks of 64"])
    < 0.01 * err["NF4, blocks of 64"]
)
assert bits["NF4, blocks of 64"] == 4.5 and round(bits["NF4 + double quantisation"], 3) == 4.127

# %% tags=["needs-torch"]
fig, ax = new_axes(
    "Storing a 1024 x 1024 weight matrix drawn from N(0, 0.02^2)",
    "RMS error / std of the weights (log scale)",
    "scheme (bits per parameter, scales included)",
    logx=True,
    figsize=(8, 4.5),
)
labels = [f"{name} ({b:.3g})" for name, b, _ in rows]
ax.barh(
    labels, [e for _, _, e in rows], color=[PALETTE[0] if b > 5 else PALETTE[3] for _, b, _ in rows]
)
ax.invert_yaxis()  # first scheme on top
fig.tight_layout()
plt.show()

# %% [markdown]
# At the same 4.5 bits per parameter, NF4's error is about 15% smaller than evenly spaced int4's,
# because its levels follow the weights' distribution; double quantisation saves 0.37 bits per
# parameter at no visible cost. int8 with block scales is about fifteen times more accurate
# again, for twice the memory. At 8 bits, int8 with a scale beats float8 E4M3 with a scale: for
# weights in a narrow, known range, evenly spaced levels use the bits better than an exponent
# does. Chapter 13 fine-tunes a frozen NF4 model (with double quantisation) through LoRA
# adapters: QLoRA.

# %% [markdown]
# ## 12.9 What the notes get right, and what they leave out (core, 4 min)
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
# 5. The QLoRA section (11.2) is an empty heading; NF4 and double quantisation are in section
#    12.8 above, and QLoRA itself in chapter 13.

# %% [markdown]
# ## Exercises
#
# Each exercise gives you a function to write and a checker that runs it on several inputs,
# including edge cases, and says what is wrong. Replace the body of the stub and run the cell.
# Solutions are folded below each exercise (on the website) or in cells tagged `solution`.
#
# ```{exercise} Core: decode a bfloat16 by hand
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
# ```{exercise} Optional: float16's largest value
# :label: ex-formats-largest
#
# Write `largest_finite(E, M)` that returns the largest finite value of an IEEE-style format
# with $E$ exponent bits and $M$ fraction bits (the all-ones exponent reserved for infinities
# and NaNs), as a float. Then use it to print float16's largest value and compare it with
# `np.finfo(np.float16).max`.
# ```


# %%
def largest_finite(E, M):
    raise NotImplementedError  # your code here


check.largest_finite(largest_finite)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-formats-largest
# :class: dropdown
# ```


# %% tags=["solution"]
def largest_finite(E, M):
    bias = 2 ** (E - 1) - 1
    top_exponent = (2**E - 2) - bias  # the largest exponent field that is not all ones
    return (2 - 2.0**-M) * 2.0**top_exponent  # all fraction bits set: 1.11...1 in binary


print("float16:", largest_finite(5, 10), "| np.finfo:", float(np.finfo(np.float16).max))
assert largest_finite(5, 10) == float(np.finfo(np.float16).max) == 65504
check.largest_finite(largest_finite, require=True)

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Optional: absmax int8 quantisation
# :label: ex-formats-absmax
#
# Write `absmax_int8(W, block_size)` for a 1-D NumPy array `W` whose length is a multiple of
# `block_size`. Return `(q, scale)`: `q` the int8 codes (same shape as `W`) and `scale` one value
# per block, following eq. (12.6) with $b = 8$. A block of zeros must get scale 0 and codes 0
# (no division by zero).
# ```


# %%
def absmax_int8(W, block_size):
    raise NotImplementedError  # your code here


check.absmax_int8(absmax_int8)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-formats-absmax
# :class: dropdown
# ```


# %% tags=["solution"]
def absmax_int8(W, block_size):
    blocks = W.reshape(-1, block_size)  # (n_blocks, B)
    scale = np.abs(blocks).max(axis=1) / 127  # (n_blocks,)
    safe = np.where(scale > 0, scale, 1.0)  # a block of zeros divides by 1 instead of 0
    q = np.rint(blocks / safe[:, None]).astype(np.int8)  # round to nearest, ties to even
    return q.reshape(W.shape), scale


check.absmax_int8(absmax_int8, require=True)

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Core, predict then check: one plus a little in bfloat16
# :label: ex-formats-predict
#
# What is $1 + 2^{-8}$ when the result is rounded to bfloat16? And $1 + 3 \cdot 2^{-9}$? Write the
# two values as a pair of floats, then run the cell.
# ```

# %%
prediction = None  # your prediction here: (first, second)
actual = tuple(float(ref.round_to_format(v, "bfloat16")) for v in (1 + 2**-8, 1 + 3 * 2**-9))
check_prediction(prediction, actual, what="the two bfloat16 values", rtol=0)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-formats-predict
# :class: dropdown
# ```

# %% tags=["solution"]
prediction = (1.0, 1.0078125)  # 2^-8 is half of bfloat16's step 2^-7 at 1: a tie, to even (1);
# 1.5 steps is nearer to one step than to two: 1 + 2^-7
assert check_prediction(prediction, actual, what="the two bfloat16 values", rtol=0).passed

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Optional, predict then check: a 7-billion-parameter model on one GPU
# :label: ex-formats-model
#
# A model has $7 \times 10^9$ weights. How many gigabytes ($10^9$ bytes) do they take in
# float32, in bfloat16, in int8 with one float32 scale per block of 64, and in NF4 with double
# quantisation, at the bits per parameter that section 12.8 measured (scales included)? Write
# the four numbers as a tuple, rounded to one decimal, then run the cell. Which of them fit on a
# GPU with 16 GB, leaving room for the activations?
# ```

# %% tags=["needs-torch"]
prediction = None  # your prediction here: (float32, bfloat16, int8, NF4) in GB
schemes = ("int8, blocks of 64", "NF4 + double quantisation")
per_param = (32, bits["bfloat16"], *(bits[name] for name in schemes))  # bits per weight
actual = tuple(round(7e9 * b / 8 / 1e9, 1) for b in per_param)
check_prediction(prediction, actual, what="the weights' memory in GB")

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-formats-model
# :class: dropdown
# ```

# %% tags=["needs-torch", "solution"]
prediction = (28.0, 14.0, 7.4, 3.6)  # 7e9 x (32, 16, 8 + 32/64, 4.127) bits / 8 bytes
assert check_prediction(prediction, actual, what="the weights' memory in GB").passed

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```
#
# Bytes are bits / 8, so a weight costs 4, 2, 1.0625 and about 0.516 bytes. float32 (28 GB)
# does not fit; bfloat16 (14 GB) leaves almost nothing for the activations and the KV cache;
# int8 (7.4 GB) and NF4 (3.6 GB) fit with room to spare. Training is another matter: Adam in
# mixed precision keeps about 16 bytes per parameter (weights, gradients, a float32 master copy
# and two moments), 112 GB for the same model, which is why chapter 13 freezes the quantised
# weights and trains small adapters instead (QLoRA).

# %% [markdown]
# ```{exercise} Optional: why keep float32's exponent?
# :label: ex-formats-concept
#
# bfloat16 and float16 both use 16 bits. bfloat16 gives 3 fraction bits to the exponent.
# Why is that the better trade for *training* networks, and what does it cost?
# ```

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-formats-concept
# :class: dropdown
# ```
#
# With float32's 8 exponent bits, bfloat16 covers float32's whole range (about $10^{-38}$ to
# $3 \times 10^{38}$): small gradients do not underflow to zero and large activations do not
# overflow, so training needs no loss scaling (section 12.7) and converting from float32 is a
# rounding of the fraction only. The cost is precision: 8 significant bits instead of 11, a
# relative step of $2^{-8}$, so long sums must be accumulated in float32.
#
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Stretch: stochastic rounding removes the bias of a long sum
# :label: ex-formats-stretch
#
# Add 0.01 to itself 1,000 times, rounding every partial sum to bfloat16 (a) to nearest and
# (b) stochastically (`ref.stochastic_round` with uniform numbers from a seeded generator). The
# exact sum is 10. Explain the result of (a), and show that (b) is right on average.
# ```

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-formats-stretch
# :class: dropdown
# ```

# %% tags=["solution"]
gen_sr = np.random.default_rng(7)
nearest, stochastic = 0.0, 0.0
for _ in range(1_000):
    nearest = float(ref.round_to_format(nearest + 0.01, "bfloat16"))
    stochastic = float(ref.stochastic_round(stochastic + 0.01, "bfloat16", gen_sr.random()))
print(f"round to nearest: {nearest:.4f}   stochastic: {stochastic:.4f}   exact: 10")
assert nearest < 5 and abs(stochastic - 10) < 0.5

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```
#
# Rounded to nearest, the sum stops growing once 0.01 is less than half a step of bfloat16 at
# the current value (from 4 on, the step is $2^{-5} = 0.03125$): every addition rounds back
# down. Stochastic rounding rounds up with probability proportional to the remainder, so each
# rounding is right on average and the expected sum stays 10.

# %% [markdown]
# ## Summary
#
# - A binary float is $(-1)^s\, 2^{e - \text{bias}}\, (1.f)_2$ for normal numbers (eq. 12.1); the
#   exponent field 0 holds zeros and subnormals (12.2), the all-ones field infinities and NaNs
#   (12.3), except in E4M3FN, which trades its infinities for one more binade.
# - Range comes from exponent bits, precision from fraction bits: float16 (5, 10) is precise but
#   ends at 65504; bfloat16 (8, 7) has float32's range with 2-3 decimal digits; fp8 E4M3 and E5M2
#   split 7 bits differently for activations and gradients.
# - Rounding is to nearest, ties to even (12.4); overflow goes to infinity, or NaN or saturation
#   for E4M3FN; rounding twice can be wrong, rounding to odd first fixes it. Stochastic rounding
#   (12.5) is unbiased and keeps small updates alive.
# - In low precision: sum pairwise or compensated (or accumulate in float32), subtract the max in
#   softmax, multiply bfloat16 inputs with float32 accumulation, scale float16 losses, and let
#   `torch.autocast` pick the precision per operation.
# - Absmax quantisation (12.6) stores integer codes and one scale per block; per-block scales
#   contain outliers. NF4 (12.7) places 16 levels at normal quantiles and beats int4 at the same
#   4.5 bits per parameter; double quantisation brings the cost to about 4.127 bits.
#
# ## References
#
# - G. Strabel, *Transformers*, lecture notes, 2023, section 15 and figure 13
#   {cite}`strabel2023transformers`.
# - IEEE Standard for Floating-Point Arithmetic, IEEE Std 754-2019 {cite}`ieee2019754`.
# - D. Kalamkar et al., "A study of BFLOAT16 for deep learning training", 2019
#   {cite}`kalamkar2019study`.
# - P. Micikevicius et al., "FP8 formats for deep learning", 2022 {cite}`micikevicius2022fp8`.
# - P. Micikevicius et al., "Mixed precision training", ICLR 2018 {cite}`micikevicius2018mixed`.
# - S. Gupta et al., "Deep learning with limited numerical precision", ICML 2015
#   {cite}`gupta2015deep`.
# - S. Boldo and G. Melquiond, "Emulation of FMA and correctly rounded sums: proved algorithms
#   using rounding to odd", 2008 {cite}`boldo2008emulation`.
# - S. A. Figueroa, "When is double rounding innocuous?", 1995 {cite}`figueroa1995double`.
# - N. J. Higham, "The accuracy of floating point summation", 1993 {cite}`higham1993accuracy`.
# - W. Kahan, "Further remarks on reducing truncation errors", 1965 {cite}`kahan1965further`.
# - T. Dettmers et al., "LLM.int8(): 8-bit matrix multiplication for transformers at scale", 2022
#   {cite}`dettmers2022llmint8`.
# - T. Dettmers et al., "8-bit optimizers via block-wise quantization", ICLR 2022
#   {cite}`dettmers2022optimizers`.
# - T. Dettmers et al., "QLoRA: efficient finetuning of quantized LLMs", 2023
#   {cite}`dettmers2023qlora`.
#
# The full bibliography of the course is on the [References](../book/references.md) page.
#
# ## How this chapter is tested
#
# `tests/test_number_formats.py` decodes every pattern of float16, bfloat16 and both fp8
# formats and compares them with ml_dtypes and PyTorch, checks rounding on a million random
# values and every tie, quantises 16-bit weights against a float64 computation, and checks
# NF4 against bitsandbytes (packed codes, scales and values); `tests/test_conformance.py`
# compares the NumPy reference and PyTorch on random inputs in four dtypes, most bit for bit;
# `benchmarks/number_formats.py` times decoding and quantisation.

# %% [markdown]
# Both sides agree on every pattern of the small formats (section 12.3) and on a million
# conversions (section 12.6); `tests/test_conformance.py` compares every function on random
# inputs for several dtypes, most of them bit for bit. Bad input gets a message, not a stack trace
# from deep inside NumPy:

# %% tags=["needs-torch"]
for call in (
    lambda: ref.decode(0x10000, "float16"),
    lambda: ref.encode(1.0, "fp8"),
    lambda: fast.absmax_quantize(torch.tensor([1.0, float("nan")])),
):
    try:
        call()
    except (TypeError, ValueError) as err:
        print(f"{type(err).__name__}: {err}")
