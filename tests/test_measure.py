"""The shared timer and peak-memory tracker (course_lib.measure)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from course_lib import measure
from course_lib.measure import (
    TensorMemory,
    best_time,
    best_times,
    peak_numpy_memory,
    peak_tensor_memory,
    timed,
)


@pytest.mark.slow
def test_peak_counts_what_is_alive_at_once():
    x = torch.ones(256)  # made before: not counted
    assert peak_tensor_memory(lambda: x * 2) == 1024
    # x + 1 (1 KiB) is alive while (x + 1) * 2 (1 KiB) is made; then x + 1 is freed
    assert peak_tensor_memory(lambda: (x + 1) * 2) == 2048
    assert peak_tensor_memory(lambda: (x + 1) * 2, exclude_result=True) == 1024


@pytest.mark.slow
def test_in_place_results_and_views_cost_nothing():
    x = torch.ones(256)
    assert peak_tensor_memory(lambda: x.mul_(1.0)) == 0
    assert peak_tensor_memory(lambda: x.view(16, 16).t()) == 0


def test_freed_tensors_leave_the_count():
    def chain():
        y = torch.ones(1024)  # 4 KiB
        for _ in range(10):
            y = y * 2  # the previous y is freed as the next is made
        return y

    with TensorMemory() as mem:
        chain()
    assert mem.peak == 2 * 4096
    assert mem.current == 0


def test_numpy_memory():
    assert peak_numpy_memory(lambda: np.ones(10_000)) >= 80_000
    assert peak_numpy_memory(lambda: np.ones(10_000), exclude_result=True) < 8_000


def test_timers():
    t = timed(lambda: 3)
    assert t.result == 3 and t.wall >= 0 and t.cpu >= 0
    calls = []
    assert best_time(lambda: calls.append(1), repeats=2, warmup=3) >= 0
    assert len(calls) == 5  # 3 warm-up calls, then one call per repeat (min_time=0)
    assert best_time(lambda: None, repeats=1, min_time=0.01) < 0.01
    times = best_times({"a": lambda: None, "b": lambda: sum(range(10_000))}, rounds=2)
    assert set(times) == {"a", "b"} and times["a"] <= times["b"]


def test_timers_synchronise_the_device(monkeypatch):
    seen = []
    monkeypatch.setattr(measure, "synchronize", lambda device=None: seen.append(device))
    best_time(lambda: None, repeats=2, warmup=0, device="cuda")
    assert seen and set(seen) == {"cuda"}


def test_bad_arguments():
    with pytest.raises(ValueError, match="repeats must be at least 1"):
        best_time(lambda: None, repeats=0)
    with pytest.raises(TypeError, match="min_time must be a real number"):
        best_time(lambda: None, min_time="1")
    with pytest.raises(ValueError, match="rounds must be at least 1"):
        best_times({}, rounds=0)
