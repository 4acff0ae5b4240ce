"""The configuration and parameters of a BERT encoder (Chapter 9).

BERT (Devlin et al. 2019; Strabel's notes section 8) is chapter 5's post-LN block stacked
``n_layers`` times with *no* causal mask, under three summed embeddings (token, position,
segment) and a LayerNorm, with a masked-LM head whose output matrix is the token embedding.

Parameters are a dict (``"blocks"`` a list of chapter 5 block dicts) or the same numbers as one
flat vector in the order of :func:`layout`, the form the conformance suite uses.

>>> cfg = BertConfig(vocab_size=10, max_len=6, n_layers=2, block=BlockConfig(8, 2, 16))
>>> count_parameters(cfg) == sum(int(np.prod(s)) for _, s in layout(cfg))
True
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from course_lib.block import params as block_params
from course_lib.block.config import BlockConfig
from course_lib.checks import check_int, fmt_shape

__all__ = [
    "BertConfig",
    "bert_block",
    "check_bert_params",
    "count_parameters",
    "flatten",
    "init_parameters",
    "layout",
    "unflatten",
]


@dataclass(frozen=True)
class BertConfig:
    """A BERT encoder with its masked-LM head.

    Attributes:
        vocab_size: number of tokens V (specials included).
        max_len: number of learned positions, the longest input the model accepts.
        n_layers: number of encoder blocks.
        block: the blocks' configuration; BERT's is post-LN, LayerNorm with biases, GELU,
            ``eps = 1e-12`` (:func:`bert_block`).
        n_segments: number of segment embeddings (2: sentence A and sentence B).

    >>> BertConfig(vocab_size=10, max_len=0, n_layers=1, block=BlockConfig(8, 2, 16))
    Traceback (most recent call last):
    ...
    ValueError: max_len must be at least 1, got 0
    """

    vocab_size: int
    max_len: int
    n_layers: int
    block: BlockConfig
    n_segments: int = 2

    def __post_init__(self) -> None:
        check_int(self.vocab_size, "vocab_size", low=1)
        check_int(self.max_len, "max_len", low=1)
        check_int(self.n_layers, "n_layers", low=1)
        check_int(self.n_segments, "n_segments", low=1)
        if not isinstance(self.block, BlockConfig):
            raise TypeError(f"block must be a BlockConfig, got {type(self.block).__name__}")
        if self.block.norm != "layer" or not self.block.bias or self.block.gated:
            raise ValueError("block must use LayerNorm with biases and an ungated feed-forward")

    @property
    def d_model(self) -> int:
        return self.block.d_model


def bert_block(d_model: int, n_heads: int, d_ff: int | None = None) -> BlockConfig:
    """BERT's block: post-LN, GELU (the exact, erf form), LayerNorm eps 1e-12, biases everywhere.

    >>> bert_block(8, 2)
    BlockConfig(d_model=8, n_heads=2, d_ff=32, d_head=4, norm_position='post', norm='layer', activation='gelu', gated=False, bias=True, eps=1e-12)
    """
    return BlockConfig(
        d_model, n_heads, 4 * d_model if d_ff is None else d_ff,
        norm_position="post", activation="gelu", eps=1e-12,
    )  # fmt: skip


def _top_layout(c: BertConfig) -> tuple[list, list]:
    d, V = c.d_model, c.vocab_size
    head = [
        ("tok_emb", (V, d)), ("pos_emb", (c.max_len, d)), ("seg_emb", (c.n_segments, d)),
        ("emb_norm_gain", (d,)), ("emb_norm_bias", (d,)),
    ]  # fmt: skip
    tail = [
        ("mlm_w", (d, d)), ("mlm_b", (d,)), ("mlm_norm_gain", (d,)), ("mlm_norm_bias", (d,)),
        ("mlm_out_bias", (V,)),
    ]  # fmt: skip
    return head, tail


def layout(config: BertConfig) -> list[tuple[str, tuple[int, ...]]]:
    """Every parameter's name and shape in flat-vector order; block ``r``'s as ``blocks.r.name``."""
    if not isinstance(config, BertConfig):
        raise TypeError(f"config must be a BertConfig, got {type(config).__name__}")
    head, tail = _top_layout(config)
    blocks = [
        (f"blocks.{r}.{n}", s)
        for r in range(config.n_layers)
        for n, s in block_params.layout(config.block)
    ]
    return head + blocks + tail


def count_parameters(config: BertConfig) -> int:
    """How many numbers the encoder and its MLM head hold (the output matrix is tied, counted once)."""
    return sum(math.prod(s) for _, s in layout(config))


def unflatten(theta: Any, config: BertConfig) -> dict[str, Any]:
    """Cut a flat vector (NumPy or PyTorch) into the parameter dict (views, no copies)."""
    lay = layout(config)
    n = count_parameters(config)
    if theta.ndim != 1 or theta.shape[0] != n:
        raise ValueError(
            f"params must be a dict or a flat vector of length {n}, got shape {fmt_shape(theta.shape)}"
        )
    out: dict[str, Any] = {"blocks": [{} for _ in range(config.n_layers)]}
    i = 0
    for name, shape in lay:
        size = math.prod(shape)
        piece = theta[i : i + size].reshape(shape)
        i += size
        if name.startswith("blocks."):
            _, r, short = name.split(".")
            out["blocks"][int(r)][short] = piece
        else:
            out[name] = piece
    return out


def flatten(params: Mapping[str, Any], config: BertConfig) -> np.ndarray:
    """The parameter dict as one float64 vector in :func:`layout` order (inverse of :func:`unflatten`)."""
    p = check_bert_params(params, config, lambda v, name: np.asarray(v, dtype=np.float64))
    parts = []
    for name, _ in layout(config):
        if name.startswith("blocks."):
            _, r, short = name.split(".")
            parts.append(p["blocks"][int(r)][short].ravel())
        else:
            parts.append(p[name].ravel())
    return np.concatenate(parts)


def check_bert_params(
    params: Mapping[str, Any], config: BertConfig, convert: Callable[[Any, str], Any]
) -> dict[str, Any]:
    """Convert every parameter with ``convert(value, name)`` and check names and shapes."""
    if not isinstance(params, Mapping):
        raise TypeError(f"params must be a dict or a flat vector, got {type(params).__name__}")
    head, tail = _top_layout(config)
    want = {n for n, _ in head + tail} | {"blocks"}
    extra, missing = set(params) - want, want - set(params)
    if extra or missing:
        bad = f"unknown {sorted(extra)[0]!r}" if extra else f"missing {sorted(missing)[0]!r}"
        raise ValueError(f"params has the wrong names: {bad}")
    out: dict[str, Any] = {}
    for name, shape in head + tail:
        v = convert(params[name], name)
        if tuple(v.shape) != shape:
            raise ValueError(
                f"params[{name!r}] must have shape {fmt_shape(shape)}, got {fmt_shape(v.shape)}"
            )
        out[name] = v
    blocks = params["blocks"]
    if len(blocks) != config.n_layers:
        raise ValueError(f"params['blocks'] must hold {config.n_layers} blocks, got {len(blocks)}")
    out["blocks"] = [block_params.check_params(b, config.block, convert) for b in blocks]
    return out


def init_parameters(
    config: BertConfig, rng: np.random.Generator | int | None = 0
) -> dict[str, Any]:
    """Random float64 parameters: embeddings and weights N(0, 0.02^2) as BERT does, gains 1, biases 0.

    >>> cfg = BertConfig(vocab_size=7, max_len=5, n_layers=1, block=bert_block(4, 2))
    >>> p = init_parameters(cfg)
    >>> p["tok_emb"].shape, p["blocks"][0]["w_q"].shape, p["mlm_out_bias"].shape
    ((7, 4), (2, 4, 2), (7,))
    """
    if not isinstance(config, BertConfig):
        raise TypeError(f"config must be a BertConfig, got {type(config).__name__}")
    rng = np.random.default_rng(rng)
    flat = {}
    for name, shape in layout(config):
        short = name.split(".")[-1]
        if short.endswith("_gain"):
            flat[name] = np.ones(shape)
        elif short.endswith("bias") or short.startswith("b_") or short == "mlm_b":
            flat[name] = np.zeros(shape)
        else:
            flat[name] = 0.02 * rng.standard_normal(shape)
    return unflatten(np.concatenate([flat[n].ravel() for n, _ in layout(config)]), config)
