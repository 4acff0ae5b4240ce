"""Where a block's parameters live: their layout, flat vectors and nested dicts, initialisation.

Nothing here does array maths beyond slicing, so it exists once and serves both sides: the NumPy
reference (:mod:`course_lib.block.reference`) and the PyTorch side
(:mod:`course_lib.block.accelerated`, :mod:`course_lib.models`). :func:`layout` lists every
parameter with its shape.

Weights follow the notes' row convention (``x @ W``): a projection from width ``a`` to width ``b``
has shape ``(a, b)``; attention weights are stacked per head, ``w_q`` of shape
``(n_heads, d_model, d_head)``, as in Chapter 4.

>>> [name for name, _ in layout(BlockConfig(d_model=8, n_heads=2, d_ff=32))][:3]
['norm1_gain', 'norm1_bias', 'w_q']
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from course_lib.block.config import BlockConfig, DecoderConfig, EncoderDecoderConfig
from course_lib.checks import fmt_shape

__all__ = [
    "check_decoder_block_params",
    "check_params",
    "decoder_block_layout",
    "flatten_parameters",
    "init_decoder_block",
    "init_parameters",
    "layout",
    "unflatten_decoder_block",
    "unflatten_parameters",
]


# ------------------------------------------------------------------------------------ layouts
Config = BlockConfig | DecoderConfig | EncoderDecoderConfig

_FFN_NAMES = ("w_1", "w_2", "w_3", "b_1", "b_2", "b_3")


def _block_layout(c: BlockConfig) -> list[tuple[str, tuple[int, ...]]]:
    d, f = c.d_model, c.d_ff
    out: list[tuple[str, tuple[int, ...]]] = []

    def norm(prefix: str) -> None:
        out.append((f"{prefix}_gain", (d,)))
        if c.norm_has_bias:
            out.append((f"{prefix}_bias", (d,)))

    norm("norm1")
    out += _attention_layout(c)
    if c.n_norms == 2:
        norm("norm2")
    if c.gated:  # W3 (phi(W1 x) * W2 x)
        out += [("w_1", (d, f)), ("w_2", (d, f)), ("w_3", (f, d))]
        if c.bias:
            out += [("b_1", (f,)), ("b_2", (f,)), ("b_3", (d,))]
    else:  # W2 phi(W1 x + b1) + b2
        out += [("w_1", (d, f)), ("w_2", (f, d))]
        if c.bias:
            out += [("b_1", (f,)), ("b_2", (d,))]
    return out


def _attention_layout(c: BlockConfig, prefix: str = "") -> list[tuple[str, tuple[int, ...]]]:
    d, h, dk = c.d_model, c.n_heads, c.d_head
    out = [(f"{prefix}w_{w}", (h, d, dk)) for w in ("q", "k", "v")]
    out.append((f"{prefix}w_o", (h * dk, d)))
    if c.bias:
        out += [(f"{prefix}b_{w}", (h, dk)) for w in ("q", "k", "v")] + [(f"{prefix}b_o", (d,))]
    return out


def decoder_block_layout(config: BlockConfig) -> list[tuple[str, tuple[int, ...]]]:
    """The parameters of a decoder block with cross-attention, in flat-vector order.

    Three sub-layers, each with its norm, named as in ``torch.nn.TransformerDecoderLayer``:
    ``norm1`` and the masked self-attention (``w_q`` ... ``b_o``, the encoder block's names),
    ``norm2`` and the cross-attention (``cross_w_q`` ... ``cross_b_o``), ``norm3`` and the
    feed-forward network (``w_1``, ``w_2`` ...). Post-LN or pre-LN only.

    >>> [n for n, _ in decoder_block_layout(BlockConfig(4, 2, 8, bias=False, norm="rms"))]
    ... # doctest: +NORMALIZE_WHITESPACE
    ['norm1_gain', 'w_q', 'w_k', 'w_v', 'w_o', 'norm2_gain', 'cross_w_q', 'cross_w_k',
     'cross_w_v', 'cross_w_o', 'norm3_gain', 'w_1', 'w_2']
    """
    if not isinstance(config, BlockConfig):
        raise TypeError(f"config must be a BlockConfig, got {type(config).__name__}")
    if config.norm_position not in ("post", "pre"):
        raise ValueError(
            "a decoder block with cross-attention is post-LN or pre-LN, got norm_position "
            f"{config.norm_position!r}"
        )
    d = config.d_model

    def norm(prefix: str) -> list[tuple[str, tuple[int, ...]]]:
        return [(f"{prefix}_gain", (d,))] + (
            [(f"{prefix}_bias", (d,))] if config.norm_has_bias else []
        )

    ffn = [(n, s) for n, s in _block_layout(config) if n in _FFN_NAMES]
    return (
        norm("norm1")
        + _attention_layout(config)
        + norm("norm2")
        + _attention_layout(config, "cross_")
        + norm("norm3")
        + ffn
    )


def _final_norm(prefix: str, c: BlockConfig) -> list[tuple[str, tuple[int, ...]]]:
    out = [(f"{prefix}_gain", (c.d_model,))]
    if c.norm_has_bias:
        out.append((f"{prefix}_bias", (c.d_model,)))
    return out


def _decoder_layout(c: DecoderConfig) -> list[tuple[str, tuple[int, ...]]]:
    d = c.d_model
    out = [("tok_emb", (c.vocab_size, d)), ("pos_emb", (c.context_length, d))]
    block = _block_layout(c.block)
    for r in range(c.n_layers):
        out += [(f"blocks.{r}.{name}", shape) for name, shape in block]
    if c.final_norm:
        out += _final_norm("final_norm", c.block)
    if not c.tie_embeddings:
        out.append(("w_out", (d, c.vocab_size)))
    return out


def _encoder_decoder_layout(c: EncoderDecoderConfig) -> list[tuple[str, tuple[int, ...]]]:
    out = []
    enc, dec = _block_layout(c.block), decoder_block_layout(c.block)
    for r in range(c.n_encoder_layers):
        out += [(f"encoder.{r}.{name}", shape) for name, shape in enc]
    if c.final_norm:
        out += _final_norm("encoder_norm", c.block)
    for r in range(c.n_decoder_layers):
        out += [(f"decoder.{r}.{name}", shape) for name, shape in dec]
    if c.final_norm:
        out += _final_norm("decoder_norm", c.block)
    return out


def layout(config: Config) -> list[tuple[str, tuple[int, ...]]]:
    """Every parameter's name and shape, in the order of the flat parameter vector.

    Decoder parameters of block ``r`` are named ``blocks.r.<name>``; an encoder-decoder's are
    ``encoder.r.<name>`` and ``decoder.r.<name>`` (see :func:`decoder_block_layout`).

    >>> layout(BlockConfig(d_model=4, n_heads=2, d_ff=8, norm="rms", bias=False))[:3]
    [('norm1_gain', (4,)), ('w_q', (2, 4, 2)), ('w_k', (2, 4, 2))]
    """
    if isinstance(config, BlockConfig):
        return _block_layout(config)
    if isinstance(config, DecoderConfig):
        return _decoder_layout(config)
    if isinstance(config, EncoderDecoderConfig):
        return _encoder_decoder_layout(config)
    raise TypeError(
        "config must be a BlockConfig, a DecoderConfig or an EncoderDecoderConfig, "
        f"got {type(config).__name__}"
    )


def _groups(config: Config) -> dict[str, int]:
    """The lists of blocks a configuration nests its parameters in, and their lengths."""
    if isinstance(config, DecoderConfig):
        return {"blocks": config.n_layers}
    if isinstance(config, EncoderDecoderConfig):
        return {"encoder": config.n_encoder_layers, "decoder": config.n_decoder_layers}
    return {}


# ------------------------------------------------------------------ flat vectors and dicts
def _nest(flat: dict[str, Any], groups: Mapping[str, int]) -> dict[str, Any]:
    nested: dict[str, Any] = {g: [{} for _ in range(n)] for g, n in groups.items()}
    for name, value in flat.items():
        if name.split(".", 1)[0] in groups:
            g, r, sub = name.split(".", 2)
            nested[g][int(r)][sub] = value
        else:
            nested[name] = value
    return nested


def _flat_items(params: Mapping[str, Any], lay: list, groups: Mapping[str, int]):
    """Yield (name, value) in layout order; raises if a name is missing."""
    for name, _ in lay:
        if name.split(".", 1)[0] in groups:
            g, r, sub = name.split(".", 2)
            blocks = params.get(g)
            if blocks is None or len(blocks) <= int(r) or sub not in blocks[int(r)]:
                raise ValueError(f"params lacks {name!r} (needed by this configuration)")
            yield name, blocks[int(r)][sub]
        else:
            if name not in params:
                raise ValueError(f"params lacks {name!r} (needed by this configuration)")
            yield name, params[name]


def _unflatten(theta: Any, lay: list, groups: Mapping[str, int]) -> dict[str, Any]:
    n = sum(math.prod(s) for _, s in lay)
    shape = tuple(getattr(theta, "shape", ()))
    if len(shape) != 1 or shape[0] != n:
        raise ValueError(
            f"the flat parameter vector must have shape ({n},) for this configuration, "
            f"got {fmt_shape(shape)}"
        )
    out, start = {}, 0
    for name, s in lay:
        size = math.prod(s)
        out[name] = theta[start : start + size].reshape(s)
        start += size
    return _nest(out, groups)


def unflatten_parameters(theta: Any, config: Config) -> dict[str, Any]:
    """Cut a flat vector (NumPy array or tensor) into named views, in :func:`layout` order.

    A decoder's block parameters are returned as a list under ``"blocks"`` (an
    encoder-decoder's under ``"encoder"`` and ``"decoder"``).

    >>> from course_lib.block.counting import count_parameters
    >>> cfg = BlockConfig(d_model=2, n_heads=1, d_ff=1, bias=False, norm="rms")
    >>> p = unflatten_parameters(np.arange(count_parameters(cfg), dtype=float), cfg)
    >>> p["norm1_gain"], p["w_q"].shape
    (array([0., 1.]), (1, 2, 2))
    """
    return _unflatten(theta, layout(config), _groups(config))


def unflatten_decoder_block(theta: Any, config: BlockConfig) -> dict[str, Any]:
    """:func:`unflatten_parameters` for a decoder block (:func:`decoder_block_layout`)."""
    return _unflatten(theta, decoder_block_layout(config), {})


def flatten_parameters(
    params: Mapping[str, Any], config: Config, concat: Callable | None = None
) -> Any:
    """Concatenate named parameters into one flat vector (inverse of :func:`unflatten_parameters`).

    ``concat`` joins a list of 1-D pieces; by default ``np.concatenate`` (``torch.cat`` for
    tensors).

    >>> from course_lib.block.counting import count_parameters
    >>> cfg = BlockConfig(d_model=2, n_heads=1, d_ff=1)
    >>> theta = np.arange(count_parameters(cfg), dtype=float)
    >>> bool((flatten_parameters(unflatten_parameters(theta, cfg), cfg) == theta).all())
    True
    """
    pieces = [v.reshape(-1) for _, v in _flat_items(params, layout(config), _groups(config))]
    if concat is None:
        if pieces and type(pieces[0]).__module__.startswith("torch"):
            import torch

            concat = torch.cat
        else:
            concat = np.concatenate
    return concat(pieces)


def _check(
    params: Mapping[str, Any], lay: list, groups: Mapping[str, int], convert: Callable[..., Any]
) -> dict[str, Any]:
    if not isinstance(params, Mapping):
        raise TypeError(
            f"params must be a dict of named arrays or a flat vector, got {type(params).__name__}"
        )
    for g, n in groups.items():
        got = params.get(g, [])
        if len(got) != n:
            raise ValueError(f"params[{g!r}] must hold {n} blocks, got {len(got)}")
    shapes = dict(lay)
    flat = {}
    for name, value in _flat_items(params, lay, groups):
        arr = convert(value, f"params[{name!r}]")
        if tuple(arr.shape) != shapes[name]:
            raise ValueError(
                f"params[{name!r}] must have shape {fmt_shape(shapes[name])} for this "
                f"configuration, got {fmt_shape(arr.shape)}"
            )
        flat[name] = arr
    extra = set(params) - {n for n in shapes if "." not in n} - set(groups)
    for g in groups:
        for r, blk in enumerate(params.get(g, [])):
            extra |= {f"{g}.{r}.{k}" for k in blk if f"{g}.{r}.{k}" not in shapes}
    if extra:
        raise ValueError(
            f"params has names this configuration does not use: {sorted(extra)} "
            "(a bias in a bias-free block, or a misspelt key?)"
        )
    return _nest(flat, groups)


def check_params(
    params: Mapping[str, Any], config: Config, convert: Callable[..., Any]
) -> dict[str, Any]:
    """Convert every parameter with ``convert(value, name)`` and check its shape.

    Returns a dict with the same structure (``"blocks"`` a list for decoders, ``"encoder"`` and
    ``"decoder"`` for an encoder-decoder). Extra names are an error too, so that a misspelt key
    never goes unnoticed.
    """
    return _check(params, layout(config), _groups(config), convert)


def check_decoder_block_params(
    params: Mapping[str, Any], config: BlockConfig, convert: Callable[..., Any]
) -> dict[str, Any]:
    """:func:`check_params` for a decoder block (:func:`decoder_block_layout`)."""
    return _check(params, decoder_block_layout(config), {}, convert)


def init_parameters(config: Config, rng: np.random.Generator | int | None = 0) -> dict[str, Any]:
    """Random float64 parameters: weights ~ N(0, 2 / (fan_in + fan_out)) (Glorot), biases 0, gains 1.

    Embeddings are N(0, 1/d). Per-head attention weights use the fan of the whole projection
    (``d_model`` in, ``n_heads * d_head`` out).

    >>> p = init_parameters(BlockConfig(d_model=4, n_heads=2, d_ff=8))
    >>> p["norm1_gain"], p["b_1"]
    (array([1., 1., 1., 1.]), array([0., 0., 0., 0., 0., 0., 0., 0.]))
    """
    return _nest(_init(layout(config), rng), _groups(config))


def init_decoder_block(config: BlockConfig, rng: np.random.Generator | int | None = 0) -> dict:
    """:func:`init_parameters` for a decoder block (:func:`decoder_block_layout`).

    >>> p = init_decoder_block(BlockConfig(d_model=4, n_heads=2, d_ff=8))
    >>> p["cross_w_q"].shape, p["norm3_gain"]
    ((2, 4, 2), array([1., 1., 1., 1.]))
    """
    return _init(decoder_block_layout(config), rng)


def _init(lay: list, rng: np.random.Generator | int | None) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(rng)
    flat = {}
    for name, shape in lay:
        base = name.split(".")[-1].removeprefix("cross_")
        if base.endswith("_gain"):
            flat[name] = np.ones(shape)
        elif base.endswith("_bias") or base.startswith("b_"):
            flat[name] = np.zeros(shape)
        elif base in ("tok_emb", "pos_emb"):
            flat[name] = rng.standard_normal(shape) / math.sqrt(shape[-1])
        else:
            if len(shape) == 3:  # (h, d, d_k): fan_in d, fan_out h * d_k
                fan_in, fan_out = shape[1], shape[0] * shape[2]
            else:
                fan_in, fan_out = shape
            flat[name] = rng.standard_normal(shape) * math.sqrt(2.0 / (fan_in + fan_out))
    return flat
