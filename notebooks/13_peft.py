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

    course_lib.colab.setup("13_peft")

# %% [markdown]
# # 13. Parameter-efficient fine-tuning: LoRA, QLoRA, prompt and prefix tuning
#
# Fine-tuning every weight of a pre-trained model needs, with Adam, four copies of the model in
# memory (weights, gradients, two moments) and one full copy on disk per task. Parameter-efficient
# methods freeze the pre-trained weights and train something small beside them: a low-rank update
# of some matrices (LoRA), the same over a 4-bit frozen model (QLoRA), a few trainable input
# embeddings (prompt tuning) or trainable keys and values in every layer (prefix tuning). This
# chapter builds all four on chapter 5's decoder, checks each against the `peft` library on the
# same weights, and races them on chapter 8's pre-trained Shakespeare GPT, teaching it a task it
# gets wrong: writing a word backwards.
#
# **After this chapter you can**
#
# - write a LoRA layer, `h = W0 x + (alpha / r) B A x`, say why `B` starts at zero, and merge the
#   update into `W0` and out again;
# - count the trainable parameters of LoRA, prompt tuning and prefix tuning for any model, and
#   check the count against `peft`;
# - compute and measure the memory of weights, gradients and optimiser state for each method,
#   and QLoRA's bits per frozen weight;
# - say what prompt tuning and prefix tuning each let the model see, and why one adapter can be
#   merged for free while the others cannot.
#
# **Assumes**: chapter 5 (the decoder-only model), chapter 8 (the pre-trained character-level
# GPT), chapter 12 (NF4 quantisation), matrix rank.
# **Core path**: about 55 minutes; the optional sections add about 3 minutes (13.10), the
# exercises about 45.
#
# The chapter follows sections 11 and 13 of Strabel's notes {cite}`strabel2023transformers`
# (LoRA, QLoRA, prompt design and tuning), the LoRA paper {cite}`hu2021lora`, the QLoRA paper
# {cite}`dettmers2023qlora`, and the prompt-tuning and prefix-tuning papers the notes list
# (Lester et al., 2021; Li and Liang, 2021).

# %%
import copy
import logging
import warnings

import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import nn

from course_lib import seed_everything
from course_lib.checker import check_prediction
from course_lib.peft import accelerated as fast
from course_lib.peft import exercises as check
from course_lib.peft import reference as ref
from course_lib.peft.counting import memory_bytes, trainable_parameters
from course_lib.peft.layer import LoRALinear
from course_lib.peft.model import AdaptedGPT
from course_lib.peft.task import (
    accuracy,
    example_text,
    fine_tune,
    greedy_answers,
    load_base,
    random_words,
    reverse_examples,
)
from course_lib.plotting import new_axes, use_style

seed_everything(0)
use_style()
torch.set_num_threads(1)  # these models are tiny: one thread is faster than two on a small CPU
logging.getLogger("transformers").setLevel(logging.ERROR)
logging.getLogger("bitsandbytes").setLevel(logging.ERROR)
warnings.filterwarnings("ignore", module="peft")  # peft notes that GPT-2 stores Conv1D weights
warnings.filterwarnings("ignore", category=FutureWarning)  # deprecation notices of transformers

# %% [markdown]
# ## 13.1 What full fine-tuning costs (core, 3 min)
#
# Strabel's notes introduce LoRA as a method "for fine-tuning large, pre-trained transformers
# with limited fine-tuning data and/or compute" (section 11.1). The cost is memory first: Adam
# keeps, for every trained float32 parameter, the parameter (4 bytes), its gradient (4) and two
# moments (8), 16 bytes in all. For GPT-2 small's 124 million parameters that is about 2 GB
# before a single activation is stored; for a 7-billion-parameter model, 112 GB. A frozen
# parameter costs only its 4 bytes (2 in bfloat16, about half a byte in NF4).

# %%
from course_lib.block.config import BlockConfig, DecoderConfig
from course_lib.block.counting import count_parameters

gpt2_small = DecoderConfig(50257, 1024, 12, BlockConfig(768, 12, 3072, norm_position="pre"))
n_gpt2 = count_parameters(gpt2_small)
full = memory_bytes(gpt2_small, "full")
print(f"GPT-2 small: {n_gpt2:,} parameters")
print({k: f"{v / 2**30:.2f} GiB" for k, v in full.items()})
assert n_gpt2 == 124_439_808 and sum(full.values()) == 16 * n_gpt2

# %% [markdown]
# ## 13.2 LoRA: a low-rank update beside a frozen matrix (core, 10 min)
#
# The notes state it for one pre-trained matrix $W_0 \in \mathbb{R}^{d \times k}$: freeze it and
# learn $B \in \mathbb{R}^{d \times r}$ and $A \in \mathbb{R}^{r \times k}$ with $r \ll \min(d, k)$,
# $A$ random Gaussian and $B$ zero. The LoRA paper {cite}`hu2021lora` (eq. 3) and every library
# also **scale** the update by $\alpha / r$ (the notes leave this out; section 13.9):
#
# $$h = W_0 x + \frac{\alpha}{r} B A x. \tag{13.1}$$
#
# The update $BA$ is a $d \times k$ matrix of rank at most $r$, described by $r(d + k)$ numbers
# instead of $dk$. With $B = 0$ the layer is exactly the pre-trained one at the start, so
# fine-tuning begins from the model's own behaviour. Here is the layer, computing the update
# through the rank-$r$ bottleneck $x A^\top$ without ever forming $BA$:


# %%
class LoRA(nn.Module):
    """h = x W^T + b + (alpha / r) (x A^T) B^T, with W and b frozen."""

    def __init__(self, W: torch.Tensor, b: torch.Tensor, r: int, alpha: float):
        super().__init__()
        d, k = W.shape
        self.W = nn.Parameter(W.clone(), requires_grad=False)  # (d, k), frozen
        self.b = nn.Parameter(b.clone(), requires_grad=False)  # (d,), frozen
        self.A = nn.Parameter(torch.randn(r, k) / k**0.5)  # (r, k), Gaussian
        self.B = nn.Parameter(torch.zeros(d, r))  # (d, r), zero: the layer starts unchanged
        self.scale = alpha / r

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x (..., k)
        h = x @ self.W.T + self.b  # (..., d): the frozen path
        z = x @ self.A.T  # (..., r): down to rank r
        return h + self.scale * (z @ self.B.T)  # (..., d): back up, scaled


