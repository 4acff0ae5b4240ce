"""How many parameters a block or a model has, and the GPT-3 size table (Chapter 5).

:func:`count_parameters` counts them with a closed formula, :func:`approx_parameters` is the
``12 n_layers d_model^2`` rule of thumb, and :func:`gpt3_table` reproduces the GPT-3 size table
of the lecture slides (Brown et al., 2020, Table 2.1).

>>> cfg = BlockConfig(d_model=8, n_heads=2, d_ff=32)
>>> count_parameters(cfg)  # 4*8*8 + 4*8 (attention) + 2*8*32 + 32 + 8 (FFN) + 4*8 (two norms)
872
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from course_lib.block.config import BlockConfig, DecoderConfig, EncoderDecoderConfig
from course_lib.checks import check_int

__all__ = [
    "GPT3_SIZES",
    "GPT3Row",
    "approx_parameters",
    "count_parameters",
    "gpt3_config",
    "gpt3_table",
]


# ----------------------------------------------------------------------------------- counting
def count_parameters(config: BlockConfig | DecoderConfig) -> int:
    """The exact number of parameters, from a closed formula (tested against :func:`layout`).

    For one block with width d, ``h`` heads of width ``d_k`` (``d_a = h d_k``) and FFN width f:

    * attention: ``3 d d_a + d_a d`` weights, ``3 d_a + d`` biases;
    * feed-forward: ``2 d f`` weights and ``f + d`` biases, or, gated, ``3 d f`` and ``2 f + d``;
    * norms: 2 (1 for the parallel block), each ``2d`` (LayerNorm) or ``d`` (RMSNorm or no bias).

    A decoder adds ``(V + n_ctx) d`` embeddings, the final norm, and ``d V`` if untied. An
    encoder-decoder's decoder blocks each add a cross-attention and a third norm to a block,
    and each stack may end in a norm.

    >>> count_parameters(BlockConfig(d_model=512, n_heads=8, d_ff=2048))  # 12 d^2 + 13 d
    3152384
    """
    if isinstance(config, DecoderConfig):
        c = config.block
        d = c.d_model
        total = (config.vocab_size + config.context_length) * d
        total += config.n_layers * count_parameters(c)
        if config.final_norm:
            total += 2 * d if c.norm_has_bias else d
        if not config.tie_embeddings:
            total += d * config.vocab_size
        return total
    if isinstance(config, EncoderDecoderConfig):
        c = config.block
        block, norm = count_parameters(c), (2 * c.d_model if c.norm_has_bias else c.d_model)
        cross = 4 * c.d_model * c.d_attn + ((3 * c.d_attn + c.d_model) if c.bias else 0)
        total = config.n_encoder_layers * block + config.n_decoder_layers * (block + cross + norm)
        return total + (2 * norm if config.final_norm else 0)
    if not isinstance(config, BlockConfig):
        raise TypeError(
            "config must be a BlockConfig, a DecoderConfig or an EncoderDecoderConfig, "
            f"got {type(config).__name__}"
        )
    c = config
    d, da, f = c.d_model, c.d_attn, c.d_ff
    attention = 4 * d * da + ((3 * da + d) if c.bias else 0)
    if c.gated:
        ffn = 3 * d * f + ((2 * f + d) if c.bias else 0)
    else:
        ffn = 2 * d * f + ((f + d) if c.bias else 0)
    norms = c.n_norms * (2 * d if c.norm_has_bias else d)
    return attention + ffn + norms


def approx_parameters(
    n_layers: int, d_model: int, vocab_size: int = 0, context_length: int = 0
) -> int:
    """The rule of thumb ``12 n_layers d_model^2 + (V + n_ctx) d_model``.

    Each block has ``4 d^2`` attention weights and ``8 d^2`` feed-forward weights (with
    ``d_ff = 4 d``); biases and norms (``13 d`` per block) are left out.

    >>> approx_parameters(12, 768, 50257, 2048) / 1e6  # GPT-3 Small, nominally 125M
    125.104896
    """
    check_int(n_layers, "n_layers", low=1)
    check_int(d_model, "d_model", low=1)
    check_int(vocab_size, "vocab_size", low=0)
    check_int(context_length, "context_length", low=0)
    return 12 * n_layers * d_model**2 + (vocab_size + context_length) * d_model


# -------------------------------------------------------------------------- the GPT-3 table
@dataclass(frozen=True)
class GPT3Row:
    """One row of the GPT-3 size table as the slides (``003``) print it (from Brown et al.)."""

    name: str
    nominal: float  # parameters, as printed (125M, ..., 175.0B)
    n_layers: int
    d_model: int
    n_heads: int
    d_head: int


#: The model sizes of GPT-3 exactly as the slides print them (the 13B row's d_model included).
GPT3_SIZES: tuple[GPT3Row, ...] = (
    GPT3Row("GPT-3 Small", 125e6, 12, 768, 12, 64),
    GPT3Row("GPT-3 Medium", 350e6, 24, 1024, 16, 64),
    GPT3Row("GPT-3 Large", 760e6, 24, 1536, 16, 96),
    GPT3Row("GPT-3 XL", 1.3e9, 24, 2048, 24, 128),
    GPT3Row("GPT-3 2.7B", 2.7e9, 32, 2560, 32, 80),
    GPT3Row("GPT-3 6.7B", 6.7e9, 32, 4096, 32, 128),
    GPT3Row("GPT-3 13B", 13.0e9, 40, 5140, 40, 128),
    GPT3Row("GPT-3 175B", 175.0e9, 96, 12288, 96, 128),
)


def gpt3_config(
    n_layers: int,
    d_model: int,
    n_heads: int,
    d_head: int | None = None,
    vocab_size: int = 50257,
    context_length: int = 2048,
) -> DecoderConfig:
    """A GPT-3-style decoder: pre-LN, GELU, ``d_ff = 4 d_model``, biases, tied embeddings.

    >>> count_parameters(gpt3_config(12, 768, 12)) / 1e6
    125.22624
    """
    block = BlockConfig(
        d_model=d_model,
        n_heads=n_heads,
        d_ff=4 * d_model,
        d_head=d_head,
        norm_position="pre",
        activation="gelu",
    )
    return DecoderConfig(vocab_size, context_length, n_layers, block)


def _gpt3_count(r: GPT3Row, d_attn: int, vocab_size: int, context_length: int) -> int:
    """Exact count of row r with attention width d_attn (one head of that width)."""
    block = BlockConfig(
        d_model=r.d_model,
        n_heads=1,
        d_ff=4 * r.d_model,
        d_head=d_attn,
        norm_position="pre",
        activation="gelu",
    )
    return count_parameters(DecoderConfig(vocab_size, context_length, r.n_layers, block))


def gpt3_table(
    rows: Sequence[GPT3Row] = GPT3_SIZES, vocab_size: int = 50257, context_length: int = 2048
) -> list[dict[str, Any]]:
    """Reproduce the GPT-3 size table: count every row's parameters and check its consistency.

    For each row: ``heads_x_dhead`` (``n_heads * d_head``, which should equal ``d_model``),
    ``approx`` (``12 n d^2 + (V + n_ctx) d``), ``exact`` (:func:`count_parameters` with the
    attention width ``d_model``, i.e. the table's d_model taken at its word) and
    ``exact_as_printed`` (the attention width taken as ``n_heads * d_head`` instead), each with
    its relative error against the nominal size. GPT-3 uses GPT-2's vocabulary (V = 50257) and
    2048 learned positions.

    >>> t = {r["name"]: r for r in gpt3_table()}
    >>> t["GPT-3 XL"]["heads_x_dhead"], round(t["GPT-3 XL"]["exact_as_printed"] / 1e9, 2)
    (3072, 1.52)
    """
    out = []
    for r in rows:
        width = r.n_heads * r.d_head
        approx = approx_parameters(r.n_layers, r.d_model, vocab_size, context_length)

        # parameter counts depend on the heads only through n_heads * d_head, so one head of
        # width d_model counts the same as any split of d_model into heads
        e, e_printed = (
            _gpt3_count(r, r.d_model, vocab_size, context_length),
            _gpt3_count(r, width, vocab_size, context_length),
        )
        out.append(
            {
                "name": r.name,
                "nominal": r.nominal,
                "n_layers": r.n_layers,
                "d_model": r.d_model,
                "n_heads": r.n_heads,
                "d_head": r.d_head,
                "heads_x_dhead": width,
                "consistent": width == r.d_model,
                "approx": approx,
                "approx_error": approx / r.nominal - 1,
                "exact": e,
                "exact_error": e / r.nominal - 1,
                "exact_as_printed": e_printed,
                "exact_as_printed_error": e_printed / r.nominal - 1,
            }
        )
    return out
