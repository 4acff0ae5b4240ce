"""Longformer's self-attention (Beltagy et al., 2020) written from its pattern, in PyTorch.

Every token attends to its window of ``window`` neighbours on each side and to the global
tokens; each global token attends to every token, with its **own** projections (``query_global``,
``key_global``, ``value_global``). Written here as chapter 4's dense attention under the mask
``sliding_window_mask | global columns`` (clear, O(L^2)); the banded computation of the window is
:func:`course_lib.long_sequences.accelerated.sliding_window_attention`. The test suite checks it
against Hugging Face's ``LongformerSelfAttention`` built from a config with random weights.

>>> torch.manual_seed(0) is not None
True
>>> p = {n: torch.randn(8, 8) for n in ("query", "key", "value", "query_global", "key_global", "value_global")}
>>> out = longformer_self_attention(torch.randn(1, 6, 8), p, n_heads=2, window=1, global_idx=[0])
>>> tuple(out.shape)
(1, 6, 8)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch

from course_lib.attention.accelerated import scaled_dot_product_attention
from course_lib.checks import as_tensor, check_int
from course_lib.long_sequences.accelerated import global_mask, sliding_window_mask
from course_lib.long_sequences.checks import check_global_indices

__all__ = ["PROJECTIONS", "longformer_self_attention"]

#: The six projections of a Longformer attention layer, named as Hugging Face names them.
PROJECTIONS = ("query", "key", "value", "query_global", "key_global", "value_global")


def _project(x, params, name, n_heads):
    w = params[name]
    b = params.get(f"{name}_bias")
    y = x @ w.T + (0 if b is None else b)  # (B, L, d): nn.Linear's convention, weight (out, in)
    return y.unflatten(-1, (n_heads, -1)).transpose(1, 2)  # (B, h, L, d_h)


def longformer_self_attention(
    x: Any, params: Mapping[str, torch.Tensor], n_heads: int, window: int, global_idx: Any = ()
) -> torch.Tensor:
    """Longformer attention of ``x`` (B, L, d) before its output projection, (B, L, d).

    ``params`` maps each of :data:`PROJECTIONS` to a (d, d) weight (and optionally
    ``"<name>_bias"`` to a (d,) bias); ``window`` is the number of neighbours on each side
    (Hugging Face's ``attention_window`` is twice it); ``global_idx`` are the global positions.
    """
    x = as_tensor(x, "x", ndim=3)
    h = check_int(n_heads, "n_heads", low=1)
    B, L, d = x.shape
    if d % h:
        raise ValueError(f"the width d={d} of x is not divisible by n_heads={h}")
    missing = [n for n in PROJECTIONS if n not in params]
    if missing:
        raise ValueError(f"params lacks the projections {missing}; it needs all of {PROJECTIONS}")
    idx = torch.from_numpy(check_global_indices(global_idx, L)).to(x.device)
    is_global = torch.zeros(L, dtype=torch.bool, device=x.device)
    is_global[idx] = True
    scale = 1 / math.sqrt(d // h)
    # every token: its window and the global tokens, with the ordinary projections
    mask = (sliding_window_mask(L, min(window, L - 1)) | global_mask(L, idx.cpu())).to(x.device)
    q, k, v = (_project(x, params, n, h) for n in ("query", "key", "value"))  # (B, h, L, d_h)
    out = scaled_dot_product_attention(q, k, v, mask=mask, scale=scale)  # (B, h, L, d_h)
    if idx.numel():
        # the global tokens' rows: every key, with the global projections
        qg, kg, vg = (_project(x, params, n, h) for n in PROJECTIONS[3:])
        rows = scaled_dot_product_attention(qg[:, :, idx], kg, vg, scale=scale)  # (B, h, g, d_h)
        out = out.index_copy(2, idx, rows)
    return out.transpose(1, 2).reshape(B, L, d)  # (B, L, d)
