"""Softmax speed (4096 x 4096 float32, CPU) and the memory of the online softmax (Chapter 2).

Targets (issue 3):

1. ``course_lib.softmax.accelerated.softmax`` within 1.5x of ``torch.softmax`` on a 4096 x 4096
   float32 input on the CPU; the NumPy reference measured beside them.
2. The online softmax over 10^7 elements in chunks: peak extra memory bounded by the chunk size
   (measured), and the result equal to the full softmax within 1e-6 (float32).

How time is measured: :func:`course_lib.measure.best_times`, the best of several calls, the
implementations interleaved round by round so that a busy machine slows them all alike.

How memory is measured ("extra" = peak memory during the call minus the output it returns; the
input already exists and is not counted), with :mod:`course_lib.measure`:

* NumPy: ``tracemalloc``, to which NumPy reports every array buffer it allocates.
* PyTorch: a ``TorchDispatchMode`` that sees every storage an ATen operator creates until it is
  freed; the peak of the bytes alive is the peak of tensor memory. Scratch space that a kernel
  allocates and frees inside one operator is invisible to it (``torch.softmax``'s CPU kernel
  keeps only small per-thread buffers). On CUDA the allocator's own
  ``torch.cuda.max_memory_allocated`` is reported beside it as a cross-check.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

import course_lib.softmax.accelerated as fast
import course_lib.softmax.reference as ref
from course_lib.measure import best_times, peak_numpy_memory, peak_tensor_memory

TITLE = "Softmax: speed against torch.softmax, and the memory of the online softmax"
TARGET_RATIO = 1.5
TARGET_ERROR = 1e-6
MIB = 2**20


# ----------------------------------------------------------------------------- speed
def explicit_softmax(x: torch.Tensor) -> torch.Tensor:
    """The stable formula written with separate PyTorch operations (for comparison)."""
    m = x.amax(dim=-1, keepdim=True)
    e = torch.exp(x - m)
    return e / e.sum(dim=-1, keepdim=True)


def speed_rows(n: int, rounds: int) -> list[dict]:
    g = torch.Generator().manual_seed(0)
    x = 4 * torch.randn(n, n, generator=g)  # (n, n) float32
    x64 = x.double().numpy()
    fns = {
        "torch.softmax": lambda: torch.softmax(x, -1),
        "course softmax (PyTorch)": lambda: fast.softmax(x),
        "explicit max-subtract (PyTorch ops)": lambda: explicit_softmax(x),
        "course online_softmax, 1 chunk (PyTorch)": lambda: fast.online_softmax(x, chunk_size=n),
    }
    slow = {"course softmax (NumPy reference, float64)": lambda: ref.softmax(x64)}
    times = best_times(fns, rounds=rounds) | best_times(slow, rounds=max(2, rounds // 3))
    rows = []
    for name, t in times.items():
        rows.append(
            _row("speed", name, f"{n}x{n} float32", seconds=t, ratio=t / times["torch.softmax"])
        )
    return rows


# ----------------------------------------------------------------------------- memory
def torch_extra_bytes(fn: Callable[[], torch.Tensor]) -> tuple[int, torch.Tensor]:
    """Peak tensor memory of ``fn()`` beyond the tensor it returns, and that tensor."""
    with torch.no_grad():
        extra = peak_tensor_memory(fn, exclude_result=True)
        return extra, fn()


def numpy_extra_bytes(fn: Callable[[], np.ndarray]) -> tuple[int, np.ndarray]:
    """Peak traced memory of ``fn()`` beyond the array it returns, and that array."""
    return peak_numpy_memory(fn, exclude_result=True), fn()


def memory_rows(n: int, chunks: list[int]) -> list[dict]:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(n, generator=g)  # (n,) float32 logits
    exact = torch.softmax(x.double(), -1)  # the softmax of these float32 numbers, in float64
    full = torch.softmax(x, -1)
    size = f"{n:.0e}"

    def rel_err(y: torch.Tensor) -> float:
        return float(((y.double() - exact).abs() / exact).max())

    rows = []
    for name, fn in (
        ("course softmax (PyTorch, float32)", lambda: fast.softmax(x)),
        ("explicit max-subtract (PyTorch ops)", lambda: explicit_softmax(x)),
    ):
        extra, out = torch_extra_bytes(fn)
        rows.append(_row("memory", name, size, extra=extra, err=rel_err(out)))
    for c in chunks:
        extra, _ = torch_extra_bytes(lambda c=c: fast.online_softmax_stats(x, chunk_size=c)[1])
        rows.append(
            _row(
                "memory",
                "online_softmax_stats, pass 1 (PyTorch, float32)",
                size,
                chunk=c,
                extra=extra,
                chunk_bytes=c * x.element_size(),
            )
        )
    for c in chunks:
        extra, out = torch_extra_bytes(lambda c=c: fast.online_softmax(x, chunk_size=c))
        rows.append(
            _row(
                "memory",
                "online_softmax, both passes (PyTorch, float32)",
                size,
                chunk=c,
                extra=extra,
                chunk_bytes=c * x.element_size(),
                err=rel_err(out),
                vs_full=float(((out - full).abs() / full).max()),
            )
        )
    x64 = x.double().numpy()
    extra, _ = numpy_extra_bytes(lambda: ref.softmax(x64))
    rows.append(_row("memory", "course softmax (NumPy reference, float64)", size, extra=extra))
    for c in chunks:
        extra, _ = numpy_extra_bytes(lambda c=c: ref.online_softmax_stats(x64, chunk_size=c)[1])
        rows.append(
            _row(
                "memory",
                "online_softmax_stats, pass 1 (NumPy reference, float64)",
                size,
                chunk=c,
                extra=extra,
                chunk_bytes=c * 8,
            )
        )
    for c in chunks:
        extra, _ = numpy_extra_bytes(lambda c=c: ref.online_softmax(x64, chunk_size=c))
        rows.append(
            _row(
                "memory",
                "online_softmax, both passes (NumPy reference, float64)",
                size,
                chunk=c,
                extra=extra,
                chunk_bytes=c * 8,
            )
        )
    if torch.cuda.is_available():
        rows.extend(cuda_rows(x, chunks, exact))
    return rows


def cuda_rows(x: torch.Tensor, chunks: list[int], exact: torch.Tensor) -> list[dict]:
    """The same measurement with CUDA's allocator statistics (a cross-check of TensorMemory)."""
    xc = x.cuda()
    rows = []
    for c in [None, *chunks]:

        def call(c=c) -> torch.Tensor:
            return fast.softmax(xc) if c is None else fast.online_softmax(xc, chunk_size=c)

        extra = peak_tensor_memory(call, device=xc.device, exclude_result=True)
        out = call()
        err = float(((out.double().cpu() - exact).abs() / exact).max())
        name = "course softmax" if c is None else "course online_softmax"
        rows.append(
            _row(
                "memory (CUDA allocator)",
                f"{name} (PyTorch, float32, cuda)",
                f"{x.numel():.0e}",
                chunk=c,
                extra=extra,
                chunk_bytes=None if c is None else c * 4,
                err=err,
            )
        )
    return rows


