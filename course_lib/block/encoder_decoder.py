"""The encoder-decoder Transformer, with cross-attention (Chapter 5, section 5.9).

The architecture of Vaswani et al. (2017), Figure 3 of Strabel's notes (section 3): an encoder
stack reads the whole source with unmasked self-attention; every block of the decoder stack
adds, between its masked self-attention and its feed-forward network, a **cross-attention**
whose queries come from the target being written and whose keys and values come from the
encoder's output (the *memory*). May's notes name it ("attention between two different
languages") and never return to it; this module builds it.

* :func:`reversal_pairs`: a sequence-to-sequence task the course generates: reverse a string of
  3 to 8 digits; sources padded, targets start with BOS and end with EOS.
* :class:`DecoderBlock`: one decoder block as a ``torch.nn.Module`` (its maths is
  :func:`course_lib.block.accelerated.decoder_block_forward`, mirrored by
  :func:`course_lib.block.reference.decoder_block`).
* :class:`EncoderDecoderModel`: embeddings shared by source, target and output (tied, as in the
  paper's section 3.4), learned positions, the two stacks, ``loss``, ``greedy_decode`` and
  ``cross_attention_maps``; ``numpy_forward`` runs the same weights through the NumPy reference.
* :func:`transformer_parameters`: a ``torch.nn.Transformer``'s configuration and weights in the
  course's layout (for parity tests), and :func:`torch_masks`, our masks in PyTorch's convention.
* :func:`train_reversal_seq2seq`: a few seconds of Adam on :func:`reversal_pairs`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import course_lib.block.reference as ref
from course_lib.attention.accelerated import (
    attention_weights,
    causal_mask,
    fuse_head_weights,
    split_heads,
)
from course_lib.block.accelerated import decoder_block_forward, encoder_decoder_forward
from course_lib.block.config import BlockConfig, EncoderDecoderConfig
from course_lib.block.counting import count_parameters
from course_lib.block.experiment import threads
from course_lib.block.module import (
    BlockModule,
    TransformerBlock,
    encoder_layer_parameters,
    init_parameter_,
)
from course_lib.block.params import check_decoder_block_params, decoder_block_layout, layout
from course_lib.checks import (
    as_tensor,
    check_int,
    check_real,
    fmt_shape,
    values_are_free_to_read,
)

__all__ = [
    "BOS",
    "EOS",
    "PAD",
    "VOCAB",
    "DecoderBlock",
    "EncoderDecoderModel",
    "reversal_pairs",
    "torch_masks",
    "train_reversal_seq2seq",
    "transformer_parameters",
]

PAD, BOS, EOS = 10, 11, 12  # digits are 0..9
VOCAB = 13


# ------------------------------------------------------------------------------------ the task
def reversal_pairs(
    generator: torch.Generator, batch_size: int, min_len: int = 3, max_len: int = 8
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A batch of "reverse these digits" pairs: (source, decoder input, decoder target).

    Each source is ``n`` random digits (``n`` uniform in ``[min_len, max_len]``), padded with
    :data:`PAD` to ``max_len``. The decoder reads :data:`BOS` and the reversed digits (teacher
    forcing) and must predict the reversed digits and then :data:`EOS`; targets past EOS are
    -100, which the loss ignores. Shapes: (B, max_len), (B, max_len + 1), (B, max_len + 1).

    >>> src, tgt_in, tgt_out = reversal_pairs(torch.Generator().manual_seed(0), 1, 3, 3)
    >>> src.tolist(), tgt_in.tolist(), tgt_out.tolist()
    ([[4, 9, 3]], [[11, 3, 9, 4]], [[3, 9, 4, 12]])
    """
    check_int(batch_size, "batch_size", low=1)
    check_int(min_len, "min_len", low=1)
    check_int(max_len, "max_len", low=min_len)
    digits = torch.randint(0, 10, (batch_size, max_len), generator=generator)
    lengths = torch.randint(min_len, max_len + 1, (batch_size,), generator=generator)
    pos = torch.arange(max_len)
    real = pos < lengths[:, None]  # (B, max_len)
    src = torch.where(real, digits, PAD)
    # reversed: position i holds digit n-1-i of the source
    rev_idx = (lengths[:, None] - 1 - pos).clamp(min=0)  # (B, max_len)
    rev = torch.where(real, torch.gather(digits, 1, rev_idx), PAD)
    tgt_in = torch.cat([torch.full((batch_size, 1), BOS), rev], dim=1)  # (B, max_len + 1)
    tgt_out = torch.cat([rev, torch.full((batch_size, 1), PAD)], dim=1)
    tgt_out[torch.arange(batch_size), lengths] = EOS
    tgt_out[tgt_out == PAD] = -100
    return src, tgt_in, tgt_out


