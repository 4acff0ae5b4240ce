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

from course_lib.checks import check_int, check_real, matmul_shapes
from course_lib.measure import best_time, synchronize


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
            f"{self.cores} core{'s' if self.cores != 1 else ''} x {self.ghz:.2f} GHz x {self.flops_per_cycle[dtype]} {dtype} "
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


# ------------------------------------------------------------------ measuring GFLOP/s
#: An implementation to time: given n, build the inputs and return a call doing one n^3 product.
Setup = Callable[[int], Callable[[], object]]


def matmul_setups(
    devices: Sequence[str] = ("cpu",), with_slow: bool = True
) -> dict[str, tuple[Setup, int]]:
    """The implementations Chapter 1 compares, each with the largest n worth timing.

    Keys name the implementation; values are ``(setup, max_n)``. Slow Python-level views are
    capped at small n so that a sweep stays quick.
    """
    import numpy as np
    import torch

    from course_lib.matmul import reference as ref

    def numpy_setup(dtype: type) -> Setup:
        def setup(n: int) -> Callable[[], object]:
            rng = np.random.default_rng(n)
            X, Y = rng.standard_normal((2, n, n)).astype(dtype)
            return lambda: X @ Y

        return setup

    def torch_setup(dtype: torch.dtype, device: str) -> Setup:
        def setup(n: int) -> Callable[[], object]:
            gen = torch.Generator().manual_seed(n)
            X, Y = torch.randn(2, n, n, generator=gen, dtype=dtype).to(device)

            def run() -> object:
                out = X @ Y
                synchronize(device)
                return out

            return run

        return setup

    def list_setup(n: int) -> Callable[[], object]:
        rng = np.random.default_rng(n)
        X, Y = rng.standard_normal((2, n, n)).tolist()
        return lambda: naive_matmul(X, Y)

    def view_setup(fn: Callable) -> Setup:
        def setup(n: int) -> Callable[[], object]:
            X, Y = np.random.default_rng(n).standard_normal((2, n, n))
            return lambda: fn(X, Y)

        return setup

    setups: dict[str, tuple[Setup, int]] = {}
    if with_slow:
        setups["pure Python triple loop"] = (list_setup, 128)
        setups["NumPy row view (eq. 3)"] = (view_setup(ref.matmul_rows), 256)
        setups["NumPy outer-product view"] = (view_setup(ref.matmul_outer), 256)
    setups["np.matmul float64"] = (numpy_setup(np.float64), 2048)
    setups["np.matmul float32"] = (numpy_setup(np.float32), 2048)
    for device in devices:
        big = 8192 if device != "cpu" else 2048
        setups[f"torch.matmul float64 ({device})"] = (torch_setup(torch.float64, device), big)
        setups[f"torch.matmul float32 ({device})"] = (torch_setup(torch.float32, device), big)
    return setups


def gflops_sweep(
    setups: dict[str, tuple[Setup, int]],
    sizes: Sequence[int],
    *,
    repeats: int = 3,
    min_time: float = 0.02,
) -> list[dict[str, float | int | str]]:
    """Time each implementation on n x n by n x n products; one record per (name, n)."""
    records: list[dict[str, float | int | str]] = []
    for name, (setup, max_n) in setups.items():
        for n in sizes:
            if n > max_n:
                continue
            seconds = best_time(setup(n), repeats=repeats, min_time=min_time)
            records.append(
                {
                    "implementation": name,
                    "n": n,
                    "seconds": seconds,
                    "gflops": matmul_flops(n, n, n) / seconds / 1e9,
                }
            )
    return records


def practical_peak(records: Sequence[dict[str, float | int | str]], dtype: str = "float32") -> dict:
    """The best measured BLAS figure of a sweep in ``dtype``: the *practical* peak.

    The nominal peak of :func:`estimate_peak` multiplies the clock the operating system reports,
    which on a virtual machine or a CPU with boost is often below the clock the cores run at; a
    large BLAS product is what real code can reach. Returns the record (implementation, n,
    gflops) with the most GFLOP/s among the library (not Python-loop) products of ``dtype``.

    >>> recs = [{"implementation": "np.matmul float32", "n": 512, "gflops": 90.0},
    ...         {"implementation": "torch.matmul float32 (cpu)", "n": 1024, "gflops": 120.0},
    ...         {"implementation": "np.matmul float64", "n": 1024, "gflops": 60.0}]
    >>> practical_peak(recs)["gflops"], practical_peak(recs, "float64")["n"]
    (120.0, 1024)
    """
    blas = [r for r in records if "matmul " + dtype in str(r["implementation"])]
    if not blas:
        raise ValueError(f"the sweep has no np.matmul or torch.matmul record in {dtype}")
    return max(blas, key=lambda r: float(r["gflops"]))


def compare_with_nominal(best_gflops: float, peak: PeakEstimate, dtype: str = "float32") -> str:
    """One sentence that puts a measured figure beside the nominal peak, true on any machine.

    >>> p = PeakEstimate(cores=2, ghz=2.0, flops_per_cycle={"float32": 32, "float64": 16}, simd="AVX2")
    >>> compare_with_nominal(96.0, p)
    'the best float32 product reaches 96.0 GFLOP/s, 75% of the nominal 128 GFLOP/s'
    >>> compare_with_nominal(150.0, p).split("; ")[1]
    'more than 100%: the clock the system reports is below the one the cores run at (boost)'
    """
    nominal = peak.gflops(dtype)
    share = 100 * best_gflops / nominal
    sentence = (
        f"the best {dtype} product reaches {best_gflops:.1f} GFLOP/s, {share:.0f}% of the nominal "
        f"{nominal:.0f} GFLOP/s"
    )
    if share > 100:
        sentence += (
            "; more than 100%: the clock the system reports is below the one the cores run at "
            "(boost)"
        )
    return sentence


