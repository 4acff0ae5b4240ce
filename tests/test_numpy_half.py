"""The NumPy half of the course stands alone: a chapter's NumPy reference and its exercises
import, and seeding works, where PyTorch is absent; and where it is missing, a PyTorch cell says
so clearly (course_lib.optional) instead of a bare ImportError.

Two ways to take torch away: ``sys.modules["torch"] = None`` in a subprocess (any import of it
fails), and a fresh environment without the torch packages (tools/overlay_venv.py), where
importing it falls through every real finder to the course's message.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from course_lib.optional import MESSAGE
from tools import overlay_venv

ROOT = Path(__file__).resolve().parent.parent
#: chapter folders whose NumPy reference and exercises must not need torch, and their modules
NUMPY_HALF = {
    "matmul": ("reference", "exercises", "widget", "cost"),
    "softmax": ("reference", "exercises", "widget"),
    "text_metrics": ("ngrams", "bleu", "rouge", "exercises", "widget"),
    "attention": ("reference", "exercises", "as_printed", "examples", "flops"),
    "positions": ("reference", "exercises", "as_printed", "indices", "variants"),
    "number_formats": ("reference", "exercises", "formats"),
}
SHARED = ("checker", "checks", "plotting", "interact", "paths", "fetch", "colab", "measure")


def _run(code: str, python: str = sys.executable, **env: str) -> subprocess.CompletedProcess:
    environ = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    return subprocess.run(
        [python, "-c", code], capture_output=True, text=True, env=environ, cwd=ROOT
    )


def _existing(package: str, modules: tuple[str, ...]) -> list[str]:
    folder = ROOT / "course_lib" / package
    return [f"course_lib.{package}.{m}" for m in modules if (folder / f"{m}.py").is_file()]


@pytest.mark.parametrize("package", sorted(NUMPY_HALF))
def test_the_numpy_reference_and_exercises_import_without_torch(package):
    mine = _existing(package, NUMPY_HALF[package])
    assert len(mine) == len(NUMPY_HALF[package]), "a module listed above no longer exists"
    modules = mine + [f"course_lib.{m}" for m in SHARED]
    code = f"""
import importlib, sys
sys.modules["torch"] = None  # any import of torch now fails
for name in {modules!r}:
    importlib.import_module(name)
import course_lib
rng = course_lib.seed_everything(3)
from course_lib.checks import as_array
assert as_array([[1, 2]], "X").shape == (1, 2)
from course_lib.measure import best_time, peak_numpy_memory
import numpy as np
assert peak_numpy_memory(lambda: np.ones(1000)) >= 8000 and best_time(lambda: None) >= 0
print("ok", rng.integers(10))
"""
    out = _run(code)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("ok")


@pytest.mark.skipif(os.name == "nt", reason="the temporary environment links with symlinks")
def test_without_torch_a_pytorch_cell_gets_a_clear_message(tmp_path):
    gone = ("torch", "functorch", "torchgen", "course_lib", "__editable__")
    python = overlay_venv.make(tmp_path / "venv", keep=lambda name: not name.startswith(gone))
    code = """
import course_lib.matmul.reference as ref
import course_lib.matmul.exercises
print(ref.__name__)
import importlib.util
assert importlib.util.find_spec("torch") is None  # a library asking "is torch installed?"
try:
    import course_lib.matmul.accelerated
except ModuleNotFoundError as exc:
    print("MESSAGE", exc)
"""
    out = _run(code, python=str(python))
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("course_lib.matmul.reference")
    assert "MESSAGE " + MESSAGE.format(name="torch") in out.stdout


def test_the_message_finder_comes_after_the_real_finders():
    out = _run("import course_lib, torch; import sys; print(sys.meta_path[-1].__class__.__name__)")
    assert out.returncode == 0 and out.stdout.strip() == "MissingTorch"  # last, after the real ones
