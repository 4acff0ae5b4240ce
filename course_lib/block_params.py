"""Configurations, parameter layouts and parameter counts of Transformer blocks (Chapter 5).

Nothing here does array maths beyond slicing, so it exists once and serves both sides: the NumPy
reference (:mod:`course_lib.reference.block`) and the PyTorch side
(:mod:`course_lib.accelerated.block`, :mod:`course_lib.models`).

* :class:`BlockConfig` describes one block: widths, where the norms sit (``post``, ``pre`` or
  ``parallel``), which norm (``layer`` or ``rms``), the feed-forward activation, whether it is
  gated (GLU) and whether the block has biases.
* :class:`DecoderConfig` describes a decoder-only model (notes ``002`` eq. 21): token and
  position embeddings, ``n_layers`` blocks, an optional final norm and a (tied) output projection.
* :func:`layout` lists every parameter with its shape, :func:`count_parameters` counts them with a
  closed formula, :func:`approx_parameters` is the ``12 n_layers d_model^2`` rule of thumb, and
  :func:`gpt3_table` reproduces the GPT-3 size table of the slides (``003``).

Weights follow the notes' row convention (``x @ W``): a projection from width ``a`` to width ``b``
has shape ``(a, b)``; attention weights are stacked per head, ``w_q`` of shape
``(n_heads, d_model, d_head)``, as in Chapter 4.

>>> cfg = BlockConfig(d_model=8, n_heads=2, d_ff=32)
>>> count_parameters(cfg)  # 4*8*8 + 4*8 (attention) + 2*8*32 + 32 + 8 (FFN) + 4*8 (two norms)
872
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from course_lib.checks import check_choice, check_int, fmt_shape

__all__ = [
    "ACTIVATIONS",
    "GPT3_SIZES",
    "NORMS",
    "NORM_POSITIONS",
    "BlockConfig",
    "DecoderConfig",
    "GPT3Row",
    "approx_parameters",
    "check_params",
    "count_parameters",
    "flatten_parameters",
    "gpt3_config",
    "gpt3_table",
    "init_parameters",
    "layout",
    "unflatten_parameters",
]

NORM_POSITIONS = ("post", "pre", "parallel")
NORMS = ("layer", "rms")
ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "swish")


def _check_bool(value: Any, name: str) -> bool:
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


@dataclass(frozen=True)
class BlockConfig:
    """One Transformer block.

    Attributes:
        d_model: width of the residual stream (the block's input and output).
        n_heads: number of attention heads.
        d_ff: inner width of the feed-forward network (``4 * d_model`` in GPT and the original
            Transformer).
        d_head: width of each head's queries, keys and values; default ``d_model // n_heads``
            (then ``n_heads`` must divide ``d_model``).
        norm_position: ``"post"`` (norm after each residual addition, the original Transformer,
            notes ``002`` section 2.4), ``"pre"`` (norm at the start of each branch, notes ``004``
            section 1.3) or ``"parallel"`` (one norm feeding both branches, notes ``001``).
        norm: ``"layer"`` (LayerNorm, gain and bias) or ``"rms"`` (RMSNorm, gain only).
        activation: the feed-forward nonlinearity: ``relu``, ``gelu``, ``gelu_tanh`` or
            ``swish`` (``x * sigmoid(x)``).
        gated: use a gated linear unit ``W3 (phi(W1 x) * W2 x)`` instead of ``W2 phi(W1 x)``
            (notes ``001``; with ``swish`` this is SwiGLU).
        bias: give every projection and every LayerNorm a bias (``False``: the notes ``001``
            "removal of biases"; as in ``torch.nn.TransformerEncoderLayer(bias=False)``).
        eps: the small number added to the variance (or mean square) inside the norms.

    >>> BlockConfig(d_model=10, n_heads=3, d_ff=40)
    Traceback (most recent call last):
    ...
    ValueError: n_heads=3 does not divide d_model=10: pass d_head explicitly or change n_heads
    >>> BlockConfig(d_model=8, n_heads=2, d_ff=0)
    Traceback (most recent call last):
    ...
    ValueError: d_ff must be at least 1, got 0
    """

    d_model: int
    n_heads: int
    d_ff: int
    d_head: int | None = None
    norm_position: str = "post"
    norm: str = "layer"
    activation: str = "relu"
    gated: bool = False
    bias: bool = True
    eps: float = 1e-5

    def __post_init__(self) -> None:
        check_int(self.d_model, "d_model", low=1)
        check_int(self.n_heads, "n_heads", low=1)
        check_int(self.d_ff, "d_ff", low=1)
        if self.d_head is None:
            if self.d_model % self.n_heads:
                raise ValueError(
                    f"n_heads={self.n_heads} does not divide d_model={self.d_model}: "
                    "pass d_head explicitly or change n_heads"
                )
            object.__setattr__(self, "d_head", self.d_model // self.n_heads)
        check_int(self.d_head, "d_head", low=1)
        check_choice(self.norm_position, "norm_position", NORM_POSITIONS)
        check_choice(self.norm, "norm", NORMS)
        check_choice(self.activation, "activation", ACTIVATIONS)
        _check_bool(self.gated, "gated")
        _check_bool(self.bias, "bias")
        if not isinstance(self.eps, int | float) or isinstance(self.eps, bool) or self.eps < 0:
            raise ValueError(f"eps must be a non-negative number, got {self.eps!r}")

    @property
    def d_attn(self) -> int:
        """Total width of the concatenated heads, ``n_heads * d_head``."""
        return self.n_heads * self.d_head  # type: ignore[operator]

    @property
    def norm_has_bias(self) -> bool:
        return self.norm == "layer" and self.bias

    @property
    def n_norms(self) -> int:
        """How many norms the block has: two, or one shared by both branches (parallel)."""
        return 1 if self.norm_position == "parallel" else 2


@dataclass(frozen=True)
class DecoderConfig:
    """A decoder-only Transformer (notes ``002`` eq. 21; GPT).

    ``h_0 = U W_e + W_p``, then ``n_layers`` blocks with causal self-attention, an optional final
    norm, and ``P(u) = softmax(h_n W_e^T)`` when the embeddings are tied.

    Attributes:
        vocab_size: number of tokens V.
        context_length: number of learned positions (the longest sequence the model accepts).
        n_layers: number of blocks.
        block: the configuration shared by every block.
        tie_embeddings: reuse the token embedding ``W_e`` (transposed) as the output projection.
        final_norm: apply a norm after the last block; default ``True`` unless the blocks are
            post-LN (whose output is already normalised).

    >>> cfg = DecoderConfig(vocab_size=10, context_length=6, n_layers=2,
    ...                     block=BlockConfig(d_model=8, n_heads=2, d_ff=16, norm_position="pre"))
    >>> cfg.final_norm, count_parameters(cfg)
    (True, 1344)
    """

    vocab_size: int
    context_length: int
    n_layers: int
    block: BlockConfig
    tie_embeddings: bool = True
    final_norm: bool | None = field(default=None)

    def __post_init__(self) -> None:
        check_int(self.vocab_size, "vocab_size", low=1)
        check_int(self.context_length, "context_length", low=1)
        check_int(self.n_layers, "n_layers", low=1)
        if not isinstance(self.block, BlockConfig):
            raise TypeError(f"block must be a BlockConfig, got {type(self.block).__name__}")
        _check_bool(self.tie_embeddings, "tie_embeddings")
        if self.final_norm is None:
            object.__setattr__(self, "final_norm", self.block.norm_position != "post")
        _check_bool(self.final_norm, "final_norm")

    @property
    def d_model(self) -> int:
        return self.block.d_model


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


# ----------------------------------------------------------------------------------- counting
def count_parameters(config: BlockConfig | DecoderConfig) -> int:
    """The exact number of parameters, from a closed formula (tested against :func:`layout`).

    For one block with width d, ``h`` heads of width ``d_k`` (``d_a = h d_k``) and FFN width f:

    * attention: ``3 d d_a + d_a d`` weights, ``3 d_a + d`` biases;
    * feed-forward: ``2 d f`` weights and ``f + d`` biases, or, gated, ``3 d f`` and ``2 f + d``;
    * norms: 2 (1 for the parallel block), each ``2d`` (LayerNorm) or ``d`` (RMSNorm or no bias).

    A decoder adds ``(V + n_ctx) d`` embeddings, the final norm, and ``d V`` if untied.

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
    if not isinstance(config, BlockConfig):
        raise TypeError(
            f"config must be a BlockConfig or a DecoderConfig, got {type(config).__name__}"
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
