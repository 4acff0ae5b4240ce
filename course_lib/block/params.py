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

from course_lib.block.config import BlockConfig, DecoderConfig
from course_lib.block.counting import count_parameters
from course_lib.checks import fmt_shape

__all__ = [
    "check_params",
    "flatten_parameters",
    "init_parameters",
    "layout",
    "unflatten_parameters",
]


# ------------------------------------------------------------------------------------ layouts
def _block_layout(c: BlockConfig) -> list[tuple[str, tuple[int, ...]]]:
    d, h, dk, f = c.d_model, c.n_heads, c.d_head, c.d_ff
    out: list[tuple[str, tuple[int, ...]]] = []

    def norm(prefix: str) -> None:
        out.append((f"{prefix}_gain", (d,)))
        if c.norm_has_bias:
            out.append((f"{prefix}_bias", (d,)))

    norm("norm1")
    for w in ("q", "k", "v"):
        out.append((f"w_{w}", (h, d, dk)))
    out.append(("w_o", (h * dk, d)))
    if c.bias:
        out += [("b_q", (h, dk)), ("b_k", (h, dk)), ("b_v", (h, dk)), ("b_o", (d,))]
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


def _decoder_layout(c: DecoderConfig) -> list[tuple[str, tuple[int, ...]]]:
    d = c.d_model
    out = [("tok_emb", (c.vocab_size, d)), ("pos_emb", (c.context_length, d))]
    block = _block_layout(c.block)
    for r in range(c.n_layers):
        out += [(f"blocks.{r}.{name}", shape) for name, shape in block]
    if c.final_norm:
        out.append(("final_norm_gain", (d,)))
        if c.block.norm_has_bias:
            out.append(("final_norm_bias", (d,)))
    if not c.tie_embeddings:
        out.append(("w_out", (d, c.vocab_size)))
    return out


def layout(config: BlockConfig | DecoderConfig) -> list[tuple[str, tuple[int, ...]]]:
    """Every parameter's name and shape, in the order of the flat parameter vector.

    Decoder parameters of block ``r`` are named ``blocks.r.<name>``.

    >>> layout(BlockConfig(d_model=4, n_heads=2, d_ff=8, norm="rms", bias=False))[:3]
    [('norm1_gain', (4,)), ('w_q', (2, 4, 2)), ('w_k', (2, 4, 2))]
    """
    if isinstance(config, BlockConfig):
        return _block_layout(config)
    if isinstance(config, DecoderConfig):
        return _decoder_layout(config)
    raise TypeError(f"config must be a BlockConfig or a DecoderConfig, got {type(config).__name__}")


# ------------------------------------------------------------------ flat vectors and dicts
def _nest(flat: dict[str, Any], config: BlockConfig | DecoderConfig) -> dict[str, Any]:
    if isinstance(config, BlockConfig):
        return flat
    nested: dict[str, Any] = {"blocks": [{} for _ in range(config.n_layers)]}
    for name, value in flat.items():
        if name.startswith("blocks."):
            _, r, sub = name.split(".", 2)
            nested["blocks"][int(r)][sub] = value
        else:
            nested[name] = value
    return nested


def _flat_items(params: Mapping[str, Any], config: BlockConfig | DecoderConfig):
    """Yield (name, value) in layout order; raises if a name is missing."""
    for name, _ in layout(config):
        if name.startswith("blocks."):
            _, r, sub = name.split(".", 2)
            blocks = params.get("blocks")
            if blocks is None or len(blocks) <= int(r) or sub not in blocks[int(r)]:
                raise ValueError(f"params lacks {name!r} (needed by this configuration)")
            yield name, blocks[int(r)][sub]
        else:
            if name not in params:
                raise ValueError(f"params lacks {name!r} (needed by this configuration)")
            yield name, params[name]


