"""The quick tier (``pytest --quick``) leaves out the notebooks and the tests marked slow, book,
browser or lab; the full run keeps them (conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests._root import root_conftest

ROOT = Path(__file__).resolve().parent.parent
PROBE = ["tests/test_portability.py", "tests/test_lab_slides.py", "notebooks/02_softmax.ipynb"]


def collected(*args: str) -> str:
    cmd = [sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:xdist", *args, *PROBE]
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    return run.stdout


@pytest.mark.slow
def test_quick_leaves_out_notebooks_and_slow_or_browser_tests_and_the_full_run_keeps_them():
    quick, full = collected("--quick"), collected()
    for kept in ("test_the_re_run_collects_every_machine_sensitive_test", "test_deck_markdown"):
        assert kept in quick and kept in full
    for left_out in ("pass_with_another_cpus_kernels", "test_deck_in_browser", "02_softmax.ipynb"):
        assert left_out not in quick and left_out in full


def test_the_browser_tests_and_the_portability_re_run_are_split_into_units_both_workers_share():
    work_unit = root_conftest().work_unit

    assert work_unit("tests/test_book.py::test_page_in_browser[index]") == "site"
    assert work_unit("tests/test_lab_slides.py::test_deck_in_browser[01_matmul]") == "site"
    assert work_unit("tests/test_lab_slides.py::test_rise_slideshow_in_jupyterlab") == "lab"
    assert work_unit("tests/test_lab.py::test_chapter_in_jupyterlab[01_matmul]") == "lab"
    one = "tests/test_portability.py::test_machine_sensitive_tests_pass_with_another_cpus_kernels"
    assert work_unit(f"{one}[08_gpt]") != work_unit(f"{one}[09_bert]")
    assert work_unit("tests/test_gpt.py::test_x") is None  # its module, as loadscope does


def test_notebook_kernels_start_on_the_code_path_and_nothing_else_does(monkeypatch):
    import nbval.kernel

    from tools import code_paths

    seen = {}
    monkeypatch.setattr(nbval.kernel, "start_new_kernel", lambda **kw: seen.update(kw))
    monkeypatch.setenv("MKL_CBWR", "AVX512")  # the caller's setting does not leak in
    root_conftest().notebook_kernels_on(code_paths.PINNED)
    nbval.kernel.start_new_kernel(kernel_name="python3", cwd="/tmp")
    want = {k: v for k, v in code_paths.path_env(code_paths.PINNED).items() if v is not None}
    assert {k: seen["env"].get(k) for k in code_paths.KNOBS if k in seen["env"]} == want
    assert seen["env"]["COURSE_DEVICE"] == "cpu" and seen["cwd"] == "/tmp"
    assert seen["env"]["OMP_NUM_THREADS"] == "1"
    assert os.environ["MKL_CBWR"] == "AVX512"  # this process keeps its own


def test_with_alternate_notebook_kernels_the_portability_re_run_keeps_only_the_unit_tests():
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--co", "-q", "--nbval-kernels=alternate",
         "tests/test_portability.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    kept = [ln for ln in run.stdout.splitlines() if "kernels[" in ln]
    assert kept == [
        "tests/test_portability.py::"
        "test_machine_sensitive_tests_pass_with_another_cpus_kernels[tests]"
    ], run.stdout


def test_by_default_the_machine_sensitive_notebooks_run_on_the_alternate_path(monkeypatch):
    """--nbval-kernels=course (the default): one nbval run checks both paths, the stored outputs
    (written on the pinned path) against the alternate path's for the notebooks whose digits
    could move, against the pinned path's for the rest."""
    import nbval.kernel
    import nbval.plugin

    from tools import code_paths

    conftest = root_conftest()
    seen = []
    monkeypatch.setattr(nbval.kernel, "start_new_kernel", lambda **kw: seen.append(kw["env"]))
    monkeypatch.setattr(nbval.plugin.IPyNbFile, "setup", lambda self: None)
    conftest.notebook_kernels_on("course")
    for name in ("08_gpt.ipynb", "02_softmax.ipynb"):
        nbval.plugin.IPyNbFile.setup(type("File", (), {"fspath": f"/x/notebooks/{name}"})())
        nbval.kernel.start_new_kernel(kernel_name="python3", cwd="/tmp")
    alternate, pinned = (code_paths.path_env(p) for p in ("alternate", "pinned"))
    assert "08_gpt.ipynb" in conftest.PORTABILITY_NOTEBOOKS
    assert "02_softmax.ipynb" not in conftest.PORTABILITY_NOTEBOOKS
    assert seen[0]["OMP_NUM_THREADS"] == alternate["OMP_NUM_THREADS"] == "2"
    assert seen[1]["OMP_NUM_THREADS"] == pinned["OMP_NUM_THREADS"] == "1"
    assert seen[0].get("MKL_CBWR") == alternate["MKL_CBWR"]
    assert seen[1].get("MKL_CBWR") == pinned["MKL_CBWR"]
