"""Number formats (Chapter 12): decoding speed of the NumPy reference, and blockwise NF4 in PyTorch.

Targets of the chapter's issue:

* decoding all 65,536 float16 patterns with the vectorised NumPy reference in well under a second;
* blockwise NF4 quantisation and dequantisation (block size 64, with and without double
  quantisation of the scales) of a 4096 x 4096 float32 matrix with PyTorch on the CPU in under one
  second, reported beside the memory footprint in bits per parameter (scales included).

The quantisation time includes packing two 4-bit codes per byte; the dequantisation time includes
unpacking them. Double quantisation stores the absmax scales as int8 (absmax quantisation in
blocks of 256, after subtracting their mean) plus one float32 scale per 256 scales and the mean.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np
import torch

import course_lib.number_formats.accelerated as fast
import course_lib.number_formats.reference as ref
from course_lib.measure import timed

TITLE = "Number formats: decoding bit patterns (NumPy reference) and blockwise NF4 (PyTorch, CPU)"
DECODE_TARGET_S = 1.0
NF4_TARGET_S = 1.0


def _best(fn: Callable[[], object], repeats: int) -> tuple[float, float, object]:
    """Best wall time, best CPU time of this process (all threads), and the last result."""
    runs = [timed(fn) for _ in range(repeats)]
    return min(r.wall for r in runs), min(r.cpu for r in runs), runs[-1].result


def _row(
    task: str,
    size: str,
    seconds: float,
    cpu: float,
    bits: object = "",
    error: object = "",
    target: str = "",
) -> dict:
    return {
        "task": task,
        "size": size,
        "seconds": float(f"{seconds:.3g}"),
        "cpu seconds": float(f"{cpu:.3g}"),
        "bits/param": bits,
        "rel RMS error": error,
        "target": target,
    }


def decode_rows(repeats: int) -> list[dict]:
    rows = []
    for name, nbits in (
        ("float16", 16),
        ("bfloat16", 16),
        ("float8_e4m3fn", 8),
        ("float8_e5m2", 8),
    ):
        patterns = np.arange(2**nbits)
        seconds, cpu, _ = _best(lambda p=patterns, n=name: ref.decode(p, n), repeats)
        target = f"< {DECODE_TARGET_S:g} s" if name == "float16" else ""
        task = f"ref.decode, every {name} pattern"
        rows.append(_row(task, f"{2**nbits:,}", seconds, cpu, target=target))
    x = np.random.default_rng(0).standard_normal(10**6).astype(np.float32)
    seconds, cpu, _ = _best(lambda: ref.encode(x, "bfloat16"), repeats)
    rows.append(_row("ref.encode, float32 -> bfloat16", "1,000,000", seconds, cpu))
    return rows


def _nf4(W: torch.Tensor, double_quant: bool):
    """Quantise + pack (and double-quantise the scales); return the stored pieces."""
    codes, absmax = fast.nf4_quantize(W, block_size=64)
    packed = fast.pack_4bit(codes)
    if not double_quant:
        return packed, absmax
    offset = absmax.mean()
    q2, scale2 = fast.absmax_quantize(absmax - offset, block_size=256)
    return packed, (q2, scale2, offset)


def _nf4_back(stored, double_quant: bool) -> torch.Tensor:
    packed, scales = stored
    if double_quant:
        q2, scale2, offset = scales
        absmax = fast.absmax_dequantize(q2, scale2, block_size=256) + offset
    else:
        absmax = scales
    return fast.nf4_dequantize(fast.unpack_4bit(packed), absmax, block_size=64)


def _bits_per_param(stored, n: int, double_quant: bool) -> float:
    packed, scales = stored
    bits = 8 * packed.numel()
    if double_quant:
        q2, scale2, _ = scales
        bits += 8 * q2.numel() + 32 * (scale2.numel() + 1)
    else:
        bits += 32 * scales.numel()
    return bits / n


def nf4_rows(n: int, repeats: int) -> list[dict]:
    W = torch.randn(n, n, generator=torch.Generator().manual_seed(0))  # float32 on the CPU
    rows = []
    for dq in (False, True):
        label = "NF4, blocks of 64" + (" + double quantisation" if dq else "")
        t_q, c_q, stored = _best(lambda d=dq: _nf4(W, d), repeats)
        t_d, c_d, W_hat = _best(lambda s=stored, d=dq: _nf4_back(s, d), repeats)
        bits = round(_bits_per_param(stored, W.numel(), dq), 4)
        err = float(f"{((W - W_hat).pow(2).mean().sqrt() / W.std()).item():.4f}")
        size = f"{n} x {n}"
        rows.append(_row(f"{label}: quantise + pack", size, t_q, c_q, bits, err))
        rows.append(_row(f"{label}: unpack + dequantise", size, t_d, c_d, bits, err))
        target = f"< {NF4_TARGET_S:g} s (4096 x 4096)"
        rows.append(_row(f"{label}: both", size, t_q + t_d, c_q + c_d, bits, err, target))
    t_q, c_q, (q, scale) = _best(lambda: fast.absmax_quantize(W, block_size=64), repeats)
    t_d, c_d, W_hat = _best(lambda: fast.absmax_dequantize(q, scale, block_size=64), repeats)
    err = float(f"{((W - W_hat).pow(2).mean().sqrt() / W.std()).item():.4f}")
    rows.append(
        _row("int8 absmax, blocks of 64: both", f"{n} x {n}", t_q + t_d, c_q + c_d, 8.5, err)
    )
    return rows


def run(quick: bool = False) -> list[dict]:
    repeats = 1 if quick else 3
    return decode_rows(repeats) + nf4_rows(1024 if quick else 4096, repeats)


def summary(rows: list[dict]) -> str:
    threads = torch.get_num_threads()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines = [
        f"wall-clock seconds are the target; 'cpu seconds' is this process's CPU time over all "
        f"{threads} threads (1-minute load average during the run: {load:.1f} on "
        f"{os.cpu_count()} CPUs)"
    ]
    decode = next(r for r in rows if r["task"] == "ref.decode, every float16 pattern")
    ok = decode["seconds"] < DECODE_TARGET_S
    lines.append(
        f"decode target (all 65,536 float16 patterns < {DECODE_TARGET_S:g} s): "
        f"{'met' if ok else 'NOT met'} ({decode['seconds']:.3g} s)"
    )
    for r in rows:
        if r["task"].endswith(": both") and r["task"].startswith("NF4"):
            if r["size"] != "4096 x 4096":
                verdict = "not measured (quick run)"
            else:
                verdict = "met" if r["seconds"] < NF4_TARGET_S else "NOT met"
            lines.append(
                f"NF4 target ({r['task'].removesuffix(': both')}, < {NF4_TARGET_S:g} s): {verdict} "
                f"({r['seconds']:.3g} s wall, {r['cpu seconds']:.3g} s CPU, "
                f"{r['bits/param']} bits/param)"
            )
    return "\n".join(lines)
