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
# predictable scale, and a small feed-forward network applied to every position. Where the
# normalisation sits turns out to decide whether a deep stack trains at all. This chapter
# builds the block in every variant the notes mention, checks it against PyTorch's own
# layer, stacks it into the decoder-only model that chapter 8 trains, counts its parameters
# down to the last bias, and builds the encoder–decoder of the original Transformer, whose
# decoder reads the source through cross-attention.
#
# **After this chapter you can**
#
# - write LayerNorm (with its gain) and RMSNorm, and match `torch.nn.LayerNorm` and
#   `torch.nn.RMSNorm` to rounding error;
# - write the position-wise feed-forward network with ReLU, GELU or swish, and its gated
#   (GLU, SwiGLU) variant;
# - assemble post-LN, pre-LN and parallel blocks, with or without biases, and reproduce
#   `torch.nn.TransformerEncoderLayer` exactly from copied weights;
# - stack blocks into the decoder-only model of eq. (21) of Strabel's notes, with tied embeddings,
#   and write that model on one page;
# - build the encoder–decoder Transformer with cross-attention, match `torch.nn.Transformer`
#   from copied weights, train it in seconds and read its cross-attention maps;
# - count the parameters of any configuration exactly, explain the rule of thumb
#   $12\,n_\text{layers} d_\text{model}^2$, and reproduce (and correct) the GPT-3 size table;
# - explain, with gradients measured at initialisation and a training run, why pre-LN stacks
#   train more easily than post-LN ones.
#
# **Assumes**: chapter 4 (multi-head attention, masks; we call its functions) and basic
# PyTorch autograd.
# **Core path**: about 48 minutes (the sections marked core); the optional sections add about
# 35 minutes (5.7, 5.8 and 5.9), the exercises about 50.
#
# The chapter follows section 2.4, section 3 (Figure 3) and eq. (21) of Strabel's notes
# {cite}`strabel2023transformers`, the block and LayerNorm equations of the lecture slides
# {cite}`marlin2022transformers`, sections 1 and 1.3 (cross-attention, residuals and layer
# norm) of May's notes {cite}`may2024transformer`, and the handwritten notes' list of block
# modifications (norm position, bias removal, RMSNorm, gated units, the parallel block).

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
from course_lib.block.config import BlockConfig, DecoderConfig, EncoderDecoderConfig
from course_lib.block.counting import approx_parameters, count_parameters, gpt3_table
from course_lib.block.encoder_decoder import (
    BOS,
    EOS,
    PAD,
    reversal_pairs,
    torch_masks,
    train_reversal_seq2seq,
    transformer_parameters,
)
from course_lib.block.experiment import (
    gradient_norms_at_init,
    load_log,
    reversal_batch,
    train_reversal,
)
from course_lib.block.params import init_decoder_block, init_parameters, layout
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
# ## 5.1 The block as the notes describe it (core, 5 min)
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
# **post-LN**; it is the one of the original Transformer {cite}`vaswani2017attention`. A block
# is fully described by a handful of numbers, collected in a `BlockConfig`:

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
# ## 5.2 Layer normalisation (core, 7 min)
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
# still give each feature its own scale and offset. Our PyTorch version calls
# `torch.nn.functional.layer_norm`; both match `torch.nn.LayerNorm` with the same (random)
# weights, in float64 and float32:

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
# ## 5.3 Residual connections (core, 6 min)
#
# May's notes motivate the residual connection
# {cite}`may2024transformer` (section 1.3): if a layer's output were only
# $\mathrm{ff}(\mathrm{self}(x))$, whatever attention decided to ignore about a token would be lost
# for good. Adding the input back, $f(x) \to x + f(x)$ (the handwritten notes' item 5;
# {cite}`he2016deep`), means each sub-layer only has to learn a *change* to the token's vector. The
# same identity path helps gradients: the Jacobian of $x + f(x)$ is $I + J_f$, so a gradient $g$ at
# the output reaches the input as exactly $g + J_f^\top g$: the gradient itself, plus whatever flows
# back through $f$. A deep chain of small random layers shows the difference:

# %%
torch.manual_seed(0)
depth, d = 24, 64
layers = [torch.randn(d, d, dtype=torch.float64) * 0.5 / d**0.5 for _ in range(depth)]  # (d, d)
x = torch.randn(1, d, dtype=torch.float64, requires_grad=True)
print(f"no layers at all (identity)  |d out / d x| = {d**0.5:.2e}")  # the gradient of sum(x)
for residual in (False, True):
    h = x
    for W in layers:
        h = h + torch.tanh(h @ W) if residual else torch.tanh(h @ W)
    (grad,) = torch.autograd.grad(h.sum(), x)
    print(f"24 layers, residual={residual!s:<5} |d out / d x| = {grad.norm().item():.2e}")

# %% [markdown]
# Without residuals the gradient at the input has all but vanished after 24 layers (each layer
# multiplies it by a Jacobian of norm about one half). With them it stays within a small
# factor of the identity map's gradient: every layer passes the gradient through unchanged and
# adds its own contribution. For one residual layer the identity $g + J_f^\top g$ is exact:

# %%
W = layers[0]  # (d, d)
g = torch.randn(1, d, dtype=torch.float64)  # a gradient arriving at the output
y = x + torch.tanh(x @ W)  # one residual layer
(grad_x,) = torch.autograd.grad(y, x, grad_outputs=g)
J = torch.autograd.functional.jacobian(lambda v: torch.tanh(v @ W), x.detach())[
    0, :, 0, :
]  # (d, d)
torch.testing.assert_close(grad_x, g + g @ J)  # g + J^T g, written for row vectors

# %% [markdown]
# ## 5.4 The position-wise feed-forward network (core, 6 min)
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
# ## 5.5 Three ways to arrange a block (core, 8 min)
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

    def mhsa(z, p=p):
        return multi_head_attention(
            z,
            z,
            z,
            p["w_q"],
            p["w_k"],
            p["w_v"],
            p["w_o"],
            b_q=p["b_q"],
            b_k=p["b_k"],
            b_v=p["b_v"],
            b_o=p["b_o"],
        )

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
# The parallel block has $2d$ fewer parameters: one norm instead of two.
#
# The PyTorch twin runs the same computation batched and differentiable; the modules of
# `course_lib.models` call it. The two sides agree on all 96 variants (3 norm positions
# $\times$ 2 norms $\times$ plain or gated $\times$ with or without biases $\times$ 4
# activations); the loop that checks it is in the appendix, "How this chapter is tested".
#
# PyTorch ships a block too, `torch.nn.TransformerEncoderLayer` (post-LN by default, pre-LN with
# `norm_first=True`); with its weights copied in, ours gives the same outputs and gradients (the
# appendix, "How this chapter is tested", shows the check).
#
# ## 5.6 Stacking blocks: the decoder-only model, on one page (core, 8 min)
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
# the embedding matrix is **tied**, used twice. Every block's attention is causal (token $i$
# sees tokens $j \le i$). With pre-LN blocks the residual stream is never normalised, so a
# final norm goes before the projection (GPT-2 added one there).
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
#
# ## 5.7 Counting parameters (optional, 8 min)
#
# Count one GPT block with $d_\text{ff} = 4d$ and $h$ heads of width $d/h$:
#
# - attention: $W_Q, W_K, W_V$ are $h$ matrices of $d \times d/h$, together $3d^2$, and $W_O$ is
#   $d \times d$: $4d^2$ weights and $4d$ biases;
# - feed-forward: $W_1$ and $W_2$ have $d \cdot 4d$ entries each: $8d^2$ weights and
#   $4d + d$ biases;
# - two LayerNorms: $4d$.
#
# That is $12d^2 + 13d$ per block. For $d$ in the hundreds the $13d$ is below 1% of the
# total, hence the rule of thumb $N \approx 12\, n_\text{layers}\, d_\text{model}^2$, plus the
# embeddings $(V + n_\text{ctx})\,d$. `count_parameters` counts any configuration exactly from
# a closed formula; the tests check it against the layout and against `sum(p.numel())`.

