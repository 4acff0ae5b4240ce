"""Conformance specs for Chapter 5 (the Transformer block).

Blocks, stacks and the decoder take their parameters as one flat vector here (the form both
sides accept besides a dict), so that the suite converts them to the dtype under test and
``gradcheck`` differentiates with respect to every parameter at once. Every block variant
(post/pre/parallel x LayerNorm/RMSNorm x plain/gated x bias/no bias x 4 activations) can be
drawn; ``tests/test_block.py`` also runs each of the 96 combinations explicitly.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

from course_lib.block.config import (
    ACTIVATIONS,
    NORM_POSITIONS,
    NORMS,
    BlockConfig,
    DecoderConfig,
    EncoderDecoderConfig,
)
from course_lib.block.counting import count_parameters
from course_lib.block.params import decoder_block_layout
from course_lib.conformance import (
    ALL_DTYPES,
    Case,
    Spec,
    batch_shapes,
    dims,
    normal_arrays,
    seeded_rng,
)

#: The mirrored functions of this chapter and how to check them (see course_lib.conformance).
SPECS: list[Spec] = []


@st.composite
def norm_inputs(draw: st.DrawFn, with_bias: bool = True) -> Case:
    """x (..., L, d) with d >= 2, an optional gain and (LayerNorm) an optional bias."""
    batch, L, d = draw(batch_shapes), draw(dims), draw(st.integers(2, 8))
    (x,) = draw(normal_arrays((*batch, L, d)))
    rng = seeded_rng(draw)
    gain = 1 + 0.5 * rng.standard_normal(d) if draw(st.booleans()) else None
    eps = draw(st.sampled_from([1e-5, 1e-3]))
    if not with_bias:
        return Case((x, gain), {"eps": eps})
    bias = rng.standard_normal(d) if draw(st.booleans()) else None
    return Case((x, gain, bias), {"eps": eps})


@st.composite
def activation_inputs(draw: st.DrawFn) -> Case:
    (x,) = draw(normal_arrays((*draw(batch_shapes), draw(dims)), scale=2.0))
    return Case((x,), {"name": draw(st.sampled_from(ACTIVATIONS))})


@st.composite
def ffn_inputs(draw: st.DrawFn, gated: bool = False) -> Case:
    """x (..., d), weights (d, f) [, (d, f)], (f, o), each bias present or None."""
    batch, d, f, o = draw(batch_shapes), draw(dims), draw(dims), draw(dims)
    rng = seeded_rng(draw)
    x = rng.standard_normal((*batch, draw(dims), d))
    ws = [rng.standard_normal((d, f)) / np.sqrt(d)]
    if gated:
        ws.append(rng.standard_normal((d, f)) / np.sqrt(d))
    ws.append(rng.standard_normal((f, o)) / np.sqrt(f))
    sizes = [f] * (len(ws) - 1) + [o]
    biases = [rng.standard_normal(n) if draw(st.booleans()) else None for n in sizes]
    return Case((x, *ws, *biases), {"activation": draw(st.sampled_from(ACTIVATIONS))})


@st.composite
def block_configs(draw: st.DrawFn, positions: tuple[str, ...] = NORM_POSITIONS) -> BlockConfig:
    h, dk = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    return BlockConfig(
        d_model=draw(st.integers(2, 6)),
        n_heads=h,
        d_head=dk,
        d_ff=draw(st.integers(1, 6)),
        norm_position=draw(st.sampled_from(positions)),
        norm=draw(st.sampled_from(NORMS)),
        activation=draw(st.sampled_from(ACTIVATIONS)),
        gated=draw(st.booleans()),
        bias=draw(st.booleans()),
    )


def _theta(rng: np.random.Generator, n: int, *shape: int) -> np.ndarray:
    return 0.5 * rng.standard_normal((*shape, n))


@st.composite
def block_inputs(draw: st.DrawFn, stack: bool = False) -> Case:
    """x (..., L, d), flat parameters (P,) or (R, P), the config; a causal mask or none."""
    cfg = draw(block_configs())
    rng = seeded_rng(draw)
    L = draw(st.integers(1, 5))
    x = rng.standard_normal((*draw(batch_shapes), L, cfg.d_model))
    n = count_parameters(cfg)
    theta = _theta(rng, n, draw(st.integers(1, 3))) if stack else _theta(rng, n)
    kwargs = {"mask": np.tril(np.ones((L, L), dtype=bool))} if draw(st.booleans()) else {}
    return Case((x, theta, cfg), kwargs)


@st.composite
def decoder_inputs(draw: st.DrawFn) -> Case:
    """Integer tokens (..., L), a flat parameter vector and a small decoder configuration."""
    block = draw(block_configs())
    cfg = DecoderConfig(
        vocab_size=draw(st.integers(2, 6)),
        context_length=draw(st.integers(1, 5)),
        n_layers=draw(st.integers(1, 2)),
        block=block,
        tie_embeddings=draw(st.booleans()),
    )
    rng = seeded_rng(draw)
    L = draw(st.integers(1, cfg.context_length))
    tokens = rng.integers(0, cfg.vocab_size, (*draw(batch_shapes), L))
    return Case((tokens, _theta(rng, count_parameters(cfg)), cfg))


def _keep(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    """A random boolean (rows, cols) mask with at least one True per row (key 0 always kept)."""
    keep = rng.random((rows, cols)) < 0.7
    keep[:, 0] = True
    return keep


@st.composite
def decoder_block_inputs(draw: st.DrawFn) -> Case:
    """y (..., L_t, d), memory (..., L_s, d), flat parameters, a post-LN or pre-LN config, masks."""
    cfg = draw(block_configs(positions=("post", "pre")))
    rng = seeded_rng(draw)
    batch, Lt, Ls = draw(batch_shapes), draw(st.integers(1, 4)), draw(st.integers(1, 4))
    y = rng.standard_normal((*batch, Lt, cfg.d_model))
    memory = rng.standard_normal((*batch, Ls, cfg.d_model))
    n = sum(math.prod(s) for _, s in decoder_block_layout(cfg))
    kwargs = {}
    if draw(st.booleans()):
        kwargs["self_mask"] = np.tril(np.ones((Lt, Lt), dtype=bool))
    if draw(st.booleans()):
        kwargs["cross_mask"] = _keep(rng, Lt, Ls)
    return Case((y, memory, _theta(rng, n), cfg), kwargs)


@st.composite
def encoder_decoder_inputs(draw: st.DrawFn) -> Case:
    """Source x (..., L_s, d), target y (..., L_t, d), flat parameters, config, masks."""
    cfg = EncoderDecoderConfig(
        draw(st.integers(1, 2)),
        draw(st.integers(1, 2)),
        draw(block_configs(positions=("post", "pre"))),
        final_norm=draw(st.booleans()),
    )
    rng = seeded_rng(draw)
    batch, Lt, Ls = draw(batch_shapes), draw(st.integers(1, 4)), draw(st.integers(1, 4))
    x = rng.standard_normal((*batch, Ls, cfg.d_model))
    y = rng.standard_normal((*batch, Lt, cfg.d_model))
    kwargs = {"tgt_mask": np.tril(np.ones((Lt, Lt), dtype=bool))}
    if draw(st.booleans()):  # source padding: the same keys hidden from every query
        keep = _keep(rng, 1, Ls)  # (1, L_s)
        kwargs["src_mask"] = keep
        kwargs["memory_mask"] = keep
    return Case((x, y, _theta(rng, count_parameters(cfg)), cfg), kwargs)


# tolerances: a norm divides by a standard deviation, so its output error is about the input
# rounding of the dtype (float16 ~1e-3, bfloat16 ~1e-2) times a few
SPECS.append(
    Spec(
        topic="block",
        name="layer_norm",
        inputs=norm_inputs(),
        dtypes=ALL_DTYPES,
        tolerance={"float16": (1e-2, 1e-2), "bfloat16": (5e-2, 5e-2)},
    )
)
SPECS.append(
    Spec(
        topic="block",
        name="rms_norm",
        inputs=norm_inputs(with_bias=False),
        dtypes=ALL_DTYPES,
        tolerance={"float16": (1e-2, 1e-2), "bfloat16": (5e-2, 5e-2)},
    )
)
SPECS.append(
    Spec(
        topic="block",
        name="activation",
        inputs=activation_inputs(),
        dtypes=ALL_DTYPES,
        tolerance={"float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2)},
    )
)
SPECS.append(
    Spec(
        topic="block",
        name="feed_forward",
        inputs=ffn_inputs(),
        dtypes=ALL_DTYPES,
        tolerance={"float16": (2e-2, 2e-2), "bfloat16": (5e-2, 1e-1)},
    )
)
SPECS.append(
    Spec(
        topic="block",
        name="glu_feed_forward",
        inputs=ffn_inputs(gated=True),
        dtypes=ALL_DTYPES,
        tolerance={"float16": (2e-2, 2e-2), "bfloat16": (5e-2, 1e-1)},
    )
)
# whole blocks: float64 and float32 (half precision is chapter 12's subject)
_BLOCK_TOL = {"float64": (1e-9, 1e-10), "float32": (1e-3, 1e-4)}
for _name, _inputs in (
    ("transformer_block", block_inputs()),
    ("transformer_stack", block_inputs(stack=True)),
):
    SPECS.append(Spec(topic="block", name=_name, inputs=_inputs, tolerance=_BLOCK_TOL))
SPECS.append(
    Spec(topic="block", name="decoder_forward", inputs=decoder_inputs(), tolerance=_BLOCK_TOL)
)
SPECS.append(
    Spec(topic="block", name="decoder_block", inputs=decoder_block_inputs(), tolerance=_BLOCK_TOL)
)
SPECS.append(
    Spec(
        topic="block",
        name="encoder_decoder_stack",
        inputs=encoder_decoder_inputs(),
        tolerance=_BLOCK_TOL,
    )
)
