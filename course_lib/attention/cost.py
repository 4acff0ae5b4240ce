"""What attention costs: FLOP counts, and time and tensor memory measured (Chapter 4).

The FLOP counts live in :mod:`course_lib.attention.flops` (no PyTorch) and are re-exported
here. FLOPs count a multiply-add as two, as in chapter 1. For self-attention over L tokens of width
d = h * d_k (the usual d_k = d_v = d / h, d_o = d):

* projections Q, K, V and the output W_O: 4 products of (L, d) by (d, d), ``8 L d^2``;
* scores Q K^T: ``2 L^2 d`` (h heads of ``2 L^2 d_k``); weighted sum A V: ``2 L^2 d``;
* softmax: about 5 operations per logit (scale, subtract the max, exp, sum, divide), ``5 h L^2``.

A position-wise feed-forward network with hidden width d_ff costs ``4 L d d_ff`` (two products;
``16 L d^2`` at the usual d_ff = 4d). So the ratio FFN / attention is
``16 d^2 / (8 d^2 + 4 L d)`` = ``4d / (2d + L)`` (softmax aside): never more than 2, and below 1
once L > 2d.

Memory is measured with :func:`course_lib.measure.peak_tensor_memory`, which follows every
tensor the PyTorch dispatcher creates while a function runs (forward and backward) and reports
the peak of the bytes alive at once, beyond what existed before. It is exact for what it sees and the same on
every machine; it does not see scratch buffers a fused kernel allocates internally (those are a
few tiles per thread).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from course_lib.attention.accelerated import scaled_dot_product_attention
from course_lib.attention.flops import attention_flops, crossover_length, ffn_flops
from course_lib.checks import check_int
from course_lib.measure import STEADY, peak_tensor_memory, steady, timed

__all__ = [
    "STEADY",
    "attention_flops",
    "crossover_length",
    "ffn_flops",
    "interleaved_times",
    "measure_attention",
    "steady",
]


# ----------------------------------------------------------------------------- measuring
IMPLEMENTATIONS: dict[str, Callable[..., torch.Tensor]] = {
    "explicit": lambda q, k, v, mask: scaled_dot_product_attention(q, k, v, mask),
    "fused": lambda q, k, v, mask: F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
}


def measure_attention(
    lengths: Sequence[int],
    *,
    batch: int = 1,
    n_heads: int = 8,
    d_head: int = 64,
    implementations: Sequence[str] = ("explicit", "fused"),
    causal: bool = False,
    backward: bool = True,
    repeats: int = 3,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    time_it: bool = True,
    clock: str = "wall",
) -> list[dict[str, Any]]:
    """Time and peak tensor memory of attention (forward, and backward if asked) against L.

    Each row: ``L``, ``implementation``, ``seconds``, the best of ``repeats`` interleaved
    rounds (in each round every implementation is called once untimed, then once timed),
    ``spread``, the second-best time over the best (1.0 for a single round: a spread well above
    1 says the best time was not reproduced, so it is noise, not data), ``peak_MiB``
    (:func:`course_lib.measure.peak_tensor_memory`) and ``weights_MiB``, the size of one
    (B, h, L, L) tensor of attention weights in this dtype. ``seconds`` and ``spread`` are
    absent if ``time_it=False``. ``clock="cpu"`` times the process's CPU time instead of the
    wall clock (see :func:`interleaved_times`).

    >>> rows = measure_attention([8, 16], n_heads=2, d_head=4, time_it=False)
    >>> [(r["L"], r["implementation"]) for r in rows]
    [(8, 'explicit'), (8, 'fused'), (16, 'explicit'), (16, 'fused')]
    """
    for name in implementations:
        if name not in IMPLEMENTATIONS:
            raise ValueError(f"unknown implementation {name!r}; use {sorted(IMPLEMENTATIONS)}")
    rows = []
    size = torch.tensor([], dtype=dtype).element_size()
    for L in lengths:
        L = check_int(L, "L", low=1)
        shape = (batch, n_heads, L, d_head)  # (B, h, L, d_k)
        q, k, v = (torch.randn(shape, device=device, dtype=dtype) for _ in range(3))
        for t in (q, k, v):
            t.requires_grad_(backward)
        mask = torch.ones(L, L, dtype=torch.bool, device=device).tril() if causal else None
        grad = torch.randn(shape, device=device, dtype=dtype)
        steps = {}
        for name in implementations:
            fn = IMPLEMENTATIONS[name]

            def step(fn=fn, q=q, k=k, v=v, mask=mask, grad=grad) -> None:
                out = fn(q, k, v, mask)  # (B, h, L, d_k)
                if backward:
                    q.grad = k.grad = v.grad = None
                    out.backward(grad)

            steps[name] = step
        times = (
            interleaved_times(steps, rounds=repeats, device=device, clock=clock) if time_it else {}
        )
        for name, step in steps.items():
            row: dict[str, Any] = {"L": L, "implementation": name}
            if time_it:
                best = times[name]
                row["seconds"] = best[0]
                row["spread"] = best[1] / best[0] if len(best) > 1 and best[0] > 0 else 1.0
            row["peak_MiB"] = peak_tensor_memory(step, device=device) / 2**20
            row["weights_MiB"] = batch * n_heads * L * L * size / 2**20
            rows.append(row)
    return rows


def interleaved_times(
    steps: dict[str, Callable[[], Any]],
    *,
    rounds: int = 3,
    device: Any = None,
    clock: str = "wall",
) -> dict[str, list[float]]:
    """Seconds of every timed call of each step, sorted, over ``rounds`` interleaved rounds.

    In each round every step is called once untimed (caches, and the allocator as the step's
    own call leaves it), then once timed with :func:`course_lib.measure.timed`. Interleaving
    spreads a drift of the machine's load over all the steps alike.

    ``clock="wall"`` keeps the wall-clock time; ``clock="cpu"`` the process's CPU time, which on
    a machine shared with other jobs leaves out the time spent waiting for a core (a long call
    is preempted more often than a short one, so wall times inflate ratios between lengths). It
    measures the arithmetic only when the work runs on the CPU, on one thread.

    >>> t = interleaved_times({"a": lambda: None, "b": lambda: None}, rounds=2)
    >>> sorted(t), len(t["a"]), t["a"] == sorted(t["a"])
    (['a', 'b'], 2, True)
    """
    rounds = check_int(rounds, "rounds", low=1)
    if clock not in ("wall", "cpu"):
        raise ValueError(f"clock must be 'wall' or 'cpu', got {clock!r}")
    if clock == "cpu" and device is not None and torch.device(device).type != "cpu":
        raise ValueError(f"clock='cpu' measures CPU work only; the device is {device}")
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(rounds):
        for name, step in steps.items():
            step()
            timing = timed(step, device=device)
            times[name].append(timing.wall if clock == "wall" else timing.cpu)
    return {name: sorted(t) for name, t in times.items()}