# %%
for d in (64, 768, 12288):
    assert count_parameters(BlockConfig(d, 4, 4 * d)) == 12 * d * d + 13 * d
gpt2 = DecoderConfig(
    50257, 1024, 12, BlockConfig(768, 12, 3072, norm_position="pre", activation="gelu")
)
print(
    f"GPT-2 small: exact {count_parameters(gpt2):,},",
    f"rule of thumb {approx_parameters(12, 768, 50257, 1024):,}",
)
assert count_parameters(gpt2) == 124_439_808

# %% [markdown]
# The exact count, 124,439,808, is the size of the released GPT-2 small checkpoint (with tied
# embeddings); the GPT-2 paper's table lists the model as 117M {cite}`radford2019language`. Now the
# GPT-3 size table of the slides {cite}`marlin2022transformers`, copied there from the GPT-3 paper
# {cite}`brown2020language`. We recompute every row from its $n_\text{layers}$ and
# $d_\text{model}$ (GPT-3 uses GPT-2's vocabulary of 50,257 tokens and 2,048 positions), and
# also check whether $n_\text{heads} \times d_\text{head} = d_\text{model}$, as the heads must
# tile the model width:

# %%
table = gpt3_table()
print(
    f"{'model':<12} {'nominal':>8} {'n':>3} {'d_model':>7} {'h x d_head':>10}"
    f"  {'12nd^2+emb':>10} {'exact':>8} {'error':>6}"
)
for r in table:
    flag = "" if r["consistent"] else "  <- h x d_head != d_model"
    print(
        f"{r['name']:<12} {r['nominal'] / 1e9:>7.3g}B {r['n_layers']:>3} {r['d_model']:>7}"
        f" {r['heads_x_dhead']:>10}  {r['approx'] / 1e9:>9.3f}B {r['exact'] / 1e9:>7.3f}B"
        f" {100 * r['exact_error']:>+5.1f}%{flag}"
    )
assert all(abs(r["exact_error"]) < 0.02 and abs(r["approx_error"]) < 0.02 for r in table)

# %% [markdown]
# Every row is reproduced to within 2% of its nominal size (the largest gaps, +1.7% for
# Medium and −1.8% for 2.7B, are within the rounding of the nominal figures). Two rows are
# inconsistent as printed:
#
# - **GPT-3 13B** prints $d_\text{model} = 5140$, but $40 \times 128 = 5120$, and 5140 is not
#   even divisible by 40 heads. The count cannot tell the two apart (both are within 2% of
#   13B), the arithmetic can: the width is 5120.
# - **GPT-3 XL** prints 24 heads of width 128, which is 3072, not $d_\text{model} = 2048$.
#   Taken at its word, the attention would be $4 \cdot 2048 \cdot 3072$ per layer and the model
#   would be far from 1.3B:

# %%
xl = next(r for r in table if r["name"] == "GPT-3 XL")
print(
    f"XL with attention width 24 x 128 = 3072: {xl['exact_as_printed'] / 1e9:.2f}B"
    f" ({100 * xl['exact_as_printed_error']:+.0f}%)"
)
print(
    f"XL with attention width d_model = 2048:  {xl['exact'] / 1e9:.2f}B"
    f" ({100 * xl['exact_error']:+.1f}%)"
)
assert xl["exact_as_printed_error"] > 0.15 and abs(xl["exact_error"]) < 0.02

# %% [markdown]
# So the XL row's heads must share the width 2048: 16 heads of 128, or 32 of 64 (24 heads
# cannot, since 2048 / 24 is not a whole number). The parameter count depends on the heads
# only through $n_\text{heads} d_\text{head}$.
#
# The explorer below splits the count of any configuration into its parts. Pick a GPT-3 row
# and watch the embeddings' share fall from about a third of GPT-3 Small to a fraction of a
# percent of the 175B model; switch on the gated FFN or remove the biases and see what they
# cost. (On the website it responds for every preset and switch.)

# %%
from course_lib.block.widget import explorer

explorer("GPT-3 Small")

# %% [markdown]
# ## 5.8 Why pre-LN trains more easily (optional, 12 min)
#
# The original Transformer (post-LN) needs a learning-rate **warm-up**: start tiny, grow over
# thousands of steps. Xiong et al. traced this to the gradients at initialisation
# {cite}`xiong2020layer`: in a post-LN stack the gradient of the last layers' weights does not
# shrink with depth, and it is larger than that of the lower layers, so a full-size step at
# the start throws the top of the network around. In a pre-LN stack the residual stream grows
# with every block (nothing normalises it) and the final norm divides by its size, so the
# gradients of the last layers shrink like $1/\sqrt{n_\text{layers}}$.
#
# We measure it: a freshly initialised decoder ($d = 32$, in float64), the next-token loss on
# random tokens, and the gradient norm of each block's weights, for stacks of 2 to 24 blocks.

# %%
depths = [2, 6, 12, 24]
names = ("w_q", "w_k", "w_v", "w_o", "w_1", "w_2")
kw = {"d_model": 32, "length": 16, "batch_size": 8, "names": names}
grads = {pos: {R: gradient_norms_at_init(pos, R, **kw) for R in depths} for pos in ("post", "pre")}

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.8))
for pos, marker in (("post", "o"), ("pre", "s")):
    g24 = grads[pos][24]
    ax1.plot(range(1, 25), g24, marker=marker, ms=3, label=f"{pos}-LN")
    ax2.plot(
        depths, [grads[pos][R][-1] for R in depths], marker=marker, label=f"{pos}-LN, last block"
    )
ax2.plot(
    depths,
    grads["pre"][2][-1] * np.sqrt(2 / np.array(depths)),
    "k--",
    lw=1,
    label="1 / sqrt(depth)",
)
ax1.set(
    title="Gradient norm per block, 24-block stack",
    xlabel="block (1 = nearest the input)",
    ylabel="|grad| of the block's weights",
)
ax2.set(
    title="Last block's gradient norm vs depth",
    xlabel="number of blocks",
    ylabel="|grad| (log scale)",
    xscale="log",
    yscale="log",
)
ax2.set_xticks(depths, labels=[str(R) for R in depths])
ax2.xaxis.set_minor_formatter(plt.NullFormatter())
ax1.legend(), ax2.legend(fontsize=8)
fig.tight_layout()
plt.show()

