"""What attention costs in FLOPs, counted (Chapter 4).

FLOPs count a multiply-add as two, as in chapter 1. For self-attention over L tokens of width
d = h * d_k (the usual d_k = d_v = d / h, d_o = d):

* projections Q, K, V and the output W_O: 4 products of (L, d) by (d, d), ``8 L d^2``;
* scores Q K^T: ``2 L^2 d`` (h heads of ``2 L^2 d_k``); weighted sum A V: ``2 L^2 d``;
* softmax: about 5 operations per logit (scale, subtract the max, exp, sum, divide), ``5 h L^2``.

A position-wise feed-forward network with hidden width d_ff costs ``4 L d d_ff`` (two products;
``16 L d^2`` at the usual d_ff = 4d). So the ratio FFN / attention is
``16 d^2 / (8 d^2 + 4 L d)`` = ``4d / (2d + L)`` (softmax aside): never more than 2, and below 1
once L > 2d.

Arithmetic only, with no PyTorch: chapter 4's NumPy half uses these counts where PyTorch is
not installed. :mod:`course_lib.attention.cost` re-exports them beside its measurements.
"""

from __future__ import annotations

from course_lib.checks import check_int

__all__ = ["attention_flops", "crossover_length", "ffn_flops"]


def attention_flops(L_q: int, L_k: int, d_model: int, n_heads: int) -> dict[str, int]:
    """FLOPs of one multi-head attention layer for one sequence, by component.

    d_k = d_v = d_model / n_heads; the keys' and values' sources have width d_model.

    >>> f = attention_flops(4, 4, 8, 2)
    >>> f["projections"], f["scores"], f["weighted_sum"], f["softmax"]
    (2048, 256, 256, 160)
    """
    L_q, L_k = check_int(L_q, "L_q", low=1), check_int(L_k, "L_k", low=1)
    d, h = check_int(d_model, "d_model", low=1), check_int(n_heads, "n_heads", low=1)
    if d % h:
        raise ValueError(f"d_model={d} is not divisible by n_heads={h}")
    flops = {
        "projections": 2 * L_q * d * d + 2 * 2 * L_k * d * d + 2 * L_q * d * d,  # Q, K, V, W_O
        "scores": 2 * L_q * L_k * d,  # h heads of Q^i (K^i)^T: 2 L_q L_k d_k each
        "weighted_sum": 2 * L_q * L_k * d,  # h heads of A^i V^i
        "softmax": 5 * h * L_q * L_k,
    }
    flops["total"] = sum(flops.values())
    return flops


def ffn_flops(L: int, d_model: int, d_ff: int | None = None) -> int:
    """FLOPs of a position-wise feed-forward network (two products) over L tokens.

    >>> ffn_flops(4, 8)  # d_ff = 4 * 8: 2 * 4 * 8 * 32 twice
    4096
    """
    L, d = check_int(L, "L", low=1), check_int(d_model, "d_model", low=1)
    d_ff = 4 * d if d_ff is None else check_int(d_ff, "d_ff", low=1)
    return 2 * L * d * d_ff * 2


def crossover_length(d_model: int, d_ff: int | None = None, *, core_only: bool = False) -> float:
    """The length L at which self-attention's FLOPs equal the FFN's (softmax ignored).

    ``core_only=True`` compares the FFN with the L^2 part alone (scores and weighted sum), as
    if the four projections were not part of attention.

    >>> crossover_length(512), crossover_length(512, core_only=True)
    (1024.0, 2048.0)
    """
    d = check_int(d_model, "d_model", low=1)
    d_ff = 4 * d if d_ff is None else check_int(d_ff, "d_ff", low=1)
    # attention 8 L d^2 + 4 L^2 d  =  FFN 4 L d d_ff   =>   L = (4 d d_ff - 8 d^2) / (4 d)
    linear = 0 if core_only else 8 * d * d
    return max(0.0, (4 * d * d_ff - linear) / (4 * d))
