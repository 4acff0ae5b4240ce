"""The machine-sensitive tests, run once more with another CPU's kernels.

PyTorch picks its CPU kernels by the instruction sets it finds (AVX-512, AVX2, ...), and results
of training differ in the last bits between them, which a few hundred optimiser steps can grow.
``ATEN_CPU_CAPABILITY=default`` makes PyTorch use its portable kernels instead, as a CPU without
AVX would: the tests marked ``portability`` (training reproductions, shipped models) and the
notebooks that train must pass under it too. It runs in a subprocess because the capability is
read once, when PyTorch starts.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def machine_sensitive_paths() -> list[str]:
    """What the re-run collects: the test files that mark a test ``portability``, not every
    module of tests/ (collecting them all imports every chapter for nothing), and notebooks/
    (conftest.py marks the notebooks in its PORTABILITY_NOTEBOOKS so)."""
    files = [
        p.relative_to(ROOT).as_posix()
        for p in sorted((ROOT / "tests").glob("test_*.py"))
        if "mark.portability" in p.read_text(encoding="utf-8") and p.name != Path(__file__).name
    ]
    return [*files, "notebooks"]


@pytest.mark.slow
@pytest.mark.parametrize("capability", ["default"])
def test_machine_sensitive_tests_pass_with_another_cpus_kernels(capability):
    env = {**os.environ, "ATEN_CPU_CAPABILITY": capability, "COURSE_DEVICE": "cpu"}
    cmd = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider",
        "-m", "portability", *machine_sensitive_paths(),
    ]  # fmt: skip
    run = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    tail = run.stdout[-3000:] + run.stderr[-2000:]
    assert run.returncode == 0, f"ATEN_CPU_CAPABILITY={capability}:\n{tail}"
    assert " passed" in run.stdout and "deselected" in run.stdout, tail


def test_the_re_run_collects_every_machine_sensitive_test():
    """Every file with a test marked portability, and every notebook marked so, is re-run."""
    paths = machine_sensitive_paths()
    assert "tests/test_feedback.py" in paths and "notebooks" in paths
    assert all((ROOT / p).exists() for p in paths)
    marked = {
        p.name
        for p in (ROOT / "tests").glob("test_*.py")
        if "pytest.mark.portability" in p.read_text(encoding="utf-8")
    } - {Path(__file__).name}
    assert marked <= {Path(p).name for p in paths}