# %% [markdown]
# What to notice:
#
# - **pre-LN** (left): the gradient falls steadily from the first block to the last, and
#   (right) the last block's gradient falls with depth along the $1/\sqrt{\text{depth}}$ line,
#   as Xiong et al.'s analysis predicts.
# - **post-LN**: the gradients stay large all the way up to the last block, and the last
#   block's gradient does not shrink as the stack gets deeper; at 24 blocks it is several times
#   the pre-LN one. With one learning rate for every layer, the top of a deep post-LN stack
#   takes much larger steps than the rest, until warm-up has let the network settle.
#
# The slopes on the right-hand log-log plot, as numbers:

# %%
for pos in ("post", "pre"):
    slope = np.polyfit(np.log(depths), np.log([grads[pos][R][-1] for R in depths]), 1)[0]
    print(f"{pos}-LN: last block's gradient ~ depth^{slope:+.2f}")
slope_pre = np.polyfit(np.log(depths), np.log([grads["pre"][R][-1] for R in depths]), 1)[0]
slope_post = np.polyfit(np.log(depths), np.log([grads["post"][R][-1] for R in depths]), 1)[0]
assert -0.8 < slope_pre < -0.3 and slope_post > -0.1
assert grads["post"][24][-1] > 3 * grads["pre"][24][-1]
thirds = grads["pre"][24].reshape(3, 8).mean(axis=1)  # first, middle and last 8 blocks
assert thirds[0] > thirds[1] > thirds[2] and grads["pre"][24][0] > 2 * grads["pre"][24][-1]

# %% [markdown]
# ### A training race
#
# Does it matter in practice? A synthetic task: read six digits and a separator, then write
# the digits in reverse order (`3 1 4 1 5 9 | 9 5 1 4 1 3`). Only the six answers count in the
# loss; guessing gives $\ln 10 \approx 2.30$. We train two 6-block decoders ($d = 32$), one
# post-LN and one pre-LN, identical in everything else, with Adam at a learning rate of
# $10^{-2}$ and **no warm-up**, for 150 steps of 64 sequences.

# %%
x, y = reversal_batch(torch.Generator().manual_seed(0), 1)
print("input :", x[0].tolist(), "\ntarget:", y[0].tolist())

# %% tags=["nbval-ignore-output"]
race = {pos: train_reversal(pos, n_layers=6, lr=1e-2, steps=150, seed=0) for pos in ("post", "pre")}
for pos, out in race.items():
    print(
        f"{pos}-LN: final loss {np.mean(out['loss'][-10:]):.3f},"
        f" accuracy on fresh data {out['accuracy']:.3f}"
    )

# %%
fig, ax = new_axes(
    "Digit reversal, 6 blocks, Adam lr = 1e-2, no warm-up",
    "step",
    "training loss (log scale)",
    logy=True,
    figsize=(6.4, 3.8),
)
for pos, out in race.items():
    ax.plot(out["loss"], label=f"{pos}-LN")
ax.axhline(np.log(10), color="grey", ls=":", lw=1, label="chance, ln 10")
ax.legend()
fig.tight_layout()
plt.show()
assert race["pre"]["accuracy"] > 0.95 and np.mean(race["post"]["loss"][-10:]) > 1.5

# %% [markdown]
# Both models sit at chance for the first steps; the pre-LN one then breaks away and solves
# the task within a few dozen steps, while the post-LN one never leaves chance. One run is one
# seed, so the repository ships a larger experiment, made by
# `python -m course_lib.block.experiment` (about a quarter of an hour on one core; see
# `data/README.md`): depths 2 and 6, three learning rates, with and without a 100-step linear
# warm-up, three seeds each, 300 steps.

# %%
log = load_log()
runs = log["runs"]


def final(R, lr, warmup, pos):
    sel = [
        r
        for r in runs
        if (r["n_layers"], r["lr"], r["warmup"], r["norm_position"]) == (R, lr, warmup, pos)
    ]
    return np.array([np.mean(r["loss"][-4:]) for r in sel])  # last 20 steps, one value per seed


print(
    f"{'depth':>5} {'lr':>6} {'warm-up':>7} | {'post-LN final loss (3 seeds)':>30} | {'pre-LN':>22}"
)
for R in log["grid"]["n_layers"]:
    for lr in log["grid"]["lr"]:
        for warmup in log["grid"]["warmup"]:
            post, pre = final(R, lr, warmup, "post"), final(R, lr, warmup, "pre")
            print(
                f"{R:>5} {lr:>6g} {warmup:>7} | {np.array2string(post, precision=2):>30}"
                f" | {np.array2string(pre, precision=2):>22}"
            )

# %% [markdown]
# Read the table row by row:
#
# - with 2 blocks, or with a small learning rate, both arrangements learn the task;
# - with 6 blocks and the largest learning rate without warm-up, post-LN fails (loss stuck at
#   chance) on every seed, while pre-LN succeeds on every seed;
# - warm-up is what rescues post-LN, as the original Transformer's schedule assumed.
#
# The assertions below check those three sentences against the shipped log, and a figure
# shows the deep, fast case with all seeds. Even with warm-up, post-LN's curves are bumpier
# than pre-LN's.

# %%
assert all(
    final(2, lr, w, pos).max() < 0.1
    for lr in log["grid"]["lr"]
    for w in (0, 100)
    for pos in ("post", "pre")
)
assert final(6, 1e-2, 0, "post").min() > 2.0 and final(6, 1e-2, 0, "pre").max() < 0.05
assert final(6, 1e-2, 100, "post").max() < final(6, 1e-2, 0, "post").min()

fig, ax = new_axes(
    "Shipped log: 6 blocks, lr = 1e-2, three seeds each",
    "step",
    "training loss (log scale)",
    logy=True,
    figsize=(6.4, 3.8),
)
steps = np.arange(len(runs[0]["loss"])) * log["window"] + log["window"] / 2
styles = {
    ("post", 0): ("#D55E00", "-"),
    ("pre", 0): ("#0072B2", "-"),
    ("post", 100): ("#D55E00", ":"),
}
for (pos, warmup), (colour, ls) in styles.items():
    for i, r in enumerate(
        r
        for r in runs
        if (r["n_layers"], r["lr"], r["norm_position"], r["warmup"]) == (6, 1e-2, pos, warmup)
    ):
        label = f"{pos}-LN, warm-up {warmup}" if i == 0 else None
        ax.plot(steps, r["loss"], color=colour, ls=ls, lw=1.2, label=label)
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 5.9 The encoder–decoder Transformer and cross-attention (optional, 15 min)
#
# The Transformer of Vaswani et al. was built for translation, and it is not the decoder-only
# model of section 5.6: it is the **encoder–decoder** of Figure 3 of Strabel's notes (section 3)
# {cite}`strabel2023transformers` {cite}`vaswani2017attention`. An *encoder* stack of blocks
# reads the whole source sentence, every token attending to every other (no causal mask). A
# *decoder* stack writes the output one token at a time, and each of its blocks has three
# sub-layers instead of two:
#
# 1. masked self-attention over the output written so far (causal, as in section 5.6);
# 2. **cross-attention**: queries from the decoder, keys and values from the encoder's output,
#    called the *memory* $M$;
# 3. the feed-forward network.
#
# May's notes name cross-attention, "the attention between two different languages", and
# promise to come back to it {cite}`may2024transformer` (section 1, footnote 5); they never
# do. Nothing new is needed to compute it. Strabel's eqs. (14)–(18) already take the queries
# from one sequence $X_Q$ ($d_l$ tokens) and the keys and values from another, $X_K = X_V$
# ($d_s$ tokens); self-attention (the notes' section 2.3) is the special case
# $X_Q = X_K = X_V$. Cross-attention is the general case with $X_Q$ the decoder's states and
# $X_K = X_V = M$, so its weights form a $d_l \times d_s$ matrix: a row per output token, a
# column per source token. In the pre-LN form we train below, with norms $N_1, N_2, N_3$,
#
# $$
# Y_1 = Y + \operatorname{MHSA}_\text{causal}\big(N_1(Y)\big), \qquad
# Y_2 = Y_1 + \operatorname{Multihead}\big(N_2(Y_1), M, M\big), \qquad
# \text{out} = Y_2 + \operatorname{FFN}\big(N_3(Y_2)\big).
# $$
#
# (The paper's post-LN form normalises after each addition instead, as in section 5.1.) The
# decoder block, written out from chapter 4's `multi_head_attention` and this chapter's norm
# and feed-forward network, agrees with the library's `decoder_block`, NumPy and PyTorch:

