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

from tests._root import root_conftest

ROOT = Path(__file__).resolve().parent.parent


PORTABILITY_NOTEBOOKS: dict[str, int] = root_conftest().PORTABILITY_NOTEBOOKS


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


def chunks() -> dict[str, list[str]]:
    """The re-run in parts that the two workers share (conftest.py makes each test of this
    module a work unit of its own): the marked tests together, and each marked notebook alone,
    the slowest first."""
    paths = machine_sensitive_paths()
    notebooks = sorted(PORTABILITY_NOTEBOOKS, key=lambda n: -PORTABILITY_NOTEBOOKS[n])
    return {
        "tests": [p for p in paths if p != "notebooks"],
        **{n.removesuffix(".ipynb"): [f"notebooks/{n}"] for n in notebooks},
    }


@pytest.mark.slow
@pytest.mark.parametrize("chunk", list(chunks()))
def test_machine_sensitive_tests_pass_with_another_cpus_kernels(chunk):
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default", "COURSE_DEVICE": "cpu"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider"]
    cmd += ["-m", "portability", *chunks()[chunk]]
    run = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    tail = run.stdout[-3000:] + run.stderr[-2000:]
    assert run.returncode == 0, f"ATEN_CPU_CAPABILITY=default, {chunk}:\n{tail}"
    assert " passed" in run.stdout, tail


def test_the_chunks_cover_every_marked_file_and_notebook_once():
    parts = [p for chunk in chunks().values() for p in chunk]
    assert len(parts) == len(set(parts))
    assert set(parts) == {p for p in machine_sensitive_paths() if p != "notebooks"} | {
        f"notebooks/{n}" for n in PORTABILITY_NOTEBOOKS
    }


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
