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

    course_lib.colab.setup("05_transformer_block")

# %% [markdown]
# # 5. The Transformer block
#
# Attention lets tokens talk to each other; on its own it is not a network you can stack a
# hundred times and train. The **block** wraps it with three more ingredients: a residual
# connection around every sub-layer, a normalisation that keeps each token's vector at a
# predictable scale, and a small feed-forward network applied to every position. This chapter
# builds the block in every variant the notes mention, checks it against PyTorch's own layer,
# and stacks it into the decoder-only model that chapter 8 trains, written on one page. Its
# second part, [`05_transformer_block_stacks`](05_transformer_block_stacks.ipynb), counts the
# parameters of such stacks, shows why the place of the norm decides whether a deep stack trains
# at all, and builds the encoder–decoder of the original Transformer.
#
# **After this chapter you can**
#
# - write LayerNorm (with its gain) and RMSNorm, match `torch.nn.LayerNorm` and
#   `torch.nn.RMSNorm` to rounding error, and derive LayerNorm's gradient;
# - explain with a measurement why residual connections keep the gradient of a deep stack alive;
# - write the position-wise feed-forward network with ReLU, GELU or swish, and its gated
#   (GLU, SwiGLU) variant;
# - assemble post-LN, pre-LN and parallel blocks, with or without biases, and find the bug in
#   the handwritten notes' pre-LN formula;
# - stack blocks into the decoder-only model of eq. (21) of Strabel's notes, with tied
#   embeddings, written on one page and equal to the library's model.
#
# **Assumes**: chapter 4 (multi-head attention, masks; we call its functions) and basic
# PyTorch autograd.
# **Core path**: about 54 minutes; every section is core (the optional sections add about 0
# minutes), and the exercises at the end take about 40 more.
# The optional quiz that ends the lesson takes about 22 minutes more.
#
# The chapter follows section 2.4 and eq. (21) of Strabel's notes
# {cite}`strabel2023transformers`, the block and LayerNorm equations of the lecture slides
# {cite}`marlin2022transformers`, section 1.3 (residuals and layer norm) of May's notes
# {cite}`may2024transformer`, and the handwritten notes' list of block modifications (norm
# position, bias removal, RMSNorm, gated units, the parallel block). Where the notes get
# something wrong, the section that covers it says so and shows the correct form.

# %%
import math

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import course_lib.block.accelerated as fast
import course_lib.block.reference as ref
from course_lib import seed_everything
from course_lib.attention.accelerated import fuse_head_weights
from course_lib.attention.reference import causal_mask, multi_head_attention
from course_lib.block import exercises as check
from course_lib.block.config import BlockConfig, DecoderConfig
from course_lib.block.counting import count_parameters
from course_lib.block.params import init_parameters, layout
from course_lib.checker import check_prediction
from course_lib.models import DecoderOnlyModel, TransformerBlock, encoder_layer_parameters
from course_lib.plotting import new_axes, use_style

rng = seed_everything(0)
use_style()
np.set_printoptions(precision=3, suppress=True)


# %% [markdown]
# `ref` holds the NumPy references (float64, written like the equations) and `fast` their
# PyTorch twins (same names and signatures; batched, any device, dtype-preserving,
# differentiable). Configurations and parameter counts live in `course_lib.block.params`; the
# `torch.nn.Module`s in `course_lib.models`.
#
# ## 5.1 The block as the notes describe it (core, 4 min)
#
# The notes describe one block in four steps {cite}`strabel2023transformers` (section 2.4):
# multi-head self-attention turns the input $X_0$ into $X_1$; $X_0 + X_1$ is normalised into
# $X_2$; a feed-forward layer turns $X_2$ into $X_3$; $X_2 + X_3$ is normalised into the output
# $X_4$. The slides write the same thing token by token {cite}`marlin2022transformers`:
#
# $$
# \begin{aligned}
# \mathbf{h} &= \operatorname{MultiheadAttention}(\mathbf{x}), \\
# \mathbf{u}_i &= \operatorname{LayerNorm}(\mathbf{x}_i + \mathbf{h}_i;\ \gamma_1, \beta_1), \\
# \mathbf{z}'_i &= W_2 \operatorname{relu}(W_1 \mathbf{u}_i), \\
# \mathbf{z}_i &= \operatorname{LayerNorm}(\mathbf{u}_i + \mathbf{z}'_i;\ \gamma_2, \beta_2).
# \end{aligned}
# $$
#
# Because the normalisation comes *after* each residual addition, this arrangement is called
# **post-LN**; it is the one of the original Transformer {cite}`vaswani2017attention`. (The
# slides introduce the block as a map from $M$ inputs of width $D$ to $M$ outputs of width $K$;
# the very next line adds $\mathbf{x}_i + \mathbf{h}_i$, which needs $K = D$. Every residual
# connection fixes the width of the residual stream, and our blocks refuse an input of the wrong
# width.) A block is fully described by a handful of numbers, collected in a `BlockConfig`:

# %%
cfg = BlockConfig(d_model=8, n_heads=2, d_ff=32)  # post-LN, LayerNorm, ReLU, biases
params = init_parameters(cfg, rng)  # a dict of named float64 arrays
for name, shape in layout(cfg)[:6]:
    print(f"{name:<11} {shape}")
print("...", len(layout(cfg)), "tensors,", count_parameters(cfg), "numbers")

# %% [markdown]
# We store weights in the notes' row convention (a token is a row, a layer computes $XW$), so
# the feed-forward weight $W_1$ is $(d_\text{model}, d_\text{ff})$, and the attention weights
# are stacked per head exactly as in chapter 4: `w_q` is $(h, d_\text{model}, d_k)$. Running the
# block on a sequence of $L = 5$ tokens:

# %%
X0 = rng.standard_normal((5, 8))  # (L, d)
X4 = ref.transformer_block(X0, params, cfg)  # (L, d)
print(X4.shape)
print("largest |row mean|  < 1e-12:", np.abs(X4.mean(axis=-1)).max() < 1e-12)
print("row standard deviations:", X4.std(axis=-1).round(4))
np.testing.assert_allclose(X4.mean(axis=-1), 0, atol=1e-12)

