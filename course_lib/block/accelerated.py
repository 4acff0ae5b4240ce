"""The Transformer block, in PyTorch (Chapter 5).

Same names, signatures and equations as :mod:`course_lib.block.reference` (read it for the
maths), but batched over leading dimensions, on any device, in the inputs' dtype, and
differentiable. The norms and activations call PyTorch's fused kernels
(``torch.nn.functional.layer_norm``, ``rms_norm``, ``gelu``, ``silu``); the linear layers call
``torch.nn.functional.linear``, which adds the bias inside the matrix product; the attention is
Chapter 4's :func:`course_lib.attention.accelerated.multi_head_attention`, or, with
``block_forward(..., fused=True)`` (what chapter 9's BERT runs), :func:`fused_self_attention`: one
(d, 3 h d_k) product for the queries, keys and values and PyTorch's fused
``scaled_dot_product_attention`` kernel.

The modules of :mod:`course_lib.models` (``TransformerBlock``, ``DecoderOnlyModel``) and of
:mod:`course_lib.block.encoder_decoder` hold their weights as ``torch.nn.Parameter`` and call the
same code (:func:`block_forward`, :func:`decoder_logits`, :func:`decoder_block_forward`,
:func:`encoder_decoder_forward`), so what is tested here is what they run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from course_lib.attention.accelerated import causal_mask, multi_head_attention
from course_lib.block.config import ACTIVATIONS, BlockConfig, DecoderConfig, EncoderDecoderConfig
from course_lib.block.counting import count_parameters
from course_lib.block.params import (
    check_decoder_block_params,
    check_params,
    unflatten_decoder_block,
    unflatten_parameters,
)
from course_lib.checks import (
    as_tensor,
    check_choice,
    check_real,
    fmt_shape,
    same_device_and_dtype,
    values_are_free_to_read,
)

__all__ = [
    "activation",
    "decoder_block",
    "decoder_forward",
    "encoder_decoder_stack",
    "feed_forward",
    "glu_feed_forward",
    "layer_norm",
    "rms_norm",
    "transformer_block",
    "transformer_stack",
]

Dropout = Callable[[torch.Tensor], torch.Tensor]


# ------------------------------------------------------------------------------ input checks
def _vector(v: Any, name: str, d: int, what: str, like: torch.Tensor) -> torch.Tensor | None:
    if v is None:
        return None
    v = as_tensor(v, name, ndim=1)
    same_device_and_dtype(x=like, **{name: v})
    if tuple(v.shape) != (d,):
        raise ValueError(f"{name} must have shape ({d},) to match {what}, got {fmt_shape(v.shape)}")
    return v


def _eps(eps: Any) -> float:
    return check_real(eps, "eps", low=0.0, high_open=True)


def _weight(w: Any, name: str, rows: int, rows_what: str, like: torch.Tensor) -> torch.Tensor:
    w = as_tensor(w, name, ndim=2)
    same_device_and_dtype(x=like, **{name: w})
    if w.shape[0] != rows:
        raise ValueError(
            f"{name} must have {rows} rows to match {rows_what}, got shape {fmt_shape(w.shape)}"
        )
    return w


def _linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    """``x @ w + b`` for w in the row convention (d_in, d_out); one fused call."""
    return F.linear(x, w.t(), b)


# ----------------------------------------------------------------------------------- norms
def layer_norm(x: Any, gain: Any = None, bias: Any = None, eps: float = 1e-5) -> torch.Tensor:
    """LayerNorm over the last dimension: ``beta + gamma * (z - mu) / sqrt(var + eps)``.

    Calls ``torch.nn.functional.layer_norm`` (the biased variance, as in the reference).

    >>> layer_norm(torch.tensor([[1.0, 2.0, 3.0]]), eps=0.0)
    tensor([[-1.2247,  0.0000,  1.2247]])
    """
    x = as_tensor(x, "x", min_ndim=1)
    d = x.shape[-1]
    what = f"the last dimension of x, shape {fmt_shape(x.shape)}"
    gain = _vector(gain, "gain", d, what, x)
    bias = _vector(bias, "bias", d, what, x)
    return F.layer_norm(x, (d,), gain, bias, _eps(eps))


def rms_norm(x: Any, gain: Any = None, eps: float = 1e-6) -> torch.Tensor:
    """RMSNorm over the last dimension: ``gamma * z / sqrt(mean(z^2) + eps)``.

    >>> rms_norm(torch.tensor([[3.0, 4.0]]), eps=0.0)
    tensor([[0.8485, 1.1314]])
    """
    x = as_tensor(x, "x", min_ndim=1)
    d = x.shape[-1]
    gain = _vector(gain, "gain", d, f"the last dimension of x, shape {fmt_shape(x.shape)}", x)
    return F.rms_norm(x, (d,), gain, _eps(eps))


# ------------------------------------------------------------------------ the feed-forward
_PHI: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
    "swish": F.silu,
}


def activation(x: Any, name: str = "relu") -> torch.Tensor:
    """The nonlinearity ``phi``: ``relu``, ``gelu``, ``gelu_tanh`` or ``swish`` (``x sigma(x)``).

    >>> activation(torch.tensor([-1.0, 0.0, 2.0]), "swish")
    tensor([-0.2689,  0.0000,  1.7616])
    """
    x = as_tensor(x, "x", allow_empty=True)
    return _PHI[check_choice(name, "activation", ACTIVATIONS)](x)


def feed_forward(
    x: Any, w1: Any, w2: Any, b1: Any = None, b2: Any = None, activation: str = "relu"
) -> torch.Tensor:
    """The position-wise feed-forward network ``phi(x W1 + b1) W2 + b2``; x (..., d).

    >>> feed_forward(torch.tensor([[1.0, -2.0]]), torch.eye(2), torch.ones(2, 1))
    tensor([[1.]])
    """
    check_choice(activation, "activation", ACTIVATIONS)
    x = as_tensor(x, "x", min_ndim=1)
    d = x.shape[-1]
    w1 = _weight(w1, "w1", d, f"the last dimension of x, shape {fmt_shape(x.shape)}", x)
    d_ff = w1.shape[1]
    w2 = _weight(w2, "w2", d_ff, f"the columns of w1, shape {fmt_shape(w1.shape)} (d_ff)", x)
    b1 = _vector(b1, "b1", d_ff, f"the columns of w1 (d_ff = {d_ff})", x)
    b2 = _vector(b2, "b2", w2.shape[1], f"the columns of w2 (d_out = {w2.shape[1]})", x)
    return _ffn(x, w1, w2, b1, b2, activation)


def _ffn(x, w1, w2, b1, b2, name: str) -> torch.Tensor:
    return _linear(_PHI[name](_linear(x, w1, b1)), w2, b2)  # (..., d_ff) -> (..., d_out)


def glu_feed_forward(
    x: Any,
    w1: Any,
    w2: Any,
    w3: Any,
    b1: Any = None,
    b2: Any = None,
    b3: Any = None,
    activation: str = "swish",
) -> torch.Tensor:
    """The gated feed-forward ``(phi(x W1 + b1) * (x W2 + b2)) W3 + b3`` (SwiGLU with swish).

    >>> glu_feed_forward(torch.ones(1, 1), torch.ones(1, 1), 2 * torch.ones(1, 1),
    ...                  torch.ones(1, 1), activation="relu")
    tensor([[2.]])
    """
    check_choice(activation, "activation", ACTIVATIONS)
    x = as_tensor(x, "x", min_ndim=1)
    d = x.shape[-1]
    what = f"the last dimension of x, shape {fmt_shape(x.shape)}"
    w1 = _weight(w1, "w1", d, what, x)
    w2 = _weight(w2, "w2", d, what, x)
    d_ff = w1.shape[1]
    if w2.shape != w1.shape:
        raise ValueError(
            f"w1 and w2 must have the same shape (d, d_ff), got {fmt_shape(w1.shape)} and "
            f"{fmt_shape(w2.shape)}"
        )
    w3 = _weight(w3, "w3", d_ff, f"the columns of w1, shape {fmt_shape(w1.shape)} (d_ff)", x)
    b1 = _vector(b1, "b1", d_ff, f"the columns of w1 (d_ff = {d_ff})", x)
    b2 = _vector(b2, "b2", d_ff, f"the columns of w2 (d_ff = {d_ff})", x)
    b3 = _vector(b3, "b3", w3.shape[1], f"the columns of w3 (d_out = {w3.shape[1]})", x)
    return _glu(x, w1, w2, w3, b1, b2, b3, activation)


def _glu(x, w1, w2, w3, b1, b2, b3, name: str) -> torch.Tensor:
    gate = _PHI[name](_linear(x, w1, b1))  # (..., d_ff)
    return _linear(gate * _linear(x, w2, b2), w3, b3)  # (..., d_out)


# ------------------------------------------------------------------- fused self-attention
def fused_qkv(p: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The three projections side by side: W (d, 3 h d_k), columns ``[Q heads | K heads | V heads]``.

    Built from the stored per-head matrices ``w_q``, ``w_k``, ``w_v`` (h, d, d_k) on every call,
    so the parameters (and the checkpoints, and the conversions to Hugging Face) keep their
    layout; the copy is small next to the product it feeds. The bias (3 h d_k,) is None when the
    block has none.

    >>> w = torch.arange(8.0).reshape(2, 2, 2)  # h = 2 heads, d = 2, d_k = 2
    >>> W, b = fused_qkv({"w_q": w, "w_k": 10 * w, "w_v": 100 * w})
    >>> W.shape, b, W[0, :4].tolist()  # row 0: head 0's then head 1's first row of w_q
    (torch.Size([2, 12]), None, [0.0, 1.0, 4.0, 5.0])
    """
    w = torch.cat([p[n].permute(1, 0, 2).flatten(1) for n in ("w_q", "w_k", "w_v")], 1)
    if p.get("b_q") is None:
        return w, None  # (d, 3 h d_k)
    return w, torch.cat([p["b_q"].flatten(), p["b_k"].flatten(), p["b_v"].flatten()])