# ------------------------------------------------------------------ the chapter's stored sweep
#: The stored sweep of section 1.8, in ``data/`` (made by ``python -m course_lib.matmul.cost``).
STORED_SWEEP = "matmul_gflops.json"
#: Sizes and implementations of the stored sweep; slow Python-level views stop at their max_n.
SWEEP_SIZES = (8, 16, 32, 64, 128, 256, 512, 1024, 2048)
#: Environment variables that pin every BLAS and PyTorch to one thread.
ONE_THREAD = {
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "VECLIB_MAXIMUM_THREADS": "1",
}


def _seconds_per_call(fn: Callable[[], object], min_time: float, clock: str) -> float:
    """Seconds per call of ``fn``, calling it until ``min_time`` seconds have passed."""
    now = time.thread_time if clock == "cpu" else time.perf_counter
    fn()  # untimed: caches and lazy initialisation
    calls, start = 0, now()
    while True:
        fn()
        calls += 1
        elapsed = now() - start
        if elapsed >= min_time:
            return elapsed / calls


def steady_sweep(
    setups: dict[str, tuple[Setup, int]],
    sizes: Sequence[int],
    *,
    rounds: int = 5,
    min_time: float = 0.002,
    clock: str = "wall",
) -> list[dict[str, float | int | str]]:
    """GFLOP/s of each implementation and size, measured in interleaved rounds.

    Each round measures every (implementation, n) once, calling it until ``min_time`` seconds
    have passed; a drift of the machine's load then touches all of them alike. A record keeps
    the best time (``seconds``, ``gflops``) and ``spread``, the second-best time over the best:
    :func:`course_lib.measure.steady` calls a record whose best time the other rounds do not
    reproduce within 25% unsteady.

    ``clock="wall"`` times with the wall clock (what a user waits for, on an idle machine the
    right measure). ``clock="cpu"`` times the calling thread's CPU time (``time.thread_time``):
    on a machine shared with other jobs, time spent waiting for a core is left out, so a long
    product is not charged for the other jobs. It is right only when the product runs on the
    calling thread alone: every BLAS and PyTorch on one thread (``ONE_THREAD``), on the CPU.
    """
    check_int(rounds, "rounds", low=2)
    check_real(min_time, "min_time", low=0.0, low_open=True, high_open=True)
    if clock not in ("wall", "cpu"):
        raise ValueError(f"clock must be 'wall' or 'cpu', got {clock!r}")
    calls = {
        (name, n): setup(n) for name, (setup, max_n) in setups.items() for n in sizes if n <= max_n
    }
    times: dict[tuple[str, int], list[float]] = {key: [] for key in calls}
    for _ in range(rounds):
        for key, fn in calls.items():
            times[key].append(_seconds_per_call(fn, min_time, clock))
    records: list[dict[str, float | int | str]] = []
    for (name, n), seconds in times.items():
        first, second = sorted(seconds)[:2]
        records.append(
            {
                "implementation": name,
                "n": n,
                "seconds": first,
                "spread": second / first,
                "gflops": matmul_flops(n, n, n) / first / 1e9,
            }
        )
    return records


def _cpu_model(cpuinfo: str) -> str:
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() == "model name":
            return value.strip()
    return platform.processor() or platform.machine()


def make_stored_sweep(rounds: int = 7) -> dict:
    """Run the sweep of section 1.8 on one thread and return it with the machine it ran on."""
    import numpy as np
    import torch

    for var, value in ONE_THREAD.items():
        if os.environ.get(var) != value:
            raise RuntimeError(
                f"{var} is not 1: run python -m course_lib.matmul.cost, which sets the threads"
            )
    torch.set_num_threads(1)
    path = Path("/proc/cpuinfo")
    cpuinfo = path.read_text() if path.exists() else ""
    peak = estimate_peak(cpuinfo, cores=1)
    records = steady_sweep(matmul_setups(["cpu"]), SWEEP_SIZES, rounds=rounds, clock="cpu")
    for r in records:  # three significant digits are all a timing supports
        r["seconds"] = float(f"{r['seconds']:.3g}")
        r["spread"] = round(float(r["spread"]), 2)
        r["gflops"] = float(f"{r['gflops']:.3g}")
    return {
        "made_by": "python -m course_lib.matmul.cost",
        "threads": 1,
        "clock": "cpu time of the calling thread (time.thread_time)",
        "rounds": rounds,
        "min_time_s": 0.002,
        "machine": {
            "cpu": _cpu_model(cpuinfo),
            "simd": peak.simd,
            "ghz_reported": peak.ghz,
            "nominal_gflops": {d: peak.gflops(d) for d in ("float32", "float64")},
        },
        "versions": {"numpy": np.__version__, "torch": torch.__version__},
        "records": records,
    }


def load_stored_sweep() -> dict:
    """The stored sweep of section 1.8 (``data/matmul_gflops.json``)."""
    import json

    from course_lib.paths import data_path

    return json.loads(data_path(STORED_SWEEP).read_text(encoding="utf-8"))


def main() -> None:
    """Write ``data/matmul_gflops.json``; re-runs itself with every library on one thread."""
    import json
    import sys

    if any(os.environ.get(k) != v for k, v in ONE_THREAD.items()):
        os.execve(
            sys.executable,
            [sys.executable, "-m", "course_lib.matmul.cost"],
            os.environ | ONE_THREAD,
        )
    from course_lib.paths import data_path

    out = data_path(STORED_SWEEP, must_exist=False)
    stored = make_stored_sweep()
    out.write_text(json.dumps(stored, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