d, k, r, alpha = 6, 8, 2, 5.0  # alpha != r: a missing scale would show
W0, b0 = torch.randn(d, k, dtype=torch.float64), torch.randn(d, dtype=torch.float64)
layer = LoRA(W0, b0, r, alpha).double()
x = torch.randn(4, k, dtype=torch.float64)  # (B, k)
assert torch.equal(layer(x), x @ W0.T + b0)  # B = 0: exactly the pre-trained layer

# %% [markdown]
# At initialisation the layer changes nothing. Give $B$ some values (as training would) and the
# page's class agrees with the library's NumPy reference, its PyTorch twin and its module
# `LoRALinear`, which the rest of the course uses:

# %%
with torch.no_grad():
    layer.B.normal_()
lib = LoRALinear(W0, b0, rank=r, alpha=alpha)
with torch.no_grad():
    lib.A.copy_(layer.A)
    lib.B.copy_(layer.B)
ours = layer(x).detach()  # (4, d)
args = (W0, layer.A.detach(), layer.B.detach(), alpha)
np.testing.assert_allclose(ours.numpy(), ref.lora_linear(x.numpy(), *(a.numpy() if torch.is_tensor(a) else a for a in args), b=b0.numpy()), rtol=1e-12)  # fmt: skip
torch.testing.assert_close(ours, fast.lora_linear(x, *args, b=b0))
torch.testing.assert_close(ours, lib(x).detach())
print("the page's LoRA = reference = accelerated = LoRALinear, shape", tuple(ours.shape))

# %% [markdown]
# Only $A$ and $B$ receive gradients; the frozen matrix and bias get none. Notice also what the
# zero $B$ does to the very first step: the gradient with respect to $A$ is $B^\top(\cdot)$, zero,
# so at first only $B$ moves, and $A$ starts learning once $B$ is non-zero.

# %%
fresh = LoRA(W0, b0, r, alpha).double()
fresh(x).square().sum().backward()
print("gradient norms: A", fresh.A.grad.norm().item(), "| B", round(fresh.B.grad.norm().item(), 3))
assert fresh.W.grad is None and fresh.b.grad is None
assert fresh.A.grad.abs().max() == 0 and fresh.B.grad.abs().max() > 0

# %% [markdown]
# ## 13.3 Merging: inference costs nothing extra (core, 5 min)
#
# After training, $W' = W_0 + \frac{\alpha}{r}BA$ is an ordinary $d \times k$ matrix: fold it in
# and the layer is a plain linear map again, as fast as the original (the LoRA paper's claim of
# "no additional inference latency"). Keep $\frac{\alpha}{r}BA$ and you can subtract it again to
# swap in another task's adapter. Merged and unmerged outputs agree:

# %%
unmerged = lib(x).detach()  # (4, d)
lib.merge()  # W <- W + (alpha / r) B A
torch.testing.assert_close(lib(x).detach(), unmerged)
torch.testing.assert_close(lib.weight.detach(), fast.lora_weight(*args))
lib.unmerge()  # W <- W - (alpha / r) B A
print("largest change of W after merge + unmerge:", f"{(lib.weight - W0).abs().max().item():.1e}")
assert torch.allclose(lib.weight, W0, atol=1e-12)

# %% [markdown]
# Unmerging gives $W_0$ back up to rounding (exactly here in float64 to within $10^{-15}$; in
# bfloat16 a merge and unmerge can move weights by a rounding step, one reason libraries keep
# the base weights untouched until the end).
#
# ## 13.4 Which matrices, and how many parameters (core, 6 min)
#
# LoRA can adapt any matrix. The paper adapts the query and value projections; `peft` adapts
# GPT-2's fused query/key/value matrix `c_attn` by default; QLoRA adapts every linear layer.
# Adapting a $d \times k$ matrix in each of $n$ layers trains $n \cdot r(d + k)$ numbers.
# For GPT-2 small with $r = 8$ on `c_attn` ($2304 \times 768$):

# %%
n_lora = trainable_parameters(gpt2_small, "lora", rank=8, targets=["w_qkv"])
print(f"{n_lora:,} trainable parameters, {100 * n_lora / n_gpt2:.2f}% of the model")
assert n_lora == 12 * 8 * (2304 + 768)

# %% [markdown]
# A quarter of a percent. The chapter's model is **chapter 8's pre-trained GPT**: the
# character-level model trained on Shakespeare that ships with the course (4 layers, 4 heads,
# width 128, context 64, learned positions, LayerNorm with biases, exact GELU, tied embeddings:
# GPT-2's design at a size that fits this page). A learned-position GPT stores its weights under
# chapter 5's names, so they load unchanged into chapter 5's `DecoderOnlyModel`, which computes
# the same logits; `load_base` does exactly that:

# %%
from course_lib.gpt.pretrained import load_pretrained

base, tok = load_base()  # chapter 5's DecoderOnlyModel holding chapter 8's weights
gpt, _ = load_pretrained()
cfg = base.config  # chapter 5's DecoderConfig of chapter 8's GPTConfig
x_text = torch.tensor([tok.encode("To be, or not to be: that is the question;")])  # (1, 42)
with torch.no_grad():
    torch.testing.assert_close(base(x_text), gpt(x_text), atol=1e-5, rtol=1e-5)
print(f"{sum(p.numel() for p in base.parameters()):,} parameters, vocabulary of {tok.vocab_size}")
print(
    f"{cfg.n_layers} layers, width {cfg.d_model}, context {cfg.context_length}, {cfg.block.activation}"
)

# %% [markdown]
# `AdaptedGPT` copies a pre-trained model's weights, freezes them, and adds adapters to the
# matrices named in `targets` (`w_qkv`, `w_q`, `w_k`, `w_v`, `w_o`, `w_1`, `w_2`). The same
# weights go into Hugging Face's `GPT2LMHeadModel` (built from a config, nothing downloaded; its
# activation set to the exact `"gelu"` this model uses, not GPT-2's tanh approximation), and
# `peft` adds its LoRA there. Both train the same number of parameters and compute the same
# function, at initialisation and after the same $A$ and $B$ are copied in:

