"""Transformer blocks and a decoder-only model as ``torch.nn.Module``s (Chapter 5; trained in Chapter 8).

Their one home; :mod:`course_lib.models` re-exports them for the later chapters.

The modules own their weights as ``torch.nn.Parameter`` under the names of
:func:`course_lib.block.params.layout` (``w_q``, ``norm1_gain``, ``blocks.0.w_1``, ...), and
their ``forward`` calls the functions of :mod:`course_lib.block.accelerated`: the maths lives in
one place, and it is tested against the NumPy reference with the same weights
(:meth:`TransformerBlock.numpy_parameters` gives them to :mod:`course_lib.block.reference`).

* :class:`BlockModule`: what every block module shares: its parameters, created from a
  layout and initialised, and their dict and NumPy views (the decoder block of
  :mod:`course_lib.block.encoder_decoder` is one too).
* :class:`TransformerBlock`: one block (post-LN, pre-LN or parallel; LayerNorm or RMSNorm;
  ReLU, GELU or swish; plain or gated feed-forward; with or without biases).
* :class:`DecoderOnlyModel`: notes ``002`` eq. (21): token and position embeddings, ``n_layers``
  blocks with causal self-attention, a final norm for pre-LN stacks, and the output projection
  tied to the token embedding.
* :func:`encoder_layer_parameters`: the configuration and weights of a
  ``torch.nn.TransformerEncoderLayer``, converted to this layout (for parity tests).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from course_lib.block.accelerated import block_forward, check_tokens, decoder_logits
from course_lib.block.config import BlockConfig, DecoderConfig
from course_lib.block.counting import count_parameters
from course_lib.block.params import check_params, layout, unflatten_parameters
from course_lib.checks import as_tensor, check_real, fmt_shape

__all__ = ["BlockModule", "DecoderOnlyModel", "TransformerBlock", "encoder_layer_parameters"]


def _check_dropout(p: Any) -> float:
    return check_real(p, "dropout", low=0.0, high=1.0, high_open=True)


def init_parameter_(name: str, t: torch.Tensor, generator: torch.Generator | None) -> None:
    """The scheme of :func:`course_lib.block.params.init_parameters`, in place: unit gains, zero
    biases, embeddings N(0, 1/d), Glorot-normal weights (cross-attention's as self-attention's)."""
    base = name.split(".")[-1].removeprefix("cross_")
    with torch.no_grad():
        if base.endswith("_gain"):
            t.fill_(1.0)
        elif base.endswith("_bias") or base.startswith("b_"):
            t.zero_()
        elif base.endswith("emb"):  # tok_emb, pos_emb, src_pos_emb, tgt_pos_emb
            t.normal_(0.0, 1.0 / math.sqrt(t.shape[-1]), generator=generator)
        else:
            fan_in, fan_out = (t.shape[1], t.shape[0] * t.shape[2]) if t.ndim == 3 else t.shape
            t.normal_(0.0, math.sqrt(2.0 / (fan_in + fan_out)), generator=generator)


def _copy_in(module: nn.Module, flat: Mapping[str, Any]) -> None:
    with torch.no_grad():
        for name, param in module.named_parameters():
            value = flat[name]
            if not isinstance(value, torch.Tensor):
                value = torch.as_tensor(np.asarray(value))
            param.copy_(value.to(param.dtype))


class BlockModule(nn.Module):
    """A block's parameters, one ``nn.Parameter`` per entry of ``layout(config)``, initialised.

    The base of :class:`TransformerBlock` (``layout`` is :func:`course_lib.block.params.layout`)
    and of the encoder-decoder's ``DecoderBlock`` (:func:`~course_lib.block.params.decoder_block_layout`).

    Args:
        config: the block's :class:`~course_lib.block.config.BlockConfig`.
        dropout: probability of zeroing an *activation* of each branch's output before it is
            added to the residual stream (0 by default; only in training mode).
        device, dtype: where and in which precision to create the parameters.
        generator: a ``torch.Generator`` for the initial weights (reproducible initialisation).
    """

    #: the parameters' names and shapes for a configuration (set by each subclass)
    layout: Any = staticmethod(layout)

    def __init__(
        self,
        config: BlockConfig,
        dropout: float = 0.0,
        *,
        device: Any = None,
        dtype: torch.dtype | None = None,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(config, BlockConfig):
            raise TypeError(f"config must be a BlockConfig, got {type(config).__name__}")
        self.config = config
        self.dropout = _check_dropout(dropout)
        for name, shape in self.layout(config):
            self.register_parameter(
                name, nn.Parameter(torch.empty(shape, device=device, dtype=dtype))
            )
        self.reset_parameters(generator)

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Glorot-normal weights, zero biases, unit gains."""
        for name, param in self.named_parameters():
            init_parameter_(name, param, generator)

    def parameter_dict(self) -> dict[str, nn.Parameter]:
        """The parameters by name, as :mod:`course_lib.block.accelerated` expects them."""
        return dict(self.named_parameters())

    def numpy_parameters(self) -> dict[str, np.ndarray]:
        """A float64 NumPy copy of the parameters, for :mod:`course_lib.block.reference`."""
        return {k: v.detach().cpu().double().numpy() for k, v in self.named_parameters()}

    def _drop(self) -> Any:
        if self.dropout > 0 and self.training:
            return lambda t: F.dropout(t, self.dropout, True)
        return None


