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
# # 5. The Transformer block
#
# Attention lets tokens talk to each other; on its own it is not a network you can stack a
# hundred times and train. The **block** wraps it with three more ingredients: a residual
# connection around every sub-layer, a normalisation that keeps each token's vector at a
# predictable scale, and a small feed-forward network applied to every position. Where the
# normalisation sits turns out to decide whether a deep stack trains at all. This chapter
# builds the block in every variant the notes mention, checks it against PyTorch's own
# layer, stacks it into the decoder-only model that chapter 8 trains, and counts its
# parameters down to the last bias.
#
# **After this chapter you can**
#
# - write LayerNorm (with its gain) and RMSNorm, and match `torch.nn.LayerNorm` and
#   `torch.nn.RMSNorm` to rounding error;
# - write the position-wise feed-forward network with ReLU, GELU or swish, and its gated
#   (GLU, SwiGLU) variant;
# - assemble post-LN, pre-LN and parallel blocks, with or without biases, and reproduce
#   `torch.nn.TransformerEncoderLayer` exactly from copied weights;
# - stack blocks into the decoder-only model of the notes' eq. (21), with tied embeddings;
# - count the parameters of any configuration exactly, explain the rule of thumb
#   $12\,n_\text{layers} d_\text{model}^2$, and reproduce (and correct) the GPT-3 size table;
# - explain, with gradients measured at initialisation and a training run, why pre-LN stacks
#   train more easily than post-LN ones.
#
# **Assumes**: chapter 4 (multi-head attention, masks; we call its functions) and basic
# PyTorch autograd.
# **Core path**: about 50 minutes (sections marked core); the optional sections add about 20
# minutes, the exercises about 40.
#
# The chapter follows section 2.4 and eq. (21) of the notes {cite}`strabel2023transformers`,
# the block and LayerNorm equations of the lecture slides {cite}`marlin2022transformers`,
# section 1.3 (residuals and layer norm) of the lecture notes on keys, queries and values
# {cite}`may2024transformer`, and the handwritten notes' list of block modifications (norm
# position, bias removal, RMSNorm, gated units, the parallel block).

# %%
import matplotlib.pyplot as plt
import numpy as np
import torch

import course_lib.block.accelerated as fast
import course_lib.block.reference as ref
from course_lib import seed_everything
from course_lib.attention.reference import causal_mask, multi_head_attention
from course_lib.block import exercises as check
from course_lib.block.config import BlockConfig, DecoderConfig
from course_lib.block.counting import approx_parameters, count_parameters, gpt3_table
from course_lib.block.experiment import (
    gradient_norms_at_init,
    load_log,
    reversal_batch,
    train_reversal,
)
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
# \operatorname{RMSNorm}(\mathbf{z}; \gamma) = \gamma \odot \frac{\mathbf{z}}{\operatorname{RMS}(\mathbf{z})},
# \qquad \operatorname{RMS}(\mathbf{z}) = \Big(\frac{1}{d}\sum_{i=1}^{d} z_i^2 + \epsilon\Big)^{1/2}.
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
# The lecture notes on keys, queries and values motivate the residual connection
# {cite}`may2024transformer` (section 1.3): if a layer's output were only $\mathrm{ff}(\mathrm{self}(x))$, whatever
# attention decided to ignore about a token would be lost for good. Adding the input back,
# $f(x) \to x + f(x)$ (the handwritten notes' item 5; {cite}`he2016deep`), means each sub-layer
# only has to learn a *change* to the token's vector. The same identity path helps
# gradients: the Jacobian of $x + f(x)$ is $I + J_f$, so a gradient $g$ at the output reaches the
# input as exactly $g + J_f^\top g$: the gradient itself, plus whatever flows back through $f$.
# A deep chain of small random layers shows the difference:

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
# item 6, written there for column vectors as $W_2\,\phi(W_1\mathbf{x}_t + \mathbf{b}_1) + \mathbf{b}_2$). In
# the row convention,
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
# $W_3\big(\phi(W_1\mathbf{x}) \odot W_2\mathbf{x}\big)$, "often swish" {cite}`shazeer2020glu`. In the
# row convention, $(\phi(\mathbf{x}W_1) \odot \mathbf{x}W_2)\,W_3$: one branch, passed through
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
# ## 5.5 Three ways to arrange a block (core, 10 min)
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
# \text{parallel:}\quad & \text{out} = X + \operatorname{MHSA}\big(N_1(X)\big) + \operatorname{FFN}\big(N_1(X)\big). &&
# \end{aligned}
# $$
#
# In pre-LN {cite}`xiong2020layer` the residual stream $X \to X' \to \text{out}$ is never
# normalised; each branch normalises its own copy of the input. The parallel block (GPT-J,
# PaLM {cite}`chowdhery2023palm`) computes both branches from the same normalised input, so
# they can run at the same time; we use one shared norm, as PaLM's formula reads. Each variant can drop
# its biases (the notes' "removal of biases"; the LayerNorm bias goes too, as in PyTorch's
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
# `course_lib.models` call it. We check the two sides against each other on **every**
# variant: 3 norm positions $\times$ 2 norms $\times$ plain or gated $\times$ with or without
# biases $\times$ 4 activations = 96 blocks, each with a causal mask (the test suite does the
# same, plus hypothesis-drawn shapes and gradient checks):

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
# ### Parity with `torch.nn.TransformerEncoderLayer`
#
# PyTorch ships a block: `torch.nn.TransformerEncoderLayer`, post-LN by default and pre-LN with
# `norm_first=True`. It stores its weights differently (linear layers as (out, in), the three
# attention projections fused into one $(3d, d)$ matrix); `encoder_layer_parameters` converts
# them to our layout, transposing and splitting the fused matrix per head. With the weights
# copied, our block reproduces PyTorch's, forward and backward:

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
        torch.testing.assert_close(gw_ours, gw_theirs.T)  # (d, d_ff) vs PyTorch's (d_ff, d)
        print(
            f"norm_first={norm_first!s:<5} ({c.norm_position}-LN) {str(dtype):<13}: forward and gradients match"
        )

