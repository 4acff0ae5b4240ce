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
        todo: dict[tuple[int, int], list[tuple[torch.Tensor, torch.Tensor, float, str | None]]] = {}
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
                d2 = _view(d, fold)
                if d2.shape[0] > d2.shape[1]:  # wide side up, so equal shapes batch together
                    d2 = d2.mT
                todo.setdefault(tuple(d2.shape), []).append((p, d2, group["lr"], fold))
        steps = self.param_groups[0]["steps"]
        for items in todo.values():  # one batched Newton-Schulz per shape
            ortho = _orthogonalise(torch.stack([d2 for _, d2, _, _ in items]), steps, 1e-7)
            for (p, _, lr, fold), o in zip(items, ortho, strict=True):
                wide = _view(p, fold)
                if wide.shape[0] > wide.shape[1]:
                    o = o.mT
                scale = math.sqrt(max(1.0, o.shape[0] / o.shape[1]))
                p.add_(_unview(o, p, fold), alpha=-lr * scale)
        return loss


def _view(t: torch.Tensor, fold: str | None) -> torch.Tensor:
    """The 2-D view of a parameter that Muon orthogonalises."""
    if fold == "heads_in":  # (h, d, d_head) -> (d, h*d_head): the fused projection
        return t.permute(1, 0, 2).reshape(t.shape[1], -1)
    if fold == "heads_out":  # (h, d_head, d) -> (h*d_head, d)
        return t.reshape(-1, t.shape[-1])
    return t


def _unview(o: torch.Tensor, p: torch.Tensor, fold: str | None) -> torch.Tensor:
    """The inverse of :func:`_view`: a 2-D update back in the parameter's shape."""
    if fold == "heads_in":  # (d, h*d_head) -> (h, d, d_head)
        return o.reshape(p.shape[1], p.shape[0], p.shape[2]).permute(1, 0, 2)
    return o.reshape(p.shape)