# %% [markdown]
# Every output row has mean 0 and standard deviation (almost exactly) 1: the last thing a
# post-LN block does is normalise, and at initialisation the gain is 1 and the bias 0. The
# standard deviation falls short of 1 only by the $\epsilon$ inside the square root, which the
# next section explains.
#
# ## 5.2 Layer normalisation (core, 8 min)
#
# LayerNorm rescales each token's vector on its own, using only that vector's $d$ entries
# {cite}`ba2016layer`. The slides give it with a gain $\gamma$ and a bias $\beta$
# {cite}`marlin2022transformers`:
#
# $$
# \operatorname{LayerNorm}(\mathbf{z}; \gamma, \beta) = \beta + \gamma \odot
# \frac{\mathbf{z} - \mu(\mathbf{z})}{\sigma(\mathbf{z})}, \qquad
# \mu(\mathbf{z}) = \frac{1}{d}\sum_{i=1}^{d} z_i, \qquad
# \sigma(\mathbf{z}) = \Big(\frac{1}{d}\sum_{i=1}^{d} (z_i - \mu)^2 + \epsilon\Big)^{1/2}.
# $$
#
# The small $\epsilon$ (PyTorch's default is $10^{-5}$) is not in the notes; it keeps a token
# whose entries are all equal from producing $0/0$. By hand, for $\mathbf{z} = (1, 2, 3)$:
# $\mu = 2$, $\sigma^2 = 2/3$, so the result is $(-1, 0, 1)\cdot\sqrt{3/2}$.

# %%
z = np.array([1.0, 2.0, 3.0])
print(ref.layer_norm(z, eps=0.0))
np.testing.assert_allclose(ref.layer_norm(z, eps=0.0), np.array([-1, 0, 1]) * np.sqrt(1.5))
print(ref.layer_norm([4.0, 4.0, 4.0], bias=[0.0, 1.0, 2.0]))  # sigma = 0: the bias survives

# %% [markdown]
# Notice the division is by $d$, not $d - 1$ (the biased variance), and the statistics are per
# token: two tokens never influence each other's normalisation, unlike batch normalisation.
# The gain and bias are learned, one number per feature, so after normalising the layer can
# still give each feature its own scale and offset.
#
# **The handwritten notes' LayerNorm has no gain.** They write
# $\operatorname{LayerNorm}(h)_t = (h_t - \mu_t)/\sigma_t + \beta$, with only a bias and no
# $\epsilon$. Without $\gamma$, every token leaves the norm with standard deviation exactly 1
# across its features, whatever the layer learns; with a gain, the features get their own
# scales. Without $\epsilon$, a token whose entries are all equal gives $0/0$:

# %%
x = rng.standard_normal((3, 8))  # (L, d): three tokens
gamma = np.linspace(0.5, 3.0, 8)  # one gain per feature
print("std per token, the notes' form:", ref.layer_norm(x, bias=np.zeros(8)).std(axis=-1).round(3))
print(
    "std per token, with a gain:    ", ref.layer_norm(x, gamma, np.zeros(8)).std(axis=-1).round(3)
)
const = np.full(4, 2.0)
with np.errstate(invalid="ignore"):
    print("constant token without eps:", (const - const.mean()) / const.std())
print("constant token with eps:   ", ref.layer_norm(const))

# %% [markdown]
# Our PyTorch version calls `torch.nn.functional.layer_norm`; both sides match
# `torch.nn.LayerNorm` with the same (random) weights:

# %%
ln = torch.nn.LayerNorm(8, dtype=torch.float64)
with torch.no_grad():
    ln.weight.normal_(), ln.bias.normal_()
x = torch.randn(2, 5, 8, dtype=torch.float64)  # (B, L, d)
torch.testing.assert_close(fast.layer_norm(x, ln.weight, ln.bias), ln(x))
w_np, b_np = ln.weight.detach().numpy(), ln.bias.detach().numpy()
np.testing.assert_allclose(ref.layer_norm(x.numpy(), w_np, b_np), ln(x).detach().numpy())

# %% [markdown]
# ### RMSNorm
#
# RMSNorm drops the centring and the bias and divides by the root mean square
# {cite}`zhang2019root`:
#
# $$
# \operatorname{RMSNorm}(\mathbf{z}; \gamma) = \gamma \odot
# \frac{\mathbf{z}}{\operatorname{RMS}(\mathbf{z})},
# \qquad \operatorname{RMS}(\mathbf{z}) = \Big(\frac{1}{d}\sum_{i=1}^{d} z_i^2 +
# \epsilon\Big)^{1/2}.
# $$
#
# It is cheaper (one reduction instead of two) and works as well in practice, which is why
# the handwritten notes list it among the modern modifications of the block. For a vector
# that already has mean zero, the two norms coincide:

# %%
x = rng.standard_normal((4, 8))
centred = x - x.mean(axis=-1, keepdims=True)
np.testing.assert_allclose(ref.rms_norm(centred, eps=1e-5), ref.layer_norm(x, eps=1e-5))
rms = torch.nn.RMSNorm(8, eps=1e-6, dtype=torch.float64)
with torch.no_grad():
    rms.weight.normal_()
xt = torch.from_numpy(x)
torch.testing.assert_close(fast.rms_norm(xt, rms.weight, eps=1e-6), rms(xt))
np.testing.assert_allclose(
    ref.rms_norm(x, rms.weight.detach().numpy(), eps=1e-6), rms(xt).detach().numpy(), rtol=1e-12
)
print("RMSNorm matches torch.nn.RMSNorm; RMSNorm of centred x equals LayerNorm of x")

# %% [markdown]
# ## 5.3 Residual connections (core, 12 min)
#
# May's notes motivate the residual connection
# {cite}`may2024transformer` (section 1.3): if a layer's output were only
# $\mathrm{ff}(\mathrm{self}(x))$, whatever attention decided to ignore about a token would be lost
# for good. Adding the input back, $f(x) \to x + f(x)$ (the handwritten notes' item 5;
# {cite}`he2016deep`), means each sub-layer only has to learn a *change* to the token's vector.
# Seen from the whole stack, every block reads from and adds to one running sum, which Elhage
# et al. call the **residual stream** {cite}`elhage2021mathematical`. The same identity path
# helps gradients: the Jacobian of $x + f(x)$ is $I + J_f$, so a gradient $g$ at the output
# reaches the input as exactly $g + J_f^\top g$: the gradient itself, plus whatever flows back
# through $f$. One residual layer $x + \tanh(xW)$, checked against autograd:

# %% tags=["worksheet"]
torch.manual_seed(0)
depth, d = 24, 64
layers = [torch.randn(d, d, dtype=torch.float64) * 0.5 / d**0.5 for _ in range(depth)]  # (d, d)
x = torch.randn(1, d, dtype=torch.float64, requires_grad=True)  # (1, d): one token
W = layers[0]  # (d, d)
g = torch.randn(1, d, dtype=torch.float64)  # a gradient arriving at the output
y = x + torch.tanh(x @ W)  # one residual layer
(grad_x,) = torch.autograd.grad(y, x, grad_outputs=g)
J = torch.autograd.functional.jacobian(lambda v: torch.tanh(v @ W), x.detach())[0, :, 0]  # (d, d)
torch.testing.assert_close(grad_x, g + g @ J)  # g + J^T g, written for row vectors

