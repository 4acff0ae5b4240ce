"""One timer and one peak-memory tracker, used by every benchmark and every cost section.

Timing. :func:`timed` runs a function once and returns its wall-clock and CPU seconds and its
result; :func:`best_time` calls a function after warm-up calls and returns the best time of one
call; :func:`best_times` times several functions in interleaved rounds (each timed call directly
follows an untimed call of the same function, so that every function meets the allocator in the
state its own previous call left). All of them synchronise CUDA and Apple MPS before reading the
clock, so that GPU timings measure the work and not only its launch.

Memory. :func:`peak_tensor_memory` is the peak number of bytes of tensors alive at once while a
function runs, beyond what existed before it started: on the CPU it watches every storage that an
ATen operator creates (a ``TorchDispatchMode``) until it is freed; on CUDA it reads the caching
allocator's peak. :func:`peak_numpy_memory` does the same for NumPy, whose buffers Python's
``tracemalloc`` sees.

PyTorch is imported only by what needs it (the tensor tracker), so the timers and the NumPy
tracker work where it is not installed: where ``torch`` was never imported, no GPU work can be
queued, and there is nothing to synchronise.

>>> import torch
>>> x = torch.ones(1000)  # 4000 bytes, allocated before: not counted
>>> peak_tensor_memory(lambda: (x + 1) * 2)  # x + 1 is alive while (x + 1) * 2 is made
8000
>>> best_time(lambda: None, repeats=2) >= 0
True
"""

from __future__ import annotations

import functools
import gc
import sys
import time
import tracemalloc
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from course_lib.checks import check_int, check_real

if TYPE_CHECKING:
    import torch

__all__ = [
    "Timing",
    "best_time",
    "best_times",
    "peak_numpy_memory",
    "peak_tensor_memory",
    "synchronize",
    "timed",
]


def _device(device: Any) -> torch.device | None:
    import torch

    return None if device is None else torch.device(device)


def synchronize(device: Any = None) -> None:
    """Wait for queued GPU work on ``device`` (CUDA or MPS; every CUDA device if None)."""
    torch = sys.modules.get("torch")
    if torch is None:  # PyTorch never imported: no GPU work can be queued
        return
    d = _device(device)
    if (d is None or d.type == "cuda") and torch.cuda.is_available():
        torch.cuda.synchronize(d)
    elif d is not None and d.type == "mps":
        torch.mps.synchronize()


@dataclass(frozen=True)
class Timing:
    """One timed call: wall-clock seconds, CPU seconds of this process, and the result."""

    wall: float
    cpu: float
    result: Any


def timed(fn: Callable[[], Any], *, device: Any = None) -> Timing:
    """Run ``fn()`` once and time it (GPU work included).

    >>> t = timed(lambda: sum(range(1000)))
    >>> t.result, t.wall >= 0, t.cpu >= 0
    (499500, True, True)
    """
    synchronize(device)
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    synchronize(device)
    return Timing(time.perf_counter() - wall, time.process_time() - cpu, result)


def best_time(
    fn: Callable[[], Any],
    *,
    repeats: int = 3,
    warmup: int = 1,
    min_time: float = 0.0,
    device: Any = None,
) -> float:
    """The best of ``repeats`` measurements of the seconds one call of ``fn()`` takes.

    ``warmup`` untimed calls come first (caches, lazy initialisation, thread pools). With
    ``min_time > 0`` each measurement calls ``fn`` repeatedly until that many seconds have passed
    and divides by the number of calls, which makes microsecond calls measurable.
    """
    check_int(repeats, "repeats", low=1)
    check_int(warmup, "warmup", low=0)
    check_real(min_time, "min_time", low=0.0, high_open=True)
    for _ in range(warmup):
        fn()
    best = float("inf")
    for _ in range(repeats):
        synchronize(device)
        calls, start = 0, time.perf_counter()
        while True:
            fn()
            calls += 1
            synchronize(device)
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                break
        best = min(best, elapsed / calls)
    return best


#: A best time counts as data only if the second-best time is within this factor of it.
STEADY = 1.25


def steady(row: dict[str, Any]) -> bool:
    """Whether a measured row's best time was reproduced (second best within ``STEADY``).

    A row holds ``seconds`` (the best time) and ``spread`` (second best / best). On a busy machine
    a best time can come out several times too large; one the next round does not reproduce is
    noise, not data (chapters 1 and 4 flag such rows).

    >>> steady({"seconds": 1.0, "spread": 1.1}), steady({"seconds": 1.0, "spread": 3.0})
    (True, False)
    """
    return "seconds" in row and row.get("spread", 1.0) <= STEADY