# %% [markdown]
# `torch.testing.assert_close` uses tolerances that depend on the dtype (about $10^{-7}$
# relative in float64 is far looser than what we get; $1.3\times10^{-6}$ in float32). The test
# suite repeats this with biases removed, GELU, a causal mask, and the NumPy reference.
#
# ## 5.6 Stacking blocks: the decoder-only model (core, 6 min)
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
# final norm goes before the projection (GPT-2 added one there). `DecoderOnlyModel`
# is this model as a `torch.nn.Module`; its NumPy twin `ref.decoder_forward` runs the same
# weights:

# %%
dcfg = DecoderConfig(
    vocab_size=11,
    context_length=12,
    n_layers=3,
    block=BlockConfig(d_model=16, n_heads=4, d_ff=64, norm_position="pre", activation="gelu"),
)
model = DecoderOnlyModel(dcfg, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
tokens = torch.randint(0, 11, (2, 9), generator=torch.Generator().manual_seed(1))  # (B, L)
logits = model(tokens)  # (B, L, V)
print(tuple(logits.shape), " parameters:", model.count_parameters(), "=", count_parameters(dcfg))
np.testing.assert_allclose(
    logits.detach().numpy(),
    ref.decoder_forward(tokens.numpy(), model.numpy_parameters(), dcfg),
    rtol=1e-10,
)
assert (
    model.count_parameters() == count_parameters(dcfg) == sum(p.numel() for p in model.parameters())
)

# %% [markdown]
# The module and the NumPy forward pass, which builds $U$ as explicit one-hot rows and
# multiplies, agree. Two more properties to check: the model is causal (changing the last
# token leaves the logits of every earlier position untouched), and tying saves a whole
# $V \times d$ matrix.

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
    f"GPT-2 small: exact {count_parameters(gpt2):,}, rule of thumb {approx_parameters(12, 768, 50257, 1024):,}"
)
assert count_parameters(gpt2) == 124_439_808

# %% [markdown]
# The exact count, 124,439,808, is the size of the released GPT-2 small checkpoint (with tied
# embeddings); the GPT-2 paper's table lists the model as 117M {cite}`radford2019language`. Now the GPT-3 size table
# of the slides {cite}`marlin2022transformers`, copied there from the GPT-3 paper
# {cite}`brown2020language`. We recompute every row from its $n_\text{layers}$ and
# $d_\text{model}$ (GPT-3 uses GPT-2's vocabulary of 50,257 tokens and 2,048 positions), and
# also check whether $n_\text{heads} \times d_\text{head} = d_\text{model}$, as the heads must
# tile the model width:

