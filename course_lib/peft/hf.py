"""The same weights in Hugging Face ``transformers``' GPT-2, for parity with ``peft``.

:func:`to_hf_gpt2` builds a ``GPT2LMHeadModel`` from a ``GPT2Config`` (random weights, nothing is
downloaded) and copies a chapter 5 :class:`~course_lib.models.decoder.DecoderOnlyModel` into it.
GPT-2 stores each linear map as a ``Conv1D`` whose weight is (in, out), the row convention of
chapter 5, so the copy is a concatenation: ``c_attn`` is ``[W_q | W_k | W_v]``, heads side by
side in each third. :func:`copy_lora_from_peft` and :func:`copy_prefix_from_peft` copy ``peft``'s
adapter weights into an :class:`~course_lib.peft.model.AdaptedGPT`, so that both can be compared.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from course_lib.models.decoder import DecoderOnlyModel
from course_lib.peft.model import AdaptedGPT, base_weights, check_gpt2_like

__all__ = ["HF_TARGETS", "Logits", "copy_adapters_from_peft", "to_hf_gpt2", "to_hf_qlora"]

#: Our LoRA targets and the module names ``peft`` matches in GPT-2.
HF_TARGETS = {"w_qkv": "attn.c_attn", "w_o": "attn.c_proj", "w_1": "mlp.c_fc", "w_2": "mlp.c_proj"}
_ACTIVATION = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu", "swish": "silu"}


def to_hf_gpt2(base: DecoderOnlyModel) -> Any:
    """A ``transformers.GPT2LMHeadModel`` (eval mode, float32, eager attention) holding ``base``'s weights."""
    logging.getLogger("transformers").setLevel(logging.ERROR)
    from transformers import GPT2Config, GPT2LMHeadModel

    if not isinstance(base, DecoderOnlyModel):
        raise TypeError(f"base must be a DecoderOnlyModel, got {type(base).__name__}")
    c = check_gpt2_like(base.config)
    b = c.block
    if b.d_head * b.n_heads != b.d_model:
        raise ValueError("GPT-2 needs d_head * n_heads == d_model")
    cfg = GPT2Config(
        vocab_size=c.vocab_size, n_positions=c.context_length, n_embd=b.d_model,
        n_layer=c.n_layers, n_head=b.n_heads, n_inner=b.d_ff,
        activation_function=_ACTIVATION[b.activation], layer_norm_epsilon=b.eps,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, tie_word_embeddings=True,
        bos_token_id=None, eos_token_id=None,
    )  # fmt: skip
    cfg._attn_implementation = "eager"
    hf = GPT2LMHeadModel(cfg).float().eval()
    w = base_weights(base)
    with torch.no_grad():
        tr = hf.transformer
        tr.wte.weight.copy_(w["tok_emb"])
        tr.wpe.weight.copy_(w["pos_emb"])
        for r, blk in enumerate(tr.h):
            blk.ln_1.weight.copy_(w[f"{r}.ln1_g"])
            blk.ln_1.bias.copy_(w[f"{r}.ln1_b"])
            blk.ln_2.weight.copy_(w[f"{r}.ln2_g"])
            blk.ln_2.bias.copy_(w[f"{r}.ln2_b"])
            for ours, conv in (("qkv", blk.attn.c_attn), ("o", blk.attn.c_proj),
                               ("fc", blk.mlp.c_fc), ("proj", blk.mlp.c_proj)):  # fmt: skip
                conv.weight.copy_(w[f"{r}.{ours}"].t())  # Conv1D is (in, out)
                conv.bias.copy_(w[f"{r}.{ours}_b"])
        tr.ln_f.weight.copy_(w["lnf_g"])
        tr.ln_f.bias.copy_(w["lnf_b"])
    return hf


