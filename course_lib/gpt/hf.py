"""Our GPT's weights inside Hugging Face ``transformers``' ``GPT2LMHeadModel`` (parity checks).

:func:`to_hf_gpt2` builds a ``GPT2LMHeadModel`` from a ``GPT2Config`` (random weights, nothing is
downloaded) and copies our weights in. GPT-2 stores each linear layer as a ``Conv1D`` whose
weight is (in, out), the row convention of the notes, so the copy is a concatenation: its
``c_attn`` is ``[W_q | W_k | W_v]`` with the heads side by side inside each third.
Only what GPT-2 has can be copied: learned positions, LayerNorm with biases, GELU (exact or
tanh), an ungated feed-forward.
"""

from __future__ import annotations

from typing import Any

import torch

from course_lib.gpt.model import GPT

__all__ = ["to_hf_gpt2"]

_HF_ACTIVATION = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu", "swish": "silu"}


def _fuse(w: torch.Tensor) -> torch.Tensor:
    return w.permute(1, 0, 2).reshape(w.shape[1], -1)  # (h, d, dk) -> (d, h*dk)


def to_hf_gpt2(model: GPT) -> Any:
    """A ``transformers.GPT2LMHeadModel`` (eval mode, float32, eager attention) with ``model``'s weights.

    >>> from course_lib.gpt.config import GPTConfig
    >>> ours = GPT(GPTConfig(vocab_size=7, context_length=5, n_layers=1, n_heads=2, d_model=4), seed=0)
    >>> hf = to_hf_gpt2(ours)
    >>> t = torch.tensor([[1, 2, 3]])
    >>> torch.allclose(hf(t).logits, ours(t), atol=1e-6)
    True
    """
    from transformers import GPT2Config, GPT2LMHeadModel

    if not isinstance(model, GPT):
        raise TypeError(f"model must be a course_lib.gpt.model.GPT, got {type(model).__name__}")
    c = model.config
    if c.positions != "learned" or c.norm != "layer" or not c.bias or c.gated:
        raise ValueError(
            "GPT-2 has learned positions, LayerNorm with biases and an ungated feed-forward; "
            f"this model has positions={c.positions!r}, norm={c.norm!r}, bias={c.bias}, gated={c.gated}"
        )
    hf_config = GPT2Config(
        vocab_size=c.vocab_size,
        n_positions=c.context_length,
        n_embd=c.d_model,
        n_layer=c.n_layers,
        n_head=c.n_heads,
        n_inner=c.d_ff,
        activation_function=_HF_ACTIVATION[c.activation],
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        layer_norm_epsilon=c.eps,
        tie_word_embeddings=True,
        bos_token_id=0,  # GPT-2's 50256 lies outside a small vocabulary
        eos_token_id=0,
    )
    hf_config._attn_implementation = "eager"
    hf = GPT2LMHeadModel(hf_config).float().eval()
    hf.loss_type = "ForCausalLM"  # the shifted next-token cross-entropy
    p = model.parameter_dict()
    with torch.no_grad():
        tr = hf.transformer
        tr.wte.weight.copy_(p["tok_emb"])
        tr.wpe.weight.copy_(p["pos_emb"])
        for blk, h in zip(p["blocks"], tr.h, strict=True):
            h.ln_1.weight.copy_(blk["norm1_gain"])
            h.ln_1.bias.copy_(blk["norm1_bias"])
            h.attn.c_attn.weight.copy_(torch.cat([_fuse(blk[f"w_{x}"]) for x in "qkv"], dim=1))
            h.attn.c_attn.bias.copy_(torch.cat([blk[f"b_{x}"].reshape(-1) for x in "qkv"]))
            h.attn.c_proj.weight.copy_(blk["w_o"])
            h.attn.c_proj.bias.copy_(blk["b_o"])
            h.ln_2.weight.copy_(blk["norm2_gain"])
            h.ln_2.bias.copy_(blk["norm2_bias"])
            h.mlp.c_fc.weight.copy_(blk["w_1"])
            h.mlp.c_fc.bias.copy_(blk["b_1"])
            h.mlp.c_proj.weight.copy_(blk["w_2"])
            h.mlp.c_proj.bias.copy_(blk["b_2"])
        tr.ln_f.weight.copy_(p["final_norm_gain"])
        tr.ln_f.bias.copy_(p["final_norm_bias"])
    return hf