# %%
rng_ed = np.random.default_rng(5)
dec_cfg = BlockConfig(d_model=8, n_heads=2, d_ff=32, norm_position="pre")
pd = {
    k: v + 0.1 * rng_ed.standard_normal(v.shape)
    for k, v in init_decoder_block(dec_cfg, rng_ed).items()
}
Y = rng_ed.standard_normal((2, 4, 8))  # (B, L_t, d): 4 target tokens
M = rng_ed.standard_normal((2, 6, 8))  # (B, L_s, d): the encoder's output for 6 source tokens


def mha(x_q, x_kv, prefix="", mask=None):  # eqs. (14)-(18) with X_Q = x_q and X_K = X_V = x_kv
    w = [pd[prefix + n] for n in ("w_q", "w_k", "w_v", "w_o")]
    b = {n: pd[prefix + n] for n in ("b_q", "b_k", "b_v", "b_o")}
    return multi_head_attention(x_q, x_kv, x_kv, *w, mask=mask, **b)


def N(i, z):
    return ref.layer_norm(z, pd[f"norm{i}_gain"], pd[f"norm{i}_bias"])


Y1 = Y + mha(N(1, Y), N(1, Y), mask=causal_mask(4))  # (B, L_t, d): masked self-attention
Y2 = Y1 + mha(N(2, Y1), M, prefix="cross_")  # (B, L_t, d): queries from Y1, keys and values from M
out = Y2 + ref.feed_forward(N(3, Y2), pd["w_1"], pd["w_2"], pd["b_1"], pd["b_2"])  # (B, L_t, d)
np.testing.assert_allclose(
    ref.decoder_block(Y, M, pd, dec_cfg, self_mask=causal_mask(4)), out, rtol=1e-12
)
as_t = {k: torch.from_numpy(v) for k, v in pd.items()}
torch.testing.assert_close(
    fast.decoder_block(
        torch.from_numpy(Y), torch.from_numpy(M), as_t, dec_cfg, torch.from_numpy(causal_mask(4))
    ),
    torch.from_numpy(out),
)
print(out.shape, "- one row per target token, from a source of", M.shape[1], "tokens")

# %% [markdown]
# The output has a row per *target* token whatever the source's length: each target token
# takes a weighted average of the source's value vectors. The decoder block has the encoder
# block's parameters plus a second attention and a third norm, $4d^2 + 4d + 2d$ more.
#
# PyTorch ships this architecture, without embeddings, as `torch.nn.Transformer`.
# `transformer_parameters` converts its weights to our layout (its decoder layers'
# `multihead_attn` is the cross-attention; `nn.Transformer` always ends both stacks with a
# LayerNorm, even post-LN). One trap: PyTorch's boolean masks mark where a query may **not**
# attend, ours where it may; `torch_masks` turns ours into PyTorch's keyword arguments. With
# PyTorch's defaults (post-LN, ReLU), in evaluation mode (dropout off), a causal target mask
# and a padded source, our stacks compute what PyTorch computes:

# %%
torch.manual_seed(0)
theirs = nn.Transformer(
    16, nhead=4, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=64, batch_first=True
)
theirs.eval()
ed_cfg, ed_params = transformer_parameters(theirs)
src_x, tgt_y = (
    torch.randn(2, 7, 16),
    torch.randn(2, 5, 16),
)  # (B, L_s, d) source, (B, L_t, d) target
keep = torch.tensor(
    [[True] * 7, [True] * 4 + [False] * 3]
)  # (B, L_s): the second source has 4 tokens
want = theirs(src_x, tgt_y, **torch_masks(keep, 5))  # (B, L_t, d)
got = fast.encoder_decoder_stack(
    src_x,
    tgt_y,
    ed_params,
    ed_cfg,
    src_mask=keep[:, None, None],  # (B, 1, 1, L_s): every head, every query
    tgt_mask=torch.ones(5, 5, dtype=torch.bool).tril(),  # (L_t, L_t) causal
    memory_mask=keep[:, None, None],
)
torch.testing.assert_close(got, want)  # float32: within 1.3e-6 relative, 1e-5 absolute
n_theirs = sum(p.numel() for p in theirs.parameters())
print(
    ed_cfg.block.norm_position + "-LN,",
    count_parameters(ed_cfg),
    "parameters, as in PyTorch:",
    count_parameters(ed_cfg) == n_theirs,
)

# %% [markdown]
# ### Training one: reversing digit strings
#
# Section 5.8's race reversed digits with a decoder-only model that read the digits and its
# own output in one sequence. Here the same task is a translation: the source is a string of 3
# to 8 digits, padded to 8 with a `PAD` token that the encoder's and the cross-attention's
# masks hide; the target is the digits reversed, after a `BOS` token and followed by `EOS`.
# In training the decoder reads the correct previous tokens (teacher forcing) and predicts the
# next one at every position. Guessing uniformly among the 13 tokens would give a loss of
# $\ln 13 \approx 2.56$; a fresh model starts a little above it.

# %%
src, tgt_in, tgt_out = reversal_pairs(torch.Generator().manual_seed(0), 1)  # PAD=10 BOS=11 EOS=12
print("source          :", src[0].tolist())
print("decoder reads   :", tgt_in[0].tolist())
print("decoder predicts:", tgt_out[0].tolist(), " (-100: not scored)")

# %% [markdown]
# The model: one encoder and one decoder block, $d = 32$, 4 heads, pre-LN, the token
# embedding shared by source, target and output (as in the paper's section 3.4), learned
# positions (the paper's sinusoids are chapter 6's subject); 300 steps of Adam on batches of
# 64 fresh pairs, a few seconds on a laptop's CPU. Then **greedy decoding**, which is how the
# model is used: no target is given, the decoder starts from `BOS`, and each step appends the
# most likely next token and feeds it back in, until `EOS`.