# ----------------------------------------------------------------------------------- modules
class DecoderBlock(BlockModule):
    """A decoder block: masked self-attention, cross-attention to the memory, feed-forward.

    ``forward(y, memory, self_mask=None, cross_mask=None)``: y (..., L_t, d), memory
    (..., L_s, d) -> (..., L_t, d); masks boolean, True where a query may attend.

    >>> blk = DecoderBlock(BlockConfig(d_model=8, n_heads=2, d_ff=32))
    >>> blk(torch.randn(2, 3, 8), torch.randn(2, 5, 8)).shape
    torch.Size([2, 3, 8])
    >>> sum(p.numel() for p in blk.parameters())  # a block (872) + cross-attention and a norm
    1176
    """

    layout = staticmethod(decoder_block_layout)  # BlockModule creates and initialises them

    def forward(self, y, memory, self_mask=None, cross_mask=None, record=None) -> torch.Tensor:
        y = as_tensor(y, "y", min_ndim=2)
        if y.shape[-1] != self.config.d_model or memory.shape[-1] != self.config.d_model:
            raise ValueError(
                f"y and memory must have last dimension d_model = {self.config.d_model}, got "
                f"shapes {fmt_shape(y.shape)} and {fmt_shape(memory.shape)}"
            )
        p, drop = self.parameter_dict(), self._drop()
        return decoder_block_forward(y, memory, p, self.config, self_mask, cross_mask, drop, record)


