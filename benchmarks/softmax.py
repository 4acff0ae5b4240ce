"""Softmax speed (4096 x 4096 float32, CPU) and the memory of the online softmax (Chapter 2).

Targets (issue 3):

1. ``course_lib.accelerated.softmax.softmax`` within 1.5x of ``torch.softmax`` on a 4096 x 4096
   float32 input on the CPU; the NumPy reference measured beside them.
2. The online softmax over 10^7 elements in chunks: peak extra memory bounded by the chunk size
   (measured), and the result equal to the full softmax within 1e-6 (float32).

How time is measured: the best of several calls after a warm-up call, the implementations
interleaved round by round so that a busy machine slows them all alike.

How memory is measured ("extra" = peak memory during the call minus the output it returns; the
input already exists and is not counted):

* NumPy: ``tracemalloc``, to which NumPy reports every array buffer it allocates.
* PyTorch: a ``TorchDispatchMode`` that sees every tensor an ATen operator returns and tracks the
  bytes of the storages still referenced (by weak references), sampling the total after every
  operator; the peak of that total is the peak of tensor memory. Scratch space that a kernel
  allocates and frees inside one operator is invisible to it (``torch.softmax``'s CPU kernel
  keeps only small per-thread buffers). On CUDA the allocator's own
  ``torch.cuda.max_memory_allocated`` is reported beside it as a cross-check.
"""

from __future__ import annotations

import gc
import time
import tracemalloc
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

import course_lib.accelerated.softmax as fast
import course_lib.reference.softmax as ref

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


def best_times(fns: dict[str, Callable[[], Any]], rounds: int) -> dict[str, float]:
    """Best wall time of each function over ``rounds`` interleaved rounds.

    Each timed call directly follows an untimed call of the same function, so that every
    function meets the allocator in the state its own previous call left (a 64 MiB output freed
    by one function and re-faulted by the next otherwise skews whichever runs first).
    """
    best = {name: float("inf") for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            fn()
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


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
    times = best_times(fns, rounds) | best_times(slow, max(2, rounds // 3))
    rows = []
    for name, t in times.items():
        rows.append(
            _row("speed", name, f"{n}x{n} float32", seconds=t, ratio=t / times["torch.softmax"])
        )
    return rows


# ----------------------------------------------------------------------------- memory
class TensorMemory(TorchDispatchMode):
    """Peak bytes of tensor storages created by ATen operators while the mode is active."""

    def __init__(self) -> None:
        super().__init__()
        self.storages: dict[int, tuple[int, list[weakref.ref]]] = {}
        self.peak = 0

    def _live(self) -> int:
        dead = [k for k, (_, refs) in self.storages.items() if all(r() is None for r in refs)]
        for k in dead:
            del self.storages[k]
        return sum(nbytes for nbytes, _ in self.storages.values())

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        live_inputs = {
            a.untyped_storage().data_ptr()
            for a in tree_flatten((args, kwargs))[0]
            if isinstance(a, torch.Tensor)
        }
        for t in tree_flatten(out)[0]:
            if not isinstance(t, torch.Tensor) or t.device.type == "meta":
                continue
            storage = t.untyped_storage()
            key = storage.data_ptr()
            entry = self.storages.get(key)
            if entry is not None and any(r() is not None for r in entry[1]):
                entry[1].append(weakref.ref(t))  # a view or an in-place result: same memory
            elif key not in live_inputs:  # a new buffer (inputs made outside are not counted)
                self.storages[key] = (storage.nbytes(), [weakref.ref(t)])
        self.peak = max(self.peak, self._live())
        return out


def torch_extra_bytes(fn: Callable[[], torch.Tensor]) -> tuple[int, torch.Tensor]:
    """Peak tensor memory of ``fn()`` minus the bytes of the tensor it returns."""
    gc.collect()
    with torch.no_grad(), TensorMemory() as mem:
        out = fn()
    return mem.peak - out.untyped_storage().nbytes(), out


def numpy_extra_bytes(fn: Callable[[], np.ndarray]) -> tuple[int, np.ndarray]:
    """Peak traced memory of ``fn()`` minus the bytes of the array it returns."""
    gc.collect()
    tracemalloc.start()
    try:
        out = fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    out = np.asarray(out)
    base = out if out.base is None else out.base
    return peak - base.nbytes, out


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
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        out = fast.softmax(xc) if c is None else fast.online_softmax(xc, chunk_size=c)
        torch.cuda.synchronize()
        extra = torch.cuda.max_memory_allocated() - before - out.untyped_storage().nbytes()
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
    n_speed, rounds = (1024, 5) if quick else (4096, 30)
    n_mem = 10**6 if quick else 10**7
    chunks = [2**12, 2**16] if quick else [2**10, 2**12, 2**14, 2**16, 2**18]
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
