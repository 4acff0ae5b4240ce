"""LoRA's training step against peft's, and QLoRA's bits per frozen weight (Chapter 13).

Targets (issue 19), float32 on the CPU:

* one LoRA training step (forward, backward, Adam) of :class:`course_lib.peft.model.AdaptedGPT`
  takes at most 1.1 times as long as ``peft``'s LoRA on Hugging Face's GPT-2 holding the same
  weights (rank 8 on ``c_attn``, ``c_proj`` and ``c_fc``; GPT-2 uses eager attention, ours
  PyTorch's fused ``scaled_dot_product_attention``). The model is the chapter's: chapter 8's
  pre-trained GPT (4 layers, width 128), a batch of 32 sequences of its full context, 64
  characters (the quick run uses a random 2-layer, 64-wide model);
* QLoRA's frozen weights (NF4 with double quantisation) take at most 4.2 bits per parameter,
  measured from the storage of the tensors.

Timings are interleaved (ours, peft, ours, ...) and the best of several rounds is kept.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable

import torch

from course_lib.block.config import BlockConfig, DecoderConfig
from course_lib.measure import best_times
from course_lib.models.decoder import DecoderOnlyModel
from course_lib.peft.hf import to_hf_gpt2
from course_lib.peft.model import AdaptedGPT
from course_lib.peft.qlora import NF4Weight
from course_lib.peft.task import load_base

TITLE = "Chapter 13: a LoRA training step, ours against peft, and QLoRA's bits per weight"
TARGET_TIME = 1.1
TARGET_BITS = 4.2


def _step(model: torch.nn.Module, tokens: torch.Tensor, hf: bool) -> Callable[[], None]:
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=1e-4)

    def step() -> None:
        out = model(tokens)
        logits = out.logits if hf else out
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), tokens.reshape(-1)
        )
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def run(quick: bool = False) -> list[dict]:
    from peft import LoraConfig, TaskType, get_peft_model

    logging.getLogger("peft").setLevel(logging.ERROR)
    rounds = 2 if quick else 7
    if quick:
        block = BlockConfig(64, 4, 256, norm_position="pre", activation="gelu_tanh")
        base = DecoderOnlyModel(DecoderConfig(77, 32, 2, block), generator=torch.Generator().manual_seed(0))  # fmt: skip
        B = 4
    else:
        base, B = load_base()[0], 32  # chapter 8's pre-trained GPT
    cfg, L = base.config, base.config.context_length
    tokens = torch.randint(0, cfg.vocab_size, (B, L), generator=torch.Generator().manual_seed(1))
    ours = AdaptedGPT(base, targets=("w_qkv", "w_o", "w_1", "w_2"), rank=8, alpha=16.0).train()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = get_peft_model(
            to_hf_gpt2(base),
            LoraConfig(r=8, lora_alpha=16, target_modules=["c_attn", "c_proj", "c_fc"],
                       lora_dropout=0.0, task_type=TaskType.CAUSAL_LM),
        ).train()  # fmt: skip
    best = best_times(
        {"ours": _step(ours, tokens, False), "peft": _step(theirs, tokens, True)}, rounds=rounds
    )
    rows = [
        {"measure": f"LoRA step, {name} (ms)", "value": 1000 * t, "target": ""}
        for name, t in best.items()
    ]
    rows.append({"measure": "time ratio ours / peft", "value": best["ours"] / best["peft"], "target": f"<= {TARGET_TIME}"})  # fmt: skip
    n = 256 if quick else 1024
    q = NF4Weight(0.02 * torch.randn(n, 4 * n, generator=torch.Generator().manual_seed(2)))
    rows.append({"measure": f"QLoRA bits per frozen weight ({n} x {4 * n})", "value": q.bits_per_parameter(), "target": f"<= {TARGET_BITS}"})  # fmt: skip
    return rows


def summary(rows: list[dict]) -> str:
    ratio = next(r["value"] for r in rows if r["measure"].startswith("time ratio"))
    bits = next(r["value"] for r in rows if r["measure"].startswith("QLoRA bits"))
    ok_t = "meets" if ratio <= TARGET_TIME else "MISSES"
    ok_b = "meets" if bits <= TARGET_BITS else "MISSES"
    return (
        f"LoRA step: {ratio:.2f} x peft's ({ok_t} the {TARGET_TIME} x target); "
        f"QLoRA: {bits:.3f} bits per frozen weight ({ok_b} the {TARGET_BITS} target)"
    )
