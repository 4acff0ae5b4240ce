"""What a matrix product costs: FLOP counts, timings and this machine's peak (Chapter 1).

Scalar arithmetic and timing, with no array maths to mirror, so it exists once.
"""

from __future__ import annotations

import os
import platform
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from course_lib.checks import check_int, matmul_shapes


def matmul_flops(n: int, m: int, k: int) -> int:
    """FLOPs of an (n, m) by (m, k) product, counting a multiply-add as two: ``2 n m k``.

    Each of the n*k entries needs m multiplications and m - 1 additions, so the exact count is
    ``n k (2m - 1)``; the convention ``2 n m k`` (used by BLAS benchmarks and every paper) counts
    the m multiply-adds a fused multiply-add unit performs.

    >>> matmul_flops(2, 3, 4)
    48
    """
    for name, v in (("n", n), ("m", m), ("k", k)):
        check_int(v, name, low=1)
    return 2 * n * m * k


def naive_matmul(X: Sequence[Sequence[float]], Y: Sequence[Sequence[float]]) -> list[list[float]]:
    """The triple loop of eq. (1) in pure Python, on lists of lists: the slowest way there is.

    >>> naive_matmul([[1, 2], [3, 4]], [[5, 6], [7, 8]])
    [[19, 22], [43, 50]]
    """
    n, m, k = len(X), len(Y), len(Y[0]) if len(Y) else 0
    if n == 0 or m == 0 or k == 0:
        raise ValueError("naive_matmul needs non-empty matrices")
    matmul_shapes((n, len(X[0])), (m, k))
    out = [[0] * k for _ in range(n)]
    for i in range(n):
        Xi, Oi = X[i], out[i]
        for j in range(k):
            s = 0
            for l in range(m):
                s += Xi[l] * Y[l][j]
            Oi[j] = s
    return out


def best_time(fn: Callable[[], object], *, repeats: int = 5, min_time: float = 0.05) -> float:
    """Best wall-clock seconds of one call of ``fn`` (each repeat loops until ``min_time``)."""
    check_int(repeats, "repeats", low=1)
    fn()  # warm-up: caches, lazy initialisation, thread pools
    best = float("inf")
    for _ in range(repeats):
        calls, start = 0, time.perf_counter()
        while True:
            fn()
            calls += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                break
        best = min(best, elapsed / calls)
    return best


@dataclass(frozen=True)
class PeakEstimate:
    """Theoretical peak of this CPU: cores x clock x FLOPs per cycle per core."""

    cores: int
    ghz: float
    flops_per_cycle: dict[str, int]
    simd: str

    def gflops(self, dtype: str = "float32") -> float:
        return self.cores * self.ghz * self.flops_per_cycle[dtype]

    def explain(self, dtype: str = "float32") -> str:
        return (
            f"{self.cores} cores x {self.ghz:.2f} GHz x {self.flops_per_cycle[dtype]} {dtype} "
            f"FLOPs/cycle ({self.simd}) = {self.gflops(dtype):.0f} GFLOP/s"
        )


def _simd_flops_per_cycle(flags: set[str]) -> tuple[str, dict[str, int]]:
    """FLOPs per cycle per core, assuming two FMA units (true of most x86 cores since Haswell)."""
    if "avx512f" in flags:
        lanes32, name = 16, "AVX-512, 2 FMA units"
    elif "avx2" in flags and "fma" in flags:
        lanes32, name = 8, "AVX2, 2 FMA units"
    elif "asimd" in flags or platform.machine() in ("arm64", "aarch64"):
        lanes32, name = 4, "NEON, 2 FMA units (assumed)"
    else:
        lanes32, name = 4, "SSE, no FMA"
        return name, {"float32": 2 * lanes32, "float64": lanes32}
    # 2 units x lanes x 2 FLOPs per fused multiply-add
    return name, {"float32": 2 * lanes32 * 2, "float64": 2 * (lanes32 // 2) * 2}


def estimate_peak(cpuinfo: str | None = None, cores: int | None = None) -> PeakEstimate:
    """Estimate this CPU's peak from /proc/cpuinfo (Linux) or ``platform`` (elsewhere).

    The clock is the one the kernel reports, which may be below the turbo clock, and the FMA
    unit count is an assumption: treat the result as an order of magnitude, not a promise.

    >>> info = "flags : fpu avx2 fma\\ncpu MHz : 2000.000\\n"
    >>> estimate_peak(info, cores=2).explain()
    '2 cores x 2.00 GHz x 32 float32 FLOPs/cycle (AVX2, 2 FMA units) = 128 GFLOP/s'
    """
    if cpuinfo is None:
        path = Path("/proc/cpuinfo")
        cpuinfo = path.read_text() if path.exists() else ""
    flags: set[str] = set()
    mhz = []
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in ("flags", "features"):
            flags |= set(value.split())
        elif key == "cpu mhz":
            mhz.append(float(value))
    m = re.search(r"@\s*([\d.]+)\s*GHz", cpuinfo)
    ghz = float(m.group(1)) if m else (max(mhz) / 1000 if mhz else 3.0)
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    simd, per_cycle = _simd_flops_per_cycle(flags)
    return PeakEstimate(cores=int(cores or 1), ghz=ghz, flops_per_cycle=per_cycle, simd=simd)