def unflatten_parameters(theta: Any, config: BlockConfig | DecoderConfig) -> dict[str, Any]:
    """Cut a flat vector (NumPy array or tensor) into named views, in :func:`layout` order.

    A decoder's block parameters are returned as a list under ``"blocks"``.

    >>> cfg = BlockConfig(d_model=2, n_heads=1, d_ff=1, bias=False, norm="rms")
    >>> p = unflatten_parameters(np.arange(count_parameters(cfg), dtype=float), cfg)
    >>> p["norm1_gain"], p["w_q"].shape
    (array([0., 1.]), (1, 2, 2))
    """
    n = count_parameters(config)
    shape = tuple(getattr(theta, "shape", ()))
    if len(shape) != 1 or shape[0] != n:
        raise ValueError(
            f"the flat parameter vector must have shape ({n},) for this configuration, "
            f"got {fmt_shape(shape)}"
        )
    out, start = {}, 0
    for name, s in layout(config):
        size = math.prod(s)
        out[name] = theta[start : start + size].reshape(s)
        start += size
    return _nest(out, config)


def flatten_parameters(
    params: Mapping[str, Any], config: BlockConfig | DecoderConfig, concat: Callable | None = None
) -> Any:
    """Concatenate named parameters into one flat vector (inverse of :func:`unflatten_parameters`).

    ``concat`` joins a list of 1-D pieces; by default ``np.concatenate`` (``torch.cat`` for
    tensors).

    >>> cfg = BlockConfig(d_model=2, n_heads=1, d_ff=1)
    >>> theta = np.arange(count_parameters(cfg), dtype=float)
    >>> bool((flatten_parameters(unflatten_parameters(theta, cfg), cfg) == theta).all())
    True
    """
    pieces = [v.reshape(-1) for _, v in _flat_items(params, config)]
    if concat is None:
        if pieces and type(pieces[0]).__module__.startswith("torch"):
            import torch

            concat = torch.cat
        else:
            concat = np.concatenate
    return concat(pieces)


def check_params(
    params: Mapping[str, Any], config: BlockConfig | DecoderConfig, convert: Callable[..., Any]
) -> dict[str, Any]:
    """Convert every parameter with ``convert(value, name)`` and check its shape.

    Returns a dict with the same structure (``"blocks"`` a list for decoders). Extra names are
    an error too, so that a misspelt key never goes unnoticed.
    """
    if not isinstance(params, Mapping):
        raise TypeError(
            f"params must be a dict of named arrays or a flat vector, got {type(params).__name__}"
        )
    flat = {}
    for name, value in _flat_items(params, config):
        arr = convert(value, f"params[{name!r}]")
        expected = dict(layout(config))[name]
        if tuple(arr.shape) != expected:
            raise ValueError(
                f"params[{name!r}] must have shape {fmt_shape(expected)} for this configuration, "
                f"got {fmt_shape(arr.shape)}"
            )
        flat[name] = arr
    known = {n.split(".", 2)[-1] if n.startswith("blocks.") else n for n, _ in layout(config)}
    extra = set(params) - known - ({"blocks"} if isinstance(config, DecoderConfig) else set())
    if isinstance(config, DecoderConfig):
        for r, blk in enumerate(params.get("blocks", [])):
            extra |= {f"blocks.{r}.{k}" for k in set(blk) - known}
        if len(params.get("blocks", [])) != config.n_layers:
            raise ValueError(
                f"params['blocks'] must hold {config.n_layers} blocks, "
                f"got {len(params.get('blocks', []))}"
            )
    if extra:
        raise ValueError(
            f"params has names this configuration does not use: {sorted(extra)} "
            "(a bias in a bias-free block, or a misspelt key?)"
        )
    return _nest(flat, config)


def init_parameters(
    config: BlockConfig | DecoderConfig, rng: np.random.Generator | int | None = 0
) -> dict[str, Any]:
    """Random float64 parameters: weights ~ N(0, 2 / (fan_in + fan_out)) (Glorot), biases 0, gains 1.

    Embeddings are N(0, 1/d). Per-head attention weights use the fan of the whole projection
    (``d_model`` in, ``n_heads * d_head`` out).

    >>> p = init_parameters(BlockConfig(d_model=4, n_heads=2, d_ff=8))
    >>> p["norm1_gain"], p["b_1"]
    (array([1., 1., 1., 1.]), array([0., 0., 0., 0., 0., 0., 0., 0.]))
    """
    rng = np.random.default_rng(rng)
    flat = {}
    for name, shape in layout(config):
        base = name.split(".")[-1]
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
    return _nest(flat, config)