# %%
from peft import LoraConfig, TaskType, get_peft_model

from course_lib.models.decoder import DecoderOnlyModel
from course_lib.peft.hf import copy_adapters_from_peft, to_hf_gpt2

ALL = ("w_qkv", "w_o", "w_1", "w_2")  # GPT-2's c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj
ours = AdaptedGPT(base, targets=ALL, rank=4, alpha=8.0)
theirs = get_peft_model(
    to_hf_gpt2(base),
    LoraConfig(r=4, lora_alpha=8, target_modules=["c_attn", "c_proj", "c_fc"], lora_dropout=0.0,
               task_type=TaskType.CAUSAL_LM),
)  # fmt: skip
n_theirs = sum(p.numel() for p in theirs.parameters() if p.requires_grad)
print(f"trainable: ours {ours.trainable_parameters():,}, peft {n_theirs:,}")
assert (
    ours.trainable_parameters()
    == n_theirs
    == trainable_parameters(cfg, "lora", rank=4, targets=ALL)
)
t = reverse_examples(4, seed=0)  # (4, 12) token ids of the task of section 13.5
with torch.no_grad():
    torch.testing.assert_close(ours(t), base(t), atol=1e-4, rtol=1e-4)  # B = 0
    g = torch.Generator().manual_seed(0)
    for p in theirs.parameters():
        if p.requires_grad:
            p.normal_(0, 0.05, generator=g)  # pretend training happened
    copy_adapters_from_peft(theirs, ours)
    assert (ours(t) - base(t)).abs().max() > 0.1  # the update changes the model
    torch.testing.assert_close(ours(t), theirs(t).logits, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(
        ours.merge()(t), theirs.merge_and_unload()(t).logits, atol=1e-4, rtol=1e-4
    )

# %% [markdown]
# The gradients agree too (the chapter's tests check them, and the appendix lists the rest).
#
# ## 13.5 A task the pre-trained model gets wrong (core, 8 min)
#
# To see fine-tuning work we need a task the model cannot do yet and can learn. It is generated
# from a seed, so nothing is downloaded: five random lowercase letters, a colon, the same
# letters **reversed**, a semicolon, `stone:enots;`. Every character is in the Shakespeare
# vocabulary (it has no `=`, so a colon separates), and the model has read thousands of colons,
# never this pattern. The loss and the accuracy count the five answer letters only; an example
# is right when all five are the model's top predictions (exact match). Before fine-tuning:

# %%
from course_lib.peft.task import HELD_OUT_SEED

words = random_words(4, seed=3)  # four words from a seed the training batches do not use
print("the task:            ", [example_text(w) for w in words])
print("the model continues: ", greedy_answers(base, words))
held_out = reverse_examples(512, seed=HELD_OUT_SEED)  # (512, 12): the 512 held-out words
acc_frozen = accuracy(base, held_out)
print(f"exact-match accuracy before fine-tuning: {acc_frozen:.2f}")
assert acc_frozen < 0.01
assert set(greedy_answers(base, words)) == {" the "}

# %% [markdown]
# The pre-trained model does what its training text suggests: after a colon comes a space and
# a common word, here ` the `, never the letters reversed. Not one held-out word comes out right.
#
# Now fine-tune, live: LoRA of rank 8 on all four matrices of every block, $\alpha = 2r$, Adam
# with learning rate $3 \cdot 10^{-3}$, batches of 32 fresh words, accuracy on the 512 held-out
# words every 100 steps. 500 steps take about half a minute:

# %% tags=["nbval-ignore-output"]
live = AdaptedGPT(base, targets=ALL, rank=8, alpha=16.0)
live_curve = fine_tune(live, steps=500, lr=3e-3, eval_every=100, eval_examples=512, progress=True)

# %%
print(f"LoRA r=8, {live.trainable_parameters():,} trained parameters")
print(f"exact-match accuracy after {live_curve.steps[-1]} steps: {live_curve.accuracy[-1]:.2f}")
print("the model now writes:", greedy_answers(live, words))
assert live_curve.accuracy[-1] > 0.9
assert greedy_answers(live, words) == [w[::-1] for w in words]

# %% [markdown]
# A training run is too slow for this page for every method and rank, so a script runs them all
# on the same batches, for 1000 steps each, and ships what it measured in
# `data/peft/comparison.json`, together with the command that made it:

# %%
from course_lib.peft.compare import by_name, load_comparison

comparison = load_comparison()
runs = by_name(comparison)
print(comparison["command"])
print(f"{len(runs)} runs, {comparison['settings']['steps']} steps each, {comparison['runtime_s'] / 60:.0f} minutes (wall clock) on one CPU thread")  # fmt: skip
shipped = runs["lora r=8"]["curve"]
assert shipped["steps"][: len(live_curve.steps)] == live_curve.steps
assert abs(shipped["accuracy"][len(live_curve.steps) - 1] - live_curve.accuracy[-1]) < 0.05

# %% [markdown]
# The script's LoRA r=8 run is the live run continued (same seeds, same batches; its accuracy
# at step 500 is the live run's). Here are full fine-tuning and LoRA at ranks 1 to 8, all on the
# same batches:

# %%
RANKS = [1, 2, 4, 8]
fig, ax = new_axes("Fine-tuning to reverse words", "step", "held-out exact-match accuracy")
for name in ["full", *(f"lora r={r}" for r in RANKS), "lora q,v r=4"]:
    c = runs[name]["curve"]
    ax.plot(
        c["steps"], c["accuracy"], marker="o", ms=3, label=name, ls="--" if "q,v" in name else "-"
    )
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()


def first_step(name, level=0.9):
    """The first evaluation step at which a run's accuracy reached ``level`` (None: never)."""
    c = runs[name]["curve"]
    return next((s for s, a in zip(c["steps"], c["accuracy"], strict=True) if a >= level), None)


for name in ["full", *(f"lora r={r}" for r in RANKS), "lora q,v r=4"]:
    print(f"{name:<13} {runs[name]['trainable']:>8,} trained, accuracy {runs[name]['accuracy']:.2f}, first at 0.9 at step {first_step(name) or 'never'}")  # fmt: skip

# %% [markdown]
# Full fine-tuning learns the task first (by step 200), and LoRA from rank 2 up learns it too,
# the sooner the higher the rank: the accuracy stays at 0 for hundreds of steps, then jumps
# within a hundred steps or two, as a model does when it finds a new circuit (here: attend from
# the $i$-th answer position to the $i$-th letter from the end). Rank 1 (8,192 trained numbers,
# 1% of the model) has not found it after 1000 steps. Adapting only the queries and values, the
# paper's choice, trains the same 8,192 numbers at rank 4 and gets most of the way (0.88): *where*
# the parameters go matters as much as how many.

# %%
acc = {name: res["accuracy"] for name, res in runs.items()}
assert acc["full"] > 0.9 and min(acc[f"lora r={r}"] for r in (2, 4, 8)) > 0.9
assert first_step("full") < first_step("lora r=8") < first_step("lora r=4") < first_step("lora r=2")
assert acc["lora r=1"] < 0.05 and first_step("lora r=1") is None
assert runs["lora q,v r=4"]["trainable"] == runs["lora r=1"]["trainable"]
assert 0.8 < acc["lora q,v r=4"] < 0.9

# %% [markdown]
# ## 13.6 QLoRA: LoRA over a 4-bit frozen model (core, 8 min)
#
# The notes' QLoRA section (11.2) is an empty heading. What QLoRA {cite}`dettmers2023qlora` does:
# store every frozen matrix in **NF4** (chapter 12: 16 levels at the quantiles of a normal
# distribution, one absmax scale per block of 64 weights), quantise those scales again to 8 bits
# in blocks of 256 (**double quantisation**), multiply in **bfloat16** after dequantising, and
# train LoRA adapters on every linear layer in higher precision. The memory per frozen weight:
#
# $$4 + \frac{8}{64} + \frac{32}{64 \cdot 256} \approx 4.127 \text{ bits},$$
#
# against 4.5 bits with float32 scales and 32 bits for float32. `NF4Weight` stores a matrix
# that way (the codes are chapter 12's, which equal bitsandbytes' on the same matrix); its
# measured storage, for a GPT-2-small-sized matrix:

# %%
from course_lib.peft.qlora import NF4Weight, bits_per_parameter

W = 0.02 * torch.randn(768, 2304)  # the shape of GPT-2 small's c_attn
q = NF4Weight(W)
print(
    f"{q.storage_bytes():,} bytes for {W.numel():,} weights: {q.bits_per_parameter():.4f} bits each"
)
rel = ((q.dequantize(torch.float32) - W).norm() / W.norm()).item()
print(f"relative error of the dequantised matrix: {rel:.3f}")
assert q.bits_per_parameter() == bits_per_parameter(W.numel()) < 4.2

# %% [markdown]
# Quantisation changes the model a little (a tenth of each weight's size, in RMS), and LoRA then
# learns around the quantised weights. `AdaptedGPT(..., nf4=True)` holds the four matrices of
# every block this way and runs them in bfloat16; embeddings, norms and biases stay in float32.
# The reference is QLoRA the way users run it: the same GPT weights loaded in 4 bits by
# `bitsandbytes` (NF4, double quantisation, bfloat16 compute) with `peft`'s LoRA on top, its
# adapters copied from ours so that both start from the same point. The two models differ only
# in the second level of the double quantisation (bitsandbytes stores the block scales in an
# 8-bit dynamic float code, we in absmax int8, chapter 12):

# %%
from course_lib.peft.hf import Logits, to_hf_qlora

ref_qlora = to_hf_qlora(base, rank=4, alpha=8.0)
start = AdaptedGPT(base, targets=ALL, rank=4, alpha=8.0, nf4=True)  # what "qlora r=4" starts from
for layer, adapters in enumerate(start.adapters):
    for target, hf_name in (("w_qkv", "attn.c_attn"), ("w_o", "attn.c_proj"), ("w_1", "mlp.c_fc"), ("w_2", "mlp.c_proj")):  # fmt: skip
        sub = ref_qlora.get_submodule(f"base_model.model.transformer.h.{layer}.{hf_name}")
        with torch.no_grad():
            sub.lora_A["default"].weight.copy_(adapters[target].A)
            sub.lora_B["default"].weight.copy_(adapters[target].B)
with torch.no_grad():
    a, b = Logits(ref_qlora)(held_out[:8]), start(held_out[:8])
    dense = base(held_out[:8, :-1])
gap = ((a - b).norm() / a.norm()).item()
print("relative difference of the logits at the start below 2%:", gap < 0.02)
assert gap < 0.02
print(f"QLoRA's frozen model is {((b[:, :-1] - dense).norm() / dense.norm()).item():.2f} away from the float32 one (relative)")  # fmt: skip

# %% [markdown]
# The script trained both for 1000 steps on the same batches (LoRA r=4 on every matrix, as the
# float32 `lora r=4` run):

# %%
fig, ax = new_axes("QLoRA r=4: ours against peft + bitsandbytes", "step", "held-out accuracy")
for name, style in (("lora r=4", ":"), ("qlora r=4", "-"), ("qlora r=4 (peft + bitsandbytes)", "--")):  # fmt: skip
    c = runs[name]["curve"]
    ax.plot(c["steps"], c["accuracy"], ls=style, marker="o", ms=3, label=name)
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()
qm, lm = runs["qlora r=4"], runs["lora r=4"]
ref_acc = runs["qlora r=4 (peft + bitsandbytes)"]["accuracy"]
print(f"final accuracy: ours {qm['accuracy']:.2f}, peft + bitsandbytes {ref_acc:.2f}, float32 LoRA {lm['accuracy']:.2f}")  # fmt: skip
saving = lm["frozen_bytes"] / qm["frozen_bytes"]
print(f"frozen weights: {qm['frozen_bytes']:,} bytes with NF4, {lm['frozen_bytes']:,} in float32 ({saving:.1f} times less)")  # fmt: skip
assert 6 < saving < 7

# %% [markdown]
# QLoRA learns the task as the float32 LoRA of the same rank does, and so does the `peft` +
# `bitsandbytes` reference; the three curves jump within a hundred steps of each other. They need
# not lie on top of each other: the frozen models differ by rounding (NF4 against float32, and
# the second level of the scales between the two QLoRAs), and when a jump comes depends on
# small differences.

# %%
assert qm["accuracy"] > 0.9 and ref_acc > 0.9
assert abs(first_step("qlora r=4") - first_step("qlora r=4 (peft + bitsandbytes)")) <= 100

# %% [markdown]
# In this model the embeddings and positions are 3% of the weights and stay in float32, so the
# saving is 6.4-fold rather than eightfold. **Paged optimisers**, QLoRA's third
# idea, move the optimiser state between GPU and CPU memory (NVIDIA unified memory) when a long
# sequence makes memory spike, instead of failing with an out-of-memory error. On a CPU,
# optimiser state already lives in main memory, so there is nothing to page: they matter on a
# GPU only.
#
# ## 13.7 Prompt tuning and prefix tuning (core, 7 min)
#
# Section 13 of the notes ("Prompt design and tuning") only says "Need to cover" the two papers.
# Both methods leave every weight alone and train extra **vectors** instead:
#
# - **Prompt tuning** {cite}`lester2021power` learns $n$ embeddings $P \in \mathbb{R}^{n \times d}$
#   placed before the token embeddings. Only the first layer sees them as inputs; later layers
#   see whatever the frozen network makes of them. It trains $n \cdot d$ numbers.
# - **Prefix tuning** {cite}`li2021prefix` learns, for every layer and head, $n$ keys and $n$
#   values that are prepended to the keys and values computed from the tokens. Every layer's
#   attention reads its own trained prefix. It trains $n_\text{layers} \cdot 2 \cdot n \cdot d$.
#
# Here is the difference made concrete, in what the first layer's attention receives:

# %%
prompt_m = AdaptedGPT(base, prompt_tokens=8)
prefix_m = AdaptedGPT(base, prefix_tokens=8)
print("prompt: trained", tuple(prompt_m.prompt.shape), "(n, d), added to the input only")
print("prefix: trained", tuple(prefix_m.prefix.shape), "(layers, key/value, heads, n, d_head)")
print(
    f"trainable: prompt {prompt_m.trainable_parameters():,}, prefix {prefix_m.trainable_parameters():,}"
)
assert prompt_m.trainable_parameters() == 8 * cfg.d_model
assert prefix_m.trainable_parameters() == cfg.n_layers * 2 * 8 * cfg.d_model

# %% [markdown]
# With the trainable vectors copied from `peft`'s `PromptTuningConfig` and `PrefixTuningConfig`
# models (on the same GPT weights), the outputs agree. `peft` keeps the virtual positions in its
# logits for prompt tuning, so its first 8 positions are dropped before comparing; and, as in
# `peft`, the real tokens sit at positions $n$ to $n + L - 1$.

# %%
from peft import PrefixTuningConfig, PromptTuningConfig

for kind, mine in ((PromptTuningConfig, prompt_m), (PrefixTuningConfig, prefix_m)):
    other = get_peft_model(
        to_hf_gpt2(base), kind(num_virtual_tokens=8, task_type=TaskType.CAUSAL_LM)
    )
    assert (
        sum(p.numel() for p in other.parameters() if p.requires_grad) == mine.trainable_parameters()
    )
    theirs_mine = copy.deepcopy(mine)
    copy_adapters_from_peft(other, theirs_mine)
    with torch.no_grad():
        logits = other(t).logits[:, -t.shape[1] :]  # (4, 12, V): the real tokens
        torch.testing.assert_close(theirs_mine(t), logits, atol=1e-4, rtol=1e-4)
print("prompt and prefix tuning agree with peft")

# %% [markdown]
# The script trained both on the reversal task with 8 virtual tokens each (a higher learning
# rate, $3 \cdot 10^{-2}$, as the papers use for these few parameters):

# %%
for name in ("prompt", "prefix"):
    c = runs[name]["curve"]
    print(f"{name} tuning: {runs[name]['trainable']:,} trained, accuracy {runs[name]['accuracy']:.2f}, final loss {c['loss'][-1]:.2f}")  # fmt: skip
assert max(runs["prompt"]["accuracy"], runs["prefix"]["accuracy"]) < 0.05
assert min(runs[n]["curve"]["loss"][-1] for n in ("prompt", "prefix")) > 3.0  # ln 26 = 3.26

# %% [markdown]
# Neither learns to reverse in 1000 steps; their loss on the answer letters stays above 3, near
# $\ln 26 \approx 3.26$, a uniform guess among the letters. That is no bug (the outputs agree
# with `peft`'s): a prompt or a prefix can add information and steer attention, but reversing
# needs the layers to look up positions the pre-trained model never looks up, which means
# changing what the weights compute. Lester et al. report that prompt tuning catches up with
# full fine-tuning only for models of about ten billion parameters; at 0.8 million it is far
# behind. LoRA changes the weights themselves, in a small subspace, and that is enough here.
#
# ## 13.8 The comparison (core, 4 min)
#
# One table for all methods, from the script's file: trainable parameters, the bytes of frozen
# weights and of trained weights + gradients + Adam state (measured, by counting the storage of
# every tensor after a step), the time of one training step (the best of five rounds in which
# the methods take turns, one thread of the course's CPU, which other jobs shared: compare the
# rows, not the absolute times), and the final accuracy.

# %%
print(f"{'method':<32}{'trainable':>10}{'frozen B':>11}{'train+grad+Adam B':>19}{'ms/step':>9}{'accuracy':>10}")  # fmt: skip
for name, res in runs.items():
    state = res.get("trained_bytes"), res.get("gradient_bytes"), res.get("optimiser_bytes")
    if state[0] is None:  # the bitsandbytes reference: accuracy only
        print(f"{name:<32}{res['trainable']:>10,}{'':>11}{'':>19}{'':>9}{res['accuracy']:>10.2f}")
        continue
    ms = "" if res["seconds_per_step"] is None else f"{1000 * res['seconds_per_step']:.0f}"
    print(f"{name:<32}{res['trainable']:>10,}{res['frozen_bytes']:>11,}{sum(state):>19,}{ms:>9}{res['accuracy']:>10.2f}")  # fmt: skip
    assert sum(state) == 16 * res["trainable"]  # 4 + 4 + 8 bytes per trained parameter

# %% [markdown]
# Full fine-tuning holds 16 bytes for each of its 811,392 parameters, 13 MB of weights,
# gradients and Adam state; LoRA r=4 holds 0.5 MB of them beside 3.2 MB of frozen float32
# weights, which QLoRA stores in 0.5 MB. The time of a step differs far less than the memory:
# on a model this small the forward and backward passes through the activations cost most, and
# LoRA saves the weights' gradients and the optimiser's work, not the passes themselves (QLoRA
# adds the dequantisation).

# %%
state = {n: 16 * r["trainable"] for n, r in runs.items() if r.get("seconds_per_step")}
times = {n: r["seconds_per_step"] for n, r in runs.items() if r.get("seconds_per_step")}
print(f"trained state: full {state['full'] / 1e6:.1f} MB, LoRA r=4 {state['lora r=4'] / 1e6:.1f} MB; frozen: LoRA {runs['lora r=4']['frozen_bytes'] / 1e6:.1f} MB, QLoRA {runs['qlora r=4']['frozen_bytes'] / 1e6:.1f} MB")  # fmt: skip
print(f"slowest step / fastest step: {max(times.values()) / min(times.values()):.1f}; trained state, full / LoRA r=4: {state['full'] / state['lora r=4']:.0f}")  # fmt: skip
assert max(times.values()) / min(times.values()) < 2 < 20 < state["full"] / state["lora r=4"]

# %% [markdown]
# Accuracy against rank, and against the number of trained parameters:

# %%
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
ax1.plot(RANKS, [runs[f"lora r={r}"]["accuracy"] for r in RANKS], marker="o", label="LoRA, all four matrices")  # fmt: skip
ax1.plot([4], [runs["qlora r=4"]["accuracy"]], "s", label="QLoRA")
ax1.plot([4], [runs["lora q,v r=4"]["accuracy"]], "^", label="LoRA, queries and values")
ax1.axhline(runs["full"]["accuracy"], color="grey", ls=":", label="full fine-tuning")
ax1.set(title=f"Accuracy after {comparison['settings']['steps']} steps against rank", xscale="log",
        xlabel="rank r (log scale)", ylabel="held-out accuracy")  # fmt: skip
ax1.set_xticks(RANKS, [str(r) for r in RANKS])
ax1.legend(fontsize=7)
for name, res in runs.items():
    if res["trainable"] and "bitsandbytes" not in name:
        ax2.scatter(res["trainable"], res["accuracy"], s=25)
        below = name.startswith("qlora") or "q,v" in name  # they share a count with another run
        ax2.annotate(name, (res["trainable"], res["accuracy"]), fontsize=7,
                     xytext=(3, -10 if below else 3), textcoords="offset points")  # fmt: skip
ax2.set(title="Accuracy against trainable parameters", xscale="log",
        xlabel="trainable parameters (log scale)", ylabel="held-out accuracy")  # fmt: skip
fig.tight_layout()
plt.show()

# %% [markdown]
# Against rank, the accuracy is a threshold: nothing at rank 1, nearly everything from rank 2 on.
# Against trainable parameters, the count alone does not decide: with 8,192 numbers each, LoRA
# r=1 and prefix tuning fail while LoRA on queries and values reaches 0.88; with 16,384 (2% of
# the model), LoRA r=2 is nearly as accurate as full fine-tuning, which trains about 50 times
# as many.

# %%
assert round(runs["full"]["trainable"] / runs["lora r=2"]["trainable"]) == 50
assert runs["prefix"]["trainable"] == runs["lora r=1"]["trainable"] == 8192

# %% [markdown]
#
# The savings are in memory, and they grow with the model: for GPT-2 small with $r = 8$ on
# `c_attn`, trained weights, gradients and Adam state fall from about 2.0 GB to 4.7 MB:

# %%
small = memory_bytes(gpt2_small, "lora", rank=8, targets=["w_qkv"])
state_full, state_lora = 16 * n_gpt2, small["trained"] + small["gradients"] + small["optimiser"]
print(f"full: {state_full / 1e9:.2f} GB; LoRA r=8 on c_attn: {state_lora / 1e6:.2f} MB")
assert round(state_full / 1e9, 1) == 2.0 and round(state_lora / 1e6, 1) == 4.7

# %% [markdown]
# ## 13.9 What the notes get wrong or leave vague (core, 4 min)
#
# 1. **The scale is missing.** Strabel's notes replace $W_0$ by "frozen($W_0$) + $BA$"; the LoRA
#    paper (section 4.1) and every implementation use $W_0 + \frac{\alpha}{r}BA$. The two agree
#    only when $\alpha = r$, which is why a test with $\alpha = r$ cannot catch a missing scale:

# %%
from course_lib.peft.as_printed import lora_weight_as_printed

rng = np.random.default_rng(0)
Wn, An, Bn = rng.standard_normal((5, 4)), rng.standard_normal((2, 4)), rng.standard_normal((5, 2))
np.testing.assert_allclose(
    lora_weight_as_printed(Wn, An, Bn), ref.lora_weight(Wn, An, Bn, alpha=2.0)
)
gap = np.abs(lora_weight_as_printed(Wn, An, Bn) - ref.lora_weight(Wn, An, Bn, alpha=16.0)).max()
print(f"alpha = r: identical; alpha = 16, r = 2: they differ by up to {gap:.2f}")
assert gap > 1

# %% [markdown]
#    The scale matters in practice: with $\alpha$ fixed, raising $r$ keeps the size of the update
#    roughly constant, so a learning rate tuned for one rank still works for another.
# 2. **"rank(r) ≪ min(d, k)"** mixes the rank and its bound: $r$ *is* the inner dimension, and
#    the update $BA$ has rank **at most** $r$ (exactly $r$ for random factors, less if $B$ or $A$
#    is degenerate, e.g. $B = 0$ at the start, rank 0):

# %%
assert np.linalg.matrix_rank(Bn @ An) == 2 and np.linalg.matrix_rank(np.zeros((5, 2)) @ An) == 0

# %% [markdown]
# 3. **"A has a random Gaussian initialization"** is the paper's description; `peft` (and the
#    paper's own code for linear layers) draws $A$ uniformly in $\pm 1/\sqrt{k}$ (Kaiming-uniform).
#    Either works, since only $B = 0$ matters for starting unchanged; our layer uses a Gaussian
#    with standard deviation $1/\sqrt{k}$:

# %%
fresh_peft = get_peft_model(to_hf_gpt2(base), LoraConfig(r=4, lora_alpha=8, target_modules=["c_attn"], task_type=TaskType.CAUSAL_LM))  # fmt: skip
A_peft = dict(fresh_peft.named_parameters())["base_model.model.transformer.h.0.attn.c_attn.lora_A.default.weight"]  # fmt: skip
assert A_peft.abs().max() <= 1 / cfg.d_model**0.5  # uniform in +-1/sqrt(k)
assert (
    AdaptedGPT(base, targets=ALL).adapters[0]["w_qkv"].A.abs().max() > 1 / cfg.d_model**0.5
)  # Gaussian tails

# %% [markdown]
# 4. **QLoRA (section 11.2) and prompt tuning (section 13) are empty**: a heading, and "Need to
#    cover [LL21] and [LARC21]". Sections 13.6 and 13.7 above fill them in: NF4 with double
#    quantisation at about 4.127 bits per weight, bfloat16 computation, paged optimisers; trained
#    input embeddings versus trained keys and values in every layer.
# 5. **Stray captions**: the LoRA section carries "Figure 13: bfloat16" (a figure of section 15)
#    and the paper's own caption "Figure 1: Our reparametrization"; in the July 2023 version the
#    LoRA figure sits inside the Longformer section.

# %% [markdown]
# ## 13.10 Explore (optional, 3 min)
#
# Choose a method and a rank: the widget shows the trainable parameters and the memory of
# weights, gradients and Adam state for chapter 8's GPT (the formulas the table above
# measured), and the accuracy curve the comparison script measured for that choice.

# %%
from course_lib.peft.widget import method_explorer

method_explorer(
    cfg,
    {k: (v["curve"]["steps"], v["curve"]["accuracy"]) for k, v in runs.items() if v["curve"]},
)

# %% [markdown]
# ## Exercises
#
# Four kinds: implement (a checker tells you what is wrong), predict then check, a conceptual
# question, and a stretch problem. Solutions are folded below each exercise.
#
# ```{exercise} A LoRA linear layer
# :label: ex-peft-implement
#
# Write `lora_linear(x, W, A, B, alpha)` in NumPy: `x` is (n, k), `W` (d, k), `A` (r, k), `B`
# (d, r); return $x W^\top + \frac{\alpha}{r} (x A^\top) B^\top$, shape (n, d).
# ```


# %%
def lora_linear(x, W, A, B, alpha):
    raise NotImplementedError  # your code here


check.lora_linear(lora_linear)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-peft-implement
# :class: dropdown
# ```


# %% tags=["solution"]
def lora_linear(x, W, A, B, alpha):
    r = A.shape[0]
    return x @ W.T + (alpha / r) * (x @ A.T) @ B.T  # (n, d)


check.lora_linear(lora_linear, require=True)

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Merge and unmerge
# :label: ex-peft-merge
#
# Write `merge(W, A, B, alpha)`, returning the merged weight, and `unmerge(W_merged, A, B,
# alpha)`, returning the weight before merging.
# ```


# %%
def merge(W, A, B, alpha):
    raise NotImplementedError  # your code here


def unmerge(W_merged, A, B, alpha):
    raise NotImplementedError  # your code here


print(check.merge(merge))
check.unmerge(unmerge)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-peft-merge
# :class: dropdown
# ```


# %% tags=["solution"]
def merge(W, A, B, alpha):
    return W + (alpha / A.shape[0]) * B @ A


def unmerge(W_merged, A, B, alpha):
    return W_merged - (alpha / A.shape[0]) * B @ A


print(check.merge(merge, require=True))
check.unmerge(unmerge, require=True)

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Count the trainable parameters
# :label: ex-peft-count
#
# Write `count_lora(d, k, r, n_layers)`: the number of trainable parameters of LoRA of rank `r`
# on one $d \times k$ matrix in each of `n_layers` layers.
# ```


# %%
def count_lora(d, k, r, n_layers):
    raise NotImplementedError  # your code here


check.count_lora(count_lora)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-peft-count
# :class: dropdown
# ```


# %% tags=["solution"]
def count_lora(d, k, r, n_layers):
    return n_layers * r * (d + k)  # A is (r, k), B is (d, r), in every layer


check.count_lora(count_lora, require=True)

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Predict, then check: prefix tuning's parameters
# :label: ex-peft-predict
#
# GPT-2 small has 12 layers and $d = 768$. How many parameters does prefix tuning with 20
# virtual tokens train (no reparametrisation network)? Write your prediction, then run the cell.
# ```

# %%
prediction = None  # your prediction here
check_prediction(prediction, trainable_parameters(gpt2_small, "prefix", virtual_tokens=20), what="prefix tuning's trainable parameters")  # fmt: skip

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-peft-predict
# :class: dropdown
# ```

# %% tags=["solution"]
prediction = 12 * 2 * 20 * 768  # a key and a value of width d per position, in every layer
assert check_prediction(prediction, trainable_parameters(gpt2_small, "prefix", virtual_tokens=20), what="prefix tuning's trainable parameters").passed  # fmt: skip

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Why B and not A?
# :label: ex-peft-concept
#
# LoRA starts with $B = 0$ and a random $A$. What would go wrong with $A = 0$ and $B = 0$? And
# with a random $B$ and $A = 0$?
# ```

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-peft-concept
# :class: dropdown
# ```
#
# With both zero, the gradient with respect to $A$ is $\frac{\alpha}{r} B^\top g x^\top = 0$ and
# with respect to $B$ is $\frac{\alpha}{r} g (Ax)^\top = 0$: nothing ever moves. One factor must be
# non-zero for the other to receive a gradient. $A = 0$ with a random $B$ would work as well (the
# update is zero at the start and $A$ gets a gradient); the convention $B = 0$ makes $A$ a random
# projection of the input from the first step, which is how the paper states it.
#
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Stretch: merging into NF4
# :label: ex-peft-stretch
#
# `AdaptedGPT(..., nf4=True).merge()` refuses. Quantise a matrix $W$ with `NF4Weight`, merge a
# small LoRA update into the dequantised matrix, quantise the result again, and measure how much
# of the update survives (the relative error of the recovered update). Why is a small update
# mostly lost, and what do people do instead?
# ```

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-peft-stretch
# :class: dropdown
# ```

# %% tags=["solution"]
Wq = NF4Weight(0.02 * torch.randn(64, 256, generator=torch.Generator().manual_seed(1)))
W_hat = Wq.dequantize(torch.float32)
update = 1e-3 * torch.randn(64, 2) @ torch.randn(2, 256)  # a small rank-2 update
recovered = NF4Weight(W_hat + update).dequantize(torch.float32) - W_hat
lost = ((recovered - update).norm() / update.norm()).item()
print(f"relative error of the update after re-quantising: {lost:.2f}")
assert lost > 0.5

# %% [markdown] tags=["solution"]
# An NF4 step is about a tenth of a weight's size; an update much smaller than one step rounds
# away or jumps a whole level. So one keeps the base in NF4 and the adapter apart, or
# dequantises the base to 16 bits, merges there, and serves a 16-bit model.
#
# ```{solution-end}
# ```

# %% [markdown]
# ## Summary
#
# - LoRA trains $h = W_0 x + \frac{\alpha}{r} BAx$ with $B = 0$ at the start; it trains
#   $r(d + k)$ numbers per matrix and, merged, costs nothing at inference.
# - With Adam, a trained float32 parameter costs 16 bytes, a frozen one 4; QLoRA stores frozen
#   weights in about 4.127 bits with NF4 and double quantisation.
# - Prompt tuning trains input embeddings, prefix tuning trains keys and values in every layer;
#   both are tiny, neither can be merged into the weights, and on a small model they learn far
#   less than LoRA.
# - Every method here computes what `peft` computes on the same weights.
#
# ## References
#
# - G. Strabel, *Transformers*, lecture notes, 2023, sections 11 and 13 {cite}`strabel2023transformers`.
# - E. J. Hu et al., "LoRA: Low-rank adaptation of large language models", 2021 {cite}`hu2021lora`.
# - T. Dettmers et al., "QLoRA: Efficient finetuning of quantized LLMs", 2023 {cite}`dettmers2023qlora`.
# - B. Lester, R. Al-Rfou and N. Constant, "The power of scale for parameter-efficient prompt
#   tuning", EMNLP 2021 {cite}`lester2021power`.
# - X. L. Li and P. Liang, "Prefix-tuning: optimizing continuous prompts for generation", ACL 2021
#   {cite}`li2021prefix`.
#
# ## How this chapter is tested
#
# `tests/test_conformance.py` runs `lora_weight` and `lora_linear` (NumPy against PyTorch) on
# random shapes with $\alpha \ne r$ in float64, float32 and bfloat16, with `gradcheck`.
# `tests/test_peft.py` checks a hand-derived update with $\alpha = 6, r = 2$; the unmerged layer
# against the merged weight computed as an explicit sum of outer products; `LoRALinear` against
# `peft` on a linear layer (outputs and gradients of $A$ and $B$); `AdaptedGPT` against chapter 5's
# model and Hugging Face's GPT-2 at initialisation; against `peft`'s LoRA at ranks 1 and 4 (trainable
# counts, outputs after copying $A$ and $B$, gradients of every adapter, outputs after
# `merge_and_unload`, and unmerging); prompt and prefix tuning against `peft` (counts and outputs);
# NF4 codes against `bitsandbytes`' `quantize_4bit` and the dequantised values against its
# `dequantize_4bit`; the measured memory against the formulas; that chapter 8's GPT loads into
# chapter 5's model with equal logits; the task's generator (seeded, every character in the
# vocabulary, the answer the reversed word); the comparison script on a tiny setting and the
# shipped `data/peft/comparison.json` (every method, the command, accuracies that tell the
# chapter's story); and a short training run (LoRA learns to reverse, the frozen model does
# not). Bad input is refused with a message:

# %%
for bad in (
    lambda: LoRALinear(torch.randn(4, 6), rank=0, alpha=1.0),
    lambda: LoRALinear(torch.randn(4, 6), rank=5, alpha=1.0),
    lambda: AdaptedGPT(base, targets=("w_gate",)),
    lambda: AdaptedGPT(base, targets=ALL, rank=2).load_adapters(
        AdaptedGPT(
            DecoderOnlyModel(
                DecoderConfig(77, 64, 4, BlockConfig(64, 4, 256, norm_position="pre"))
            ),
            targets=ALL,
            rank=2,
        ).adapter_state_dict()
    ),
):
    try:
        bad()
    except ValueError as err:
        print("ValueError:", err)

# %% [markdown]
# `python -m benchmarks.run peft` times a LoRA training step (rank 8 on every linear layer of
# chapter 8's GPT, batch 32 of 64 characters, float32) against `peft`'s on Hugging Face's GPT-2
# holding the same weights (target: at most 1.1 times as long), and measures QLoRA's bits per
# frozen weight from the storage (target: at most 4.2). On the course's 2-core machine, busy
# with other jobs at the time (timings vary with the machine and its load), it printed:
#
# | measure | value | target |
# | --- | --- | --- |
# | LoRA step, ours | 1030 ms | |
# | LoRA step, `peft` | 1010 ms | |
# | ratio ours / `peft` | 1.02 | at most 1.1 |
# | QLoRA bits per frozen weight (1024 x 4096) | 4.127 | at most 4.2 |