# %% [markdown]
# Now chain 24 such layers, each with its own random $W$ whose entries have standard deviation
# $0.5/\sqrt{d}$, so that $W$ roughly halves the length of a vector it multiplies; near zero
# $\tanh$ passes its input almost unchanged. The output's sum has gradient $(1, \dots, 1)$, of
# length $\sqrt{64} = 8$, which is what the input would receive with no layers at all.

# %% [markdown] tags=["worksheet"]
# ```{exercise} Predict, then check: a gradient through 24 layers
# :label: ex-block-predict-depth
#
# Without residual connections, each layer computes $\tanh(hW)$. About how large is the
# gradient at the input, $|\partial\, \text{sum(out)} / \partial x|$, after the 24 layers?
# Write your prediction as a power of ten, $\log_{10}$ of the norm (for example `-2` for
# $10^{-2}$); anything within 1 of the measured value counts. Then run the cell.
# ```

# %% tags=["worksheet"]
prediction = None  # your prediction here: log10 of |d sum(out) / d x| without residuals
norms = {}
for residual in (False, True):
    h = x
    for W in layers:
        h = h + torch.tanh(h @ W) if residual else torch.tanh(h @ W)
    (grad,) = torch.autograd.grad(h.sum(), x)
    norms[residual] = grad.norm().item()
check_prediction(
    prediction,
    round(math.log10(norms[False]), 1),
    what="log10 of the gradient at the input",
    rtol=0,
    atol=1,
    explanation="each layer multiplies the gradient by about 1/2 (the weights' gain 0.5, and "
    "tanh' <= 1), so 24 layers give about 8 x 2^-24 = 5e-7, log10 about -6.3; a prediction "
    "near log10 8 = 0.9 is the gradient of the identity, which only the residual path keeps",
)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-block-predict-depth
# :class: dropdown
# ```

# %% tags=["solution"]
prediction = math.log10(8 * 0.5**24)  # each layer about halves the gradient: -6.3
assert check_prediction(
    prediction,
    round(math.log10(norms[False]), 1),
    what="log10 of the gradient at the input",
    rtol=0,
    atol=1,
).passed

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %%
print(f"no layers at all (identity)  |d out / d x| = {d**0.5:.2e}")
for residual, norm in norms.items():
    print(f"24 layers, residual={residual!s:<5} |d out / d x| = {norm:.2e}")

# %% [markdown]
# Without residuals the gradient at the input has all but vanished after 24 layers. With them
# it does not vanish: every layer passes the gradient through unchanged and adds its own
# contribution $J_f^\top g$, so it even grows a little, to about three times the identity's.
# Move the sliders: a deeper chain, or weights of larger gain, make the residual chain's
# gradient grow (each layer multiplies by $I + J_f$, whose norm is above 1); with a gain of 1 the
# plain chain's gradient neither vanishes nor grows much, and above 1 it grows with depth. The
# residual path removes vanishing, not growth; how the norm's position controls the growth is
# the subject of part 2 (section 5.8).

# %%
from course_lib.block.widget import residual_explorer

residual_explorer(depth=24, gain=0.5)

# %% [markdown]
# ## 5.4 The position-wise feed-forward network (core, 9 min)
#
# After attention has mixed information *across* tokens, the feed-forward network transforms
# each token *by itself*, with the same two layers at every position (the handwritten notes'
# item 6, written there for column vectors as
# $W_2\,\phi(W_1\mathbf{x}_t + \mathbf{b}_1) + \mathbf{b}_2$). In the row convention,
#
# $$\operatorname{FFN}(\mathbf{x}) = \phi(\mathbf{x} W_1 + \mathbf{b}_1)\, W_2 + \mathbf{b}_2,
# \qquad W_1 \in \mathbb{R}^{d \times d_\text{ff}},\ W_2 \in \mathbb{R}^{d_\text{ff} \times d},$$
#
# usually with $d_\text{ff} = 4d$. "Position-wise" is a checkable claim: applying the network
# to a whole sequence is the same as applying it to each token separately.

# %%
w1, w2 = params["w_1"], params["w_2"]  # (8, 32), (32, 8)
b1, b2 = params["b_1"], params["b_2"]
seq = rng.standard_normal((5, 8))  # (L, d)
whole = ref.feed_forward(seq, w1, w2, b1, b2)  # (L, d)
one_by_one = np.stack([ref.feed_forward(tok, w1, w2, b1, b2) for tok in seq])
np.testing.assert_allclose(whole, one_by_one)
print(whole.shape)

# %% [markdown]
# **May's notes' feed-forward formula has one ReLU too many.** They describe "two linear
# transformations and one ReLU", then print $\max(0, \max(0, xW_1 + b_1)W_2 + b_2)$, which
# applies a second ReLU to the output. The network of the original paper, and of every block in
# this chapter, is $\max(0, xW_1 + b_1)W_2 + b_2$: its output can be negative, which the residual
# stream needs (a sub-layer that could only add non-negative numbers could never lower a
# feature):

# %%
as_printed = np.maximum(0, np.maximum(0, seq @ w1 + b1) @ w2 + b2)  # May's notes: two ReLUs
np.testing.assert_allclose(whole, np.maximum(0, seq @ w1 + b1) @ w2 + b2)  # ours: one ReLU
print("negative outputs: printed", int((as_printed < 0).sum()), " ours", int((whole < 0).sum()))

# %% [markdown]
# The nonlinearity $\phi$ was ReLU in the original Transformer; GPT uses GELU,
# $x\,\Phi(x)$ with $\Phi$ the standard normal distribution function {cite}`hendrycks2016gaussian`
# (GPT-2 computes it with a $\tanh$ approximation), and recent models use swish,
# $x\,\sigma(x)$. The three are close for large $|x|$ and differ near zero, where GELU and swish
# are smooth and dip slightly below zero:

# %%
grid = np.linspace(-4, 4, 401)
fig, ax = new_axes("Feed-forward nonlinearities", "x", "phi(x)", figsize=(6.4, 3.6))
for name in ("relu", "gelu", "gelu_tanh", "swish"):
    ax.plot(grid, ref.activation(grid, name), label=name, lw=1.6)
ax.legend()
fig.tight_layout()
plt.show()
np.testing.assert_allclose(
    ref.activation(grid, "gelu_tanh"), ref.activation(grid, "gelu"), atol=1e-3
)

# %% [markdown]
# The $\tanh$ form of GELU never differs from the exact one by more than $10^{-3}$ on this range
# (the assertion above), which is why GPT-2 could use it.
#
# ### Gated linear units
#
# The handwritten notes replace the FFN's nonlinearity by a **gated linear unit**
# $W_3\big(\phi(W_1\mathbf{x}) \odot W_2\mathbf{x}\big)$, "often swish" {cite}`shazeer2020glu`. In
# the row convention, $(\phi(\mathbf{x}W_1) \odot \mathbf{x}W_2)\,W_3$: one branch, passed through
# $\phi$, multiplies the other entry by entry, so the network can switch features on and off
# depending on the input. With swish this is **SwiGLU**. It has three matrices instead of two,
# so models that use it shrink $d_\text{ff}$ from $4d$ to $\tfrac{2}{3}\cdot 4d$ to keep the
# parameter count:

