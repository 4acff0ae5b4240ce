"""Attention's cost (Chapter 4): the multi-head module against PyTorch's, and time and memory vs L.

Two parts, forward + backward, float32, on the course device (the targets are stated for CPU):

* ``module``: B=8, L=512, d_model=512, 8 heads. ``torch.nn.MultiheadAttention``
  (``need_weights=False``, its fastest path) against the course's
  :class:`~course_lib.attention.module.MultiHeadAttention` (fused kernel, and explicit), and the
  bare attention (B, h, L, d_k) explicit against ``F.scaled_dot_product_attention``.
  Target: the module within 1.3x of ``torch.nn.MultiheadAttention``.
* ``sweep``: the bare attention for L = 128 ... 4096 at B=1, 8 heads of 64, on one CPU thread
  (best of 5 interleaved rounds): time and peak tensor memory
  (:func:`~course_lib.measure.peak_tensor_memory`) of the explicit computation, which stores
  (B, h, L, L) tensors, and of the fused kernel, which does not.

A time counts as data only if the second-best round reproduces it within x1.25
(:func:`course_lib.attention.cost.steady`); the table marks the others ``unsteady``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from course_lib.attention.accelerated import scaled_dot_product_attention
from course_lib.attention.cost import interleaved_times, measure_attention, steady
from course_lib.attention.module import MultiHeadAttention, to_torch_multihead
from course_lib.device import get_device
from course_lib.measure import peak_tensor_memory

TITLE = "Attention: time and peak tensor memory, forward + backward, float32"
TARGET = 1.3


def _row(part: str, what: str, B: int, L: int, seconds: float, spread: float, peak: int) -> dict:
    """One table row; a time whose best was not reproduced (``spread`` above
    :data:`course_lib.attention.cost.STEADY`) is kept in ``seconds`` but marked ``unsteady``."""
    row = {"seconds": seconds, "spread": spread}
    return {
        "part": part,
        "what": what,
        "B": B,
        "L": L,
        "seconds": float(f"{seconds:.4g}"),
        "timing": "steady" if steady(row) else f"unsteady (2nd best x{spread:.2f})",
        "peak_MiB": round(peak / 2**20, 1),
    }


def _module_rows(B: int, L: int, d: int, h: int, repeats: int, device: torch.device) -> list[dict]:
    torch.manual_seed(0)
    ours = MultiHeadAttention(d, h, device=device)
    theirs = to_torch_multihead(**{k: v.detach() for k, v in ours.stacked_weights().items()})
    explicit = MultiHeadAttention.explicit(ours)
    x = torch.randn(B, L, d, device=device, requires_grad=True)
    grad = torch.randn(B, L, d, device=device)
    with torch.no_grad():  # the three layers compute the same function
        ref = theirs(x, x, x, need_weights=False)[0]
        torch.testing.assert_close(ours(x), ref, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(explicit(x), ref, rtol=1e-4, atol=1e-5)

    def step(layer, torch_layer: bool = False):
        def run() -> None:
            out = layer(x, x, x, need_weights=False)[0] if torch_layer else layer(x)
            x.grad = None
            layer.zero_grad(set_to_none=True)
            out.backward(grad)

        return run

    shape = (B, h, L, d // h)  # (B, h, L, d_k)
    q, k, v = (torch.randn(shape, device=device, requires_grad=True) for _ in range(3))
    g = torch.randn(shape, device=device)

    def bare(attend):
        def run() -> None:
            q.grad = k.grad = v.grad = None
            attend(q, k, v).backward(g)

        return run

    steps = {
        "torch.nn.MultiheadAttention": step(theirs, True),
        "course MultiHeadAttention (fused)": step(ours),
        "course MultiHeadAttention (explicit)": step(explicit),
        "F.scaled_dot_product_attention": bare(F.scaled_dot_product_attention),
        "explicit attention (course_lib)": bare(scaled_dot_product_attention),
    }
    # interleaved rounds, best of each: a machine whose load drifts affects all alike
    times = interleaved_times(steps, rounds=repeats, device=device)
    return [
        _row(
            "module",
            what,
            B,
            L,
            times[what][0],
            times[what][1] / times[what][0] if len(times[what]) > 1 else 1.0,
            peak_tensor_memory(fn, device=device),
        )
        for what, fn in steps.items()
    ]


def run(quick: bool = False) -> list[dict]:
    device = get_device()
    if quick:
        rows = _module_rows(B=2, L=128, d=128, h=4, repeats=2, device=device)
        lengths = [128, 256, 512]
    else:
        rows = _module_rows(B=8, L=512, d=512, h=8, repeats=5, device=device)
        lengths = [128, 256, 512, 1024, 2048, 4096]
    threads = torch.get_num_threads()
    if device.type == "cpu":
        # one thread: small calls on a busy machine otherwise wait for a descheduled worker
        # thread, which adds a steady tens of milliseconds that looks like data
        torch.set_num_threads(1)
    try:
        sweep = measure_attention(
            lengths, batch=1, n_heads=8, d_head=64, repeats=3 if quick else 5, device=device
        )
    finally:
        torch.set_num_threads(threads)
    for r in sweep:
        name = (
            "explicit attention (course_lib)"
            if r["implementation"] == "explicit"
            else ("F.scaled_dot_product_attention")
        )
        rows.append(
            _row("sweep", name, 1, r["L"], r["seconds"], r["spread"], int(r["peak_MiB"] * 2**20))
        )
    return rows


def summary(rows: list[dict]) -> str:
    mod = {r["what"]: r for r in rows if r["part"] == "module"}
    ratio = (
        mod["course MultiHeadAttention (fused)"]["seconds"]
        / mod["torch.nn.MultiheadAttention"]["seconds"]
    )
    expl = (
        mod["explicit attention (course_lib)"]["seconds"]
        / mod["F.scaled_dot_product_attention"]["seconds"]
    )
    verdict = "MET" if ratio <= TARGET else "NOT MET"
    lines = [
        f"target: course MultiHeadAttention within {TARGET}x of torch.nn.MultiheadAttention "
        f"(forward + backward): {ratio:.2f}x -> {verdict}",
        f"explicit attention / F.scaled_dot_product_attention: {expl:.2f}x the time, "
        f"{mod['explicit attention (course_lib)']['peak_MiB'] / max(mod['F.scaled_dot_product_attention']['peak_MiB'], 1e-9):.1f}x the peak memory",
    ]
    sweep = [r for r in rows if r["part"] == "sweep" and r["what"].startswith("explicit")]
    if len(sweep) >= 2:
        a, b = sweep[-2], sweep[-1]
        lines.append(
            f"explicit attention, L {a['L']} -> {b['L']}: time x{b['seconds'] / a['seconds']:.1f}, "
            f"peak memory x{b['peak_MiB'] / a['peak_MiB']:.1f} (quadratic: x4 per doubling)"
        )
    unsteady = [r for r in rows if r["timing"] != "steady"]
    if unsteady:
        lines.append(
            f"{len(unsteady)} of {len(rows)} times were not reproduced within "
            "x1.25 by their second-best round (marked unsteady): noise, not data; rerun on a "
            "quiet machine"
        )
    lines.append(f"torch threads: {torch.get_num_threads()}")
    return "\n".join(lines)
