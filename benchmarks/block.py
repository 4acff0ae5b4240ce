"""Throughput of Transformer blocks, forward and forward+backward, against PyTorch's own (Chapter 5).

Target (issue 6): at B=8, L=256, d_model=512 (8 heads, d_ff=2048, ReLU, float32, CPU) the
post-LN :class:`course_lib.models.TransformerBlock` runs forward+backward within 1.3x of
``torch.nn.TransformerEncoderLayer(norm_first=False)`` with the same configuration.

The encoder-decoder of section 5.9 (one encoder and one decoder block, a causal target mask)
is timed the same way against ``torch.nn.Transformer`` with the same weights.

Timings are interleaved (ours, theirs, ours, ...) and the best of several repeats is kept, so
that a machine shared with other work affects both sides alike.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

import course_lib.block.accelerated as fast
from course_lib.block.config import BlockConfig
from course_lib.block.encoder_decoder import transformer_parameters
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


class _OurEncoderDecoder(torch.nn.Module):
    """Our stacks holding a ``torch.nn.Transformer``'s weights, with its call signature."""

    def __init__(self, theirs: torch.nn.Transformer) -> None:
        super().__init__()
        self.config, params = transformer_parameters(theirs)
        self.flat = torch.nn.ParameterDict()
        for k, v in params.items():
            if isinstance(v, list):
                for r, blk in enumerate(v):
                    for n, t in blk.items():
                        self.flat[f"{k}_{r}_{n}"] = torch.nn.Parameter(t)
            else:
                self.flat[k] = torch.nn.Parameter(v)

    def forward(self, x: torch.Tensor, y: torch.Tensor, tgt_mask: torch.Tensor) -> torch.Tensor:
        p: dict = {"encoder": [], "decoder": []}
        for k, v in self.flat.items():
            side, _, rest = k.partition("_")
            if side in p and rest[:1].isdigit():
                r, _, n = rest.partition("_")
                while len(p[side]) <= int(r):
                    p[side].append({})
                p[side][int(r)][n] = v
            else:
                p[k] = v
        return fast.encoder_decoder_stack(x, y, p, self.config, tgt_mask=tgt_mask)


def _pair_step(module, x, y, mask, backward: bool, ours: bool) -> Callable[[], None]:
    def call() -> torch.Tensor:
        return module(x, y, mask) if ours else module(x, y, tgt_mask=~mask, tgt_is_causal=True)

    def fwd() -> None:
        with torch.no_grad():
            call()

    def fwd_bwd() -> None:
        module.zero_grad(set_to_none=True)
        call().sum().backward()

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
    theirs_ed = torch.nn.Transformer(d, h, 1, 1, d_ff, dropout=0.0, batch_first=True).train()
    ours_ed = _OurEncoderDecoder(theirs_ed)
    y = torch.randn(B, L, d)
    causal = torch.ones(L, L, dtype=torch.bool).tril()
    rows = []
    for backward in (False, True):
        fns = {name: _step(m, x, backward) for name, m in modules.items()}
        fns["ours encoder-decoder post-LN"] = _pair_step(ours_ed, x, y, causal, backward, True)
        fns["torch Transformer post-LN"] = _pair_step(theirs_ed, x, y, causal, backward, False)
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
            ("ours encoder-decoder post-LN", "torch Transformer post-LN"),
        ):
            ratio = _lookup(rows, theirs, pass_) / _lookup(rows, ours, pass_)
            lines.append(f"{pass_:<17} {ours:<28}: torch is {ratio:.2f}x as fast as ours")
    ratio = _lookup(rows, "torch TransformerEncoderLayer post-LN", "forward+backward") / _lookup(
        rows, "ours post-LN", "forward+backward"
    )
    met = "MET" if ratio <= TARGET else "NOT MET"
    lines.append(
        f"target (post-LN forward+backward within {TARGET}x of TransformerEncoderLayer): "
        f"{met} ({ratio:.2f}x)"
    )
    return "\n".join(lines)