# %%
d = 12
plain = BlockConfig(d_model=d, n_heads=2, d_ff=4 * d, bias=False)
swiglu = BlockConfig(
    d_model=d, n_heads=2, d_ff=(2 * 4 * d) // 3, gated=True, activation="swish", bias=False
)
print("plain FFN d_ff =", plain.d_ff, " SwiGLU d_ff =", swiglu.d_ff)
assert count_parameters(plain) == count_parameters(swiglu)
g = init_parameters(swiglu, rng)
out = ref.glu_feed_forward(rng.standard_normal((5, d)), g["w_1"], g["w_2"], g["w_3"])  # (L, d)
print(out.shape)

# %% [markdown]
# ## 5.5 Three ways to arrange a block (core, 7 min)
#
# The handwritten notes list the positions a norm can take. With $N_1, N_2$ the two norms
# (LayerNorm or RMSNorm), the three arrangements are
#
# $$
# \begin{aligned}
# \text{post-LN:}\quad & X_2 = N_1\big(X + \operatorname{MHSA}(X)\big), &
#   \text{out} &= N_2\big(X_2 + \operatorname{FFN}(X_2)\big), \\
# \text{pre-LN:}\quad & X' = X + \operatorname{MHSA}\big(N_1(X)\big), &
#   \text{out} &= X' + \operatorname{FFN}\big(N_2(X')\big), \\
# \text{parallel:}\quad & \text{out} = X + \operatorname{MHSA}\big(N_1(X)\big) +
# \operatorname{FFN}\big(N_1(X)\big). &&
# \end{aligned}
# $$
#
# In pre-LN {cite}`xiong2020layer` the residual stream $X \to X' \to \text{out}$ is never
# normalised; each branch normalises its own copy of the input. The parallel block (GPT-J,
# PaLM {cite}`chowdhery2023palm`) computes both branches from the same normalised input, so
# they can run at the same time; we use one shared norm, as PaLM's formula reads. Each variant can
# drop its biases (the notes' "removal of biases"; the LayerNorm bias goes too, as in PyTorch's
# `bias=False`). All three, written out from their equations, agree with the library:

# %%
x = rng.standard_normal((2, 5, 8))  # (B, L, d)
for pos in ("post", "pre", "parallel"):
    c = BlockConfig(d_model=8, n_heads=2, d_ff=32, norm_position=pos)
    p = {k: v + 0.1 * rng.standard_normal(v.shape) for k, v in init_parameters(c, rng).items()}

    def N(i, z, p=p):
        return ref.layer_norm(z, p[f"norm{i}_gain"], p[f"norm{i}_bias"])

    def mhsa(z, p=p):  # chapter 4's attention with this block's weights and biases
        w = [p[n] for n in ("w_q", "w_k", "w_v", "w_o")]
        return multi_head_attention(z, z, z, *w, **{n: p[n] for n in ("b_q", "b_k", "b_v", "b_o")})

    def ffn(z, p=p):
        return ref.feed_forward(z, p["w_1"], p["w_2"], p["b_1"], p["b_2"])

    if pos == "post":
        X2 = N(1, x + mhsa(x))
        by_hand = N(2, X2 + ffn(X2))
    elif pos == "pre":
        Xp = x + mhsa(N(1, x))
        by_hand = Xp + ffn(N(2, Xp))
    else:
        by_hand = x + mhsa(N(1, x)) + ffn(N(1, x))
    np.testing.assert_allclose(ref.transformer_block(x, p, c), by_hand, rtol=1e-12)
    print(f"{pos:<8} block = its equation; {count_parameters(c)} parameters")

# %% [markdown]
# The parallel block has $2d$ fewer parameters: one norm instead of two. The PyTorch twin runs
# the same computation batched and differentiable (the modules of `course_lib.models` call it),
# and PyTorch ships a block too, `torch.nn.TransformerEncoderLayer`, post-LN by default and
# pre-LN with `norm_first=True`; from the same weights all of them compute the same outputs and
# gradients (the appendix, "How this chapter is tested", checks every variant).
#
# **May's notes describe pre-LN as the original Transformer.** They give
# $x' = \mathrm{self}(\mathrm{norm}(x)) + x$ and say the original paper did not describe it
# well. The paper is explicit, and different: each sub-layer's output is
# $\operatorname{LayerNorm}(x + \operatorname{Sublayer}(x))$ {cite}`vaswani2017attention`
# (section 3.1), which is post-LN. Pre-LN came later (GPT-2 uses it, and Xiong et al. analyse
# it {cite}`xiong2020layer`); the notes' *form* is not wrong, only its history. PyTorch's layer
# follows the paper by default:

# %%
layer = nn.TransformerEncoderLayer(16, 4, 64, dropout=0.0, batch_first=True, dtype=torch.float64)
c_torch, p_torch = encoder_layer_parameters(layer)  # its weights in our layout
xt = torch.randn(2, 5, 16, dtype=torch.float64)  # (B, L, d)
torch.testing.assert_close(layer(xt), fast.transformer_block(xt, p_torch, c_torch))
print("PyTorch's default layer is", c_torch.norm_position + "-LN")

# %% [markdown]
# The handwritten notes print a third "standard" block,
# $x + \operatorname{FFN}(\operatorname{LN}(x + \operatorname{MHSA}(x)))$, which is neither of
# the first two: the find-the-bug exercise at the end of the chapter asks what is wrong with it.
#
# ## 5.6 Stacking blocks: the decoder-only model, on one page (core, 14 min)
#
# A Transformer is a stack of $R$ blocks, each with its own parameters, each reading the
# previous one's output {cite}`marlin2022transformers`: $\mathbf{z}^1 =
# \operatorname{Block}_{\omega_1}(\mathbf{x})$, ..., $\mathbf{z}^R =
# \operatorname{Block}_{\omega_R}(\mathbf{z}^{R-1})$. GPT puts token and position embeddings
# in front and a softmax over the vocabulary behind {cite}`radford2018improving`; the notes
# write it as eq. (21) {cite}`strabel2023transformers`:
#
# $$
# h_0 = U W_e + W_p, \qquad h_l = \operatorname{block}_l(h_{l-1}),\ l = 1, \dots, n, \qquad
# P(u) = \operatorname{softmax}(h_n W_e^\top),
# $$
#
# where $U$ holds the one-hot rows of the context tokens, $W_e \in \mathbb{R}^{V\times d}$ is the
# token embedding and $W_p$ the learned position embedding. The output projection is $W_e^\top$:
# the embedding matrix is **tied**, used twice. (The notes print the output matrix as $W'_e$,
# which hides the tying, and quantify the middle equation over "$\forall i \in [1, \dots, n]$"
# while its index is $l$; that slip they inherited from GPT-1's own eq. (2)
# {cite}`radford2018improving`, which writes $W_e^\top$ for the output.) Every block's attention
# is causal (token $i$ sees tokens $j \le i$). With pre-LN blocks the residual stream is never
# normalised, so a final norm goes before the projection (GPT-2 added one there).
#
# Here is the whole model, in the manner of nanoGPT: a pre-LN block (GELU, biases, as in GPT-2)
# and the stack of eq. (21) around it. The attention is chapter 4's module on one page: one
# fused product for the queries, keys and values of every head, a reshape to split the heads,
# eq. (13) with a causal mask, the heads merged back and projected by $W_O$.


