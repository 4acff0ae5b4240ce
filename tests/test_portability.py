"""The machine-sensitive notebooks and tests, run once more on another CPU code path.

The stored outputs are written and checked on the pinned path of ``tools/code_paths.py`` (one
thread, MKL's COMPATIBLE branch, AVX2 kernels), where every x86-64 CPU gives the same bits. A
learner on Apple silicon, or on a CPU without AVX2, gets other bits; a printed number that sits
on its rounding edge then prints another digit there. This re-run is that other CPU, found on
this machine: the ``alternate`` path (MKL's own branch for this CPU, PyTorch's portable kernels,
oneDNN's SSE4.1 ones, other OpenBLAS kernels and NumPy loops, two threads), under which

* each notebook of ``PORTABILITY_NOTEBOOKS`` (conftest.py: the chapters that train or round
  in low precision) must print its stored outputs, checked by ``tools/portability.py``, whose
  report names every printed number near its edge with its unrounded values. By default
  (``--nbval-kernels=course``) nbval itself runs these notebooks on the alternate path, and
  these re-runs are deselected: they run with ``--nbval-kernels=pinned``;
* the tests marked ``portability`` (training reproductions, shipped models) must pass.

Each runs in its own processes: the code path's variables are read as the libraries start.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests._root import root_conftest
from tools import code_paths

ROOT = Path(__file__).resolve().parent.parent


PORTABILITY_NOTEBOOKS: dict[str, int] = root_conftest().PORTABILITY_NOTEBOOKS


def machine_sensitive_paths() -> list[str]:
    """The test files that mark a test ``portability`` (not every module of tests/: collecting
    them all imports every chapter for nothing)."""
    return [
        p.relative_to(ROOT).as_posix()
        for p in sorted((ROOT / "tests").glob("test_*.py"))
        if "mark.portability" in p.read_text(encoding="utf-8") and p.name != Path(__file__).name
    ]


def chunks() -> dict[str, list[str]]:
    """The re-run in parts that the two workers share (conftest.py makes each test of this
    module a work unit of its own): the marked tests together, and each marked notebook alone,
    the slowest first."""
    notebooks = sorted(PORTABILITY_NOTEBOOKS, key=lambda n: -PORTABILITY_NOTEBOOKS[n])
    return {
        "tests": machine_sensitive_paths(),
        **{n.removesuffix(".ipynb"): [f"notebooks/{n}"] for n in notebooks},
    }


@pytest.mark.slow
@pytest.mark.parametrize("chunk", list(chunks()))
def test_machine_sensitive_tests_pass_with_another_cpus_kernels(chunk):
    if chunk != "tests":
        from tools import portability

        (notebook,) = chunks()[chunk]
        report = portability.check(ROOT / notebook, [code_paths.ALTERNATE], jobs=1)
        assert report.ok, f"{code_paths.describe(code_paths.ALTERNATE)}:\n{report.text()}"
        return
    env = code_paths.apply({**os.environ, "COURSE_DEVICE": "cpu"}, code_paths.ALTERNATE)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider"]
    cmd += ["-m", "portability", *chunks()[chunk]]
    run = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    tail = run.stdout[-3000:] + run.stderr[-2000:]
    assert run.returncode == 0, f"{code_paths.describe(code_paths.ALTERNATE)}, {chunk}:\n{tail}"
    assert " passed" in run.stdout, tail


def test_the_chunks_cover_every_marked_file_and_notebook_once():
    parts = [p for chunk in chunks().values() for p in chunk]
    assert len(parts) == len(set(parts))
    assert set(parts) == set(machine_sensitive_paths()) | {
        f"notebooks/{n}" for n in PORTABILITY_NOTEBOOKS
    }
    assert all((ROOT / p).exists() for p in parts)


def test_the_re_run_collects_every_machine_sensitive_test():
    """Every file with a test marked portability is re-run."""
    paths = machine_sensitive_paths()
    assert "tests/test_feedback.py" in paths
    marked = {
        p.name
        for p in (ROOT / "tests").glob("test_*.py")
        if "pytest.mark.portability" in p.read_text(encoding="utf-8")
    } - {Path(__file__).name}
    assert marked <= {Path(p).name for p in paths}