class TransformerBlock(BlockModule):
    """One Transformer block with its own parameters; ``forward(x, mask=None)``.

    Takes the arguments of :class:`BlockModule`: ``TransformerBlock(config, dropout=0.0, *,
    device=None, dtype=None, generator=None)``.

    >>> blk = TransformerBlock(BlockConfig(d_model=8, n_heads=2, d_ff=32))
    >>> blk(torch.randn(2, 5, 8)).shape, sum(p.numel() for p in blk.parameters())
    (torch.Size([2, 5, 8]), 872)
    """

    @classmethod
    def from_parameters(cls, config: BlockConfig, params: Any, **kwargs: Any) -> TransformerBlock:
        """A block holding copies of ``params`` (a dict of arrays or tensors, or a flat vector)."""
        block = cls(config, **kwargs)
        if not isinstance(params, Mapping):
            params = unflatten_parameters(params, config)
        _copy_in(block, check_params(params, config, lambda v, name: v))
        return block

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x (..., L, d_model) -> (..., L, d_model); ``mask`` boolean, True = may attend."""
        x = as_tensor(x, "x", min_ndim=2)
        if x.shape[-1] != self.config.d_model:
            raise ValueError(
                f"x must have last dimension d_model = {self.config.d_model}, "
                f"got shape {fmt_shape(x.shape)}"
            )
        return block_forward(x, self.parameter_dict(), self.config, mask, self._drop())

    def extra_repr(self) -> str:
        c = self.config
        return (
            f"d_model={c.d_model}, n_heads={c.n_heads}, d_head={c.d_head}, d_ff={c.d_ff}, "
            f"norm_position={c.norm_position!r}, norm={c.norm!r}, activation={c.activation!r}, "
            f"gated={c.gated}, bias={c.bias}, dropout={self.dropout}"
        )


class DecoderOnlyModel(nn.Module):
    """A decoder-only Transformer (GPT), notes ``002`` eq. (21): tokens (..., L) -> logits (..., L, V).

    ``h_0 = U W_e + W_p``; ``n_layers`` :class:`TransformerBlock` s with causal self-attention;
    a final norm (pre-LN and parallel stacks); logits ``h_n W_e^T`` (tied) or ``h_n W_out``.

    >>> cfg = DecoderConfig(vocab_size=11, context_length=8, n_layers=2,
    ...                     block=BlockConfig(d_model=8, n_heads=2, d_ff=32, norm_position="pre"))
    >>> model = DecoderOnlyModel(cfg, generator=torch.Generator().manual_seed(0))
    >>> model(torch.tensor([[1, 2, 3]])).shape
    torch.Size([1, 3, 11])
    >>> model.count_parameters() == count_parameters(cfg) == sum(p.numel() for p in model.parameters())
    True
    """

    def __init__(
        self,
        config: DecoderConfig,
        dropout: float = 0.0,
        *,
        device: Any = None,
        dtype: torch.dtype | None = None,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(config, DecoderConfig):
            raise TypeError(f"config must be a DecoderConfig, got {type(config).__name__}")
        self.config = config
        self.dropout = _check_dropout(dropout)
        c, d = config, config.d_model
        kw = {"device": device, "dtype": dtype}
        self.tok_emb = nn.Parameter(torch.empty(c.vocab_size, d, **kw))
        self.pos_emb = nn.Parameter(torch.empty(c.context_length, d, **kw))
        self.blocks = nn.ModuleList(
            TransformerBlock(c.block, dropout, device=device, dtype=dtype, generator=generator)
            for _ in range(c.n_layers)
        )
        if c.final_norm:
            self.final_norm_gain = nn.Parameter(torch.empty(d, **kw))
            if c.block.norm_has_bias:
                self.final_norm_bias = nn.Parameter(torch.empty(d, **kw))
        if not c.tie_embeddings:
            self.w_out = nn.Parameter(torch.empty(d, c.vocab_size, **kw))
        for name, param in self.named_parameters():
            if not name.startswith("blocks."):
                init_parameter_(name, param, generator)

    def parameter_dict(self) -> dict[str, Any]:
        """Parameters in the nested form of :mod:`course_lib.block.accelerated`."""
        p: dict[str, Any] = {
            k: v for k, v in self.named_parameters(recurse=False) if not k.startswith("blocks")
        }
        p["blocks"] = [b.parameter_dict() for b in self.blocks]
        return p

    def numpy_parameters(self) -> dict[str, Any]:
        """A float64 NumPy copy, nested, for :func:`course_lib.block.reference.decoder_forward`."""
        p = {k: v.detach().cpu().double().numpy() for k, v in self.named_parameters(recurse=False)}
        p["blocks"] = [b.numpy_parameters() for b in self.blocks]
        return p

    def count_parameters(self) -> int:
        """``sum(p.numel())`` over the module's tensors (tied weights counted once)."""
        return sum(p.numel() for p in self.parameters())

    @classmethod
    def from_parameters(cls, config: DecoderConfig, params: Any, **kwargs: Any) -> DecoderOnlyModel:
        """A model holding copies of ``params`` (a nested dict or a flat vector)."""
        model = cls(config, **kwargs)
        if not isinstance(params, Mapping):
            params = unflatten_parameters(params, config)
        p = check_params(params, config, lambda v, name: v)
        flat = {k: v for k, v in p.items() if k != "blocks"}
        for r, blk in enumerate(p["blocks"]):
            flat.update({f"blocks.{r}.{k}": v for k, v in blk.items()})
        _copy_in(model, flat)
        return model

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Integer tokens (..., L), L <= context_length -> logits (..., L, vocab_size)."""
        t = check_tokens(tokens, self.config, self.tok_emb.device)
        drop = None
        if self.dropout > 0 and self.training:
            drop = lambda z: F.dropout(z, self.dropout, True)  # noqa: E731
        return decoder_logits(t, self.parameter_dict(), self.config, drop)

    def loss(self, tokens: torch.Tensor, targets: torch.Tensor, ignore_index: int = -100):
        """Mean cross-entropy of the next-token predictions: ``-log P(targets | tokens)``.

        ``targets`` has the shape of ``tokens``; positions equal to ``ignore_index`` are skipped.
        """
        logits = self(tokens)  # (..., L, V)
        if not isinstance(targets, torch.Tensor) or targets.shape != tokens.shape:
            raise ValueError(
                f"targets must be a tensor with the shape of tokens {fmt_shape(tokens.shape)}, "
                f"got {fmt_shape(getattr(targets, 'shape', ()))}"
            )
        return F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=ignore_index
        )

    def extra_repr(self) -> str:
        c = self.config
        return (
            f"vocab_size={c.vocab_size}, context_length={c.context_length}, "
            f"n_layers={c.n_layers}, tie_embeddings={c.tie_embeddings}, "
            f"final_norm={c.final_norm}, parameters={count_parameters(c):,}"
        )


def encoder_layer_parameters(
    layer: nn.TransformerEncoderLayer,
) -> tuple[BlockConfig, dict[str, torch.Tensor]]:
    """The configuration and weights of a ``torch.nn.TransformerEncoderLayer`` in our layout.

    PyTorch stores linear weights as (out, in) and the three attention projections fused in one
    ``in_proj_weight`` of shape (3d, d); here they become row-convention matrices, the attention
    ones split per head: ``w_q[i] = in_proj_weight[:d].T[:, i*d_k:(i+1)*d_k]``. ``norm_first``
    gives ``pre``, otherwise ``post``. Returns detached copies.

    >>> layer = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    >>> cfg, p = encoder_layer_parameters(layer)
    >>> cfg.norm_position, p["w_q"].shape, p["w_1"].shape
    ('post', torch.Size([2, 8, 4]), torch.Size([8, 16]))
    """
    if not isinstance(layer, nn.TransformerEncoderLayer):
        raise TypeError(
            f"layer must be a torch.nn.TransformerEncoderLayer, got {type(layer).__name__}"
        )
    attn = layer.self_attn
    if not attn._qkv_same_embed_dim or not layer.self_attn.batch_first:
        raise ValueError("only batch_first layers with equal q, k, v widths are supported")
    d, h = attn.embed_dim, attn.num_heads
    dk = d // h
    act = {1: "relu", 2: "gelu"}.get(layer.activation_relu_or_gelu)
    if act is None:
        raise ValueError("only ReLU and GELU TransformerEncoderLayers are supported")
    bias = attn.in_proj_bias is not None
    config = BlockConfig(
        d_model=d,
        n_heads=h,
        d_ff=layer.linear1.out_features,
        norm_position="pre" if layer.norm_first else "post",
        activation=act,
        bias=bias,
        eps=layer.norm1.eps,
    )

    def heads(w: torch.Tensor) -> torch.Tensor:  # (d_out, d_in) -> (h, d_in, d_k)
        return w.t().reshape(d, h, dk).permute(1, 0, 2).contiguous()

    W = attn.in_proj_weight.detach()
    p = {
        "norm1_gain": layer.norm1.weight,
        "w_q": heads(W[:d]),
        "w_k": heads(W[d : 2 * d]),
        "w_v": heads(W[2 * d :]),
        "w_o": attn.out_proj.weight.t(),
        "norm2_gain": layer.norm2.weight,
        "w_1": layer.linear1.weight.t(),
        "w_2": layer.linear2.weight.t(),
    }
    if bias:
        B = attn.in_proj_bias.detach()
        p.update(
            norm1_bias=layer.norm1.bias,
            norm2_bias=layer.norm2.bias,
            b_q=B[:d].reshape(h, dk),
            b_k=B[d : 2 * d].reshape(h, dk),
            b_v=B[2 * d :].reshape(h, dk),
            b_o=attn.out_proj.bias,
            b_1=layer.linear1.bias,
            b_2=layer.linear2.bias,
        )
    p = {k: v.detach().clone().contiguous() for k, v in p.items()}
    return config, check_params(p, config, lambda v, name: v)