# %%
class Block(nn.Module):
    """A pre-LN block: x + MHSA(LN1(x)), then + FFN(LN2(.))."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int):
        super().__init__()
        self.h = n_heads
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.w_qkv = nn.Linear(d_model, 3 * d_model)  # W_Q, W_K, W_V of all heads, side by side
        self.w_o = nn.Linear(d_model, d_model)  # W_O
        self.ff1, self.ff2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)  # W_1, W_2

    def attention(self, x, mask):  # x: (B, L, d); mask: True = may attend
        B, L, d = x.shape
        q, k, v = self.w_qkv(x).split(d, dim=-1)  # 3 x (B, L, d)
        q, k, v = (t.view(B, L, self.h, d // self.h).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // self.h)  # (B, h, L, L)
        a = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1) @ v  # (B, h, L, d_k)
        return self.w_o(a.transpose(1, 2).reshape(B, L, d))  # (B, L, d): concat, then W_O

    def forward(self, x, mask):
        x = x + self.attention(self.ln1(x), mask)  # (B, L, d): residual around attention
        return x + self.ff2(F.gelu(self.ff1(self.ln2(x))))  # (B, L, d): and around the FFN


class GPT(nn.Module):
    """Eq. (21): h_0 = U W_e + W_p, h_l = block_l(h_{l-1}), logits h_n W_e^T."""

    def __init__(
        self, vocab_size: int, context_length: int, n_layers: int, d_model: int, n_heads: int
    ):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab_size, d_model)  # W_e, (V, d)
        self.pos_emb = nn.Embedding(context_length, d_model)  # W_p, (n_ctx, d)
        self.blocks = nn.ModuleList(Block(d_model, n_heads, 4 * d_model) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d_model)  # the final norm of a pre-LN stack

    def forward(self, tokens):  # tokens: (B, L) integers
        L = tokens.shape[1]
        h = self.tok_emb(tokens) + self.pos_emb(torch.arange(L))  # (B, L, d): U W_e + W_p
        causal = torch.ones(L, L, dtype=torch.bool).tril()  # (L, L): i sees j <= i
        for block in self.blocks:
            h = block(h, causal)  # (B, L, d)
        return self.ln_f(h) @ self.tok_emb.weight.T  # (B, L, V): tied output, W_e^T


# %% [markdown]
# The library's `DecoderOnlyModel` is the same model, with the same parameters: with the
# library's weights copied into the page's modules, the page, the library's PyTorch model and
# its NumPy twin `ref.decoder_forward` compute the same logits (the appendix shows the copy).

# %%
dcfg = DecoderConfig(
    vocab_size=11,
    context_length=12,
    n_layers=3,
    block=BlockConfig(d_model=16, n_heads=4, d_ff=64, norm_position="pre", activation="gelu"),
)
model = DecoderOnlyModel(dcfg, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
page = GPT(vocab_size=11, context_length=12, n_layers=3, d_model=16, n_heads=4).double()
tokens = torch.randint(0, 11, (2, 9), generator=torch.Generator().manual_seed(1))  # (B, L)
logits = model(tokens)  # (B, L, V)
n_page = sum(p.numel() for p in page.parameters())
print(tuple(page(tokens).shape), tuple(logits.shape), "parameters:", n_page, count_parameters(dcfg))
assert n_page == model.count_parameters() == count_parameters(dcfg)

# %% [markdown]
# The library's model adds only what the page leaves out: the other arrangements of section
# 5.5 (post-LN, parallel), RMSNorm, gated feed-forward networks and bias-free blocks, residual
# dropout, untied output weights, parameters as one flat vector (for the NumPy twin and the
# tests), and input checks with plain messages. Chapter 8 imports it.
#
# Its dropout zeroes *activations*: in training, each entry of a branch's output is zeroed with
# probability $p$ before it joins the residual stream, and the survivors are scaled by
# $1/(1-p)$ so that the expected value is unchanged {cite}`srivastava2014dropout`. May's notes
# describe it as zeroing parameters ("treat a parameter as if it was 0"); that is a different
# method, DropConnect, and the weights stay untouched:

# %%
torch.manual_seed(0)
dropped = F.dropout(torch.ones(10_000), p=0.1, training=True)  # a branch's output, all ones
print(
    "zeroed:",
    round((dropped == 0).double().mean().item(), 2),
    " survivors:",
    round(dropped.max().item(), 4),
)

# %% [markdown]
#
# Two more properties to check: the model is causal (changing the last token leaves the
# logits of every earlier position untouched), and tying saves a whole $V \times d$ matrix.

# %%
changed = tokens.clone()
changed[:, -1] = (changed[:, -1] + 1) % 11
torch.testing.assert_close(model(changed)[:, :-1], logits[:, :-1])
untied = DecoderConfig(11, 12, 3, dcfg.block, tie_embeddings=False)
print("untied minus tied:", count_parameters(untied) - count_parameters(dcfg), "= V * d =", 11 * 16)

# %% [markdown]
# Chapter 8 trains this model on text; `model.loss(tokens, targets)` is its next-token
# cross-entropy.

# %% [markdown]
# ## Exercises
#
# Five kinds: implement (a checker runs your function against the reference on several inputs,
# edge cases included, and names the mistake), find the bug, predict then check (section 5.3
# asked one), a conceptual question, and a stretch problem. The implement cells start with a
# stub that raises `NotImplementedError`; replace its body and run the cell. Solutions are
# folded below each exercise.
#
# ```{exercise} The gradient of LayerNorm
# :label: ex-block-layernorm-grad
#
# Section 5.2 gave LayerNorm's forward pass; training needs its backward pass too. Write
# `layer_norm_grad(x, gain, grad_out, eps=1e-5)` with NumPy: given $\mathbf{g} = \partial
# \mathcal{L}/\partial \mathbf{y}$ for $\mathbf{y} = \operatorname{LayerNorm}(\mathbf{x};
# \gamma, \beta)$ (per token, over the last axis; any leading dimensions), return
# $\partial \mathcal{L}/\partial \mathbf{x}$. Hint: write $\hat{\mathbf{x}} = (\mathbf{x} -
# \mu)/\sigma$ and $\hat{\mathbf{g}} = \gamma \odot \mathbf{g}$; remember that $\mu$ and
# $\sigma$ depend on every entry of the token. Before you start, decide: what must each
# token's gradient sum to, and why? The checker compares with PyTorch's autograd.
# ```


# %%
def layer_norm_grad(x, gain, grad_out, eps=1e-5):
    raise NotImplementedError  # your code here


check.layer_norm_backward(layer_norm_grad)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-block-layernorm-grad
# :class: dropdown
# ```
#
# With $\hat x_i = (x_i - \mu)/\sigma$, $\partial \mu/\partial x_j = 1/d$ and
# $\partial \sigma/\partial x_j = \hat x_j/d$, so
# $\partial \hat x_i/\partial x_j = (\delta_{ij} - 1/d - \hat x_i \hat x_j/d)/\sigma$ and
#
# $$
# \frac{\partial \mathcal{L}}{\partial x_j} = \frac{1}{\sigma}\Big(\hat g_j -
# \overline{\hat{\mathbf{g}}} - \hat x_j\, \overline{\hat{\mathbf{g}} \odot
# \hat{\mathbf{x}}}\Big),
# $$
#
# where the bars are means over the token. The gradient sums to zero over each token (the mean
# of $\hat{\mathbf{x}}$ is 0): shifting every entry of a token by the same amount leaves its
# LayerNorm unchanged, so the loss cannot depend on that direction.


# %% tags=["solution"]
def layer_norm_grad(x, gain, grad_out, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)  # (..., 1)
    sigma = np.sqrt(x.var(axis=-1, keepdims=True) + eps)  # (..., 1), biased variance
    x_hat, g_hat = (x - mu) / sigma, grad_out * gain  # (..., d) each
    mean_g = g_hat.mean(axis=-1, keepdims=True)  # the path through mu
    mean_gx = (g_hat * x_hat).mean(axis=-1, keepdims=True)  # the path through sigma
    return (g_hat - mean_g - x_hat * mean_gx) / sigma


check.layer_norm_backward(layer_norm_grad, require=True)

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Find the bug: the handwritten notes' "standard" block
# :label: ex-block-bug
#
# The handwritten notes give the standard (pre-LN) block as
# $x + \operatorname{FFN}(\operatorname{LN}(x + \operatorname{MHSA}(x)))$. A colleague typed it in
# as `notes_block` below and ran a test: with the feed-forward weights set to zero, the block
# returns its input unchanged, so attention contributes nothing at all. Run the test, compare the
# formula with section 5.5's, and find the two things that are wrong. Then write
# `pre_ln_block(x, p)`, the correct pre-LN block for `check.PRE_LN_CONFIG` ($d_\text{model} =
# 8$, 2 heads, $d_\text{ff} = 32$, LayerNorm with $\epsilon = 10^{-5}$, ReLU, biases), from
# `ref.layer_norm`, `multi_head_attention` and `ref.feed_forward` (not `ref.transformer_block`).
# `p` holds the names of `layout(check.PRE_LN_CONFIG)`; `x` is $(L, 8)$ or $(B, L, 8)$; no mask.
# ```


# %%
def attend(z, p):  # chapter 4's multi-head self-attention with the block's weights and biases
    w = [p[n] for n in ("w_q", "w_k", "w_v", "w_o")]
    return multi_head_attention(z, z, z, *w, **{n: p[n] for n in ("b_q", "b_k", "b_v", "b_o")})


def notes_block(x, p):
    """The handwritten notes' "standard" block, as printed: x + FFN(LN(x + MHSA(x)))."""
    ln = ref.layer_norm(x + attend(x, p), p["norm2_gain"], p["norm2_bias"])
    return x + ref.feed_forward(ln, p["w_1"], p["w_2"], p["b_1"], p["b_2"])