def fused_self_attention(
    z: torch.Tensor, p: Mapping[str, torch.Tensor], mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Multi-head self-attention on checked inputs, fast: z (..., L, d) -> (..., L, d_o).

    One product ``z @ W_qkv`` (:func:`fused_qkv`) gives every head's query, key and value; the
    heads go through ``torch.nn.functional.scaled_dot_product_attention`` (a fused kernel that
    never stores the (L, L) weights); ``mask`` is boolean, True where a query may attend,
    broadcastable to (..., h, L, L). The same numbers as
    :func:`course_lib.attention.accelerated.multi_head_attention` (z, z, z, ...), to rounding.

    >>> from course_lib.attention.accelerated import multi_head_attention
    >>> g = torch.Generator().manual_seed(0)
    >>> p = {n: torch.randn(2, 4, 2, generator=g) for n in ("w_q", "w_k", "w_v")}
    >>> p["w_o"] = torch.randn(4, 4, generator=g)
    >>> z = torch.randn(3, 5, 4, generator=g)
    >>> slow = multi_head_attention(z, z, z, p["w_q"], p["w_k"], p["w_v"], p["w_o"])
    >>> torch.allclose(fused_self_attention(z, p), slow, atol=1e-6)
    True
    """
    h, d_k = p["w_q"].shape[0], p["w_q"].shape[2]  # a block's heads: d_v = d_k = d_head
    w, b = fused_qkv(p)
    qkv = _linear(z, w, b).split(h * d_k, dim=-1)  # 3 x (..., L, h*d_k): Q, K, V
    q, k, v = (t.unflatten(-1, (h, d_k)).transpose(-3, -2) for t in qkv)  # each (..., h, L, d_k)
    a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (..., h, L, d_k)
    return _linear(a.transpose(-3, -2).flatten(-2), p["w_o"], p.get("b_o"))  # (..., L, d_o)


# ------------------------------------------------------------------------------- the block
def _norm(z: torch.Tensor, p: Mapping[str, torch.Tensor], prefix: str, c: BlockConfig):
    if c.norm == "rms":
        return F.rms_norm(z, (c.d_model,), p[f"{prefix}_gain"], c.eps)
    return F.layer_norm(z, (c.d_model,), p[f"{prefix}_gain"], p.get(f"{prefix}_bias"), c.eps)


def block_forward(
    x: torch.Tensor,
    p: Mapping[str, torch.Tensor],
    c: BlockConfig,
    mask: torch.Tensor | None = None,
    dropout: Dropout | None = None,
    fused: bool = False,
) -> torch.Tensor:
    """The block's computation on checked inputs (used by :func:`transformer_block` and the modules).

    ``dropout``, if given, is applied to the output of each branch before it joins the residual
    stream (GPT-2's residual dropout); the functions of this module never pass one. ``fused``
    computes the attention with :func:`fused_self_attention` (one QKV product and PyTorch's
    fused kernel) instead of chapter 4's explicit ``multi_head_attention``: the same numbers, to
    rounding, faster; ``mask`` is then boolean and broadcasts to (..., h, L, L).
    """

    def attn(z: torch.Tensor) -> torch.Tensor:
        if fused:
            out = fused_self_attention(z, p, mask)
            return out if dropout is None else dropout(out)
        out = multi_head_attention(
            z, z, z, p["w_q"], p["w_k"], p["w_v"], p["w_o"], mask=mask,
            b_q=p.get("b_q"), b_k=p.get("b_k"), b_v=p.get("b_v"), b_o=p.get("b_o"),
        )  # fmt: skip
        return out if dropout is None else dropout(out)

    def ffn(z: torch.Tensor) -> torch.Tensor:
        if c.gated:
            out = _glu(
                z, p["w_1"], p["w_2"], p["w_3"], p.get("b_1"), p.get("b_2"), p.get("b_3"),
                c.activation,
            )  # fmt: skip
        else:
            out = _ffn(z, p["w_1"], p["w_2"], p.get("b_1"), p.get("b_2"), c.activation)
        return out if dropout is None else dropout(out)

    if c.norm_position == "post":
        x2 = _norm(x + attn(x), p, "norm1", c)  # (..., L, d)
        return _norm(x2 + ffn(x2), p, "norm2", c)
    if c.norm_position == "pre":
        x1 = x + attn(_norm(x, p, "norm1", c))  # (..., L, d)
        return x1 + ffn(_norm(x1, p, "norm2", c))
    u = _norm(x, p, "norm1", c)  # parallel: one norm feeds both branches
    return x + attn(u) + ffn(u)


def _checked(params: Any, config: Any, cls: type, like: torch.Tensor | None) -> dict[str, Any]:
    if not isinstance(config, cls):
        raise TypeError(f"config must be a {cls.__name__}, got {type(config).__name__}")
    if not isinstance(params, Mapping):
        params = unflatten_parameters(as_tensor(params, "params", ndim=1), config)
    p = check_params(params, config, lambda v, name: as_tensor(v, name))
    flat = {}
    for k, v in p.items():
        if isinstance(v, list):  # the blocks of a decoder, an encoder or a decoder stack
            for r, blk in enumerate(v):
                flat.update({f"{k}.{r}.{n}": t for n, t in blk.items()})
        else:
            flat[k] = v
    ref = like if like is not None else next(iter(flat.values()))
    same_device_and_dtype(x=ref, **flat)
    return p


def _check_x(x: Any, config: BlockConfig) -> torch.Tensor:
    x = as_tensor(x, "x", min_ndim=2)
    if x.shape[-1] != config.d_model:
        raise ValueError(
            f"x must have last dimension d_model = {config.d_model}, got shape {fmt_shape(x.shape)}"
        )
    return x


def transformer_block(x: Any, params: Any, config: BlockConfig, mask: Any = None) -> torch.Tensor:
    """One block (``post``, ``pre`` or ``parallel``), x (..., L, d_model) -> (..., L, d_model).

    ``params`` is a dict of named tensors (:func:`course_lib.block.params.layout`) or one flat
    vector of length ``count_parameters(config)``; ``mask`` a boolean (L, L) tensor, True where a
    query may attend.

    >>> from course_lib.block.config import BlockConfig
    >>> cfg = BlockConfig(d_model=4, n_heads=2, d_ff=8, norm_position="pre")
    >>> theta = torch.zeros(count_parameters(cfg))
    >>> transformer_block(torch.ones(2, 3, 4), theta, cfg).shape  # zero weights: identity
    torch.Size([2, 3, 4])
    """
    if not isinstance(config, BlockConfig):
        raise TypeError(f"config must be a BlockConfig, got {type(config).__name__}")
    x = _check_x(x, config)
    p = _checked(params, config, BlockConfig, x)
    return block_forward(x, p, config, mask)


def transformer_stack(x: Any, params: Any, config: BlockConfig, mask: Any = None) -> torch.Tensor:
    """R blocks in sequence; ``params`` a sequence of R dicts or an (R, P) tensor of flat vectors.

    >>> from course_lib.block.config import BlockConfig
    >>> cfg = BlockConfig(d_model=4, n_heads=1, d_ff=4)
    >>> transformer_stack(torch.randn(3, 4), torch.randn(2, count_parameters(cfg)), cfg).shape
    torch.Size([3, 4])
    """
    if not isinstance(config, BlockConfig):
        raise TypeError(f"config must be a BlockConfig, got {type(config).__name__}")
    if isinstance(params, Mapping):
        raise TypeError("params must be a sequence of per-block dicts or an (R, P) tensor")
    if isinstance(params, torch.Tensor) or (
        isinstance(params, Sequence) and params and not isinstance(params[0], Mapping)
    ):
        arr = as_tensor(params, "params", ndim=2)
        n = count_parameters(config)
        if arr.shape[1] != n:
            raise ValueError(
                f"params must have shape (R, {n}) (one flat vector per block), "
                f"got {fmt_shape(arr.shape)}"
            )
        params = list(arr.unbind(0))
    if len(params) == 0:
        raise ValueError("params must hold at least one block")
    z = x
    for p in params:
        z = transformer_block(z, p, config, mask)
    return z


# ---------------------------------------------------------------------------- the decoder
def check_tokens(tokens: Any, config: DecoderConfig, device: torch.device) -> torch.Tensor:
    t = tokens if isinstance(tokens, torch.Tensor) else torch.as_tensor(tokens)
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        raise TypeError(f"tokens must be integers (token ids), got a tensor of dtype {t.dtype}")
    if t.ndim < 1 or 0 in t.shape:
        raise ValueError(f"tokens must have shape (..., L) with L >= 1, got {fmt_shape(t.shape)}")
    if t.shape[-1] > config.context_length:
        raise ValueError(
            f"the sequence has {t.shape[-1]} tokens but the model has only "
            f"context_length = {config.context_length} positions"
        )
    if t.device != device:
        raise ValueError(f"tokens are on {t.device} but the parameters are on {device}")
    _check_token_range(t, config.vocab_size)
    return t.long()


def _check_token_range(t: torch.Tensor, vocab_size: int) -> None:
    """Token ids in [0, vocab_size), checked without forcing a host synchronisation.

    The readable check runs where reading values is free
    (:func:`course_lib.checks.values_are_free_to_read`); on a GPU the check is queued on the
    device (``torch._assert_async``); a compiled model leaves it to the embedding lookup.
    """
    if not values_are_free_to_read(t):
        if t.device.type == "cuda" and not torch.compiler.is_compiling():
            torch._assert_async(((t >= 0) & (t < vocab_size)).all(), "token id out of range")
        return
    lo, hi = int(t.min()), int(t.max())
    if lo < 0 or hi >= vocab_size:
        raise ValueError(
            f"token ids must lie in [0, {vocab_size - 1}] (vocab_size = {vocab_size}), "
            f"got values from {lo} to {hi}"
        )


def decoder_logits(
    tokens: torch.Tensor,
    p: Mapping[str, Any],
    c: DecoderConfig,
    dropout: Dropout | None = None,
) -> torch.Tensor:
    """Eq. (21) on checked inputs: embeddings, causal blocks, final norm, tied projection."""
    L = tokens.shape[-1]
    h = F.embedding(tokens, p["tok_emb"]) + p["pos_emb"][:L]  # (..., L, d): U W_e + W_p
    if dropout is not None:
        h = dropout(h)
    mask = causal_mask(L).to(h.device)  # (L, L)
    for blk in p["blocks"]:
        h = block_forward(h, blk, c.block, mask, dropout)  # (..., L, d)
    if c.final_norm:
        h = _norm(h, p, "final_norm", c.block)
    w_out = p["tok_emb"] if c.tie_embeddings else p["w_out"].t()  # (V, d)
    return F.linear(h, w_out)  # (..., L, V)


def decoder_forward(tokens: Any, params: Any, config: DecoderConfig) -> torch.Tensor:
    """The decoder-only model of notes ``002`` eq. (21); returns logits (..., L, V).

    ``tokens`` is an integer tensor (..., L); ``params`` a dict (``tok_emb``, ``pos_emb``,
    ``blocks``, ...) or a flat vector of length ``count_parameters(config)``.

    >>> from course_lib.block.config import BlockConfig, DecoderConfig
    >>> from course_lib.block.counting import count_parameters
    >>> cfg = DecoderConfig(vocab_size=5, context_length=4, n_layers=1,
    ...                     block=BlockConfig(d_model=4, n_heads=2, d_ff=8))
    >>> decoder_forward(torch.tensor([[0, 3, 1]]), torch.randn(count_parameters(cfg)), cfg).shape
    torch.Size([1, 3, 5])
    """
    p = _checked(params, config, DecoderConfig, None)
    t = check_tokens(tokens, config, p["tok_emb"].device)
    return decoder_logits(t, p, config)


# -------------------------------------------------------------------- the encoder-decoder
def decoder_block_forward(
    y: torch.Tensor,
    memory: torch.Tensor,
    p: Mapping[str, torch.Tensor],
    c: BlockConfig,
    self_mask: torch.Tensor | None = None,
    cross_mask: torch.Tensor | None = None,
    dropout: Dropout | None = None,
    record: list | None = None,
) -> torch.Tensor:
    """A decoder block on checked inputs (used by :func:`decoder_block` and the modules).

    ``record``, if a list, receives the cross-attention's query input (the decoder side, after
    its norm in pre-LN), so that a caller can recompute the cross-attention weights.
    """

    def drop(t: torch.Tensor) -> torch.Tensor:
        return t if dropout is None else dropout(t)

    def self_attn(z: torch.Tensor) -> torch.Tensor:
        return drop(multi_head_attention(
            z, z, z, p["w_q"], p["w_k"], p["w_v"], p["w_o"], mask=self_mask,
            b_q=p.get("b_q"), b_k=p.get("b_k"), b_v=p.get("b_v"), b_o=p.get("b_o"),
        ))  # fmt: skip

    def cross(z: torch.Tensor) -> torch.Tensor:
        if record is not None:
            record.append(z)
        return drop(multi_head_attention(
            z, memory, memory, p["cross_w_q"], p["cross_w_k"], p["cross_w_v"], p["cross_w_o"],
            mask=cross_mask, b_q=p.get("cross_b_q"), b_k=p.get("cross_b_k"),
            b_v=p.get("cross_b_v"), b_o=p.get("cross_b_o"),
        ))  # fmt: skip

    def ffn(z: torch.Tensor) -> torch.Tensor:
        if c.gated:
            return drop(_glu(
                z, p["w_1"], p["w_2"], p["w_3"], p.get("b_1"), p.get("b_2"), p.get("b_3"),
                c.activation,
            ))  # fmt: skip
        return drop(_ffn(z, p["w_1"], p["w_2"], p.get("b_1"), p.get("b_2"), c.activation))

    if c.norm_position == "post":
        y1 = _norm(y + self_attn(y), p, "norm1", c)  # (..., L_t, d)
        y2 = _norm(y1 + cross(y1), p, "norm2", c)  # (..., L_t, d)
        return _norm(y2 + ffn(y2), p, "norm3", c)
    y1 = y + self_attn(_norm(y, p, "norm1", c))  # (..., L_t, d)
    y2 = y1 + cross(_norm(y1, p, "norm2", c))
    return y2 + ffn(_norm(y2, p, "norm3", c))


def encoder_decoder_forward(
    x: torch.Tensor,
    y: torch.Tensor,
    p: Mapping[str, Any],
    c: EncoderDecoderConfig,
    src_mask: torch.Tensor | None = None,
    tgt_mask: torch.Tensor | None = None,
    memory_mask: torch.Tensor | None = None,
    dropout: Dropout | None = None,
    record: list | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The encoder and decoder stacks on checked inputs; returns (memory, decoder output)."""
    memory = x
    for blk in p["encoder"]:
        memory = block_forward(memory, blk, c.block, src_mask, dropout)  # (..., L_s, d)
    if c.final_norm:
        memory = _norm(memory, p, "encoder_norm", c.block)
    out = y
    for blk in p["decoder"]:
        out = decoder_block_forward(
            out, memory, blk, c.block, tgt_mask, memory_mask, dropout, record
        )  # (..., L_t, d)
    if c.final_norm:
        out = _norm(out, p, "decoder_norm", c.block)
    return memory, out


def decoder_block(
    y: Any,
    memory: Any,
    params: Any,
    config: BlockConfig,
    self_mask: Any = None,
    cross_mask: Any = None,
) -> torch.Tensor:
    """A decoder block: masked self-attention, cross-attention to ``memory``, feed-forward.

    y (..., L_t, d_model), memory (..., L_s, d_model) -> (..., L_t, d_model). ``params`` is a
    dict (:func:`course_lib.block.params.decoder_block_layout`) or a flat vector; masks are
    boolean, True where a query may attend.

    >>> cfg = BlockConfig(d_model=4, n_heads=2, d_ff=8, norm_position="pre")
    >>> from course_lib.block.params import init_decoder_block
    >>> n = sum(v.size for v in init_decoder_block(cfg).values())
    >>> decoder_block(torch.ones(2, 3, 4), torch.randn(2, 5, 4), torch.zeros(n), cfg).shape
    torch.Size([2, 3, 4])
    """
    if not isinstance(config, BlockConfig):
        raise TypeError(f"config must be a BlockConfig, got {type(config).__name__}")
    y = as_tensor(y, "y", min_ndim=2)
    if y.shape[-1] != config.d_model:
        raise ValueError(
            f"y must have last dimension d_model = {config.d_model}, got shape {fmt_shape(y.shape)}"
        )
    memory = as_tensor(memory, "memory", min_ndim=2)
    same_device_and_dtype(y=y, memory=memory)
    if memory.shape[-1] != config.d_model:
        raise ValueError(
            f"memory must have last dimension d_model = {config.d_model}, "
            f"got shape {fmt_shape(memory.shape)}"
        )
    if not isinstance(params, Mapping):
        params = unflatten_decoder_block(as_tensor(params, "params", ndim=1), config)
    p = check_decoder_block_params(params, config, lambda v, name: as_tensor(v, name))
    same_device_and_dtype(y=y, **p)
    return decoder_block_forward(y, memory, p, config, self_mask, cross_mask)


def encoder_decoder_stack(
    x: Any,
    y: Any,
    params: Any,
    config: EncoderDecoderConfig,
    src_mask: Any = None,
    tgt_mask: Any = None,
    memory_mask: Any = None,
) -> torch.Tensor:
    """The encoder-decoder body (``torch.nn.Transformer`` without its embeddings).

    x (..., L_s, d) source, y (..., L_t, d) target -> (..., L_t, d). Masks are boolean, True
    where a query may attend (the opposite of PyTorch's boolean masks).

    >>> cfg = EncoderDecoderConfig(1, 2, BlockConfig(d_model=4, n_heads=2, d_ff=8))
    >>> theta = torch.randn(count_parameters(cfg), dtype=torch.float64)
    >>> encoder_decoder_stack(torch.randn(3, 4).double(), torch.ones(2, 4).double(), theta, cfg).shape
    torch.Size([2, 4])
    """
    if not isinstance(config, EncoderDecoderConfig):
        raise TypeError(f"config must be an EncoderDecoderConfig, got {type(config).__name__}")
    x = _check_x(x, config.block)
    y = as_tensor(y, "y", min_ndim=2)
    if y.shape[-1] != config.d_model:
        raise ValueError(
            f"y must have last dimension d_model = {config.d_model}, got shape {fmt_shape(y.shape)}"
        )
    same_device_and_dtype(x=x, y=y)
    p = _checked(params, config, EncoderDecoderConfig, x)
    return encoder_decoder_forward(x, y, p, config, src_mask, tgt_mask, memory_mask)[1]
