"""Chapter 9 (BERT): PyTorch twins of :mod:`course_lib.bert.reference`.

Same names, signatures and equations (read the reference for the maths), batched over leading
dimensions, on any device, in the parameters' dtype, differentiable. The blocks are chapter 5's
:func:`course_lib.block.accelerated.block_forward` with ``fused=True``: one (d, 3d) product for
the queries, keys and values and PyTorch's fused ``scaled_dot_product_attention`` kernel (chapter
5's explicit attention stays reachable with ``encode(..., fused=False)``; the two agree to
rounding, ``tests/test_bert_fused.py``). The cores :func:`encode`, :func:`mlm_head` and
:func:`mlm_loss` (the head at the labelled positions only) take checked inputs and are what
:class:`course_lib.bert.model.Bert` runs on every step.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F

from course_lib.attention.accelerated import attention_weights
from course_lib.bert.config import BertConfig, check_bert_params, unflatten
from course_lib.bert.inputs import IGNORE, check_ids, check_labels, check_mask, check_segments
from course_lib.block.accelerated import block_forward
from course_lib.checks import as_tensor, same_device_and_dtype

__all__ = ["attention_maps", "bert_embeddings", "bert_encoder", "masked_lm_loss", "mlm_logits"]


def _params(params: Any, config: Any) -> dict[str, Any]:
    if not isinstance(config, BertConfig):
        raise TypeError(f"config must be a BertConfig, got {type(config).__name__}")
    if not isinstance(params, Mapping):
        params = unflatten(as_tensor(params, "params", ndim=1), config)
    p = check_bert_params(params, config, lambda v, name: as_tensor(v, name))
    flat = {k: v for k, v in p.items() if k != "blocks"}
    for r, blk in enumerate(p["blocks"]):
        flat.update({f"blocks.{r}.{n}": v for n, v in blk.items()})
    same_device_and_dtype(**flat)
    return p


def _inputs(tokens, segments, attention_mask, p, c: BertConfig):
    dev = p["tok_emb"].device
    tokens = torch.as_tensor(tokens, device=dev) if not isinstance(tokens, torch.Tensor) else tokens
    t = check_ids(tokens, "tokens", c.vocab_size, c.max_len)
    if segments is not None and not isinstance(segments, torch.Tensor):
        segments = torch.as_tensor(segments, device=dev)
    s = check_segments(segments, t, c.n_segments)
    if attention_mask is not None and not isinstance(attention_mask, torch.Tensor):
        attention_mask = torch.as_tensor(attention_mask, device=dev)
    m = check_mask(attention_mask, t)
    return t.long(), s.long(), m


def embed(t: torch.Tensor, s: torch.Tensor, p: Mapping[str, Any], c: BertConfig) -> torch.Tensor:
    """The embeddings on checked inputs: ``LN(W_tok[x] + W_pos[:L] + W_seg[s])`` (..., L, d)."""
    e = F.embedding(t, p["tok_emb"]) + p["pos_emb"][: t.shape[-1]] + F.embedding(s, p["seg_emb"])
    return F.layer_norm(e, (c.d_model,), p["emb_norm_gain"], p["emb_norm_bias"], c.block.eps)


def encode(
    t: torch.Tensor,
    s: torch.Tensor,
    m: torch.Tensor | None,
    p: Mapping[str, Any],
    c: BertConfig,
    dropout=None,
    fused: bool = True,
) -> torch.Tensor:
    """The encoder on checked inputs: embeddings, then blocks with a padding mask only (..., L, d).

    ``fused=False`` runs chapter 5's explicit attention (three projections, the (L, L) weights
    in memory) instead of the fused QKV product and kernel: the same numbers to rounding, slower;
    kept for the tests and ``benchmarks/bert_encoder.py``.
    """
    h = embed(t, s, p, c)  # (..., L, d)
    if dropout is not None:
        h = dropout(h)
    mask = None if m is None else m[..., None, None, :]  # (..., 1, 1, L): keys that are real
    for blk in p["blocks"]:
        h = block_forward(h, blk, c.block, mask, dropout, fused)  # (..., L, d)
    return h


def maps(
    t: torch.Tensor, s: torch.Tensor, m: torch.Tensor | None, p: Mapping[str, Any], c: BertConfig
) -> torch.Tensor:
    """Every head's attention weights in every block, on checked inputs: (..., R, h, L, L)."""
    if c.block.norm_position != "post":
        raise ValueError(
            f"attention_maps needs BERT's post-LN blocks, got norm_position={c.block.norm_position!r}"
        )
    h = embed(t, s, p, c)  # (..., L, d)
    mask = None if m is None else m[..., None, None, :]  # (..., 1, 1, L)
    out = []
    for blk in p["blocks"]:
        q = (
            torch.einsum("...ld,hdk->...hlk", h, blk["w_q"]) + blk["b_q"][:, None, :]
        )  # (..., h, L, d_k)
        k = torch.einsum("...ld,hdk->...hlk", h, blk["w_k"]) + blk["b_k"][:, None, :]
        out.append(attention_weights(q, k, mask))  # (..., h, L, L)
        h = block_forward(h, blk, c.block, mask, fused=True)  # (..., L, d)
    return torch.stack(out, dim=-4)