p_test = init_parameters(check.PRE_LN_CONFIG, rng)
p_test.update(w_1=np.zeros((8, 32)), w_2=np.zeros((32, 8)))  # the feed-forward network off
x_test = rng.standard_normal((5, 8))
print("notes_block returns its input:", np.allclose(notes_block(x_test, p_test), x_test))


def pre_ln_block(x, p):
    raise NotImplementedError  # your code here


check.pre_ln_block(pre_ln_block)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-block-bug
# :class: dropdown
# ```
#
# Two things are wrong. The outer residual adds $x$, not $x + \operatorname{MHSA}(\cdot)$, so
# the attention's output reaches the result only through the feed-forward network, and vanishes
# with it; and the attention reads the raw $x$, with no norm before it. The pre-LN block is
# $X' = X + \operatorname{MHSA}(N_1(X))$, then $X' + \operatorname{FFN}(N_2(X'))$: every branch
# reads a normalised copy, and every branch's output is added to the stream. With the
# feed-forward network off, the correct block returns $X'$, which differs from $x$.


# %% tags=["solution"]
def pre_ln_block(x, p):
    def norm(i, z):
        return ref.layer_norm(z, p[f"norm{i}_gain"], p[f"norm{i}_bias"])

    x1 = x + attend(norm(1, x), p)  # (..., L, d): the attention branch reads a normalised copy
    return x1 + ref.feed_forward(norm(2, x1), p["w_1"], p["w_2"], p["b_1"], p["b_2"])


print("the pre-LN block returns its input:", np.allclose(pre_ln_block(x_test, p_test), x_test))
check.pre_ln_block(pre_ln_block, require=True)

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Why layer normalisation, not batch normalisation?
# :label: ex-block-concept
#
# Batch normalisation, the norm of convolutional networks, normalises each feature over the
# examples of a batch; LayerNorm normalises each token over its own features. Give two reasons
# why a language model uses the second. Think of what a decoder sees when it generates one token
# at a time, and of sequences padded to a common length.
# ```

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-block-concept
# :class: dropdown
# ```
#
# A token's LayerNorm depends on that token alone, so the model computes the same thing for a
# batch of one as for a batch of a thousand, in training and in generation, and needs no running
# averages. Batch statistics would make a token's output depend on the other sequences of the
# batch: generating one token at a time (a batch of one, of one position) would see statistics
# unlike those of training. Padding makes it worse: pad positions would enter the batch means
# unless masked out, and a causal model must also not mix statistics across positions, or a
# token's normalisation would depend on tokens that come after it, a leak from the future.
#
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Stretch: a KV cache for the decoder
# :label: ex-block-stretch
#
# Generating one token at a time with section 5.6's decoder recomputes the keys and values of the
# whole prefix at every step. Explain which tensors a cache must keep per layer, their shapes,
# what a step then costs, and how much memory the cache takes for GPT-2 small (12 layers,
# $d_\text{model} = 768$) at 1,024 tokens in float32. (Chapter 8 builds the cache and checks it
# against uncached generation.)
# ```

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-block-stretch
# :class: dropdown
# ```
#
# Per layer the keys and values of every past token, after their projections: two tensors of
# shape $(B, h, L, d_\text{head})$. A new token then computes only its own query, key and value,
# appends its key and value, and attends over the cache, so a step costs $O(L)$ instead of
# $O(L^2)$. For GPT-2 small ($12$ layers, $h \cdot d_\text{head} = 768$) at $L = 1024$:
# $2 \times 12 \times 1024 \times 768 \times 4$ bytes $\approx 75$ MB per sequence.
#
# ```{solution-end}
# ```