def copy_adapters_from_peft(peft_model: Any, ours: AdaptedGPT) -> AdaptedGPT:
    """Copy ``peft``'s trainable weights (LoRA, prompt or prefix tuning) into ``ours``."""
    c = ours.config
    named = dict(peft_model.named_parameters())
    with torch.no_grad():
        for r, adapters in enumerate(ours.adapters):
            for t, f in adapters.items():
                if t not in HF_TARGETS:
                    raise ValueError(f"{t} has no counterpart in GPT-2; use {sorted(HF_TARGETS)}")
                stem = f"base_model.model.transformer.h.{r}.{HF_TARGETS[t]}"
                f.A.copy_(named[f"{stem}.lora_A.default.weight"])  # (r, k)
                f.B.copy_(named[f"{stem}.lora_B.default.weight"])  # (d, r)
        if ours.prompt is not None:
            ours.prompt.copy_(named["prompt_encoder.default.embedding.weight"])  # (n, d)
        if ours.prefix_mlp is not None:  # peft's prefix_projection: embedding, then the MLP
            ours.prefix_embedding.copy_(named["prompt_encoder.default.embedding.weight"])
            for i in (0, 2):
                for what in ("weight", "bias"):
                    own = getattr(ours.prefix_mlp[i], what)
                    own.copy_(named[f"prompt_encoder.default.transform.{i}.{what}"])
        if ours.prefix is not None:
            e = named["prompt_encoder.default.embedding.weight"]  # (n, layers * 2 * d)
            n, h, dk = ours.prefix_tokens, c.block.n_heads, c.block.d_head
            # peft views it as (n, layers*2, h, dk) and takes keys, values of layer l at 2l, 2l+1
            ours.prefix.copy_(e.view(n, c.n_layers, 2, h, dk).permute(1, 2, 3, 0, 4))
    return ours


class Logits(torch.nn.Module):
    """Wrap a Hugging Face causal LM so that ``forward(tokens)`` returns float32 logits of the tokens.

    ``skip`` drops leading virtual positions (``peft``'s prompt tuning keeps them in its logits).
    ``train()``/``eval()`` are not passed on: the wrapped model keeps its mode (see
    :func:`to_hf_qlora`; every dropout of the chapter's models is 0, so the mode changes nothing
    else).
    """

    def __init__(self, model: Any, skip: int = 0) -> None:
        super().__init__()
        self.model = model
        self.skip = skip

    def train(self, mode: bool = True) -> Logits:
        self.training = mode  # not passed on to the wrapped model (see above)
        return self

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.model(tokens).logits[:, self.skip :].float()


def to_hf_qlora(base: DecoderOnlyModel, rank: int, alpha: float) -> Any:
    """QLoRA the library way: ``base`` in GPT-2, loaded in 4 bits by ``bitsandbytes``, plus ``peft``'s LoRA.

    The GPT-2 copy is saved to a temporary folder and loaded back with a ``BitsAndBytesConfig``
    (NF4, double quantisation, bfloat16 compute), as one loads a checkpoint for QLoRA; nothing
    leaves the machine. LoRA of rank ``rank`` adapts ``c_attn``, ``c_proj`` and ``c_fc``.
    """
    import tempfile

    import transformers
    from peft import LoraConfig, TaskType, get_peft_model
    from transformers import BitsAndBytesConfig, GPT2LMHeadModel

    logging.getLogger("bitsandbytes").setLevel(logging.ERROR)
    transformers.utils.logging.disable_progress_bar()
    quant = BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=torch.bfloat16,
    )
    with tempfile.TemporaryDirectory() as folder:
        to_hf_gpt2(base).save_pretrained(folder)
        model = GPT2LMHeadModel.from_pretrained(folder, quantization_config=quant, device_map="cpu")
    config = LoraConfig(
        r=rank,
        lora_alpha=alpha,
        target_modules=["c_attn", "c_proj", "c_fc"],
        lora_dropout=0.0,
        task_type=TaskType.CAUSAL_LM,
    )
    # Training mode throughout: on CPUs with AVX512-BF16, bitsandbytes 0.50 repacks the 4-bit
    # weights on the first forward pass in evaluation mode, and its repacked path then fails
    # in training ("a view of a leaf Variable ... in-place"); it would also make results
    # depend on the CPU. Dropout is 0, so training mode computes the same function.
    return get_peft_model(model, config).train()
