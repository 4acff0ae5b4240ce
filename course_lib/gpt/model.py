"""The GPT as a ``torch.nn.Module`` (Chapter 8), running :mod:`course_lib.gpt.accelerated`.

Its parameters carry the names of :func:`course_lib.gpt.config.gpt_layout` (Chapter 5's:
``tok_emb``, ``pos_emb``, ``blocks.0.w_q`` of shape (h, d, d_head), ...), so its
``state_dict`` can be given to Chapter 5's :class:`~course_lib.models.DecoderOnlyModel` and to the
NumPy references unchanged. Initialisation follows GPT-2: every matrix N(0, 0.02^2), the two
projections that write into the residual stream (``w_o`` and the feed-forward's output) scaled
down by ``sqrt(2 n_layers)`` (or zero, with ``config.zero_init``), biases 0, gains 1.

>>> from course_lib.gpt.config import GPTConfig
>>> model = GPT(GPTConfig(vocab_size=11, context_length=8, n_layers=2, n_heads=2, d_model=8), seed=0)
>>> model(torch.tensor([[1, 2, 3]])).shape, model.count_parameters()
(torch.Size([1, 3, 11]), 1912)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from course_lib.gpt import accelerated as acc
from course_lib.gpt.config import GPTConfig, gpt_layout
from course_lib.gpt.params import nest

__all__ = ["GPT"]


class _Block(nn.Module):
    """Holds one block's parameters under Chapter 5's names (no forward of its own)."""

    def __init__(self, shapes: list[tuple[str, tuple[int, ...]]], **kw: Any) -> None:
        super().__init__()
        for name, shape in shapes:
            self.register_parameter(name, nn.Parameter(torch.empty(shape, **kw)))


class GPT(nn.Module):
    """A GPT (Strabel's notes eq. 21): tokens (..., L) -> logits (..., L, vocab_size).

    Args:
        config: a :class:`~course_lib.gpt.config.GPTConfig`.
        seed: seed of the initial weights (GPT-2's scheme); ``None`` uses the global generator.
        device, dtype: where and in which precision to create the parameters.
    """

    def __init__(
        self, config: GPTConfig, seed: int | None = None, *, device: Any = None, dtype: Any = None
    ) -> None:
        super().__init__()
        if not isinstance(config, GPTConfig):
            raise TypeError(f"config must be a GPTConfig, got {type(config).__name__}")
        self.config = config
        kw = {"device": device, "dtype": dtype}
        lay = gpt_layout(config)
        per_block = [(n.split(".", 2)[2], s) for n, s in lay if n.startswith("blocks.0.")]
        for name, shape in lay:
            if not name.startswith("blocks."):
                self.register_parameter(name, nn.Parameter(torch.empty(shape, **kw)))
        self.blocks = nn.ModuleList(_Block(per_block, **kw) for _ in range(config.n_layers))
        self.reset_parameters(seed)

    def reset_parameters(self, seed: int | None = None) -> None:
        """GPT-2's initialisation (see the module's docstring)."""
        g = None if seed is None else torch.Generator().manual_seed(seed)
        out_proj = "w_3" if self.config.gated else "w_2"
        scaled = 0.02 / math.sqrt(2 * self.config.n_layers)
        with torch.no_grad():
            for name, p in self.named_parameters():
                base = name.rsplit(".", 1)[-1]
                if base.endswith("_gain"):
                    p.fill_(1.0)
                elif base.endswith("_bias") or base.startswith("b_"):
                    p.zero_()
                elif self.config.zero_init and base in ("w_o", out_proj):
                    p.zero_()  # the block starts as the identity
                else:
                    std = scaled if base in ("w_o", out_proj) else 0.02
                    p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float32) * std)

    # -------------------------------------------------------------------- parameter views
    def parameter_dict(self) -> dict[str, Any]:
        """The parameters in the nested form of :mod:`course_lib.gpt.accelerated`."""
        return nest(dict(self.named_parameters()), self.config)

    def numpy_parameters(self) -> dict[str, Any]:
        """A float64 NumPy copy, nested, for :func:`course_lib.gpt.reference.gpt_forward`."""
        flat = {k: v.detach().cpu().double().numpy() for k, v in self.named_parameters()}
        return nest(flat, self.config)

    def count_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    @classmethod
    def from_parameters(cls, config: GPTConfig, params: Mapping[str, Any], **kw: Any) -> GPT:
        """A model holding copies of ``params`` (flat names or nested; arrays or tensors)."""
        from course_lib.gpt.params import check_params, flatten_names

        model = cls(config, **kw)
        p = flatten_names(
            check_params(
                params,
                config,
                lambda v, n: torch.as_tensor(
                    np.asarray(v) if not isinstance(v, torch.Tensor) else v
                ),
            )
        )
        with torch.no_grad():
            for name, param in model.named_parameters():
                param.copy_(p[name].to(param.dtype))
        return model

    # -------------------------------------------------------------------------- forward
    def hidden(self, tokens: Any, cache: acc.KVCache | None = None) -> torch.Tensor:
        """``h_n`` after the final norm, (..., L, d_model)."""
        start = 0 if cache is None else cache.length
        t = acc.check_tokens(tokens, self.config, self.tok_emb.device, start)
        return acc.hidden_states(t, self.parameter_dict(), self.config, cache)

    def forward(self, tokens: Any, cache: acc.KVCache | None = None) -> torch.Tensor:
        """Integer tokens (..., L) -> logits (..., L, V); with a ``cache``, tokens continue it."""
        head = self.tok_emb if self.config.tie_head else self.lm_head  # tied: h_n W_e^T
        return F.linear(self.hidden(tokens, cache), head)

    def loss(self, tokens: Any, lengths: Any = None) -> torch.Tensor:
        """The causal LM loss of eq. (20) on ``tokens`` (..., L): each position predicts the next."""
        return acc.causal_lm_loss(self(tokens), tokens, lengths)

    def new_cache(self) -> acc.KVCache:
        return acc.KVCache(self.config.n_layers)

    def extra_repr(self) -> str:
        c = self.config
        return (
            f"vocab_size={c.vocab_size}, context_length={c.context_length}, n_layers={c.n_layers}, "
            f"n_heads={c.n_heads}, d_model={c.d_model}, positions={c.positions!r}, "
            f"norm={c.norm!r}, parameters={self.count_parameters():,}"
        )