# %% [markdown]
# ## Summary
#
# - A block is attention and a position-wise feed-forward network, each wrapped in a residual
#   connection and a norm. Post-LN normalises after each addition (the original Transformer);
#   pre-LN normalises each branch's input and leaves the residual stream alone; the parallel
#   block feeds one normalised input to both branches.
# - LayerNorm subtracts the mean and divides by the (biased) standard deviation of each token,
#   with $\epsilon$ inside the square root, then applies a learned gain and bias (the
#   handwritten notes drop the gain); RMSNorm skips the mean and the bias.
# - A residual connection passes the gradient through unchanged, $g + J_f^\top g$: through 24
#   layers that each halve it, the plain chain's gradient falls from the identity's 8 to about
#   $6 \times 10^{-7}$, while the residual chain's does not vanish.
# - The FFN is $\phi(xW_1 + b_1)W_2 + b_2$ with ReLU, GELU or swish, and no ReLU on its output
#   (May's notes print one); the gated form $(\phi(xW_1) \odot xW_2)W_3$ is SwiGLU with swish.
# - The decoder-only model of eq. (21) is a stack of pre-LN blocks between a token and position
#   embedding and a tied output projection, with a final norm; it fits on one page and equals the
#   library's `DecoderOnlyModel`, which chapter 8 trains.
#
# Part 2, [`05_transformer_block_stacks`](05_transformer_block_stacks.ipynb), counts the
# parameters of these stacks, measures why pre-LN stacks train without warm-up, and builds the
# encoder–decoder with cross-attention.

# %% [markdown]
# ## Quiz (optional, 22 min)
#
# Test yourself on this chapter's sections: multiple choice and numeric questions, each
# naming the section it tests. Choose or type an answer and check it: the quiz says whether it
# is right and why, for the wrong options too. The cell below needs nothing from the cells
# above it, so it also runs on its own when you come back to the chapter.

# %%
from course_lib import quiz

quiz.show("05_transformer_block")

# %% [markdown]
# ## References
#
# - G. Strabel, *Transformers*, lecture notes, 2023, section 2.4 and eq. (21)
#   {cite}`strabel2023transformers`.
# - B. M. Marlin, *Lecture 23: Transformers*, lecture slides, 2022 {cite}`marlin2022transformers`.
# - J. May, *Transformer Language Models*, lecture notes, 2024, section 1.3
#   {cite}`may2024transformer`.
# - A. Vaswani et al., "Attention is all you need", 2017 {cite}`vaswani2017attention`.
# - J. L. Ba, J. R. Kiros and G. E. Hinton, "Layer normalization", 2016 {cite}`ba2016layer`.
# - B. Zhang and R. Sennrich, "Root mean square layer normalization", 2019 {cite}`zhang2019root`.
# - K. He et al., "Deep residual learning for image recognition", 2016 {cite}`he2016deep`.
# - N. Elhage et al., "A mathematical framework for Transformer circuits", 2021
#   {cite}`elhage2021mathematical`.
# - D. Hendrycks and K. Gimpel, "Gaussian error linear units (GELUs)", 2016
#   {cite}`hendrycks2016gaussian`.
# - N. Shazeer, "GLU variants improve Transformer", 2020 {cite}`shazeer2020glu`.
# - A. Chowdhery et al., "PaLM: scaling language modeling with pathways", 2023
#   {cite}`chowdhery2023palm`.
# - R. Xiong et al., "On layer normalization in the Transformer architecture", 2020
#   {cite}`xiong2020layer`.
# - A. Radford et al., "Improving language understanding by generative pre-training", 2018
#   {cite}`radford2018improving`.
# - N. Srivastava et al., "Dropout: a simple way to prevent neural networks from overfitting",
#   2014 {cite}`srivastava2014dropout`.
#
# The full bibliography of the course is on the [References](../book/references.md) page.
#
# ## How this chapter is tested
#
# `tests/test_block.py` checks the norms, blocks and decoder against hand-derived values, against
# `nn.LayerNorm`, `nn.RMSNorm` and `nn.TransformerEncoderLayer` (weights copied in), counts
# parameters against `sum(p.numel())`, and compiles the decoder with `fullgraph=True`;
# `tests/test_conformance.py` runs the NumPy reference and the PyTorch side of every mirrored
# function on random inputs in four dtypes; `benchmarks/block.py` measures speed. The loops below
# are the parity checks the lesson leaves out.

# %% [markdown]
# **LayerNorm in float32 and float64.** Both sides against `torch.nn.LayerNorm` with random
# weights (`torch.testing.assert_close` picks its tolerance from the dtype):

# %%
for dtype in (torch.float64, torch.float32):
    ln = torch.nn.LayerNorm(8, dtype=dtype)
    with torch.no_grad():
        ln.weight.normal_(), ln.bias.normal_()
    x = torch.randn(2, 5, 8, dtype=dtype)  # (B, L, d)
    torch.testing.assert_close(fast.layer_norm(x, ln.weight, ln.bias), ln(x))
    g, b = ln.weight.detach().double().numpy(), ln.bias.detach().double().numpy()
    err = np.abs(ref.layer_norm(x.double().numpy(), g, b) - ln(x).detach().double().numpy()).max()
    print(f"{str(dtype):<14} NumPy reference vs torch.nn.LayerNorm: max error < 1e-5: {err < 1e-5}")

# %% [markdown]
# **A block refuses an input of the wrong width** (the slides' $D \to K$ block, section 5.1):

# %%
try:
    ref.transformer_block(np.ones((5, 6)), init_parameters(cfg), cfg)  # cfg has d_model = 8
except ValueError as err:
    print("ValueError:", err)

# %% [markdown]
# **NumPy and PyTorch, every block variant.** 3 norm positions $\times$ 2 norms $\times$ plain
# or gated $\times$ with or without biases $\times$ 4 activations = 96 blocks, each with a
# causal mask and all its parameters as one random flat vector (the conformance suite adds
# hypothesis-drawn shapes, four dtypes and gradient checks):

