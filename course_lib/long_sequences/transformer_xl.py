"""Transformer-XL (Dai et al., 2019; Strabel's notes, eq. 25): segment recurrence, in PyTorch.

A stack of layers with relative attention (:func:`~course_lib.long_sequences.accelerated.xl_relative_logits`,
sinusoidal distance embeddings from chapter 6). The model reads a long sequence in two ways
that give the same numbers:

* :meth:`TransformerXL.forward_segments`: segment after segment; layer n of segment tau + 1
  takes its keys and values from ``[SG(memory); h^{n-1}_{tau+1}]``, the memory being the last
  ``mem_len`` hidden states of layer n - 1 (eq. 25), detached from the graph;
* :meth:`TransformerXL.forward_full`: one pass over the whole sequence, every position at once,
  with the mask :func:`recurrence_mask` that lets position i see exactly the keys the
  recurrence gives it: those j <= i no earlier than ``mem_len`` before its segment's start.

They agree to rounding (``tests/test_long_sequences.py``): the recurrence is dense attention
under a banded-by-segment mask. They differ in what they cost (the segment pass holds L x
(M + L) logits, the full pass T x T) and in their gradients: no gradient reaches an earlier
segment through the memory.

>>> model = TransformerXL(d_model=8, n_heads=2, n_layers=2, seed=0)
>>> x = torch.randn(1, 12, 8, generator=torch.Generator().manual_seed(0))
>>> seg = model.forward_segments(x, segment_len=4, mem_len=4)
>>> full = model.forward_full(x, segment_len=4, mem_len=4)
>>> torch.allclose(seg, full, atol=1e-5)
True
"""

from __future__ import annotations

import math

import torch
from torch import nn

from course_lib.checks import as_tensor, check_bool, check_int
from course_lib.long_sequences.accelerated import xl_relative_logits
from course_lib.positions.accelerated import sinusoidal_encoding

__all__ = ["TransformerXL", "XLLayer", "distance_embeddings", "recurrence_mask"]


