"""Our weights in Hugging Face ``transformers``' BERT, for the parity tests and the notebook.

The models are built from a ``transformers.BertConfig`` (random weights, nothing downloaded),
then every tensor is overwritten with ours, so that ``BertModel``, ``BertForMaskedLM`` and the
task models must compute what :mod:`course_lib.bert` computes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from course_lib.bert.config import BertConfig

__all__ = ["hf_config", "to_hf"]


def hf_config(config: BertConfig, **extra: Any):
    """The ``transformers.BertConfig`` of the same shape, dropout off, eager attention."""
    import transformers

    b = config.block
    if b.norm_position != "post" or b.activation != "gelu" or b.d_attn != b.d_model:
        raise ValueError("Hugging Face's BERT is post-LN with GELU and d_head = d_model / n_heads")
    return transformers.BertConfig(
        vocab_size=config.vocab_size, hidden_size=b.d_model, num_hidden_layers=config.n_layers,
        num_attention_heads=b.n_heads, intermediate_size=b.d_ff, hidden_act="gelu",
        max_position_embeddings=config.max_len, type_vocab_size=config.n_segments,
        layer_norm_eps=b.eps, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        **extra,
    )  # fmt: skip


def _t(v: Any) -> torch.Tensor:
    return torch.as_tensor(np.asarray(v.detach().cpu() if isinstance(v, torch.Tensor) else v))


def _fuse(w: Any) -> torch.Tensor:  # (h, d, d_k) -> nn.Linear's (h*d_k, d)
    w = _t(w)
    return w.permute(1, 0, 2).reshape(w.shape[1], -1).t()


def _state(params: dict, prefix: str) -> dict[str, torch.Tensor]:
    s = {
        f"{prefix}embeddings.word_embeddings.weight": _t(params["tok_emb"]),
        f"{prefix}embeddings.position_embeddings.weight": _t(params["pos_emb"]),
        f"{prefix}embeddings.token_type_embeddings.weight": _t(params["seg_emb"]),
        f"{prefix}embeddings.LayerNorm.weight": _t(params["emb_norm_gain"]),
        f"{prefix}embeddings.LayerNorm.bias": _t(params["emb_norm_bias"]),
    }
    for r, b in enumerate(params["blocks"]):
        q = f"{prefix}encoder.layer.{r}."
        for w in "qkv":
            name = {"q": "query", "k": "key", "v": "value"}[w]
            s[f"{q}attention.self.{name}.weight"] = _fuse(b[f"w_{w}"])
            s[f"{q}attention.self.{name}.bias"] = _t(b[f"b_{w}"]).reshape(-1)
        s[f"{q}attention.output.dense.weight"] = _t(b["w_o"]).t()
        s[f"{q}attention.output.dense.bias"] = _t(b["b_o"])
        s[f"{q}attention.output.LayerNorm.weight"] = _t(b["norm1_gain"])
        s[f"{q}attention.output.LayerNorm.bias"] = _t(b["norm1_bias"])
        s[f"{q}intermediate.dense.weight"] = _t(b["w_1"]).t()
        s[f"{q}intermediate.dense.bias"] = _t(b["b_1"])
        s[f"{q}output.dense.weight"] = _t(b["w_2"]).t()
        s[f"{q}output.dense.bias"] = _t(b["b_2"])
        s[f"{q}output.LayerNorm.weight"] = _t(b["norm2_gain"])
        s[f"{q}output.LayerNorm.bias"] = _t(b["norm2_bias"])
    return s


def _load(model, state: dict[str, torch.Tensor]):
    own = model.state_dict()
    for k, v in state.items():
        if k not in own:
            raise KeyError(f"{type(model).__name__} has no parameter {k}")
        if own[k].shape != v.shape:
            raise ValueError(f"{k}: shape {tuple(v.shape)} does not fit {tuple(own[k].shape)}")
        own[k] = v.to(own[k].dtype)
    model.load_state_dict(own)
    return model.eval()


def to_hf(
    params: dict,
    config: BertConfig,
    kind: str = "masked_lm",
    head: Any = None,
    dtype=torch.float64,
    attn_implementation: str = "eager",
):
    """A ``transformers`` BERT of ``kind`` holding our weights.

    ``kind`` is ``"model"`` (``BertModel``), ``"masked_lm"`` (``BertForMaskedLM``, our MLM head
    in ``cls.predictions``), or, with ``head`` one of :mod:`course_lib.bert.model`'s task
    heads, ``"classifier"``, ``"span"`` or ``"tagger"``. ``attn_implementation`` is
    ``"eager"`` (the explicit softmax, which can return the attention weights) or ``"sdpa"``
    (PyTorch's fused ``scaled_dot_product_attention``, what ``benchmarks/bert_encoder.py`` races).
    """
    if attn_implementation not in ("eager", "sdpa"):
        raise ValueError(
            f"attn_implementation must be 'eager' or 'sdpa', got {attn_implementation!r}"
        )
    import transformers as tf

    n_labels = {"classifier": "out", "tagger": "out"}
    extra = {"num_labels": getattr(head, n_labels[kind]).out_features} if kind in n_labels else {}
    cfg = hf_config(config, **extra)
    cls = {
        "model": tf.BertModel, "masked_lm": tf.BertForMaskedLM,
        "classifier": tf.BertForSequenceClassification, "span": tf.BertForQuestionAnswering,
        "tagger": tf.BertForTokenClassification,
    }[kind]  # fmt: skip
    model = cls(cfg, **({"add_pooling_layer": False} if kind == "model" else {}))
    model.config._attn_implementation = attn_implementation
    model = model.to(dtype)
    prefix = "" if kind == "model" else "bert."
    state = _state(params, prefix)
    if kind == "masked_lm":
        state.update({
            "cls.predictions.transform.dense.weight": _t(params["mlm_w"]).t(),
            "cls.predictions.transform.dense.bias": _t(params["mlm_b"]),
            "cls.predictions.transform.LayerNorm.weight": _t(params["mlm_norm_gain"]),
            "cls.predictions.transform.LayerNorm.bias": _t(params["mlm_norm_bias"]),
            "cls.predictions.bias": _t(params["mlm_out_bias"]),
        })  # fmt: skip
    elif kind == "classifier":
        state.update({
            "bert.pooler.dense.weight": _t(head.pooler.weight), "bert.pooler.dense.bias": _t(head.pooler.bias),
            "classifier.weight": _t(head.out.weight), "classifier.bias": _t(head.out.bias),
        })  # fmt: skip
    elif kind == "span":
        state.update({"qa_outputs.weight": _t(head.qa.weight), "qa_outputs.bias": _t(head.qa.bias)})
    elif kind == "tagger":
        state.update(
            {"classifier.weight": _t(head.out.weight), "classifier.bias": _t(head.out.bias)}
        )
    return _load(model, state)