# %% tags=["nbval-ignore-output"]
s2s = train_reversal_seq2seq(seed=0)
print(f"training loss: first step {s2s['loss'][0]:.2f}, last ten {np.mean(s2s['loss'][-10:]):.3f}")
print(
    f"greedy decoding of 500 fresh sources: {s2s['sequence_accuracy']:.1%} exactly right,",
    f"{s2s['token_accuracy']:.1%} of tokens right",
)
s2s_model = s2s["model"]
fresh, _, fresh_out = reversal_pairs(torch.Generator().manual_seed(7), 4)  # four new sources
written = s2s_model.greedy_decode(fresh, max_new=9)  # (B, steps), EOS included
for s_, w_, t_ in zip(fresh.tolist(), written.tolist(), fresh_out.tolist(), strict=True):
    w_ = w_[: w_.index(EOS) + 1] if EOS in w_ else w_
    print(
        [t for t in s_ if t != PAD],
        "->",
        w_,
        "right" if w_ == [t for t in t_ if t != -100] else "WRONG",
    )

# %%
assert np.log(13) < s2s["loss"][0] < 3.5  # a little above uniform guessing at the start
assert s2s["sequence_accuracy"] > 0.8 and np.mean(s2s["loss"][-10:]) < 0.1  # 0.89 to 0.99 by CPU

# %% [markdown]
# ### Where the decoder looks
#
# `cross_attention_maps` returns the cross-attention weights of every decoder block, one
# $L_t \times L_s$ matrix per head. Below, averaged over the four heads, for two sources; the
# decoder reads the right reversed digits (teacher forcing, as in training), so row $i$ shows
# where it looks to write the $i$-th token of the answer:

# %%
examples = torch.tensor([[3, 1, 4, 1, 5, 9, 2, 6], [2, 7, 1, 8, 2, PAD, PAD, PAD]])  # (B, L_s)
rev = [[6, 2, 9, 5, 1, 4, 1, 3], [2, 8, 1, 7, 2, PAD, PAD, PAD]]  # the right answers
tgt_seen = torch.tensor([[BOS, *r] for r in rev])  # (B, L_t): the decoder reads the right prefix
target = [[*r[: 8 - r.count(PAD)], EOS] for r in rev]  # and is asked for the next token
maps = s2s_model.cross_attention_maps(examples, tgt_seen)[0].mean(dim=1)  # (B, L_t, L_s), head mean
fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
for ax, s_, w_, A in zip(axes, examples.tolist(), target, maps, strict=True):
    n = sum(t != PAD for t in s_)
    im = ax.imshow(A[: n + 1, :].numpy(), cmap="Blues", vmin=0, vmax=1)
    ax.set_xticks(range(8), labels=[str(t) if t != PAD else "PAD" for t in s_])
    ax.set_yticks(range(n + 1), labels=[str(t) if t != EOS else "EOS" for t in w_[: n + 1]])
    ax.set(
        title=f"Cross-attention, {n} source digits",
        xlabel="source token (key)",
        ylabel="token being written (query)",
    )
fig.colorbar(im, ax=axes, shrink=0.8, label="weight (mean over heads)")
plt.show()

# %% [markdown]
# To write its $i$-th digit, the decoder looks at the source digit $n - 1 - i$: the weight lies
# along the anti-diagonal of the real source, and the `PAD` columns get exactly zero, because
# the mask removes them before the softmax. The model learned *where* to look from the
# positions and the length alone; nobody told it. Averaged over 500 fresh sources, the mirrored
# position receives several times the weight that looking everywhere alike (weight $1/n$ on
# each of the $n$ digits) would give it:

# %% tags=["nbval-ignore-output"]
src_eval, tgt_eval, _ = reversal_pairs(torch.Generator().manual_seed(1), 500)
A = s2s_model.cross_attention_maps(src_eval, tgt_eval)[0].mean(dim=1)  # (B, L_t, L_s)
lengths = (src_eval != PAD).sum(dim=1)  # (B,)
on_mirror, uniform = [], []
for b, n in enumerate(lengths.tolist()):
    on_mirror += [A[b, i, n - 1 - i].item() for i in range(n)]  # weight on the mirrored digit
    uniform += [1 / n] * n
print(
    f"mean weight on the mirrored digit: {np.mean(on_mirror):.2f}",
    f"(uniform attention: {np.mean(uniform):.2f})",
)
assert A.masked_select((src_eval == PAD)[:, None, :]).max() == 0  # padding never receives weight
assert np.mean(on_mirror) > 2 * np.mean(uniform)

# %% [markdown]
# The rest of each row is spread over the neighbours of the mirrored digit; the four heads
# share the work. Compared with section 5.8's decoder-only model, the encoder–decoder keeps
# the source and the output apart: the source is read once, by a stack that sees all of it,
# and the output stack reaches back into it only through cross-attention. That is the design
# of the translation model of Strabel's section 3; GPT (section 5.6) drops the encoder and
# puts everything in one causal sequence.

# %% [markdown]
# ## 5.10 What the notes get wrong (core, 8 min)
#
# 1. **The handwritten notes' LayerNorm has no gain.** They write
#    $\operatorname{LayerNorm}(h)_t = (h_t - \mu_t)/\sigma_t + \beta$, with only a bias. Without
#    $\gamma$, every token leaves the norm with standard deviation exactly 1 across its features,
#    whatever the layer learns; the slides' form $\beta + \gamma \odot (\cdot)$ (and PyTorch's) can
#    rescale each feature. The notes also leave out $\epsilon$, so a constant token gives $0/0$:

# %%
x = rng.standard_normal((3, 8))
gamma = np.linspace(0.5, 3.0, 8)
no_gain = ref.layer_norm(x, bias=np.zeros(8))
with_gain = ref.layer_norm(x, gamma, np.zeros(8))
print(
    "std per token, notes' form:",
    no_gain.std(axis=-1).round(3),
    " with a gain:",
    with_gain.std(axis=-1).round(3),
)
with np.errstate(invalid="ignore"):
    const = np.full(4, 2.0)
    print(
        "constant token without eps:",
        (const - const.mean()) / const.std(),
        " with eps:",
        ref.layer_norm(const),
    )

# %% [markdown]
# 2. **The handwritten notes' "standard" pre-LN formula is wrong.** They write the standard block
#    as $x + \operatorname{FFN}(\operatorname{LN}(x + \operatorname{MHSA}(x)))$: there is no norm
#    before the attention, and the attention's output reaches the result only through the
#    feed-forward network, because the outer residual adds $x$ rather than
#    $x + \operatorname{MHSA}(\cdot)$. The pre-LN block is $X' = X + \operatorname{MHSA}(N_1(X))$,
#    $X' + \operatorname{FFN}(N_2(X'))$ (section 5.5). With the feed-forward weights set to zero the
#    difference is stark: the notes' formula returns its input unchanged, so attention
#    contributes nothing at all.

# %%
c = BlockConfig(d_model=8, n_heads=2, d_ff=32, norm_position="pre")
p = init_parameters(c, rng)
p.update(w_1=np.zeros((8, 32)), w_2=np.zeros((32, 8)))  # switch the FFN off
x = rng.standard_normal((5, 8))
attn = multi_head_attention(
    x,
    x,
    x,
    p["w_q"],
    p["w_k"],
    p["w_v"],
    p["w_o"],
    b_q=p["b_q"],
    b_k=p["b_k"],
    b_v=p["b_v"],
    b_o=p["b_o"],
)
notes_form = x + ref.feed_forward(
    ref.layer_norm(x + attn, p["norm2_gain"], p["norm2_bias"]),
    p["w_1"],
    p["w_2"],
    p["b_1"],
    p["b_2"],
)
np.testing.assert_allclose(notes_form, x)  # attention has vanished
print(
    "notes' form == x:",
    np.allclose(notes_form, x),
    "  pre-LN block == x:",
    np.allclose(ref.transformer_block(x, p, c), x),
)

