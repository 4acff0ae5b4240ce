"""Chapter 9 (BERT: masked language models and encoder tasks): NumPy references, float64.

BERT (Devlin et al. 2019; Strabel's notes section 8; the handwritten notes' "bidirectional
encoder representations from Transformers") is an encoder: chapter 5's post-LN block with no
causal mask, so that every token sees every other token. Its input is the sum of three
embeddings, and its pre-training head predicts the tokens hidden behind ``[MASK]``:

* embeddings: ``E = LN(W_tok[x_t] + W_pos[t] + W_seg[s_t])``                      (..., L, d)
* encoder:    ``H = Block_R( ... Block_1(E))``, every block with a padding mask only (..., L, d)
* MLM head:   ``logits = LN(gelu(H W + b)) W_tok^T + b_out``, tied to ``W_tok``   (..., L, V)
* MLM loss:   mean over chosen positions ``t`` of ``-log softmax(logits_t)[x_t]``

Every public function here has a PyTorch twin of the same name and signature in
:mod:`course_lib.bert.accelerated`, and a spec in :mod:`course_lib.bert.spec`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from course_lib.attention.reference import attention_weights
from course_lib.bert.config import BertConfig, check_bert_params, unflatten
from course_lib.bert.inputs import IGNORE, check_ids, check_labels, check_mask, check_segments
from course_lib.block.reference import activation, layer_norm, transformer_block
from course_lib.checks import as_array

__all__ = ["attention_maps", "bert_embeddings", "bert_encoder", "masked_lm_loss", "mlm_logits"]


def _params(params: Any, config: Any) -> dict[str, Any]:
    if not isinstance(config, BertConfig):
        raise TypeError(f"config must be a BertConfig, got {type(config).__name__}")
    if not isinstance(params, Mapping):
        params = unflatten(as_array(params, "params", ndim=1), config)
    return check_bert_params(params, config, lambda v, name: as_array(v, name))


def _embed(tokens, segments, p: Mapping[str, Any], c: BertConfig) -> np.ndarray:
    tokens = np.asarray(check_ids(tokens, "tokens", c.vocab_size, c.max_len))
    segments = np.asarray(check_segments(segments, tokens, c.n_segments))
    L = tokens.shape[-1]
    e = p["tok_emb"][tokens] + p["pos_emb"][:L] + p["seg_emb"][segments]  # (..., L, d)
    return layer_norm(e, p["emb_norm_gain"], p["emb_norm_bias"], eps=c.block.eps)


def bert_embeddings(tokens: Any, segments: Any, params: Any, config: BertConfig) -> np.ndarray:
    """``LN(W_tok[x_t] + W_pos[t] + W_seg[s_t])``: tokens and segments (..., L) -> (..., L, d).

    ``segments=None`` puts every token in segment 0 (a single sentence).

    >>> from course_lib.bert.config import bert_block, init_parameters
    >>> cfg = BertConfig(vocab_size=6, max_len=4, n_layers=1, block=bert_block(4, 2))
    >>> e = bert_embeddings([[1, 2, 3]], None, init_parameters(cfg), cfg)
    >>> e.shape, np.allclose(e.mean(-1), 0)  # a LayerNorm closes the embeddings
    ((1, 3, 4), True)
    """
    return _embed(tokens, segments, _params(params, config), config)


def _encode(tokens, segments, p, c: BertConfig, attention_mask) -> np.ndarray:
    h = _embed(tokens, segments, p, c)  # (..., L, d)
    m = check_mask(attention_mask, np.asarray(tokens))
    # A query may look at every key that is a real token: no causal triangle, only padding.
    mask = None if m is None else np.asarray(m)[..., None, None, :]  # (..., 1, 1, L)
    for blk in p["blocks"]:
        h = transformer_block(h, blk, c.block, mask)  # (..., L, d)
    return h


def bert_encoder(
    tokens: Any, segments: Any, params: Any, config: BertConfig, attention_mask: Any = None
) -> np.ndarray:
    """The encoder's last hidden states H (..., L, d) (Hugging Face's ``last_hidden_state``).

    ``attention_mask`` (..., L) is True for real tokens and False for padding; padded keys are
    hidden from every query, and the outputs at padded positions are meaningless.

    >>> from course_lib.bert.config import bert_block, init_parameters
    >>> cfg = BertConfig(vocab_size=6, max_len=5, n_layers=2, block=bert_block(4, 2))
    >>> p = init_parameters(cfg, 1)
    >>> a = bert_encoder([[1, 2, 3, 0]], None, p, cfg, [[True, True, True, False]])
    >>> b = bert_encoder([[1, 2, 3, 5]], None, p, cfg, [[True, True, True, False]])
    >>> np.allclose(a[:, :3], b[:, :3])  # what stands in a padded position changes nothing
    True
    """
    return _encode(tokens, segments, _params(params, config), config, attention_mask)


def _post_ln(c: BertConfig) -> None:
    if c.block.norm_position != "post":
        raise ValueError(
            f"attention_maps needs BERT's post-LN blocks, got norm_position={c.block.norm_position!r}"
        )


def attention_maps(
    tokens: Any, segments: Any, params: Any, config: BertConfig, attention_mask: Any = None
) -> np.ndarray:
    """Every head's attention weights in every layer: (..., R, h, L, L).

    Entry ``[..., r, i, q, k]`` is the weight with which query ``q`` of head ``i`` in block ``r``
    averages key ``k``: ``softmax(Q K^T / sqrt(d_k))`` with ``Q = X W_Q^i + b_Q^i``,
    ``K = X W_K^i + b_K^i`` and X the block's input (BERT's blocks are post-LN, so the
    attention reads it unnormalised). Each row sums to one; padded keys get weight zero.

    >>> from course_lib.bert.config import bert_block, init_parameters
    >>> cfg = BertConfig(vocab_size=6, max_len=5, n_layers=2, block=bert_block(4, 2))
    >>> a = attention_maps([[1, 2, 3, 0]], None, init_parameters(cfg), cfg, [[True] * 3 + [False]])
    >>> a.shape, np.allclose(a.sum(-1), 1), float(a[..., 3].max())
    ((1, 2, 2, 4, 4), True, 0.0)
    """
    p = _params(params, config)
    _post_ln(config)
    h = _embed(tokens, segments, p, config)  # (..., L, d)
    m = check_mask(attention_mask, np.asarray(tokens))
    mask = None if m is None else np.asarray(m, dtype=bool)[..., None, None, :]  # (..., 1, 1, L)
    maps = []
    for blk in p["blocks"]:
        q = np.stack([h @ blk["w_q"][i] + blk["b_q"][i] for i in range(len(blk["w_q"]))], -3)
        k = np.stack([h @ blk["w_k"][i] + blk["b_k"][i] for i in range(len(blk["w_q"]))], -3)
        maps.append(attention_weights(q, k, mask))  # (..., h, L, L)
        h = transformer_block(h, blk, config.block, mask)  # (..., L, d): the next block's input
    return np.stack(maps, axis=-4)


def _mlm_head(h: np.ndarray, p: Mapping[str, Any], c: BertConfig) -> np.ndarray:
    z = activation(h @ p["mlm_w"] + p["mlm_b"], "gelu")  # (..., L, d)
    z = layer_norm(z, p["mlm_norm_gain"], p["mlm_norm_bias"], eps=c.block.eps)
    return z @ p["tok_emb"].T + p["mlm_out_bias"]  # (..., L, V): tied to the input embedding


def mlm_logits(
    tokens: Any, segments: Any, params: Any, config: BertConfig, attention_mask: Any = None
) -> np.ndarray:
    """The masked-LM scores (..., L, V): the encoder, then a dense+GELU+LN transform and ``W_tok^T``.

    >>> from course_lib.bert.config import bert_block, init_parameters
    >>> cfg = BertConfig(vocab_size=6, max_len=5, n_layers=1, block=bert_block(4, 2))
    >>> mlm_logits([[1, 2]], [[0, 1]], init_parameters(cfg), cfg).shape
    (1, 2, 6)
    """
    p = _params(params, config)
    return _mlm_head(_encode(tokens, segments, p, config, attention_mask), p, config)


def masked_lm_loss(logits: Any, labels: Any) -> np.ndarray:
    """Mean cross-entropy over the positions whose label is not ``IGNORE`` (= -100).

    ``logits`` (..., L, V), ``labels`` (..., L); the loss of BERT's MLM counts only the chosen
    positions, whatever was put in their place. Returns a 0-d array.

    >>> logits = np.log([[[0.5, 0.5], [0.9, 0.1], [0.2, 0.8]]])
    >>> float(masked_lm_loss(logits, [[IGNORE, 0, 1]]))  # -(log 0.9 + log 0.8) / 2
    0.164252033486018
    """
    logits = as_array(logits, "logits", min_ndim=2)
    labels = np.asarray(check_labels(labels, logits.shape))
    keep = labels != IGNORE  # (..., L)
    z = logits[keep]  # (n, V): the chosen positions only
    zmax = z.max(axis=-1, keepdims=True)
    log_p = z - zmax - np.log(np.exp(z - zmax).sum(axis=-1, keepdims=True))  # log-softmax
    return np.asarray(-log_p[np.arange(len(z)), labels[keep]].mean())
