"""Long sequences (Chapter 11): time and peak tensor memory of attention against the length L.

One head (inputs (1, 1, L, 64)), d = 64, float32, forward pass, on the course device (the
targets are stated for CPU):

* ``flash``: the blockwise attention with the online softmax
  (:func:`course_lib.long_sequences.accelerated.flash_attention`, blocks of 512) at
  L = 65,536, where the (L, L) matrix alone would take 16 GiB. Target: extra peak memory (beyond
  q, k, v and the output) under 64 MiB.
* ``vs_sdpa``: the same at L = 8192 against ``F.scaled_dot_product_attention``, on one thread
  and on all of ``torch.get_num_threads()`` (the blockwise forward then shares its query blocks
  out among worker threads). Target: within 2x its time; the summary prints the ratios.
* ``sweep``: L = 1024 ... 16,384 for the explicit attention of chapter 4 (stops at 8192: four
  (L, L) float32 tensors would pass 4 GiB), the blockwise one, SDPA, the sliding window
  (128 each side) and BigBird's block-sparse pattern (blocks of 64, 1 global block at each end,
  2 random blocks per row); the summary prints how time and memory grow per doubling of L.
* ``xl_cache``: evaluating a Transformer-XL (2 layers, d = 64, 4 heads, segments and memory of
  128) over T tokens segment by segment with the cached memory, against recomputing each
  segment's context from the start of the text (the same numbers, checked equal).

Memory is :func:`course_lib.measure.peak_tensor_memory` with ``exclude_result=True`` (every
tensor the dispatcher creates, so the same on every machine; scratch space inside a fused kernel
such as SDPA's is not seen). The tracker sees the calling thread only, so the two blockwise
measurements are taken on one thread; each further thread adds one worker's tile.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from course_lib.attention.accelerated import scaled_dot_product_attention
from course_lib.device import get_device
from course_lib.long_sequences.accelerated import (
    bigbird_layout,
    block_sparse_attention,
    flash_attention,
    sliding_window_attention,
)
from course_lib.long_sequences.transformer_xl import TransformerXL
from course_lib.measure import best_times, peak_tensor_memory

TITLE = "Long sequences: time and extra peak memory of attention against L, one head, d=64, float32"
FLASH_BLOCK = 512
MEMORY_TARGET_MIB = 64
TIME_TARGET = 2.0


def _methods(L: int) -> dict:
    layout = bigbird_layout(L // 64, 2, 1, 0)
    methods = {
        "explicit (chapter 4)": lambda q, k, v: scaled_dot_product_attention(q, k, v),
        "blockwise (flash)": lambda q, k, v: flash_attention(q, k, v, False, FLASH_BLOCK),
        "F.scaled_dot_product_attention": F.scaled_dot_product_attention,
        "sliding window (w=128)": lambda q, k, v: sliding_window_attention(q, k, v, 128),
        "block sparse (BigBird)": lambda q, k, v: block_sparse_attention(q, k, v, layout, 64),
    }
    if L > 8192:
        del methods["explicit (chapter 4)"]
    return methods


def _inputs(L: int, device) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(0)
    # (B, h, L, d) = (1, 1, L, 64): four dimensions, so that SDPA may pick its fused CPU kernel
    return tuple(torch.randn(1, 1, L, 64, generator=g).to(device) for _ in range(3))


def _row(part: str, what: str, L: int, seconds: float, peak: int, threads: int = 0) -> dict:
    return {
        "part": part,
        "what": what,
        "L": L,
        "threads": threads or torch.get_num_threads(),
        "seconds": float(f"{seconds:.4g}"),
        "extra_peak_MiB": round(peak / 2**20, 2),
    }


def _one_thread_peak(fn, device) -> int:
    """Peak memory on one thread: the tracker sees the calling thread's tensors only, and with
    several threads the blockwise forward runs its query blocks in worker threads."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return peak_tensor_memory(fn, device=device, exclude_result=True)
    finally:
        torch.set_num_threads(threads)


def _thread_counts() -> list[int]:
    n = torch.get_num_threads()
    return [1, n] if n > 1 else [1]