def best_times(
    fns: Mapping[str, Callable[[], Any]], *, rounds: int = 3, device: Any = None
) -> dict[str, float]:
    """Best seconds per call of each function over ``rounds`` interleaved rounds.

    >>> sorted(best_times({"a": lambda: None, "b": lambda: None}, rounds=2))
    ['a', 'b']
    """
    check_int(rounds, "rounds", low=1)
    best = {name: float("inf") for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            fn()  # untimed: the allocator as this function's own call leaves it
            best[name] = min(best[name], timed(fn, device=device).wall)
    return best


@functools.cache
def _tensor_memory_class() -> type:
    """:class:`TensorMemory`, made on first use (its base class is PyTorch's)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    class TensorMemory(TorchDispatchMode):
        """Live and peak bytes of the tensor storages that ATen operators create while active.

        A storage counts from the operator that creates it until it is freed. Storages of tensors
        made before the mode was entered are not counted, nor are in-place results and views (they
        reuse memory that is already counted or was there before).
        """

        def __init__(self) -> None:
            super().__init__()
            self.current = 0
            self.peak = 0
            self._live: set[int] = set()
            self._refs: list[weakref.ref] = []

        def _on_free(self, key: int, nbytes: int) -> Callable[[Any], None]:
            def callback(_: Any) -> None:
                self.current -= nbytes
                self._live.discard(key)

            return callback

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            inputs = {
                a.untyped_storage().data_ptr()
                for a in tree_flatten((args, kwargs))[0]
                if isinstance(a, torch.Tensor) and a.device.type != "meta"
            }
            for t in tree_flatten(out)[0]:
                if not isinstance(t, torch.Tensor) or t.device.type == "meta":
                    continue
                storage = t.untyped_storage()
                key, nbytes = storage.data_ptr(), storage.nbytes()
                if nbytes == 0 or key in self._live or key in inputs:
                    continue
                self._live.add(key)
                self.current += nbytes
                self.peak = max(self.peak, self.current)
                self._refs.append(weakref.ref(storage, self._on_free(key, nbytes)))
            return out

    return TensorMemory


def __getattr__(name: str) -> Any:
    if name == "TensorMemory":
        return _tensor_memory_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _leaves(tree: Any) -> Iterator[Any]:
    if isinstance(tree, list | tuple):
        for item in tree:
            yield from _leaves(item)
    elif isinstance(tree, dict):
        for item in tree.values():
            yield from _leaves(item)
    else:
        yield tree


def _result_bytes(result: Any) -> int:
    torch = sys.modules.get("torch")
    if torch is None:  # no tensor can be among the results
        leaves = list(_leaves(result))
    else:
        from torch.utils._pytree import tree_flatten

        leaves = tree_flatten(result)[0]
    total = 0
    for t in leaves:
        if torch is not None and isinstance(t, torch.Tensor):
            total += t.untyped_storage().nbytes()
        elif isinstance(t, np.ndarray):
            total += (t if t.base is None else t.base).nbytes
    return total


def peak_tensor_memory(
    fn: Callable[[], Any], *, device: Any = None, exclude_result: bool = False
) -> int:
    """Peak bytes of tensors alive at once while ``fn()`` runs, beyond those that existed before.

    On a CUDA ``device`` this is the caching allocator's peak (``max_memory_allocated``) above
    the memory allocated when ``fn`` started; otherwise every storage ATen creates is tracked.
    ``exclude_result=True`` subtracts the bytes of what ``fn`` returns (the "extra" memory).
    """
    import torch

    gc.collect()
    d = _device(device)
    if d is not None and d.type == "cuda":
        synchronize(d)
        torch.cuda.reset_peak_memory_stats(d)
        before = torch.cuda.memory_allocated(d)
        result = fn()
        synchronize(d)
        peak = torch.cuda.max_memory_allocated(d) - before
    else:
        with _tensor_memory_class()() as tracker:
            result = fn()
        peak = tracker.peak
    return peak - _result_bytes(result) if exclude_result else peak


def peak_numpy_memory(fn: Callable[[], Any], *, exclude_result: bool = False) -> int:
    """Peak bytes Python allocated (NumPy buffers included) while ``fn()`` runs.

    >>> peak_numpy_memory(lambda: np.ones(1000)) >= 8000
    True
    """
    gc.collect()
    tracemalloc.start()
    try:
        result = fn()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak - _result_bytes(result) if exclude_result else peak