# %%
table = gpt3_table()
print(
    f"{'model':<12} {'nominal':>8} {'n':>3} {'d_model':>7} {'h x d_head':>10}  {'12nd^2+emb':>10} {'exact':>8} {'error':>6}"
)
for r in table:
    flag = "" if r["consistent"] else "  <- h x d_head != d_model"
    print(
        f"{r['name']:<12} {r['nominal'] / 1e9:>7.3g}B {r['n_layers']:>3} {r['d_model']:>7} {r['heads_x_dhead']:>10}"
        f"  {r['approx'] / 1e9:>9.3f}B {r['exact'] / 1e9:>7.3f}B {100 * r['exact_error']:>+5.1f}%{flag}"
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
    f"XL with attention width 24 x 128 = 3072: {xl['exact_as_printed'] / 1e9:.2f}B ({100 * xl['exact_as_printed_error']:+.0f}%)"
)
print(
    f"XL with attention width d_model = 2048:  {xl['exact'] / 1e9:.2f}B ({100 * xl['exact_error']:+.1f}%)"
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
# cost. (On the website it shows its stored state; run the notebook to use it.)

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

# %%
# NBVAL_IGNORE_OUTPUT
race = {pos: train_reversal(pos, n_layers=6, lr=1e-2, steps=150, seed=0) for pos in ("post", "pre")}
for pos, out in race.items():
    print(
        f"{pos}-LN: final loss {np.mean(out['loss'][-10:]):.3f}, accuracy on fresh data {out['accuracy']:.3f}"
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
                f"{R:>5} {lr:>6g} {warmup:>7} | {np.array2string(post, precision=2):>30} | {np.array2string(pre, precision=2):>22}"
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
# ## 5.9 What the notes get wrong (core, 8 min)
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
# 4. **The notes on keys, queries and values describe pre-LN as the original Transformer.** They
#    give $x' = \mathrm{self}(\mathrm{norm}(x)) + x$ and say the original paper did not describe it
#    well. The paper is explicit, and different: each sub-layer's output is
#    $\operatorname{LayerNorm}(x + \operatorname{Sublayer}(x))$ {cite}`vaswani2017attention` (section
#    3.1), which is post-LN. Pre-LN came later and was analysed by {cite}`xiong2020layer`. The
#    notes' *form* is not wrong, only its history: pre-LN is what GPT-2 and the implementations
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
# Each exercise gives you a function to write and a checker that runs it against the
# reference on several inputs, including edge cases, and tells you what is wrong. The cells
# below start with a stub that raises `NotImplementedError`; replace its body and run the
# cell. Solutions are folded below each exercise (on the website) or in cells tagged
# `solution` (in the notebook).
#
# ```{exercise} LayerNorm, with its gain
# :label: ex-block-layernorm
#
# Write `layer_norm(x, gain, bias, eps=1e-5)` with NumPy: normalise every token (the last axis
# of `x`, which may have any number of leading dimensions) to mean 0 and variance 1, using the
# biased variance and $\epsilon$ inside the square root, then multiply by `gain` and add
# `bias` (section 5.2). A token whose entries are all equal must not give NaN.
# ```


# %%
def layer_norm(x, gain, bias, eps=1e-5):
    raise NotImplementedError  # your code here


check.layer_norm(layer_norm)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-block-layernorm
# :class: dropdown
# ```


# %% tags=["solution"]
def layer_norm(x, gain, bias, eps=1e-5):
    x = np.asarray(x, dtype=float)
    mu = x.mean(axis=-1, keepdims=True)  # (..., 1)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)  # biased: divide by d
    return bias + gain * (x - mu) / np.sqrt(var + eps)


check.layer_norm(layer_norm, require=True)

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
# - At initialisation, post-LN's last layers get the largest gradients, at any depth; pre-LN's
#   shrink like $1/\sqrt{\text{depth}}$. Without warm-up and with a large learning rate, a
#   6-block post-LN model fails to learn what a pre-LN one learns in a few dozen steps.
#
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
# parameters against `sum(p.numel())`, and compiles the decoder with `fullgraph=True`;
# `tests/test_conformance.py` runs the NumPy reference and the PyTorch side on random inputs in
# four dtypes; `benchmarks/block.py` measures speed:

# %% [markdown]
#  The modules are meant to be used, so they should not be slow. `benchmarks/block.py` times
# forward and forward+backward passes of our post-LN, pre-LN and parallel blocks against
# `torch.nn.TransformerEncoderLayer` at $B = 8$, $L = 256$, $d_\text{model} = 512$ (8 heads,
# $d_\text{ff} = 2048$, float32, CPU); the target is our post-LN block within $1.3\times$ of
# PyTorch's. Run `./course bench block` to measure your machine. A smaller version here:

# %%
# NBVAL_IGNORE_OUTPUT
from course_lib.measure import best_time

torch.manual_seed(0)
c = BlockConfig(d_model=128, n_heads=4, d_ff=512)
ours = TransformerBlock(c)
theirs = torch.nn.TransformerEncoderLayer(128, 4, 512, dropout=0.0, batch_first=True)
x = torch.randn(4, 64, 128, requires_grad=True)
for name, m in (("ours (post-LN)", ours), ("torch TransformerEncoderLayer", theirs)):
    best = best_time(lambda m=m: m(x).sum().backward(), repeats=5)
    print(
        f"{name:<30} forward+backward {1e3 * best:6.1f} ms  ({x.shape[0] * x.shape[1] / best:,.0f} tokens/s)"
    )

# %% [markdown]
# Most of the time goes into the six matrix products of the projections and the feed-forward
# network; we call the same BLAS kernels PyTorch does, so the two land close together.