# %% [markdown]
# 3. **The slides' block cannot change the width.** They say a block maps $M$ inputs of
#    dimension $D$ to $M$ outputs of dimension $K$, but the very next line adds
#    $\mathbf{x}_i + \mathbf{h}_i$, which needs $K = D$. Every residual connection fixes the
#    width of the residual stream; our blocks check it:

# %%
try:
    ref.transformer_block(np.ones((5, 6)), init_parameters(cfg), cfg)  # cfg has d_model = 8
except ValueError as err:
    print("ValueError:", err)

# %% [markdown]
# 4. **May's notes describe pre-LN as the original Transformer.** They
#    give $x' = \mathrm{self}(\mathrm{norm}(x)) + x$ and say the original paper did not describe it
#    well. The paper is explicit, and different: each sub-layer's output is
#    $\operatorname{LayerNorm}(x + \operatorname{Sublayer}(x))$ {cite}`vaswani2017attention`
#    (section 3.1), which is post-LN. Pre-LN came later and was analysed by {cite}`xiong2020layer`.
#    The notes' *form* is not wrong, only its history: pre-LN is what GPT-2 and the implementations
#    the notes recommend use, and it is the usual block today (section 5.8 shows why).
#    PyTorch's `TransformerEncoderLayer` follows the paper by default:

# %%
layer = torch.nn.TransformerEncoderLayer(
    16, 4, 64, dropout=0.0, batch_first=True, dtype=torch.float64
)  # defaults
c, p = encoder_layer_parameters(layer)
x = torch.randn(2, 5, 16, dtype=torch.float64)
print("PyTorch's default layer is", c.norm_position + "-LN")
torch.testing.assert_close(layer(x), fast.transformer_block(x, p, c))
as_pre = BlockConfig(**{**c.__dict__, "norm_position": "pre"})
assert not torch.allclose(layer(x), fast.transformer_block(x, p, as_pre))

# %% [markdown]
# 5. **The same notes describe dropout as zeroing parameters** ("treat a parameter as if it was
#    0"). Dropout zeroes *activations*, each with probability $p$, and scales the survivors by
#    $1/(1-p)$ so that the expected value is unchanged; the weights are untouched
#    {cite}`srivastava2014dropout`. (Zeroing weights is a different method, DropConnect.) Our
#    modules apply it to each branch's output before it joins the residual stream, as GPT-2 does.

# %%
torch.manual_seed(0)
h = torch.ones(10_000)
dropped = torch.nn.functional.dropout(h, p=0.1, training=True)
print(
    "fraction zeroed:",
    round((dropped == 0).float().mean().item(), 2),
    " survivors are",
    round(dropped.max().item(), 4),
    "= 1 / 0.9",
)

# %% [markdown]
# 6. **Eq. (21) of the notes** quantifies over "$\forall i \in [1, \dots, n]$" while its index is
#    $l$, and writes the output matrix as $W'_e$; in GPT it is $W_e^\top$, the token embedding
#    reused, which is what `DecoderOnlyModel` does by default (section 5.6).
# 7. **The GPT-3 table of the slides** has two inconsistent rows, 13B ($d_\text{model}$ 5140, not
#    $40 \times 128 = 5120$) and XL ($24 \times 128 \neq 2048$), shown in section 5.7.
# 8. **May's notes' feed-forward formula has one ReLU too many.** They describe "two linear
#    transformations and one ReLU", then print $\max(0, \max(0, xW_1 + b_1)W_2 + b_2)$, which
#    applies a second ReLU to the output. The network of the original paper, and of every
#    block in this chapter, is $\max(0, xW_1 + b_1)W_2 + b_2$: its output can be negative, which
#    the residual stream needs (a sub-layer that can only add non-negative numbers could never
#    lower a feature). Checked in the cell after this list.

# %%
u = rng.standard_normal((6, 8))  # (L, d) six tokens
W1, b1 = rng.standard_normal((8, 32)), rng.standard_normal(32)
W2, b2 = rng.standard_normal((32, 8)), rng.standard_normal(8)
as_printed = np.maximum(0, np.maximum(0, u @ W1 + b1) @ W2 + b2)  # May's notes, two ReLUs
ffn = ref.feed_forward(u, W1, W2, b1, b2)  # relu(u W1 + b1) W2 + b2, one ReLU
np.testing.assert_allclose(ffn, np.maximum(0, u @ W1 + b1) @ W2 + b2)
print("negative outputs: printed", int((as_printed < 0).sum()), " correct", int((ffn < 0).sum()))
assert (as_printed >= 0).all() and (ffn < 0).any()

# %% [markdown]

# %% [markdown]
# ## Exercises
#
# Four kinds: implement (a checker runs your function against the reference on several inputs,
# edge cases included, and names the mistake), predict then check, conceptual questions, and a
# stretch problem. The implement cells start with a stub that raises `NotImplementedError`;
# replace its body and run the cell. Solutions are folded below each exercise.
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
# ```{exercise} A pre-LN block from its parts
# :label: ex-block-preln
#
# Write `pre_ln_block(x, p)` for the block `check.PRE_LN_CONFIG` ($d_\text{model} = 8$, 2
# heads, $d_\text{ff} = 32$, LayerNorm with $\epsilon = 10^{-5}$, ReLU, biases). `p` is a dict
# with the names of `layout(check.PRE_LN_CONFIG)`: `norm1_gain`, `norm1_bias`, `w_q`, ...,
# `b_o`, `norm2_gain`, `norm2_bias`, `w_1`, `b_1`, `w_2`, `b_2`. Build it from
# `ref.layer_norm`, `multi_head_attention` (imported above from chapter 4) and
# `ref.feed_forward`; do not call `ref.transformer_block`. `x` is $(L, 8)$ or $(B, L, 8)$; no
# mask.
# ```


# %%
def pre_ln_block(x, p):
    raise NotImplementedError  # your code here


check.pre_ln_block(pre_ln_block)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-block-preln
# :class: dropdown
# ```


# %% tags=["solution"]
def pre_ln_block(x, p):
    def norm(i, z):
        return ref.layer_norm(z, p[f"norm{i}_gain"], p[f"norm{i}_bias"])

    u = norm(1, x)  # (..., L, d): the attention branch reads a normalised copy
    x1 = x + multi_head_attention(
        u,
        u,
        u,
        p["w_q"],
        p["w_k"],
        p["w_v"],
        p["w_o"],
        b_q=p["b_q"],
        b_k=p["b_k"],
        b_v=p["b_v"],
        b_o=p["b_o"],
    )
    return x1 + ref.feed_forward(norm(2, x1), p["w_1"], p["w_2"], p["b_1"], p["b_2"])


