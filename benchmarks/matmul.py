"""Achieved GFLOP/s of n x n matrix products, from a pure-Python loop to BLAS (Chapter 1)."""

from __future__ import annotations

import torch

from course_lib.matmul.cost import (
    compare_with_nominal,
    estimate_peak,
    gflops_sweep,
    matmul_setups,
    practical_peak,
)

TITLE = "Matrix multiplication: achieved GFLOP/s (2 n^3 FLOPs per n x n product)"


def devices() -> list[str]:
    found = ["cpu"]
    if torch.cuda.is_available():
        found.append("cuda")
    if torch.backends.mps.is_available():
        found.append("mps")
    return found


def run(quick: bool = False) -> list[dict]:
    sizes = [16, 64, 256] if quick else [16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192]
    rows = gflops_sweep(matmul_setups(devices()), sizes, repeats=2 if quick else 3)
    for r in rows:
        r["seconds"] = float(f"{r['seconds']:.3e}")
    return rows


def summary(rows: list[dict]) -> str:
    peak = estimate_peak()
    cpu = [
        r
        for r in rows
        if "cuda" not in str(r["implementation"]) and "mps" not in str(r["implementation"])
    ]
    lines = [f"nominal CPU peak (estimated): {peak.explain('float32')}; {peak.explain('float64')}"]
    for dtype in ("float32", "float64"):
        best = practical_peak(cpu, dtype)
        lines.append(
            f"practical {dtype} peak (best BLAS, {best['implementation']}, n={best['n']}): "
            + compare_with_nominal(float(best["gflops"]), peak, dtype)
        )
    return "\n".join(lines)