# %%
import itertools

worst = 0.0
for pos, norm, gated, bias, act in itertools.product(
    ("post", "pre", "parallel"),
    ("layer", "rms"),
    (False, True),
    (True, False),
    ("relu", "gelu", "gelu_tanh", "swish"),
):
    c = BlockConfig(6, 2, 10, norm_position=pos, norm=norm, gated=gated, bias=bias, activation=act)
    theta = 0.5 * rng.standard_normal(count_parameters(c))  # all parameters as one flat vector
    x = rng.standard_normal((2, 4, 6))
    want = ref.transformer_block(x, theta, c, mask=causal_mask(4))
    got = fast.transformer_block(
        torch.from_numpy(x), torch.from_numpy(theta), c, mask=torch.from_numpy(causal_mask(4))
    )
    worst = max(worst, np.abs(got.numpy() - want).max())
print("96 variants: NumPy and PyTorch agree to better than 1e-12:", worst < 1e-12)
assert worst < 1e-12

# %% [markdown]
# **The page's GPT of section 5.6 against the library.** The library's `DecoderOnlyModel` stores its
# weights in the notes' row convention ($xW$, attention weights per head, $(h, d, d_k)$), while
# `nn.Linear` computes $xW^\top + b$, so copying them across is a transpose, with the heads fused
# side by side (chapter 4's `fuse_head_weights`). With the same weights, the page, the library's
# PyTorch model and its NumPy twin `ref.decoder_forward` compute the same logits (`dcfg`,
# `model`, `page` and `tokens` are section 5.6's):

# %%
with torch.no_grad():  # nn.Linear stores (out, in): transpose the library's (in, out) weights
    page.tok_emb.weight.copy_(model.tok_emb)
    page.pos_emb.weight.copy_(model.pos_emb)
    page.ln_f.weight.copy_(model.final_norm_gain), page.ln_f.bias.copy_(model.final_norm_bias)
    for mine, lib in zip(page.blocks, model.blocks, strict=True):
        mine.w_qkv.weight.copy_(
            torch.cat([fuse_head_weights(w) for w in (lib.w_q, lib.w_k, lib.w_v)], 1).T
        )
        mine.w_qkv.bias.copy_(torch.cat([lib.b_q.flatten(), lib.b_k.flatten(), lib.b_v.flatten()]))
        mine.w_o.weight.copy_(lib.w_o.T), mine.w_o.bias.copy_(lib.b_o)
        mine.ff1.weight.copy_(lib.w_1.T), mine.ff1.bias.copy_(lib.b_1)
        mine.ff2.weight.copy_(lib.w_2.T), mine.ff2.bias.copy_(lib.b_2)
        for ln, i in ((mine.ln1, 1), (mine.ln2, 2)):
            (
                ln.weight.copy_(getattr(lib, f"norm{i}_gain")),
                ln.bias.copy_(getattr(lib, f"norm{i}_bias")),
            )

torch.testing.assert_close(page(tokens), logits)  # the page == the library's PyTorch model
np.testing.assert_allclose(  # == the NumPy reference, which builds U as one-hot rows
    logits.detach().numpy(),
    ref.decoder_forward(tokens.numpy(), model.numpy_parameters(), dcfg),
    rtol=1e-10,
)
h0, causal = page.tok_emb(tokens), torch.ones(9, 9, dtype=torch.bool).tril()  # (B, L, d), (L, L)
block_out = page.blocks[0](h0, causal)  # (B, L, d)
torch.testing.assert_close(  # one page block == the library's block, in PyTorch and in NumPy
    block_out, fast.transformer_block(h0, model.blocks[0].parameter_dict(), dcfg.block, mask=causal)
)
np.testing.assert_allclose(
    block_out.detach().numpy(),
    ref.transformer_block(
        h0.detach().numpy(), model.blocks[0].numpy_parameters(), dcfg.block, mask=causal.numpy()
    ),
    rtol=1e-10,
    atol=1e-12,
)
print(tuple(logits.shape), "- the page, the library and the NumPy reference agree")

# %% [markdown]
# **`torch.nn.TransformerEncoderLayer`, post-LN and pre-LN, float64 and float32**, forward and
# gradients (`torch.testing.assert_close` picks its tolerance from the dtype: $1.3 \times
# 10^{-6}$ relative in float32):

# %%
for norm_first in (False, True):
    for dtype in (torch.float64, torch.float32):
        layer = torch.nn.TransformerEncoderLayer(
            16, 4, 64, dropout=0.0, batch_first=True, norm_first=norm_first, dtype=dtype
        )
        c, p = encoder_layer_parameters(layer)
        block = TransformerBlock.from_parameters(c, p, dtype=dtype)
        x = torch.randn(3, 7, 16, dtype=dtype, requires_grad=True)  # (B, L, d)
        ours, theirs = block(x), layer(x)
        torch.testing.assert_close(ours, theirs)
        gx_ours, gw_ours = torch.autograd.grad(ours.square().sum(), (x, block.w_1))
        gx_theirs, gw_theirs = torch.autograd.grad(theirs.square().sum(), (x, layer.linear1.weight))
        torch.testing.assert_close(gx_ours, gx_theirs)
        torch.testing.assert_close(gw_ours, gw_theirs.T)
        print(
            f"norm_first={norm_first!s:<5} ({c.norm_position}-LN) {str(dtype):<13}:",
            "forward and gradients match",
        )


# %% [markdown]
# The modules are meant to be used, so they should not be slow. `benchmarks/block.py` times
# forward and forward+backward passes of our post-LN, pre-LN and parallel blocks against
# `torch.nn.TransformerEncoderLayer` at $B = 8$, $L = 256$, $d_\text{model} = 512$ (8 heads,
# $d_\text{ff} = 2048$, float32, CPU); the target is our post-LN block within $1.3\times$ of
# PyTorch's. Run `./course bench block` to measure your machine. A smaller version here:

# %% tags=["nbval-ignore-output"]
from course_lib.measure import best_time

torch.manual_seed(0)
c = BlockConfig(d_model=128, n_heads=4, d_ff=512)
ours = TransformerBlock(c)
theirs = torch.nn.TransformerEncoderLayer(128, 4, 512, dropout=0.0, batch_first=True)
x = torch.randn(4, 64, 128, requires_grad=True)
for name, m in (("ours (post-LN)", ours), ("torch TransformerEncoderLayer", theirs)):
    best = best_time(lambda m=m: m(x).sum().backward(), repeats=5)
    print(
        f"{name:<30} forward+backward {1e3 * best:6.1f} ms",
        f" ({x.shape[0] * x.shape[1] / best:,.0f} tokens/s)",
    )

# %% [markdown]
# Most of the time goes into the six matrix products of the projections and the feed-forward
# network; we call the same BLAS kernels PyTorch does, so the two land close together.
