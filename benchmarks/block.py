"""Throughput of Transformer blocks, forward and forward+backward, against PyTorch's own (Chapter 5).

Target (issue 6): at B=8, L=256, d_model=512 (8 heads, d_ff=2048, ReLU, float32, CPU) the
post-LN :class:`course_lib.models.TransformerBlock` runs forward+backward within 1.3x of
``torch.nn.TransformerEncoderLayer(norm_first=False)`` with the same configuration.

Timings are interleaved (ours, theirs, ours, ...) and the best of several repeats is kept, so
that a machine shared with other work affects both sides alike.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from course_lib.block.config import BlockConfig
from course_lib.measure import best_times
from course_lib.models import TransformerBlock

TITLE = "Transformer block throughput (tokens/s), float32 on the CPU, against nn.TransformerEncoderLayer"
TARGET = 1.3


def _step(module: torch.nn.Module, x: torch.Tensor, backward: bool) -> Callable[[], None]:
    def fwd() -> None:
        with torch.no_grad():
            module(x)

    def fwd_bwd() -> None:
        module.zero_grad(set_to_none=True)
        x.grad = None
        module(x).sum().backward()

    return fwd_bwd if backward else fwd


def run(quick: bool = False) -> list[dict]:
    B, L, d, h, d_ff = (2, 64, 128, 4, 512) if quick else (8, 256, 512, 8, 2048)
    rounds = 2 if quick else 7
    torch.manual_seed(0)
    x = torch.randn(B, L, d, requires_grad=True)
    modules: dict[str, torch.nn.Module] = {}
    for pos in ("post", "pre", "parallel"):
        cfg = BlockConfig(d_model=d, n_heads=h, d_ff=d_ff, norm_position=pos)
        modules[f"ours {pos}-LN" if pos != "parallel" else "ours parallel"] = TransformerBlock(cfg)
    for norm_first, label in ((False, "post-LN"), (True, "pre-LN")):
        modules[f"torch TransformerEncoderLayer {label}"] = torch.nn.TransformerEncoderLayer(
            d, h, d_ff, dropout=0.0, batch_first=True, norm_first=norm_first
        ).train()
    rows = []
    for backward in (False, True):
        fns = {name: _step(m, x, backward) for name, m in modules.items()}
        best = best_times(fns, rounds=rounds)
        for name, t in best.items():
            rows.append(
                {
                    "block": name,
                    "pass": "forward+backward" if backward else "forward",
                    "B": B,
                    "L": L,
                    "d_model": d,
                    "ms": round(1e3 * t, 2),
                    "tokens_per_s": round(B * L / t),
                }
            )
    return rows


def _lookup(rows: list[dict], block: str, pass_: str) -> float:
    return next(r["tokens_per_s"] for r in rows if r["block"] == block and r["pass"] == pass_)


def summary(rows: list[dict]) -> str:
    lines = []
    for pass_ in ("forward", "forward+backward"):
        for ours, theirs in (
            ("ours post-LN", "torch TransformerEncoderLayer post-LN"),
            ("ours pre-LN", "torch TransformerEncoderLayer pre-LN"),
        ):
            ratio = _lookup(rows, theirs, pass_) / _lookup(rows, ours, pass_)
            lines.append(f"{pass_:<17} {ours:<13}: torch is {ratio:.2f}x as fast as ours")
    ratio = _lookup(rows, "torch TransformerEncoderLayer post-LN", "forward+backward") / _lookup(
        rows, "ours post-LN", "forward+backward"
    )
    met = "MET" if ratio <= TARGET else "NOT MET"
    lines.append(
        f"target (post-LN forward+backward within {TARGET}x of TransformerEncoderLayer): "
        f"{met} ({ratio:.2f}x)"
    )
    return "\n".join(lines)