def attention_maps(
    tokens: Any, segments: Any, params: Any, config: BertConfig, attention_mask: Any = None
) -> torch.Tensor:
    """Every head's attention weights in every block (..., R, h, L, L); rows sum to one."""
    p = _params(params, config)
    t, s, m = _inputs(tokens, segments, attention_mask, p, config)
    return maps(t, s, m, p, config)


def mlm_head(h: torch.Tensor, p: Mapping[str, Any], c: BertConfig) -> torch.Tensor:
    """Dense + GELU + LayerNorm, then the tied output matrix ``W_tok^T`` and a bias: (..., L, V)."""
    z = F.gelu(F.linear(h, p["mlm_w"].t(), p["mlm_b"]))  # (..., L, d)
    z = F.layer_norm(z, (c.d_model,), p["mlm_norm_gain"], p["mlm_norm_bias"], c.block.eps)
    return F.linear(z, p["tok_emb"], p["mlm_out_bias"])  # (..., L, V)


def mlm_loss(h: torch.Tensor, y: torch.Tensor, p: Mapping[str, Any], c: BertConfig) -> torch.Tensor:
    """``masked_lm_loss(mlm_head(h), y)`` on checked labels y (..., L), the head run only where y is set.

    The head acts on each position alone and the loss reads only the positions whose label is not
    ``IGNORE``, so the others (about 85% under BERT's masking) need neither the transform nor the
    (d, V) product: gather the labelled rows of h first (as Google's original BERT code does,
    ``gather_indexes`` in ``run_pretraining.py``). The loss and every gradient are the same; only
    the rounding of the sums over positions differs.
    """
    keep = y != IGNORE  # (..., L)
    logits = mlm_head(h[keep], p, c)  # (N, V): N labelled positions
    return F.cross_entropy(logits, y[keep].long())


def bert_embeddings(tokens: Any, segments: Any, params: Any, config: BertConfig) -> torch.Tensor:
    """``LN(W_tok[x_t] + W_pos[t] + W_seg[s_t])``: tokens and segments (..., L) -> (..., L, d).

    >>> from course_lib.bert.config import bert_block, count_parameters
    >>> cfg = BertConfig(vocab_size=6, max_len=4, n_layers=1, block=bert_block(4, 2))
    >>> bert_embeddings(torch.tensor([[1, 2, 3]]), None, torch.randn(count_parameters(cfg)), cfg).shape
    torch.Size([1, 3, 4])
    """
    p = _params(params, config)
    t, s, _ = _inputs(tokens, segments, None, p, config)
    return embed(t, s, p, config)


def bert_encoder(
    tokens: Any, segments: Any, params: Any, config: BertConfig, attention_mask: Any = None
) -> torch.Tensor:
    """The encoder's last hidden states H (..., L, d); ``attention_mask`` True for real tokens."""
    p = _params(params, config)
    t, s, m = _inputs(tokens, segments, attention_mask, p, config)
    return encode(t, s, m, p, config)


def mlm_logits(
    tokens: Any, segments: Any, params: Any, config: BertConfig, attention_mask: Any = None
) -> torch.Tensor:
    """The masked-LM scores (..., L, V) of the encoder's output through the tied head."""
    p = _params(params, config)
    t, s, m = _inputs(tokens, segments, attention_mask, p, config)
    return mlm_head(encode(t, s, m, p, config), p, config)


def masked_lm_loss(logits: Any, labels: Any) -> torch.Tensor:
    """Mean cross-entropy over the positions whose label is not ``IGNORE`` (= -100).

    >>> logits = torch.log(torch.tensor([[[0.5, 0.5], [0.9, 0.1], [0.2, 0.8]]]))
    >>> round(float(masked_lm_loss(logits, torch.tensor([[IGNORE, 0, 1]]))), 6)
    0.164252
    """
    logits = as_tensor(logits, "logits", min_ndim=2)
    if not isinstance(labels, torch.Tensor):
        labels = torch.as_tensor(labels, device=logits.device)
    labels = check_labels(labels, tuple(logits.shape))
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), labels.reshape(-1).long(), ignore_index=IGNORE
    )