def recurrence_mask(T: int, segment_len: int, mem_len: int) -> torch.Tensor:
    """(T, T) boolean: position i sees j when ``start(i) - mem_len <= j <= i``.

    ``start(i) = segment_len * (i // segment_len)`` is the first position of i's segment.

    >>> recurrence_mask(6, 2, 2).int()
    tensor([[1, 0, 0, 0, 0, 0],
            [1, 1, 0, 0, 0, 0],
            [1, 1, 1, 0, 0, 0],
            [1, 1, 1, 1, 0, 0],
            [0, 0, 1, 1, 1, 0],
            [0, 0, 1, 1, 1, 1]], dtype=torch.int32)
    """
    T = check_int(T, "T", low=1)
    L = check_int(segment_len, "segment_len", low=1)
    M = check_int(mem_len, "mem_len", low=0)
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    return (j <= i) & (j >= (i // L) * L - M)


def distance_embeddings(K: int, d_model: int) -> torch.Tensor:
    """Sinusoidal embeddings (chapter 6) of the distances K - 1, ..., 1, 0, shape (K, d_model)."""
    return sinusoidal_encoding(torch.arange(K - 1, -1, -1, dtype=torch.float32), d_model)


class XLLayer(nn.Module):
    """One layer: relative multi-head attention over [memory; segment], then a feed-forward
    network, each with a residual connection and layer norm after it (the paper's post-LN)."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int) -> None:
        super().__init__()
        self.h, self.d_head = n_heads, d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=False)
        self.w_kv = nn.Linear(d_model, 2 * d_model, bias=False)
        self.w_r = nn.Linear(d_model, d_model, bias=False)  # W_{k,R}: embeds the distances
        self.u = nn.Parameter(0.1 * torch.randn(n_heads, self.d_head))  # global content bias
        self.v = nn.Parameter(0.1 * torch.randn(n_heads, self.d_head))  # global position bias
        self.w_o = nn.Linear(d_model, d_model, bias=False)
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))

    def forward(self, h: torch.Tensor, context: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """h (B, L, d): the queries' states; context (B, K, d): ``[memory; h]``, K = M + L."""
        B, L, d = h.shape
        K = context.shape[1]
        q = self.w_q(h).view(B, L, self.h, self.d_head).transpose(1, 2)  # (B, h, L, d_h)
        k, v = self.w_kv(context).view(B, K, 2, self.h, self.d_head).permute(2, 0, 3, 1, 4)
        r = self.w_r(distance_embeddings(K, d).to(h)).view(K, self.h, self.d_head)  # (K, h, d_h)
        logits = torch.stack(
            [
                xl_relative_logits(q[:, n], k[:, n], r[:, n], self.u[n], self.v[n])
                for n in range(self.h)
            ],
            dim=1,
        )  # (B, h, L, K): the four terms, head by head
        logits = logits.masked_fill(~mask, float("-inf")) / math.sqrt(self.d_head)
        att = torch.softmax(logits, dim=-1) @ v  # (B, h, L, d_h)
        h = self.ln1(h + self.w_o(att.transpose(1, 2).reshape(B, L, d)))
        return self.ln2(h + self.ff(h))


class TransformerXL(nn.Module):
    """A stack of :class:`XLLayer` over input vectors (B, T, d_model) (no embedding, no head)."""

    def __init__(
        self, d_model: int, n_heads: int, n_layers: int, d_ff: int | None = None, seed: int = 0
    ) -> None:
        super().__init__()
        d = check_int(d_model, "d_model", low=2)
        h = check_int(n_heads, "n_heads", low=1)
        if d % h or (d // h) % 2:
            raise ValueError(f"d_model={d} must be n_heads={h} times an even head width")
        torch.manual_seed(check_int(seed, "seed", low=0))
        self.layers = nn.ModuleList(
            XLLayer(d, h, d_ff or 4 * d) for _ in range(check_int(n_layers, "n_layers", low=1))
        )

    def _check(self, x, segment_len, mem_len):
        x = as_tensor(x, "x", ndim=3)
        L = check_int(segment_len, "segment_len", low=1)
        M = check_int(mem_len, "mem_len", low=0)
        if x.shape[1] % L:
            raise ValueError(
                f"x has {x.shape[1]} positions, not a multiple of segment_len={L}: pad it to "
                f"{-(-x.shape[1] // L) * L}"
            )
        return x, L, M

    def forward_segments(
        self, x: torch.Tensor, segment_len: int, mem_len: int, detach: bool = True
    ) -> torch.Tensor:
        """Segment by segment with the cached memory of eq. (25); ``detach=False`` lets gradients
        flow into earlier segments (what the stop-gradient SG prevents)."""
        x, L, M = self._check(x, segment_len, mem_len)
        detach = check_bool(detach, "detach")
        mems = [x[:, :0]] * len(self.layers)  # empty memory for the first segment
        outs = []
        for s in range(0, x.shape[1], L):
            h = x[:, s : s + L]  # (B, L, d): layer 0's input of this segment
            new_mems = []
            for n, layer in enumerate(self.layers):
                context = torch.cat([mems[n], h], dim=1)  # (B, M' + L, d): [SG(mem); h]
                new_mems.append(context[:, -M:] if M else context[:, :0])
                K = context.shape[1]
                i = torch.arange(L)[:, None] + (K - L)  # query i sits at key position M' + i
                j = torch.arange(K)[None, :]
                h = layer(h, context, (j <= i).to(x.device))
            mems = [m.detach() if detach else m for m in new_mems]
            outs.append(h)
        return torch.cat(outs, dim=1)  # (B, T, d)

    def forward_full(self, x: torch.Tensor, segment_len: int, mem_len: int) -> torch.Tensor:
        """All positions at once under :func:`recurrence_mask` (T x T logits per head)."""
        x, L, M = self._check(x, segment_len, mem_len)
        mask = recurrence_mask(x.shape[1], L, M).to(x.device)
        h = x
        for layer in self.layers:
            h = layer(h, h, mask)
        return h