class EncoderDecoderModel(nn.Module):
    """The encoder-decoder Transformer (Vaswani et al. 2017; Strabel's notes section 3, Figure 3).

    One token embedding ``W_e`` serves the source, the target and (transposed) the output
    projection, as in the paper's section 3.4; positions are learned, one table per side (the
    paper's sinusoids are chapter 6's subject). Source tokens equal to ``pad_id`` are masked
    out of every attention that reads the source.

    Args:
        config: the stacks' :class:`~course_lib.block.config.EncoderDecoderConfig`.
        vocab_size: number of tokens (shared by source and target).
        context_length: longest source and longest target.
        pad_id: the padding token of the source, or None.

    >>> cfg = EncoderDecoderConfig(1, 1, BlockConfig(d_model=8, n_heads=2, d_ff=16, norm_position="pre"))
    >>> model = EncoderDecoderModel(cfg, vocab_size=13, context_length=9, pad_id=PAD)
    >>> src, tgt_in, tgt_out = reversal_pairs(torch.Generator().manual_seed(0), 4)
    >>> model(src, tgt_in).shape
    torch.Size([4, 9, 13])
    """

    def __init__(
        self,
        config: EncoderDecoderConfig,
        vocab_size: int,
        context_length: int,
        pad_id: int | None = None,
        dropout: float = 0.0,
        *,
        device: Any = None,
        dtype: torch.dtype | None = None,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(config, EncoderDecoderConfig):
            raise TypeError(f"config must be an EncoderDecoderConfig, got {type(config).__name__}")
        self.config = config
        self.vocab_size = check_int(vocab_size, "vocab_size", low=1)
        self.context_length = check_int(context_length, "context_length", low=1)
        if pad_id is not None:
            check_int(pad_id, "pad_id", low=0, high=vocab_size - 1)
        self.pad_id = pad_id
        self.dropout = check_real(dropout, "dropout", low=0.0, high=1.0, high_open=True)
        c, d = config.block, config.d_model
        kw = {"device": device, "dtype": dtype}
        self.tok_emb = nn.Parameter(torch.empty(vocab_size, d, **kw))
        self.src_pos_emb = nn.Parameter(torch.empty(context_length, d, **kw))
        self.tgt_pos_emb = nn.Parameter(torch.empty(context_length, d, **kw))
        self.encoder = nn.ModuleList(
            TransformerBlock(c, dropout, generator=generator, **kw)
            for _ in range(config.n_encoder_layers)
        )
        self.decoder = nn.ModuleList(
            DecoderBlock(c, dropout, generator=generator, **kw)
            for _ in range(config.n_decoder_layers)
        )
        if config.final_norm:
            for side in ("encoder_norm", "decoder_norm"):
                self.register_parameter(f"{side}_gain", nn.Parameter(torch.empty(d, **kw)))
                if c.norm_has_bias:
                    self.register_parameter(f"{side}_bias", nn.Parameter(torch.empty(d, **kw)))
        for name, param in self.named_parameters(recurse=False):
            init_parameter_(name, param, generator)

    # -- parameters
    def body_parameters(self) -> dict[str, Any]:
        """The stacks' parameters, nested as :func:`course_lib.block.accelerated.encoder_decoder_stack` takes them."""
        p: dict[str, Any] = {
            k: v for k, v in self.named_parameters(recurse=False) if k.endswith(("_gain", "_bias"))
        }
        p["encoder"] = [b.parameter_dict() for b in self.encoder]
        p["decoder"] = [b.parameter_dict() for b in self.decoder]
        return p

    def count_parameters(self) -> int:
        """``sum(p.numel())``: the stacks (:func:`count_parameters`) plus ``(V + 2 n_ctx) d``."""
        return sum(p.numel() for p in self.parameters())

    # -- the forward pass
    def _tokens(self, t: Any, name: str) -> torch.Tensor:
        t = t if isinstance(t, torch.Tensor) else torch.as_tensor(t)
        if t.is_floating_point() or t.dtype == torch.bool or t.ndim != 2 or 0 in t.shape:
            raise ValueError(
                f"{name} must be a (B, L) tensor of token ids, got dtype {t.dtype} and shape "
                f"{fmt_shape(t.shape)}"
            )
        if t.shape[1] > self.context_length:
            raise ValueError(
                f"{name} has {t.shape[1]} tokens but the model has only context_length = "
                f"{self.context_length} positions"
            )
        if values_are_free_to_read(t) and (int(t.min()) < 0 or int(t.max()) >= self.vocab_size):
            raise ValueError(
                f"{name} ids must lie in [0, {self.vocab_size - 1}], got values from "
                f"{int(t.min())} to {int(t.max())}"
            )
        return t.long().to(self.tok_emb.device)

    def _source_mask(self, src: torch.Tensor) -> torch.Tensor | None:
        """(B, 1, 1, L_s): True at real source tokens, for every head and every query."""
        if self.pad_id is None:
            return None
        return (src != self.pad_id)[:, None, None, :]

    def _drop(self):
        if self.dropout > 0 and self.training:
            return lambda t: F.dropout(t, self.dropout, True)
        return None

    def _run(self, src, tgt, record=None):
        src, tgt = self._tokens(src, "src"), self._tokens(tgt, "tgt")
        if src.shape[0] != tgt.shape[0]:
            raise ValueError(
                f"src and tgt must have the same batch size, got {src.shape[0]} and {tgt.shape[0]}"
            )
        Ls, Lt = src.shape[1], tgt.shape[1]
        x = F.embedding(src, self.tok_emb) + self.src_pos_emb[:Ls]  # (B, L_s, d)
        y = F.embedding(tgt, self.tok_emb) + self.tgt_pos_emb[:Lt]  # (B, L_t, d)
        keep = self._source_mask(src)  # (B, 1, 1, L_s) or None
        causal = causal_mask(Lt).to(y.device)  # (L_t, L_t)
        memory, out = encoder_decoder_forward(
            x, y, self.body_parameters(), self.config, keep, causal, keep, self._drop(), record
        )
        return memory, out, keep

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        """Source ids (B, L_s) and decoder input ids (B, L_t) -> logits (B, L_t, V)."""
        _, out, _ = self._run(src, tgt)
        return F.linear(out, self.tok_emb)  # (B, L_t, V): tied output projection W_e^T

    def loss(self, src: torch.Tensor, tgt_in: torch.Tensor, tgt_out: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy of the next-token predictions (targets of -100 are skipped)."""
        logits = self(src, tgt_in)  # (B, L_t, V)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1))

    @torch.no_grad()
    def greedy_decode(self, src: torch.Tensor, max_new: int, bos: int = BOS, eos: int = EOS):
        """Write the output one token at a time, always taking the most likely token.

        Starts from ``bos``; stops when every sequence has written ``eos`` or after ``max_new``
        tokens. Returns (B, steps) ids, ``eos`` included; positions after it hold ``eos``.
        (The encoder runs at every step here; a real implementation encodes once and caches.)
        """
        check_int(max_new, "max_new", low=1, high=self.context_length)
        src = self._tokens(src, "src")
        out = torch.full((src.shape[0], 1), bos, device=src.device)
        done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
        for _ in range(max_new):
            nxt = self(src, out)[:, -1].argmax(-1)  # (B,)
            nxt = torch.where(done, eos, nxt)
            out = torch.cat([out, nxt[:, None]], dim=1)
            done |= nxt == eos
            if bool(done.all()):
                break
        return out[:, 1:]

    @torch.no_grad()
    def cross_attention_maps(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        """The cross-attention weights of every decoder block: (layers, B, h, L_t, L_s).

        Row i of a map is where target position i looked in the source; padded source
        positions get weight 0.
        """
        record: list[torch.Tensor] = []
        memory, _, keep = self._run(src, tgt, record)
        h = self.config.block.n_heads
        maps = []
        for z, blk in zip(record, self.decoder, strict=True):
            p = blk.parameter_dict()
            q = z @ fuse_head_weights(p["cross_w_q"])  # (B, L_t, h*d_k)
            k = memory @ fuse_head_weights(p["cross_w_k"])  # (B, L_s, h*d_k)
            if "cross_b_q" in p:
                q, k = q + p["cross_b_q"].reshape(-1), k + p["cross_b_k"].reshape(-1)
            maps.append(attention_weights(split_heads(q, h), split_heads(k, h), mask=keep))
        return torch.stack(maps)  # (layers, B, h, L_t, L_s)

    def numpy_forward(self, src: Any, tgt: Any) -> np.ndarray:
        """The same model with the same weights, through the NumPy reference (float64)."""
        src, tgt = self._tokens(src, "src").cpu().numpy(), self._tokens(tgt, "tgt").cpu().numpy()
        W = self.tok_emb.detach().cpu().double().numpy()
        x = (
            np.eye(self.vocab_size)[src] @ W
            + self.src_pos_emb.detach().cpu().double().numpy()[: src.shape[1]]
        )
        y = (
            np.eye(self.vocab_size)[tgt] @ W
            + self.tgt_pos_emb.detach().cpu().double().numpy()[: tgt.shape[1]]
        )
        keep = None if self.pad_id is None else (src != self.pad_id)[:, None, None, :]
        p = {k: v.detach().cpu().double().numpy() for k, v in self.named_parameters(recurse=False)}
        p = {k: v for k, v in p.items() if k.endswith(("_gain", "_bias"))}
        p["encoder"] = [b.numpy_parameters() for b in self.encoder]
        p["decoder"] = [b.numpy_parameters() for b in self.decoder]
        mask = ref.causal_mask(tgt.shape[1])
        out = ref.encoder_decoder_stack(x, y, p, self.config, keep, mask, keep)
        return out @ W.T  # (B, L_t, V)

    def extra_repr(self) -> str:
        return (
            f"vocab_size={self.vocab_size}, context_length={self.context_length}, "
            f"pad_id={self.pad_id}, body parameters={count_parameters(self.config):,}"
        )


# --------------------------------------------------------------------- torch.nn.Transformer
def transformer_parameters(
    model: nn.Transformer,
) -> tuple[EncoderDecoderConfig, dict[str, Any]]:
    """A ``torch.nn.Transformer``'s configuration and weights in the course's layout.

    Encoder layers convert as in :func:`course_lib.block.module.encoder_layer_parameters`. In a
    decoder layer PyTorch's ``self_attn`` becomes ``w_q`` ... ``b_o``, ``multihead_attn`` (the
    cross-attention) ``cross_w_q`` ... ``cross_b_o``, and ``norm1``, ``norm2``, ``norm3`` keep
    their names. ``nn.Transformer`` always ends both stacks with a LayerNorm, so
    ``final_norm=True`` even for post-LN. Returns detached copies.

    >>> t = nn.Transformer(8, 2, 1, 1, 16, batch_first=True)
    >>> cfg, p = transformer_parameters(t)
    >>> cfg.final_norm, p["decoder"][0]["cross_w_k"].shape
    (True, torch.Size([2, 8, 4]))
    """
    if not isinstance(model, nn.Transformer):
        raise TypeError(f"model must be a torch.nn.Transformer, got {type(model).__name__}")
    enc = [encoder_layer_parameters(layer) for layer in model.encoder.layers]
    block = enc[0][0]
    config = EncoderDecoderConfig(
        len(model.encoder.layers), len(model.decoder.layers), block, final_norm=True
    )
    d, h, dk = block.d_model, block.n_heads, block.d_head

    def heads(w: torch.Tensor) -> torch.Tensor:  # (d_out, d_in) -> (h, d_in, d_k)
        return w.t().reshape(d, h, dk).permute(1, 0, 2)

    def attention(attn: nn.MultiheadAttention, prefix: str) -> dict[str, torch.Tensor]:
        W = attn.in_proj_weight
        out = {
            f"{prefix}w_q": heads(W[:d]),
            f"{prefix}w_k": heads(W[d : 2 * d]),
            f"{prefix}w_v": heads(W[2 * d :]),
            f"{prefix}w_o": attn.out_proj.weight.t(),
        }
        if block.bias:
            B = attn.in_proj_bias
            out.update({
                f"{prefix}b_q": B[:d].reshape(h, dk),
                f"{prefix}b_k": B[d : 2 * d].reshape(h, dk),
                f"{prefix}b_v": B[2 * d :].reshape(h, dk),
                f"{prefix}b_o": attn.out_proj.bias,
            })  # fmt: skip
        return out

    decoder = []
    for layer in model.decoder.layers:
        if layer.norm_first != (block.norm_position == "pre"):
            raise ValueError("the encoder and decoder layers must agree on norm_first")
        p = {**attention(layer.self_attn, ""), **attention(layer.multihead_attn, "cross_")}
        p.update(w_1=layer.linear1.weight.t(), w_2=layer.linear2.weight.t())
        for i in (1, 2, 3):
            p[f"norm{i}_gain"] = getattr(layer, f"norm{i}").weight
        if block.bias:
            p.update(b_1=layer.linear1.bias, b_2=layer.linear2.bias)
            for i in (1, 2, 3):
                p[f"norm{i}_bias"] = getattr(layer, f"norm{i}").bias
        p = {k: v.detach().clone().contiguous() for k, v in p.items()}
        decoder.append(check_decoder_block_params(p, block, lambda v, name: v))
    params: dict[str, Any] = {"encoder": [p for _, p in enc], "decoder": decoder}
    for side, norm in (("encoder_norm", model.encoder.norm), ("decoder_norm", model.decoder.norm)):
        params[f"{side}_gain"] = norm.weight.detach().clone()
        if block.bias:
            params[f"{side}_bias"] = norm.bias.detach().clone()
    assert {n for n, _ in layout(config) if "." not in n} <= set(params)
    return config, params


def torch_masks(src_keep: torch.Tensor | None, tgt_len: int) -> dict[str, torch.Tensor | None]:
    """Our masks (True = may attend) as ``nn.Transformer.forward``'s keyword arguments.

    PyTorch's boolean masks mean the opposite (True = may *not* attend), and it takes the
    source padding per key, (B, L_s), rather than as a mask over the logits.

    >>> m = torch_masks(torch.tensor([[True, True, False]]), 2)
    >>> m["tgt_mask"].tolist(), m["src_key_padding_mask"].tolist()
    ([[False, True], [False, False]], [[False, False, True]])
    """
    pad = None
    if src_keep is not None:
        if not isinstance(src_keep, torch.Tensor) or src_keep.dtype != torch.bool:
            raise TypeError("src_keep must be a boolean tensor (B, L_s), True at real tokens")
        if src_keep.ndim != 2:
            raise ValueError(f"src_keep must have shape (B, L_s), got {fmt_shape(src_keep.shape)}")
        pad = ~src_keep
    return {
        "tgt_mask": ~causal_mask(tgt_len),
        "src_key_padding_mask": pad,
        "memory_key_padding_mask": pad,
        "tgt_is_causal": True,
    }


# ---------------------------------------------------------------------------------- training
def train_reversal_seq2seq(
    steps: int = 300,
    seed: int = 0,
    d_model: int = 32,
    n_heads: int = 4,
    n_layers: int = 1,
    batch_size: int = 64,
    lr: float = 5e-3,
    min_len: int = 3,
    max_len: int = 8,
    eval_size: int = 500,
) -> dict[str, Any]:
    """Train a small pre-LN encoder-decoder to reverse digit strings; greedy-decode fresh ones.

    ``n_layers`` encoder and ``n_layers`` decoder blocks (``d_ff = 4 d_model``, ReLU), Adam at
    ``lr``. Returns ``{"model", "loss": [per step], "sequence_accuracy": fraction of
    ``eval_size`` fresh sources whose greedy output is exactly the reversal followed by EOS,
    "token_accuracy": fraction of those output tokens right}``.

    >>> out = train_reversal_seq2seq(steps=2, d_model=8, n_heads=2, n_layers=1, eval_size=4)
    >>> len(out["loss"]), 0 <= out["sequence_accuracy"] <= 1
    (2, True)
    """
    check_int(steps, "steps", low=1)
    with threads(1):  # tiny matrices: one thread (see course_lib.block.experiment.threads)
        return _train(
            steps, seed, d_model, n_heads, n_layers, batch_size, lr, min_len, max_len, eval_size
        )


def _train(steps, seed, d_model, n_heads, n_layers, batch_size, lr, min_len, max_len, eval_size):
    gen = torch.Generator().manual_seed(seed)
    block = BlockConfig(d_model, n_heads, 4 * d_model, norm_position="pre")
    cfg = EncoderDecoderConfig(n_layers, n_layers, block)
    model = EncoderDecoderModel(cfg, VOCAB, max_len + 1, pad_id=PAD, generator=gen)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        loss = model.loss(*reversal_pairs(gen, batch_size, min_len, max_len))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    src, _, tgt_out = reversal_pairs(gen, eval_size, min_len, max_len)
    pred = model.greedy_decode(src, max_len + 1)  # (B, <= max_len + 1)
    pred = F.pad(pred, (0, max_len + 1 - pred.shape[1]), value=EOS)
    scored = tgt_out != -100
    right = (pred == tgt_out) | ~scored
    return {
        "model": model,
        "loss": losses,
        "sequence_accuracy": float(right.all(dim=1).double().mean()),
        "token_accuracy": float((pred == tgt_out)[scored].double().mean()),
    }
