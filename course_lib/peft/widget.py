"""Widget of Chapter 13: choose a method and a rank; see what it trains, what it stores, how it learned.

The numbers come from :func:`course_lib.peft.counting.trainable_parameters` and
:func:`~course_lib.peft.counting.memory_bytes` (tested against measurements); the accuracy curve
is the one the comparison script measured for that method (``data/peft/comparison.json``). This
module only draws them.

>>> from course_lib.gpt.config import GPTConfig
>>> gpt = GPTConfig(vocab_size=77, context_length=64, n_layers=4, n_heads=4, d_model=128)
>>> html = method_html(gpt.decoder, "lora", 4, {"lora r=4": ([0, 500], [0.0, 1.0])})
>>> "32,768" in html and "<svg" in html
True
"""

from __future__ import annotations

import html as _html
from collections.abc import Mapping, Sequence

from course_lib.block.config import DecoderConfig
from course_lib.interact import live_html
from course_lib.peft.counting import METHODS, memory_bytes, trainable_parameters

__all__ = ["curve_key", "method_explorer", "method_html", "steer_explorer", "steer_html"]

TARGETS_ALL = ("w_qkv", "w_o", "w_1", "w_2")
Curves = Mapping[str, tuple[Sequence[int], Sequence[float]]]


def curve_key(method: str, rank: int) -> str:
    """The name the notebook stores a run's curve under: ``"lora r=4"``, ``"prefix"``, ...

    >>> curve_key("qlora", 4), curve_key("full", 4)
    ('qlora r=4', 'full')
    """
    return f"{method} r={rank}" if method in ("lora", "qlora") else method


def _svg(steps: Sequence[int], acc: Sequence[float], w: int = 320, h: int = 140) -> str:
    """A small line chart of accuracy against step, as inline SVG."""
    if not steps:
        return "<p>(no run measured for this choice)</p>"
    x_max = max(max(steps), 1)
    pts = " ".join(
        f"{30 + (w - 40) * s / x_max:.1f},{h - 20 - (h - 30) * a:.1f}"
        for s, a in zip(steps, acc, strict=True)
    )
    return (
        f'<svg width="{w}" height="{h}" role="img" aria-label="accuracy against step">'
        f'<line x1="30" y1="{h - 20}" x2="{w - 10}" y2="{h - 20}" stroke="#555"/>'
        f'<line x1="30" y1="10" x2="30" y2="{h - 20}" stroke="#555"/>'
        f'<text x="2" y="14" font-size="10">1.0</text><text x="2" y="{h - 20}" font-size="10">0</text>'
        f'<text x="{w // 2 - 20}" y="{h - 4}" font-size="10">step (0 to {x_max})</text>'
        f'<polyline fill="none" stroke="#0072B2" stroke-width="2" points="{pts}"/></svg>'
    )


def method_html(config: DecoderConfig, method: str, rank: int, curves: Curves) -> str:
    """Trainable parameters, memory (weights, gradients, Adam state) and the measured curve."""
    kw = {"rank": rank, "targets": TARGETS_ALL, "virtual_tokens": 8}
    n = trainable_parameters(config, method, **kw)
    mem = memory_bytes(config, method, **kw)
    total = sum(mem.values())
    rows = "".join(
        f"<tr><td>{_html.escape(k)}</td><td style='text-align:right'>{v / 1024:,.1f} KiB</td></tr>"
        for k, v in mem.items()
    )
    steps, acc = curves.get(curve_key(method, rank), ([], []))
    final = f"final accuracy {acc[-1]:.2f}" if acc else "not measured"
    return (
        f"<div class='peft-explorer'><p><b>{_html.escape(method)}</b>"
        f"{f' (rank {rank})' if method in ('lora', 'qlora') else ''}: "
        f"{n:,} trainable parameters; {final}</p>"
        f"<table>{rows}<tr><td><b>total</b></td><td style='text-align:right'><b>{total / 1024:,.1f} KiB</b>"
        f"</td></tr></table>{_svg(list(steps), list(acc))}</div>"
    )


