"""The Transformer block, as NumPy references (Chapter 5).

Written to be read beside the equations, in float64, row convention (one token per row):

* :func:`layer_norm`: ``LN(z) = beta + gamma * (z - mu(z)) / sigma(z)`` (slides ``003``, "Aside:
  Layer Norm"; Ba et al. 2016), with ``sigma = sqrt(mean((z - mu)^2) + eps)``; the handwritten
  notes ``001`` drop the gain ``gamma``;
* :func:`rms_norm`: ``gamma * z / sqrt(mean(z^2) + eps)`` (Zhang and Sennrich 2019);
* :func:`activation`: ReLU, GELU (exact and tanh form) and swish ``x * sigmoid(x)``;
* :func:`feed_forward`: the position-wise network ``phi(x W1 + b1) W2 + b2`` (notes ``001``
  item 6, written there as ``W2 phi(W1 x + b1) + b2`` for column vectors);
* :func:`glu_feed_forward`: the gated form ``(phi(x W1) * (x W2)) W3`` (notes ``001``, "FFN
  nonlinearity -> GLU"; Shazeer 2020);
* :func:`transformer_block`: post-LN (notes ``002`` section 2.4, slides ``003``), pre-LN (notes
  ``004`` section 1.3) and the parallel block (notes ``001``), with or without biases;
* :func:`transformer_stack`: R blocks, each with its own parameters (slides ``003``);
* :func:`decoder_forward`: the decoder-only model of notes ``002`` eq. (21);
* :func:`decoder_block`: a decoder block of the encoder-decoder Transformer (notes ``002``
  section 3, Figure 3): masked self-attention, cross-attention to the encoder's output, FFN;
* :func:`encoder_decoder_stack`: the encoder stack and the decoder stack together, the body of
  ``torch.nn.Transformer``.

The attention inside a block is Chapter 4's :func:`course_lib.attention.reference.multi_head_attention`.
Configurations and parameter layouts are in :mod:`course_lib.block.params`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from course_lib.attention.reference import causal_mask, multi_head_attention
from course_lib.block.config import ACTIVATIONS, BlockConfig, DecoderConfig, EncoderDecoderConfig
from course_lib.block.counting import count_parameters
from course_lib.block.params import (
    check_decoder_block_params,
    check_params,
    unflatten_decoder_block,
    unflatten_parameters,
)
from course_lib.checks import as_array, check_choice, check_real, check_token_ids, fmt_shape

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


# ------------------------------------------------------------------------------ input checks
def _vector(v: Any, name: str, d: int, what: str) -> np.ndarray | None:
    """A per-feature vector of length d (or None)."""
    if v is None:
        return None
    v = as_array(v, name, ndim=1)
    if v.shape != (d,):
        raise ValueError(f"{name} must have shape ({d},) to match {what}, got {fmt_shape(v.shape)}")
    return v


def _eps(eps: Any) -> float:
    return check_real(eps, "eps", low=0.0, high_open=True)


def _weight(w: Any, name: str, rows: int, rows_what: str) -> np.ndarray:
    w = as_array(w, name, ndim=2)
    if w.shape[0] != rows:
        raise ValueError(
            f"{name} must have {rows} rows to match {rows_what}, got shape {fmt_shape(w.shape)}"
        )
    return w


# ----------------------------------------------------------------------------------- norms
def layer_norm(x: Any, gain: Any = None, bias: Any = None, eps: float = 1e-5) -> np.ndarray:
    """Layer normalisation over the last axis, with gain ``gamma`` and bias ``beta``.

    For each vector z (a row of length d): ``mu = (1/d) sum_i z_i``,
    ``sigma = sqrt((1/d) sum_i (z_i - mu)^2 + eps)`` and ``LN(z) = beta + gamma * (z - mu) / sigma``
    (slides ``003``; the notes ``001`` print it without ``gamma``). ``gain=None`` means
    ``gamma = 1``, ``bias=None`` means ``beta = 0``.

    >>> layer_norm([[1.0, 2.0, 3.0]], eps=0.0)  # mu = 2, sigma = sqrt(2/3)
    array([[-1.22474487,  0.        ,  1.22474487]])
    >>> layer_norm([1.0, 3.0], gain=[2.0, 2.0], bias=[0.0, 10.0], eps=0.0)
    array([-2., 12.])
    """
    x = as_array(x, "x", min_ndim=1)
    d = x.shape[-1]
    gain = _vector(gain, "gain", d, f"the last dimension of x, shape {fmt_shape(x.shape)}")
    bias = _vector(bias, "bias", d, f"the last dimension of x, shape {fmt_shape(x.shape)}")
    eps = _eps(eps)
    mu = x.sum(axis=-1, keepdims=True) / d  # (..., 1)
    sigma = np.sqrt(((x - mu) ** 2).sum(axis=-1, keepdims=True) / d + eps)  # (..., 1)
    out = (x - mu) / sigma  # (..., d)
    if gain is not None:
        out = gain * out
    if bias is not None:
        out = bias + out
    return out


def rms_norm(x: Any, gain: Any = None, eps: float = 1e-6) -> np.ndarray:
    """Root-mean-square normalisation over the last axis (no centring, no bias).

    ``RMS(z) = sqrt((1/d) sum_i z_i^2 + eps)`` and ``RMSNorm(z) = gamma * z / RMS(z)`` (Zhang and
    Sennrich 2019; the notes ``001`` list it among the block modifications). It differs from
    :func:`layer_norm` only by not subtracting the mean.

    >>> rms_norm([[3.0, 4.0]], eps=0.0)  # RMS = sqrt((9 + 16) / 2)
    array([[0.84852814, 1.13137085]])
    """
    x = as_array(x, "x", min_ndim=1)
    d = x.shape[-1]
    gain = _vector(gain, "gain", d, f"the last dimension of x, shape {fmt_shape(x.shape)}")
    eps = _eps(eps)
    rms = np.sqrt((x**2).sum(axis=-1, keepdims=True) / d + eps)  # (..., 1)
    out = x / rms
    return out if gain is None else gain * out


# ------------------------------------------------------------------------ the feed-forward
_erf = np.frompyfunc(math.erf, 1, 1)


def activation(x: Any, name: str = "relu") -> np.ndarray:
    """The feed-forward nonlinearity ``phi``, element by element.

    * ``relu``: ``max(0, x)``;
    * ``gelu``: ``x Phi(x) = x/2 (1 + erf(x / sqrt 2))`` (Hendrycks and Gimpel 2016);
    * ``gelu_tanh``: ``x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``, GPT-2's approximation;
    * ``swish``: ``x sigma(x) = x / (1 + exp(-x))`` (also called SiLU).

    >>> activation([-1.0, 0.0, 2.0], "relu")
    array([0., 0., 2.])
    >>> activation([-1.0, 0.0, 2.0], "swish")
    array([-0.26894142,  0.        ,  1.76159416])
    """
    x = as_array(x, "x", allow_empty=True)
    return _phi(x, check_choice(name, "activation", ACTIVATIONS))


def _phi(x: np.ndarray, name: str) -> np.ndarray:
    if name == "relu":
        return np.maximum(x, 0.0)
    if name == "gelu":
        return x / 2 * (1 + _erf(x / math.sqrt(2)).astype(np.float64))
    if name == "gelu_tanh":
        return x / 2 * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    return x / (1 + np.exp(-x))  # swish


def feed_forward(
    x: Any, w1: Any, w2: Any, b1: Any = None, b2: Any = None, activation: str = "relu"
) -> np.ndarray:
    """The position-wise feed-forward network ``phi(x W1 + b1) W2 + b2``.

    x has shape (..., d), W1 (d, d_ff), W2 (d_ff, d_out). The same two layers act on every
    position independently (notes ``001`` item 6; the slides ``003`` write it without biases).

    >>> feed_forward([[1.0, -2.0]], [[1.0, 0.0], [0.0, 1.0]], [[1.0], [1.0]])  # relu(1) + relu(-2)
    array([[1.]])
    """
    check_choice(activation, "activation", ACTIVATIONS)
    x = as_array(x, "x", min_ndim=1)
    d = x.shape[-1]
    w1 = _weight(w1, "w1", d, f"the last dimension of x, shape {fmt_shape(x.shape)}")
    d_ff = w1.shape[1]
    w2 = _weight(w2, "w2", d_ff, f"the columns of w1, shape {fmt_shape(w1.shape)} (d_ff)")
    b1 = _vector(b1, "b1", d_ff, f"the columns of w1 (d_ff = {d_ff})")
    b2 = _vector(b2, "b2", w2.shape[1], f"the columns of w2 (d_out = {w2.shape[1]})")
    hidden = x @ w1 + (0 if b1 is None else b1)  # (..., d_ff)
    out = _phi(hidden, activation) @ w2  # (..., d_out)
    return out if b2 is None else out + b2


def glu_feed_forward(
    x: Any,
    w1: Any,
    w2: Any,
    w3: Any,
    b1: Any = None,
    b2: Any = None,
    b3: Any = None,
    activation: str = "swish",
) -> np.ndarray:
    """A gated linear unit feed-forward: ``(phi(x W1 + b1) * (x W2 + b2)) W3 + b3``.

    The notes ``001`` write it ``W3 (phi(W1 x) * W2 x)`` for column vectors, "often swish"
    (then it is SwiGLU, Shazeer 2020). W1 and W2 are (d, d_ff), W3 (d_ff, d_out); ``*`` is the
    element-wise product, so one branch gates the other.

    >>> glu_feed_forward([[1.0]], [[1.0]], [[2.0]], [[1.0]], activation="relu")  # relu(1) * 2
    array([[2.]])
    """
    check_choice(activation, "activation", ACTIVATIONS)
    x = as_array(x, "x", min_ndim=1)
    d = x.shape[-1]
    what = f"the last dimension of x, shape {fmt_shape(x.shape)}"
    w1 = _weight(w1, "w1", d, what)
    w2 = _weight(w2, "w2", d, what)
    d_ff = w1.shape[1]
    if w2.shape != w1.shape:
        raise ValueError(
            f"w1 and w2 must have the same shape (d, d_ff), got {fmt_shape(w1.shape)} and "
            f"{fmt_shape(w2.shape)}"
        )
    w3 = _weight(w3, "w3", d_ff, f"the columns of w1, shape {fmt_shape(w1.shape)} (d_ff)")
    b1 = _vector(b1, "b1", d_ff, f"the columns of w1 (d_ff = {d_ff})")
    b2 = _vector(b2, "b2", d_ff, f"the columns of w2 (d_ff = {d_ff})")
    b3 = _vector(b3, "b3", w3.shape[1], f"the columns of w3 (d_out = {w3.shape[1]})")
    gate = _phi(x @ w1 + (0 if b1 is None else b1), activation)  # (..., d_ff)
    value = x @ w2 + (0 if b2 is None else b2)  # (..., d_ff)
    out = (gate * value) @ w3  # (..., d_out)
    return out if b3 is None else out + b3


# ------------------------------------------------------------------------------- the block
def _block_params(params: Any, config: Any) -> dict[str, np.ndarray]:
    if not isinstance(config, BlockConfig):
        raise TypeError(f"config must be a BlockConfig, got {type(config).__name__}")
    if not isinstance(params, Mapping):
        params = unflatten_parameters(as_array(params, "params", ndim=1), config)
    return check_params(params, config, as_array)


def _sublayers(p: Mapping[str, np.ndarray], c: BlockConfig, mask: Any):
    """The three pieces of a block with their parameters bound: norm(i, z), attn(z), ffn(z)."""

    def norm(i: int, z: np.ndarray) -> np.ndarray:
        if c.norm == "rms":
            return rms_norm(z, p[f"norm{i}_gain"], eps=c.eps)
        return layer_norm(z, p[f"norm{i}_gain"], p.get(f"norm{i}_bias"), eps=c.eps)

    def attn(z: np.ndarray) -> np.ndarray:  # multi-head self-attention, eqs. (16)-(18)
        return multi_head_attention(
            z, z, z, p["w_q"], p["w_k"], p["w_v"], p["w_o"], mask=mask,
            b_q=p.get("b_q"), b_k=p.get("b_k"), b_v=p.get("b_v"), b_o=p.get("b_o"),
        )  # fmt: skip

    def ffn(z: np.ndarray) -> np.ndarray:
        if c.gated:
            return glu_feed_forward(
                z, p["w_1"], p["w_2"], p["w_3"], p.get("b_1"), p.get("b_2"), p.get("b_3"),
                activation=c.activation,
            )  # fmt: skip
        return feed_forward(z, p["w_1"], p["w_2"], p.get("b_1"), p.get("b_2"), c.activation)

    return norm, attn, ffn


def transformer_block(x: Any, params: Any, config: BlockConfig, mask: Any = None) -> np.ndarray:
    """One Transformer block, in the variant ``config.norm_position`` names.

    With ``N1, N2`` the two norms (LayerNorm or RMSNorm), MHSA multi-head self-attention and
    FFN the feed-forward network:

    * ``post`` (notes ``002`` section 2.4; slides ``003``): ``X2 = N1(X0 + MHSA(X0))``,
      ``X4 = N2(X2 + FFN(X2))``;
    * ``pre`` (notes ``004`` section 1.3): ``X' = X + MHSA(N1(X))``, ``out = X' + FFN(N2(X'))``;
    * ``parallel`` (notes ``001``): ``out = X + MHSA(N1(X)) + FFN(N1(X))`` (one shared norm).

    Args:
        x: (..., L, d_model) token vectors.
        params: a dict of named arrays (see :func:`course_lib.block.params.layout`) or the same
            parameters as one flat vector of length ``count_parameters(config)``.
        config: a :class:`~course_lib.block.config.BlockConfig`.
        mask: optional boolean (L, L) attention mask, True where a query may attend to a key.

    >>> from course_lib.block.config import BlockConfig
    >>> from course_lib.block.params import init_parameters
    >>> cfg = BlockConfig(d_model=4, n_heads=2, d_ff=8)
    >>> out = transformer_block(np.ones((3, 4)) * [1, 2, 3, 4], init_parameters(cfg), cfg)
    >>> out.shape, np.allclose(out.mean(axis=-1), 0)  # post-LN: every row normalised
    ((3, 4), True)
    """
    p = _block_params(params, config)
    x = as_array(x, "x", min_ndim=2)
    if x.shape[-1] != config.d_model:
        raise ValueError(
            f"x must have last dimension d_model = {config.d_model}, got shape {fmt_shape(x.shape)}"
        )
    norm, attn, ffn = _sublayers(p, config, mask)
    if config.norm_position == "post":
        x2 = norm(1, x + attn(x))  # (..., L, d)
        return norm(2, x2 + ffn(x2))
    if config.norm_position == "pre":
        x1 = x + attn(norm(1, x))  # (..., L, d)
        return x1 + ffn(norm(2, x1))
    u = norm(1, x)  # parallel: both branches read the same normalised input
    return x + attn(u) + ffn(u)


def transformer_stack(x: Any, params: Any, config: BlockConfig, mask: Any = None) -> np.ndarray:
    """A stack of R blocks, each with its own parameters: ``z^r = Block_r(z^(r-1))`` (slides ``003``).

    ``params`` is a sequence of R parameter dicts, or an (R, P) array of flat vectors with
    ``P = count_parameters(config)``.

    >>> from course_lib.block.config import BlockConfig
    >>> from course_lib.block.params import init_parameters
    >>> cfg = BlockConfig(d_model=4, n_heads=1, d_ff=4)
    >>> p = [init_parameters(cfg, rng=r) for r in range(3)]
    >>> x = np.arange(8.0).reshape(2, 4)
    >>> np.allclose(transformer_stack(x, p, cfg),
    ...             transformer_block(transformer_block(transformer_block(x, p[0], cfg), p[1], cfg), p[2], cfg))
    True
    """
    if not isinstance(config, BlockConfig):
        raise TypeError(f"config must be a BlockConfig, got {type(config).__name__}")
    if isinstance(params, Mapping):
        raise TypeError("params must be a sequence of per-block dicts or an (R, P) array")
    if isinstance(params, np.ndarray) or (
        isinstance(params, Sequence) and params and not isinstance(params[0], Mapping)
    ):
        arr = as_array(params, "params", ndim=2)
        n = count_parameters(config)
        if arr.shape[1] != n:
            raise ValueError(
                f"params must have shape (R, {n}) (one flat vector per block), "
                f"got {fmt_shape(arr.shape)}"
            )
        params = list(arr)
    if len(params) == 0:
        raise ValueError("params must hold at least one block")
    z = x
    for p in params:
        z = transformer_block(z, p, config, mask)
    return z


# ---------------------------------------------------------------------------- the decoder
def decoder_forward(tokens: Any, params: Any, config: DecoderConfig) -> np.ndarray:
    """The decoder-only model of notes ``002`` eq. (21); returns the logits (..., L, V).

    ``h_0 = U W_e + W_p`` (U the one-hot rows of the tokens), ``h_l = block_l(h_(l-1))`` with
    causal self-attention for ``l = 1..n``, then ``P(u) = softmax(h_n W_e^T)``: the output
    projection is the transposed token embedding (tied) unless ``config.tie_embeddings`` is
    False. Pre-LN stacks apply a final norm before it. The softmax is left to the loss.

    ``params`` is a dict (``tok_emb``, ``pos_emb``, ``blocks``: a list of block dicts, ...) or a
    flat vector of length ``count_parameters(config)``.

    >>> from course_lib.block.config import BlockConfig, DecoderConfig
    >>> from course_lib.block.params import init_parameters
    >>> cfg = DecoderConfig(vocab_size=5, context_length=4, n_layers=2,
    ...                     block=BlockConfig(d_model=4, n_heads=2, d_ff=8, norm_position="pre"))
    >>> logits = decoder_forward([[0, 3, 1]], init_parameters(cfg), cfg)
    >>> logits.shape
    (1, 3, 5)
    >>> np.allclose(logits[0, :2], decoder_forward([[0, 3]], init_parameters(cfg), cfg)[0])  # causal
    True
    """
    if not isinstance(config, DecoderConfig):
        raise TypeError(f"config must be a DecoderConfig, got {type(config).__name__}")
    if not isinstance(params, Mapping):
        params = unflatten_parameters(as_array(params, "params", ndim=1), config)
    p = check_params(params, config, as_array)
    t = check_token_ids(tokens, config)
    L = t.shape[-1]
    U = np.eye(config.vocab_size)[t]  # (..., L, V): one-hot rows
    h = U @ p["tok_emb"] + p["pos_emb"][:L]  # (..., L, d), eq. (21) line 1
    h = transformer_stack(h, p["blocks"], config.block, mask=causal_mask(L))  # (..., L, d)
    if config.final_norm:
        c = config.block
        if c.norm == "rms":
            h = rms_norm(h, p["final_norm_gain"], eps=c.eps)
        else:
            h = layer_norm(h, p["final_norm_gain"], p.get("final_norm_bias"), eps=c.eps)
    w_out = p["tok_emb"].T if config.tie_embeddings else p["w_out"]  # (d, V)
    return h @ w_out  # (..., L, V)


# -------------------------------------------------------------------- the encoder-decoder
def _cross_attention(p: Mapping[str, np.ndarray], z: np.ndarray, memory: np.ndarray, mask: Any):
    """Queries from the decoder (z), keys and values from the encoder's output (memory)."""
    return multi_head_attention(
        z, memory, memory, p["cross_w_q"], p["cross_w_k"], p["cross_w_v"], p["cross_w_o"],
        mask=mask, b_q=p.get("cross_b_q"), b_k=p.get("cross_b_k"), b_v=p.get("cross_b_v"),
        b_o=p.get("cross_b_o"),
    )  # fmt: skip


def _check_memory(y: np.ndarray, memory: Any, d: int) -> np.ndarray:
    memory = as_array(memory, "memory", min_ndim=2)
    if memory.shape[-1] != d:
        raise ValueError(
            f"memory must have last dimension d_model = {d}, got shape {fmt_shape(memory.shape)}"
        )
    return memory


def decoder_block(
    y: Any,
    memory: Any,
    params: Any,
    config: BlockConfig,
    self_mask: Any = None,
    cross_mask: Any = None,
) -> np.ndarray:
    """A decoder block of the encoder-decoder Transformer (Vaswani et al. 2017, section 3.1).

    Three sub-layers, each in a residual connection with a norm: masked multi-head
    self-attention over the target ``y`` (``self_mask``, usually causal), multi-head
    **cross-attention** whose queries come from the decoder and whose keys and values come
    from the encoder's output ``memory`` (``cross_mask``, usually the source's padding), and
    the feed-forward network. With ``N1, N2, N3`` the norms:

    * ``post``: ``Y1 = N1(Y + SA(Y))``, ``Y2 = N2(Y1 + CA(Y1, M))``, ``out = N3(Y2 + FFN(Y2))``;
    * ``pre``: ``Y1 = Y + SA(N1(Y))``, ``Y2 = Y1 + CA(N2(Y1), M)``, ``out = Y2 + FFN(N3(Y2))``.

    Args:
        y: (..., L_t, d_model) target token vectors.
        memory: (..., L_s, d_model) the encoder's output; the cross-attention's keys and values.
        params: a dict named as :func:`course_lib.block.params.decoder_block_layout` lists, or
            one flat vector in that order.
        config: a post-LN or pre-LN :class:`~course_lib.block.config.BlockConfig`.
        self_mask: boolean, broadcast to (..., h, L_t, L_t); True where a query may attend.
        cross_mask: boolean, broadcast to (..., h, L_t, L_s).

    >>> from course_lib.block.params import init_decoder_block
    >>> cfg = BlockConfig(d_model=4, n_heads=2, d_ff=8, norm_position="pre")
    >>> p = init_decoder_block(cfg)
    >>> y, m = np.ones((3, 4)) * [1, 2, 3, 4], np.eye(4)[:2]  # 3 target, 2 source tokens
    >>> decoder_block(y, m, p, cfg, self_mask=causal_mask(3)).shape
    (3, 4)
    """
    if not isinstance(config, BlockConfig):
        raise TypeError(f"config must be a BlockConfig, got {type(config).__name__}")
    if not isinstance(params, Mapping):
        params = unflatten_decoder_block(as_array(params, "params", ndim=1), config)
    p = check_decoder_block_params(params, config, as_array)
    y = as_array(y, "y", min_ndim=2)
    if y.shape[-1] != config.d_model:
        raise ValueError(
            f"y must have last dimension d_model = {config.d_model}, got shape {fmt_shape(y.shape)}"
        )
    memory = _check_memory(y, memory, config.d_model)
    norm, self_attn, ffn = _sublayers(p, config, self_mask)

    def cross(z: np.ndarray) -> np.ndarray:
        return _cross_attention(p, z, memory, cross_mask)

    if config.norm_position == "post":
        y1 = norm(1, y + self_attn(y))  # (..., L_t, d)
        y2 = norm(2, y1 + cross(y1))  # (..., L_t, d): every target token reads the source
        return norm(3, y2 + ffn(y2))
    y1 = y + self_attn(norm(1, y))  # (..., L_t, d)
    y2 = y1 + cross(norm(2, y1))  # the memory is not normalised here: the encoder's norm did it
    return y2 + ffn(norm(3, y2))


def _final(h: np.ndarray, p: Mapping[str, np.ndarray], prefix: str, c: BlockConfig) -> np.ndarray:
    if c.norm == "rms":
        return rms_norm(h, p[f"{prefix}_gain"], eps=c.eps)
    return layer_norm(h, p[f"{prefix}_gain"], p.get(f"{prefix}_bias"), eps=c.eps)


def encoder_decoder_stack(
    x: Any,
    y: Any,
    params: Any,
    config: EncoderDecoderConfig,
    src_mask: Any = None,
    tgt_mask: Any = None,
    memory_mask: Any = None,
) -> np.ndarray:
    """The encoder-decoder Transformer's body: the encoder reads x, the decoder writes from y.

    ``M = EncNorm(Block_E(... Block_1(x)))`` with ``src_mask`` in every encoder block, then
    ``out = DecNorm(Dec_D(... Dec_1(y, M), M))`` with ``tgt_mask`` in every decoder
    self-attention and ``memory_mask`` in every cross-attention (the final norms only if
    ``config.final_norm``). The same computation as ``torch.nn.Transformer.forward(src, tgt,
    ...)``, with masks that say where a query *may* attend (PyTorch's boolean masks say
    where it may not).

    Args:
        x: (..., L_s, d_model) source vectors (embedded); y: (..., L_t, d_model) target vectors.
        params: ``{"encoder": [block dicts], "decoder": [decoder-block dicts],
            "encoder_norm_gain", ...}`` or one flat vector in :func:`course_lib.block.params.layout` order.

    >>> from course_lib.block.params import init_parameters
    >>> cfg = EncoderDecoderConfig(2, 2, BlockConfig(d_model=4, n_heads=2, d_ff=8))
    >>> x, y = np.eye(4)[:3], np.ones((2, 4)) * [1, 2, 3, 4]
    >>> encoder_decoder_stack(x, y, init_parameters(cfg), cfg, tgt_mask=causal_mask(2)).shape
    (2, 4)
    """
    if not isinstance(config, EncoderDecoderConfig):
        raise TypeError(f"config must be an EncoderDecoderConfig, got {type(config).__name__}")
    if not isinstance(params, Mapping):
        params = unflatten_parameters(as_array(params, "params", ndim=1), config)
    p = check_params(params, config, as_array)
    c = config.block
    x = as_array(x, "x", min_ndim=2)
    if x.shape[-1] != c.d_model:
        raise ValueError(
            f"x must have last dimension d_model = {c.d_model}, got shape {fmt_shape(x.shape)}"
        )
    memory = x
    for blk in p["encoder"]:
        memory = transformer_block(memory, blk, c, src_mask)  # (..., L_s, d)
    if config.final_norm:
        memory = _final(memory, p, "encoder_norm", c)
    out = y
    for blk in p["decoder"]:
        out = decoder_block(out, memory, blk, c, tgt_mask, memory_mask)  # (..., L_t, d)
    if config.final_norm:
        out = _final(out, p, "decoder_norm", c)
    return out