check.pre_ln_block(pre_ln_block, require=True)

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} A decoder block with cross-attention
# :label: ex-block-decoder
#
# Write `decoder_block_post_ln(y, memory, p)`, the **post-LN** decoder block of the original
# Transformer for `check.DECODER_CONFIG` ($d_\text{model} = 8$, 2 heads, $d_\text{ff} = 32$,
# LayerNorm, ReLU, biases). `y` holds the target vectors, $(L_t, 8)$ or $(B, L_t, 8)$, and
# `memory` the encoder's output, $(L_s, 8)$ or $(B, L_s, 8)$. `p` is named as
# `decoder_block_layout` lists: `norm1_gain`, `norm1_bias` and `w_q` ... `b_o` for the masked
# self-attention; `norm2_*` and `cross_w_q` ... `cross_b_o` for the cross-attention; `norm3_*`,
# `w_1`, `b_1`, `w_2`, `b_2` for the feed-forward network. Section 5.9 wrote the pre-LN form;
# build this one from `ref.layer_norm`, `multi_head_attention` and `ref.feed_forward`.
# ```


# %%
def decoder_block_post_ln(y, memory, p):
    raise NotImplementedError  # your code here


check.decoder_block(decoder_block_post_ln)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-block-decoder
# :class: dropdown
# ```


# %% tags=["solution"]
def decoder_block_post_ln(y, memory, p):
    def ln(i, z):
        return ref.layer_norm(z, p[f"norm{i}_gain"], p[f"norm{i}_bias"])

    def attend(x_q, x_kv, prefix, mask=None):  # queries from x_q, keys and values from x_kv
        w = [p[prefix + n] for n in ("w_q", "w_k", "w_v", "w_o")]
        b = {n: p[prefix + n] for n in ("b_q", "b_k", "b_v", "b_o")}
        return multi_head_attention(x_q, x_kv, x_kv, *w, mask=mask, **b)

    y1 = ln(1, y + attend(y, y, "", mask=causal_mask(y.shape[-2])))  # (..., L_t, d)
    y2 = ln(2, y1 + attend(y1, memory, "cross_"))  # (..., L_t, d): no mask, the source is known
    return ln(3, y2 + ref.feed_forward(y2, p["w_1"], p["w_2"], p["b_1"], p["b_2"]))


check.decoder_block(decoder_block_post_ln, require=True)

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} The exact size of a GPT
# :label: ex-block-count
#
# Write `gpt_parameters(n_layers, d_model, vocab_size, context_length)` returning, as an `int`,
# the exact number of parameters of a GPT: learned token and position embeddings; `n_layers`
# pre-LN blocks, each with two LayerNorms (gain and bias), multi-head attention with biases and
# a feed-forward network of width $4\,d_\text{model}$ with biases; a final LayerNorm; and an
# output projection tied to the token embedding. Check it on GPT-2 small
# ($n = 12$, $d = 768$, $V = 50257$, $n_\text{ctx} = 1024$): 124,439,808.
# ```


# %%
def gpt_parameters(n_layers, d_model, vocab_size, context_length):
    raise NotImplementedError  # your code here


check.gpt_parameters(gpt_parameters)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-block-count
# :class: dropdown
# ```


# %% tags=["solution"]
def gpt_parameters(n_layers, d_model, vocab_size, context_length):
    d = d_model
    attention = 4 * d * d + 4 * d  # W_Q, W_K, W_V, W_O and their biases
    ffn = 2 * d * 4 * d + 4 * d + d  # W_1, W_2 and their biases
    norms = 2 * 2 * d  # two LayerNorms, gain and bias each
    embeddings = (vocab_size + context_length) * d  # the output projection is W_e again
    return n_layers * (attention + ffn + norms) + embeddings + 2 * d  # + final LayerNorm


print(f"GPT-2 small: {gpt_parameters(12, 768, 50257, 1024):,}")
check.gpt_parameters(gpt_parameters, require=True)

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Predict, then check: the parameters of one block
# :label: ex-block-predict
#
# A post-LN block with $d_\text{model} = 64$, 4 heads, $d_\text{ff} = 256$, biases and LayerNorm.
# Predict its number of parameters (use the rule $12d^2 + 13d$ of section 5.7), then run.
# ```

# %%
prediction = None  # your prediction here
check_prediction(
    prediction, count_parameters(BlockConfig(64, 4, 256)), what="the parameter count", rtol=0
)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-block-predict
# :class: dropdown
# ```

# %% tags=["solution"]
prediction = 12 * 64**2 + 13 * 64  # attention 4d^2 + 4d, FFN 8d^2 + 5d, two norms 4d
assert check_prediction(
    prediction, count_parameters(BlockConfig(64, 4, 256)), what="the parameter count", rtol=0
).passed

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Predict, then check: the size of the original Transformer
# :label: ex-block-predict-transformer
#
# `torch.nn.Transformer()` with its defaults is the base model of the paper without its
# embeddings: $d_\text{model} = 512$, 8 heads, 6 encoder and 6 decoder blocks,
# $d_\text{ff} = 2048$, biases, and a LayerNorm after each stack. Predict its number of
# parameters from $12d^2 + 13d$ per encoder block and what section 5.9 says a decoder block
# adds, then run. (The tests check the count against `sum(p.numel())` of the PyTorch module.)
# ```

# %%
prediction = None  # your prediction here
base = EncoderDecoderConfig(6, 6, BlockConfig(512, 8, 2048), final_norm=True)
check_prediction(prediction, count_parameters(base), what="the parameter count", rtol=0)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-block-predict-transformer
# :class: dropdown
# ```