def method_explorer(config: DecoderConfig, curves: Curves, ranks: Sequence[int] = (1, 2, 4, 8)):
    """A method menu and a rank slider over :func:`method_html`."""
    import ipywidgets as w

    method = w.Dropdown(options=list(METHODS), value="lora", description="method")
    rank = w.SelectionSlider(options=list(ranks), value=ranks[len(ranks) // 2], description="rank")
    out = live_html([method, rank], lambda: method_html(config, method.value, rank.value, curves))
    return w.VBox([w.HBox([method, rank]), out])


def _svg_lines(
    lines: Sequence[tuple[Sequence[int], Sequence[float]]], w: int = 320, h: int = 140
) -> str:
    """Several accuracy curves in one small inline SVG chart (a colour per line)."""
    colours = ("#0072B2", "#D55E00", "#009E73", "#CC79A7")
    x_max = max((max(s) for s, _ in lines if s), default=1) or 1
    body = "".join(
        f'<polyline fill="none" stroke="{colours[i % len(colours)]}" stroke-width="2" points="'
        + " ".join(
            f"{30 + (w - 40) * s / x_max:.1f},{h - 20 - (h - 30) * a:.1f}"
            for s, a in zip(steps, acc, strict=True)
        )
        + '"/>'
        for i, (steps, acc) in enumerate(lines)
    )
    return (
        f'<svg width="{w}" height="{h}" role="img" aria-label="accuracy against step, per seed">'
        f'<line x1="30" y1="{h - 20}" x2="{w - 10}" y2="{h - 20}" stroke="#555"/>'
        f'<line x1="30" y1="10" x2="30" y2="{h - 20}" stroke="#555"/>'
        f'<text x="2" y="14" font-size="10">1.0</text><text x="2" y="{h - 20}" font-size="10">0</text>'
        f'<text x="{w // 2 - 20}" y="{h - 4}" font-size="10">step (0 to {x_max})</text>{body}</svg>'
    )


def steer_html(runs: Sequence[Mapping], method: str, init: str, lr: float) -> str:
    """One setting of the code study's grid: accuracy per seed (mean over codes), and the loss."""
    from course_lib.peft.elicit import code_curves, grid_loss

    by_seed = code_curves(list(runs), method=method, init=init, lr=lr)
    rows = "".join(
        f"<tr><td>seed {seed}</td>"
        + "".join(
            f"<td style='text-align:right'>{c['accuracy'][c['steps'].index(s)]:.2f}</td>"
            for s in (0, 10, 20, c["steps"][-1])
        )
        + "</tr>"
        for seed, c in by_seed.items()
    )
    last = next(iter(by_seed.values()))["steps"][-1]
    head = "".join(f"<th>step {s}</th>" for s in (0, 10, 20, last))
    loss = grid_loss(list(runs), method=method, init=init, lr=lr)
    return (
        f"<div class='peft-explorer'><p><b>{_html.escape(method)}</b> tuning from "
        f"<b>{_html.escape(init)}</b> at learning rate {lr:g}: loss averaged over the run "
        f"{loss:.3f}</p><table><tr><th></th>{head}</tr>{rows}</table>"
        f"{_svg_lines([(c['steps'], c['accuracy']) for c in by_seed.values()])}</div>"
    )


def steer_explorer(runs: Sequence[Mapping]):
    """Menus for the method and the start, a slider over the grid's learning rates."""
    import ipywidgets as w

    lrs = sorted({r["lr"] for r in runs})
    method = w.Dropdown(options=["prompt", "prefix"], value="prompt", description="method")
    init = w.Dropdown(options=["text", "random"], value="text", description="start")
    lr = w.SelectionSlider(options=lrs, value=lrs[len(lrs) // 2], description="learning rate")
    out = live_html(
        [method, init, lr], lambda: steer_html(runs, method.value, init.value, lr.value)
    )
    return w.VBox([w.HBox([method, init, lr]), out])