def _row(part, implementation, size, *, seconds=None, ratio=None, chunk=None, extra=None,
         chunk_bytes=None, err=None, vs_full=None) -> dict:  # fmt: skip
    """One row with every column (the table needs the same columns in every row)."""

    def num(v: float | None, fmt: str) -> str:
        return "-" if v is None else format(v, fmt)

    return {
        "part": part,
        "implementation": implementation,
        "size": size,
        "seconds": num(seconds, ".4f"),
        "x torch.softmax": num(ratio, ".2f"),
        "chunk": "-" if chunk is None else str(chunk),
        "extra MiB": num(None if extra is None else extra / MIB, ".3f"),
        "extra / chunk": num(None if chunk_bytes is None else extra / chunk_bytes, ".2f"),
        "max rel err": num(err, ".1e"),
        "rel diff vs torch.softmax": num(vs_full, ".1e"),
    }


def run(quick: bool = False) -> list[dict]:
    n_speed, rounds = (512, 3) if quick else (4096, 30)
    n_mem = 2 * 10**5 if quick else 10**7
    chunks = [2**10, 2**14] if quick else [2**10, 2**12, 2**14, 2**16, 2**18]
    return speed_rows(n_speed, rounds) + memory_rows(n_mem, chunks)


def summary(rows: list[dict]) -> str:
    speed = {r["implementation"]: r for r in rows if r["part"] == "speed"}
    ours = float(speed["course softmax (PyTorch)"]["x torch.softmax"])
    size = speed["course softmax (PyTorch)"]["size"]
    lines = [
        f"target 1 ({size}): course softmax takes {ours:.2f}x the time of torch.softmax "
        f"(target <= {TARGET_RATIO}x): {'MET' if ours <= TARGET_RATIO else 'NOT MET'}"
    ]
    online = [r for r in rows if r["part"] == "memory" and r["implementation"].startswith("online")]
    worst = max(float(r["extra / chunk"]) for r in online)
    full_extra = max(
        float(r["extra MiB"])
        for r in rows
        if r["part"] == "memory" and not r["implementation"].startswith("online")
    )
    errs = [float(r["max rel err"]) for r in online if r["max rel err"] != "-"]
    lines.append(
        f"target 2 (memory): the online softmax's extra memory is at most {worst:.2f} chunk "
        f"buffers at every chunk size, whatever n (the full softmax needs up to {full_extra:.1f} "
        f"MiB extra): {'MET' if worst <= 2 else 'NOT MET'}"
    )
    lines.append(
        f"target 2 (accuracy): online softmax float32 max relative error {max(errs):.1e} against "
        f"the exact softmax of the same numbers (target <= {TARGET_ERROR:.0e}): "
        f"{'MET' if max(errs) <= TARGET_ERROR else 'NOT MET'}"
    )
    return "\n".join(lines)