# %% tags=["solution"]
d = 512
encoder_block = 12 * d**2 + 13 * d
decoder_block = encoder_block + (4 * d**2 + 4 * d) + 2 * d  # + cross-attention + a third norm
prediction = 6 * encoder_block + 6 * decoder_block + 2 * 2 * d  # + the two final LayerNorms
print(f"{prediction:,}")
assert check_prediction(
    prediction, count_parameters(base), what="the parameter count", rtol=0
).passed

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Why normalise before, not after?
# :label: ex-block-concept
#
# In a post-LN stack every residual sum passes through a LayerNorm; in a pre-LN stack the
# residual stream is never normalised until the end. Use the gradient identity of section 5.3
# to explain why a 24-layer pre-LN stack trains without warm-up and a post-LN one may not.
# ```

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-block-concept
# :class: dropdown
# ```
#
# In pre-LN each layer computes $x + f(N(x))$, so the gradient reaching its input is exactly
# $g + J^\top g$: the identity path carries the output gradient down through all 24 layers
# unchanged, and each layer only adds to it. In post-LN the sum is normalised, $N(x + f(x))$, so
# the gradient passes through every norm's Jacobian on its way down; at initialisation these
# shrink or distort it differently at each depth (section 5.8 measures it), and large early
# updates of the upper layers destabilise training unless the learning rate starts small
# (warm-up) {cite}`xiong2020layer`.
#
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Which attention needs a mask?
# :label: ex-block-cross-mask
#
# In section 5.9 the decoder's self-attention has a causal mask, but its cross-attention only
# hides the source's padding. Why is reading every source token not a leak from the future?
# And what would go wrong if we trained without the causal mask and then decoded greedily?
# ```

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-block-cross-mask
# :class: dropdown
# ```
#
# In training the decoder's input is the whole correct target shifted by one (teacher
# forcing), so without the causal mask position $i$ could read token $i + 1$, the very token it
# must predict. The memory holds only the source, which is given in full both in training and
# when the model is used, so reading all of it is allowed: it is the point of the model.
# Trained without the mask, the decoder would learn to copy the next token from its input
# and reach a near-zero loss; in greedy decoding that token does not exist yet (the input is
# only what has been written so far), so the copying rule has nothing to copy and the outputs
# are wrong. The mask makes training see exactly what decoding will see.
#
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Stretch: a KV cache for the decoder
# :label: ex-block-stretch
#
# Generating one token at a time with `DecoderOnlyModel` recomputes the keys and values of the
# whole prefix at every step. Explain which tensors a cache must keep per layer, their shapes,
# and how much memory that is for GPT-2 small at 1,024 tokens in float32. (Chapter 8 builds the
# cache and checks it against uncached generation.)
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
#   with $\epsilon$ inside the square root, then applies a learned gain and bias; RMSNorm skips
#   the mean and the bias. Both match PyTorch to rounding error.
# - The FFN is $\phi(xW_1 + b_1)W_2 + b_2$ with ReLU, GELU or swish; the gated form
#   $(\phi(xW_1) \odot xW_2)W_3$ is SwiGLU with swish.
# - Our blocks reproduce `torch.nn.TransformerEncoderLayer` (post- and pre-LN) from copied
#   weights, forward and backward; all 96 variants agree between NumPy and PyTorch; the
#   decoder-only model of eq. (21) is a reusable `torch.nn.Module`.
# - A GPT block has exactly $12d^2 + 13d$ parameters; $12\,n_\text{layers} d^2$ plus the embeddings
#   reproduces the GPT-3 table to within 2%, and exposes its two inconsistent rows.
# - The encoder–decoder of the original Transformer adds a third sub-layer to each decoder
#   block: cross-attention, eqs. (14)–(18) with queries from the decoder and keys and values
#   from the encoder's output. Ours matches `torch.nn.Transformer` to float32 rounding; one
#   encoder and one decoder block learn to reverse digit strings in a few hundred steps, and
#   their cross-attention maps show the decoder reading the source backwards.
# - At initialisation, post-LN's last layers get the largest gradients, at any depth; pre-LN's
#   shrink like $1/\sqrt{\text{depth}}$. Without warm-up and with a large learning rate, a
#   6-block post-LN model fails to learn what a pre-LN one learns in a few dozen steps.
#
# ## References
#
# - G. Strabel, *Transformers*, lecture notes, 2023, section 2.4 and eq. (21)
#   {cite}`strabel2023transformers`.
# - B. M. Marlin, *Lecture 23: Transformers*, lecture slides, 2022 {cite}`marlin2022transformers`.
# - G. Strabel, *Transformers*, lecture notes, 2023, section 3 and Figure 3 (the
#   encoder–decoder) {cite}`strabel2023transformers`.
# - J. May, *Transformer Language Models*, lecture notes, 2024, sections 1 and 1.3
#   {cite}`may2024transformer`.
# - A. Vaswani et al., "Attention is all you need", 2017 {cite}`vaswani2017attention`.
# - J. L. Ba, J. R. Kiros and G. E. Hinton, "Layer normalization", 2016 {cite}`ba2016layer`.
# - B. Zhang and R. Sennrich, "Root mean square layer normalization", 2019 {cite}`zhang2019root`.
# - K. He et al., "Deep residual learning for image recognition", 2016 {cite}`he2016deep`.
# - D. Hendrycks and K. Gimpel, "Gaussian error linear units (GELUs)", 2016
#   {cite}`hendrycks2016gaussian`.
# - N. Shazeer, "GLU variants improve Transformer", 2020 {cite}`shazeer2020glu`.
# - A. Chowdhery et al., "PaLM: scaling language modeling with pathways", 2023
#   {cite}`chowdhery2023palm`.
# - R. Xiong et al., "On layer normalization in the Transformer architecture", 2020
#   {cite}`xiong2020layer`.
# - A. Radford et al., "Improving language understanding by generative pre-training", 2018
#   {cite}`radford2018improving`.
# - T. Brown et al., "Language models are few-shot learners", 2020 {cite}`brown2020language`.
# - N. Srivastava et al., "Dropout: a simple way to prevent neural networks from overfitting",
#   2014 {cite}`srivastava2014dropout`.
#
# The full bibliography of the course is on the [References](../book/references.md) page.
#
# ## How this chapter is tested
#
# `tests/test_block.py` checks the norms, blocks and decoder against hand-derived values, against
# `nn.LayerNorm`, `nn.RMSNorm` and `nn.TransformerEncoderLayer` (weights copied in), counts
# parameters against `sum(p.numel())`, and compiles the decoder with `fullgraph=True`.
# `tests/test_block_encoder_decoder.py` checks the encoder–decoder of section 5.9: parity with
# `nn.Transformer` (forward and gradients, masks included), a decoder block with a one-token
# source against its hand-derived value, causality and padding, the module against its NumPy
# forward pass, the cross-attention maps against the weights the attention used, bad input,
# and (marked `portability`) a retraining run whose loss and accuracies must land within
# tolerances. `tests/test_conformance.py` runs the NumPy reference and the PyTorch side of every
# mirrored function, `decoder_block` and `encoder_decoder_stack` included, on random inputs;
# `benchmarks/block.py` measures speed. The loops below are the parity checks the lesson
# leaves out.

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
# **`torch.nn.Transformer`**, the encoder–decoder of section 5.9, post-LN and pre-LN, ReLU and
# GELU, float64 and float32, in evaluation mode with a causal target mask and padded sources:
# our PyTorch stacks and the NumPy reference against PyTorch's module (weights copied in by
# `transformer_parameters`). `tests/test_block_encoder_decoder.py` runs the same loop and also
# compares gradients; in float32 the largest difference is a few $10^{-7}$.

# %%
import warnings

warnings.filterwarnings("ignore", message="enable_nested_tensor")  # PyTorch's note on its fast path
for norm_first in (False, True):
    for act in ("relu", "gelu"):
        torch.manual_seed(0)
        theirs = nn.Transformer(
            16, 4, 2, 3, 32, activation=act, batch_first=True, norm_first=norm_first
        ).eval()
        cfg_t, p_t = transformer_parameters(theirs)
        x, y = torch.randn(3, 7, 16), torch.randn(3, 5, 16)  # (B, L_s, d), (B, L_t, d)
        keep = torch.ones(3, 7, dtype=torch.bool)
        keep[1, 4:], keep[2, 6:] = False, False  # sources of 7, 4 and 6 tokens
        want = theirs(x, y, **torch_masks(keep, 5))
        causal = torch.ones(5, 5, dtype=torch.bool).tril()
        got = fast.encoder_decoder_stack(
            x, y, p_t, cfg_t, keep[:, None, None], causal, keep[:, None, None]
        )
        torch.testing.assert_close(got, want)
        p64 = {
            k: [{n: w.detach().double().numpy() for n, w in b.items()} for b in v]
            if isinstance(v, list)
            else v.detach().double().numpy()
            for k, v in p_t.items()
        }
        m = keep[:, None, None].numpy()
        numpy_out = ref.encoder_decoder_stack(
            x.double().numpy(), y.double().numpy(), p64, cfg_t, m, causal.numpy(), m
        )
        np.testing.assert_allclose(numpy_out, want.detach().double().numpy(), atol=1e-5, rtol=1e-5)
        print(
            f"nn.Transformer, {cfg_t.block.norm_position}-LN, {act}: PyTorch and NumPy sides match"
        )

# %% [markdown]
#  The modules are meant to be used, so they should not be slow. `benchmarks/block.py` times
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
