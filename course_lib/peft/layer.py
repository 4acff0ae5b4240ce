"""The LoRA layer as a ``torch.nn.Module``: a frozen linear map plus a trainable low-rank update.

:class:`LoRALinear` holds a frozen weight ``W`` (d, k) and bias, and trainable ``A`` (r, k),
``B`` (d, r); ``forward`` computes ``x W^T + (alpha / r) (x A^T) B^T + b`` (Hu et al., 2021).
``B`` starts at zero, so at initialisation the layer is exactly the pre-trained one. ``merge()``
folds the update into ``W`` (inference then costs nothing extra); ``unmerge()`` takes it out again.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from course_lib.checks import as_tensor, check_int, check_real, fmt_shape
from course_lib.peft.accelerated import lora_core

__all__ = ["LoRALinear", "check_rank"]


def check_rank(rank: Any, d: int, k: int, what: str = "the layer") -> int:
    """A rank ``1 <= r <= min(d, k)``, or a ValueError naming the layer.

    >>> check_rank(0, 4, 8)
    Traceback (most recent call last):
    ...
    ValueError: rank must be at least 1, got 0
    >>> check_rank(5, 4, 8, "blocks.0.w_o")
    Traceback (most recent call last):
    ...
    ValueError: rank r = 5 is larger than blocks.0.w_o allows: W is (4, 8) and r must be at most min(d, k) = 4
    """
    r = check_int(rank, "rank", low=1)
    if r > min(d, k):
        raise ValueError(
            f"rank r = {r} is larger than {what} allows: W is ({d}, {k}) and r must be at most "
            f"min(d, k) = {min(d, k)}"
        )
    return r


class LoRALinear(nn.Module):
    """``h = x W^T + (alpha / r) (x A^T) B^T + b`` with ``W``, ``b`` frozen and ``A``, ``B`` trained.

    Args:
        weight: the pre-trained ``W`` (d, k), copied and frozen.
        bias: the pre-trained bias (d,) or None, copied and frozen.
        rank: ``r``, 1 to ``min(d, k)``.
        alpha: the scale numerator; the update is multiplied by ``alpha / r``.
        generator: for ``A``'s Gaussian initialisation (``B`` starts at zero).

    >>> layer = LoRALinear(torch.eye(3), None, rank=1, alpha=4.0)
    >>> x = torch.ones(2, 3)
    >>> torch.equal(layer(x), x)  # B = 0: the pre-trained layer, exactly
    True
    >>> [n for n, p in layer.named_parameters() if p.requires_grad]
    ['A', 'B']
    """

    def __init__(
        self,
        weight: Any,
        bias: Any = None,
        *,
        rank: int,
        alpha: float,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        W = as_tensor(weight, "weight", ndim=2).detach().clone()
        d, k = W.shape
        self.rank = check_rank(rank, d, k)
        self.alpha = check_real(alpha, "alpha", low=0.0, low_open=True, high_open=True)
        self.scale = self.alpha / self.rank
        self.weight = nn.Parameter(W, requires_grad=False)
        if bias is not None:
            b = as_tensor(bias, "bias", ndim=1).detach().clone().to(W.dtype)
            if b.shape != (d,):
                raise ValueError(f"bias must have shape ({d},), got {fmt_shape(b.shape)}")
            self.bias = nn.Parameter(b, requires_grad=False)
        else:
            self.bias = None
        A = torch.randn(self.rank, k, generator=generator, dtype=W.dtype) / math.sqrt(k)
        self.A = nn.Parameter(A.to(W.device))  # (r, k): Gaussian
        self.B = nn.Parameter(torch.zeros(d, self.rank, dtype=W.dtype, device=W.device))  # (d, r)
        self.merged = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (..., k) -> (..., d)."""
        if self.merged:  # W already holds W0 + (alpha / r) B A
            return nn.functional.linear(x, self.weight, self.bias)
        return lora_core(x, self.weight, self.A, self.B, self.scale, self.bias)

    @torch.no_grad()
    def merge(self) -> LoRALinear:
        """Fold the update into ``W``: ``W <- W + (alpha / r) B A``; the forward is then one matmul."""
        if self.merged:
            raise RuntimeError("the update is already merged into W; call unmerge() first")
        self.weight.addmm_(self.B, self.A, alpha=self.scale)
        self.merged = True
        return self

    @torch.no_grad()
    def unmerge(self) -> LoRALinear:
        """Take the update out of ``W`` again (up to rounding): ``W <- W - (alpha / r) B A``."""
        if not self.merged:
            raise RuntimeError("nothing to unmerge: the update is not merged into W")
        self.weight.addmm_(self.B, self.A, alpha=-self.scale)
        self.merged = False
        return self

    def extra_repr(self) -> str:
        d, k = self.weight.shape
        return f"d={d}, k={k}, rank={self.rank}, alpha={self.alpha}, merged={self.merged}"