def run(quick: bool = False) -> list[dict]:
    device = get_device()
    rows = []
    big = 4096 if quick else 65_536
    q, k, v = _inputs(big, device)
    fn = lambda: flash_attention(q, k, v, False, FLASH_BLOCK)  # noqa: E731
    peak = _one_thread_peak(fn, device)
    seconds = best_times({"flash": fn}, rounds=1, device=device)["flash"]
    rows.append(_row("flash", "blockwise (flash)", big, seconds, peak))
    del q, k, v

    mid = 1024 if quick else 8192
    q, k, v = _inputs(mid, device)
    pair = {
        "blockwise (flash)": lambda: flash_attention(q, k, v, False, FLASH_BLOCK),
        "F.scaled_dot_product_attention": lambda: F.scaled_dot_product_attention(q, k, v),
    }
    peaks = {what: _one_thread_peak(f, device) for what, f in pair.items()}
    threads = torch.get_num_threads()
    for n in _thread_counts() if device.type == "cpu" else [threads]:
        torch.set_num_threads(n)
        try:
            best = best_times(pair, rounds=2 if quick else 5, device=device)
        finally:
            torch.set_num_threads(threads)
        rows.extend(_row("vs_sdpa", what, mid, best[what], peaks[what], n) for what in pair)
    del q, k, v

    lengths = [512, 1024] if quick else [1024, 2048, 4096, 8192, 16384]
    for L in lengths:
        q, k, v = _inputs(L, device)
        calls = {name: (lambda m=m, x=(q, k, v): m(*x)) for name, m in _methods(L).items()}
        best = best_times(calls, rounds=2 if quick else 3, device=device)
        for name, f in calls.items():
            peak = peak_tensor_memory(f, device=device, exclude_result=True)
            rows.append(_row("sweep", name, L, best[name], peak))
    rows.extend(_xl_rows(256 if quick else 2048, device))
    return rows


def _xl_rows(T: int, device, L: int = 128) -> list[dict]:
    model = TransformerXL(d_model=64, n_heads=4, n_layers=2, seed=0).to(device).eval()
    x = torch.randn(1, T, 64, generator=torch.Generator().manual_seed(0)).to(device)

    def cached():
        return model.forward_segments(x, L, L)

    def recomputed():  # each segment: the whole text up to its end, under the same mask
        return torch.cat(
            [model.forward_full(x[:, : s + L], L, L)[:, s:] for s in range(0, T, L)], dim=1
        )

    with torch.no_grad():
        torch.testing.assert_close(cached(), recomputed(), rtol=1e-4, atol=1e-4)
        best = best_times({"with cache": cached, "recomputed": recomputed}, rounds=2, device=device)
        return [
            _row(
                "xl_cache",
                f"Transformer-XL, {what}",
                T,
                best[what],
                peak_tensor_memory(fn, device=device, exclude_result=True),
            )
            for what, fn in (("with cache", cached), ("recomputed", recomputed))
        ]


def summary(rows: list[dict]) -> str:
    flash = next(r for r in rows if r["part"] == "flash")
    mem_ok = flash["extra_peak_MiB"] < MEMORY_TARGET_MIB
    dense_gib = flash["L"] ** 2 * 4 / 2**30
    lines = [
        f"target: blockwise attention at L={flash['L']:,} with extra peak memory under "
        f"{MEMORY_TARGET_MIB} MiB (the (L, L) float32 matrix alone: {dense_gib:g} GiB): "
        f"{flash['extra_peak_MiB']} MiB on one thread (each further thread's worker adds one "
        f"{FLASH_BLOCK}x{FLASH_BLOCK} tile, {FLASH_BLOCK**2 * 4 / 2**20:g} MiB), "
        f"{flash['seconds']:.1f} s on {flash['threads']} -> {'MET' if mem_ok else 'NOT MET'}",
    ]
    vs = [r for r in rows if r["part"] == "vs_sdpa"]
    for n in dict.fromkeys(r["threads"] for r in vs):
        pair = {r["what"]: r for r in vs if r["threads"] == n}
        ours, sdpa = pair["blockwise (flash)"], pair["F.scaled_dot_product_attention"]
        ratio = ours["seconds"] / sdpa["seconds"]
        lines.append(
            f"target: blockwise within {TIME_TARGET}x of F.scaled_dot_product_attention at "
            f"L={ours['L']:,}, {n} thread{'s' if n > 1 else ''}: {ours['seconds']:.3f} s / "
            f"{sdpa['seconds']:.3f} s = {ratio:.2f}x -> {'MET' if ratio <= TIME_TARGET else 'NOT MET'}"
        )
    lines.append("growth per doubling of L (time, memory), from the last two lengths measured:")
    sweep = [r for r in rows if r["part"] == "sweep"]
    for what in dict.fromkeys(r["what"] for r in sweep):
        mine = [r for r in sweep if r["what"] == what]
        if len(mine) >= 2:
            a, b = mine[-2], mine[-1]
            mem = (
                f"memory x{b['extra_peak_MiB'] / a['extra_peak_MiB']:.1f}"
                if a["extra_peak_MiB"]
                else "memory: none seen (inside a fused kernel)"
            )
            lines.append(
                f"  {what:32} L {a['L']} -> {b['L']}: time x{b['seconds'] / a['seconds']:.1f}, {mem}"
            )
    xl = {r["what"]: r for r in rows if r["part"] == "xl_cache"}
    if xl:
        fast, slow = xl["Transformer-XL, with cache"], xl["Transformer-XL, recomputed"]
        lines.append(
            f"Transformer-XL over T={fast['L']:,}: the cache is {slow['seconds'] / fast['seconds']:.1f}x "
            "faster than recomputing each segment's context"
        )
    lines.append(f"torch threads: {torch.get_num_threads()}")
    return "\n".join(lines)
