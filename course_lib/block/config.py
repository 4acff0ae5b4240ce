"""The configuration of a Transformer block and of a decoder-only model (Chapter 5).

* :class:`BlockConfig` describes one block: widths, where the norms sit (``post``, ``pre`` or
  ``parallel``), which norm (``layer`` or ``rms``), the feed-forward activation, whether it is
  gated (GLU) and whether the block has biases.
* :class:`DecoderConfig` describes a decoder-only model (Strabel's notes, eq. 21): token and
  position embeddings, ``n_layers`` blocks, an optional final norm and a (tied) output projection.
* :class:`EncoderDecoderConfig` describes the encoder-decoder stack of the original Transformer
  (Strabel's notes section 3, Figure 3; the body of ``torch.nn.Transformer``): an encoder of
  ``n_encoder_layers`` blocks and a decoder of ``n_decoder_layers`` blocks with cross-attention.

>>> BlockConfig(d_model=8, n_heads=2, d_ff=32).d_head
4
"""

from __future__ import annotations

from dataclasses import dataclass, field

from course_lib.checks import check_bool, check_choice, check_int, check_real

__all__ = [
    "ACTIVATIONS",
    "NORMS",
    "NORM_POSITIONS",
    "BlockConfig",
    "DecoderConfig",
    "EncoderDecoderConfig",
]

NORM_POSITIONS = ("post", "pre", "parallel")
NORMS = ("layer", "rms")
ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "swish")


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
        check_bool(self.gated, "gated")
        check_bool(self.bias, "bias")
        check_real(self.eps, "eps", low=0.0, high_open=True)

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
    >>> from course_lib.block.counting import count_parameters
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
        check_bool(self.tie_embeddings, "tie_embeddings")
        if self.final_norm is None:
            object.__setattr__(self, "final_norm", self.block.norm_position != "post")
        check_bool(self.final_norm, "final_norm")

    @property
    def d_model(self) -> int:
        return self.block.d_model


@dataclass(frozen=True)
class EncoderDecoderConfig:
    """The encoder-decoder Transformer of Vaswani et al. (Strabel's notes section 3, Figure 3).

    The encoder is ``n_encoder_layers`` blocks of self-attention and feed-forward; each of the
    ``n_decoder_layers`` decoder blocks has three sub-layers: masked self-attention,
    cross-attention (queries from the decoder, keys and values from the encoder's output, the
    *memory*) and feed-forward. Every block shares ``block`` (post-LN or pre-LN; a parallel block
    has no place for the cross-attention). This is the body of ``torch.nn.Transformer``:
    embeddings and the output projection are the model's (:mod:`course_lib.block.encoder_decoder`).

    Attributes:
        n_encoder_layers, n_decoder_layers: the depths of the two stacks.
        block: the configuration of every block (widths, norm position, norm, activation, ...).
        final_norm: a norm after each stack (the encoder's output and the decoder's output);
            default ``True`` for pre-LN stacks, ``False`` for post-LN ones.
            ``torch.nn.Transformer`` always has both.

    >>> cfg = EncoderDecoderConfig(2, 1, BlockConfig(d_model=8, n_heads=2, d_ff=16, norm_position="pre"))
    >>> cfg.final_norm, cfg.d_model
    (True, 8)
    >>> EncoderDecoderConfig(1, 1, BlockConfig(8, 2, 16, norm_position="parallel"))
    Traceback (most recent call last):
    ...
    ValueError: block.norm_position must be 'post' or 'pre' in an encoder-decoder, got 'parallel'
    """

    n_encoder_layers: int
    n_decoder_layers: int
    block: BlockConfig
    final_norm: bool | None = field(default=None)

    def __post_init__(self) -> None:
        check_int(self.n_encoder_layers, "n_encoder_layers", low=1)
        check_int(self.n_decoder_layers, "n_decoder_layers", low=1)
        if not isinstance(self.block, BlockConfig):
            raise TypeError(f"block must be a BlockConfig, got {type(self.block).__name__}")
        if self.block.norm_position not in ("post", "pre"):
            raise ValueError(
                "block.norm_position must be 'post' or 'pre' in an encoder-decoder, "
                f"got {self.block.norm_position!r}"
            )
        if self.final_norm is None:
            object.__setattr__(self, "final_norm", self.block.norm_position == "pre")
        check_bool(self.final_norm, "final_norm")

    @property
    def d_model(self) -> int:
        return self.block.d_model
