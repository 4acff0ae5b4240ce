"""Muon as a ``torch.optim.Optimizer`` (Chapter 8's speed-run section).

The maths is :func:`course_lib.gpt.accelerated.muon_step` (and its NumPy reference); this class
applies it in place to every matrix of a model, keeping one momentum buffer per parameter.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from course_lib.checks import check_int, check_real
from course_lib.gpt.accelerated import _orthogonalise

__all__ = ["Muon"]


class Muon(torch.optim.Optimizer):
    """Muon: SGD with Nesterov momentum whose update is orthogonalised by :func:`newton_schulz`.

    For the hidden matrices only (embeddings, the output layer and gains stay with AdamW).
    Each parameter is given with the 2-D view to orthogonalise: ``fold="heads_in"`` for
    (h, d, d_head) tensors (viewed as (d, h*d_head)), ``"heads_out"`` for (h, d_head, d)
    (viewed as (h*d_head, d)), ``None`` for a matrix.

    >>> w = torch.nn.Parameter(torch.zeros(3, 2)); w.grad = torch.ones(3, 2)
    >>> _ = Muon([w], lr=0.1).step()
    >>> bool(torch.all(w < 0))
    True
    """

    def __init__(
        self,
        params: Any,
        lr: float = 0.02,
        momentum: float = 0.95,
        nesterov: bool = True,
        steps: int = 5,
    ) -> None:
        check_real(lr, "lr", low=0.0)
        check_real(momentum, "momentum", low=0.0, high=1.0, high_open=True)
        check_int(steps, "steps", low=0)
        defaults = {"lr": lr, "momentum": momentum, "nesterov": nesterov, "steps": steps}
        super().__init__(params, defaults)
        for group in self.param_groups:
            group.setdefault("fold", None)
            for p in group["params"]:
                if p.ndim not in (2, 3):
                    raise ValueError(
                        f"Muon trains matrices; got a parameter of shape {tuple(p.shape)}"
                    )

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        loss = None if closure is None else closure()
        for group in self.param_groups:
            beta, fold = group["momentum"], group["fold"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "momentum" not in state:
                    state["momentum"] = torch.zeros_like(p)
                buf = state["momentum"]
                buf.mul_(beta).add_(p.grad)  # M <- beta M + G
                d = p.grad.add(buf, alpha=beta) if group["nesterov"] else buf
                if fold == "heads_in":  # (h, d, d_head) -> (d, h*d_head)
                    d2 = d.permute(1, 0, 2).reshape(d.shape[1], -1)
                elif fold == "heads_out":  # (h, d_head, d) -> (h*d_head, d)
                    d2 = d.reshape(-1, d.shape[-1])
                else:
                    d2 = d
                o = _orthogonalise(d2, group["steps"], 1e-7)
                o = o * math.sqrt(max(1.0, o.shape[0] / o.shape[1]))
                if fold == "heads_in":
                    o = o.reshape(d.shape[1], d.shape[0], d.shape[2]).permute(1, 0, 2)
                else:
                    o = o.reshape(d.shape)
                p.add_(o, alpha=-group["lr"])
        return loss
