"""Relative attention logits: the naive gather versus Algorithm 1's skewing (Chapter 6).

For one head with queries q (L, d) and relative embeddings E_r (L, d), both compute
``S[i, j] = q_i . E_r[j - i + L - 1]`` (j <= i):

* naive (:func:`course_lib.positions.accelerated.relative_logits_naive`): gather the (L, L, d)
  tensor R of embeddings, then one dot product per (i, j): O(L^2 d) memory;
* skewed (:func:`course_lib.positions.accelerated.relative_logits_skewed`): ``q @ E_r^T`` (L, L),
  pad, reshape, slice: O(L^2) for the logits themselves and nothing of size L^2 d, i.e.
  O(L d) beyond the output.

Each (method, L) is measured with :mod:`course_lib.measure`: the peak tensor memory of one call
(the inputs already exist and are not counted), then the best of a few timings (each a loop of at
least 50 ms). CPU, float32, d = 64, one thread (see ``THREADS``).
"""

from __future__ import annotations

from pathlib import Path

import torch

TITLE = "Relative attention logits on the CPU: naive gather (O(L^2 d)) vs skewing (Algorithm 1)"
D = 64
# One thread: on a shared machine a second OpenMP thread that has to wait for a busy core turns
# a 20-microsecond product into 40 ms; one thread compares the algorithms, not the scheduler.
THREADS = 1
BYTES = 4  # float32


def _measure(method: str, L: int, repeats: int) -> dict:
    """Peak tensor memory of one call (MiB) and its best time (seconds), on one thread."""
    from course_lib.measure import best_time, peak_tensor_memory
    from course_lib.positions import accelerated as P

    fn = P.relative_logits_naive if method == "naive" else P.relative_logits_skewed
    g = torch.Generator().manual_seed(0)
    q = torch.randn(L, D, generator=g)  # (L, d)
    E_r = torch.randn(L, D, generator=g)  # (L, d)
    threads = torch.get_num_threads()
    torch.set_num_threads(THREADS)
    try:
        fn(q[:8], E_r[:8])  # warm up the code path on a tiny input
        peak = peak_tensor_memory(lambda: fn(q, E_r)) / 2**20
        seconds = best_time(lambda: fn(q, E_r), repeats=repeats, min_time=0.05)
    finally:
        torch.set_num_threads(threads)
    return {"peak_mb": round(peak, 1), "seconds": seconds}


def _available_mb() -> float | None:
    meminfo = Path("/proc/meminfo")
    if not meminfo.exists():
        return None
    for line in meminfo.read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    return None


def theory_mb(method: str, L: int) -> float:
    """The largest intermediate each method allocates, in MB (float32)."""
    if method == "naive":
        return L * L * D * BYTES / 2**20  # R: (L, L, d)
    return (L + 1) * L * BYTES / 2**20  # the padded (L, L+1) logits


def run(quick: bool = False) -> list[dict]:
    lengths = [64, 128, 256] if quick else [256, 512, 1024, 2048, 4096]
    repeats = 2 if quick else 3
    rows = []
    for L in lengths:
        for method in ("naive", "skewed"):
            need = theory_mb(method, L)
            avail = _available_mb()
            row = {"L": L, "d": D, "threads": THREADS, "method": method}
            row["theory_MB"] = round(need, 1)
            if avail is not None and 2 * need > 0.5 * avail:
                row.update(peak_MB="skipped", ms="skipped")  # would not fit comfortably
                rows.append(row)
                continue
            result = _measure(method, L, repeats)
            row["peak_MB"] = result["peak_mb"]
            row["ms"] = round(1000 * result["seconds"], 2)
            rows.append(row)
    return rows


def summary(rows: list[dict]) -> str:
    by = {(r["L"], r["method"]): r for r in rows}
    lines = []
    faster, smaller = [], []
    for L in sorted({r["L"] for r in rows}):
        naive, skewed = by.get((L, "naive")), by.get((L, "skewed"))
        if not naive or not skewed or "skipped" in (naive["ms"], skewed["ms"]):
            continue
        ratio_t = naive["ms"] / skewed["ms"]
        line = f"L={L}: skewing is {ratio_t:.1f}x faster"
        if isinstance(naive["peak_MB"], float) and isinstance(skewed["peak_MB"], float):
            ratio_m = naive["peak_MB"] / max(skewed["peak_MB"], 0.1)
            line += (
                f" and peaks {ratio_m:.0f}x lower ({naive['peak_MB']} MB vs {skewed['peak_MB']} MB)"
            )
            smaller.append(naive["peak_MB"] > skewed["peak_MB"])
        lines.append(line)
        if L >= 1024:
            faster.append(ratio_t > 1)
    target = (
        "target met" if faster and all(faster) and all(smaller) else "target NOT met (or not run)"
    )
    lines.append(
        f"Target (less memory at every L, faster at L >= 1024): {target}. Memory grows as "
        f"L^2 d for the naive gather and L^2 for skewing, a ratio of about d = {D}."
    )
    return "\n".join(lines)
