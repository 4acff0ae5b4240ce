"""The maintenance tools: notebook execution and the new-chapter scaffold."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_chapter_map import table_rows
from tools.execute_notebooks import execute

ROOT = Path(__file__).resolve().parent.parent


def test_notebooks_execute_on_the_cpu_whatever_the_caller_has(tmp_path, monkeypatch):
    src = tmp_path / "probe.py"
    src.write_text(
        '# %%\nimport os\nprint(os.environ["COURSE_DEVICE"], os.environ["PYTHONHASHSEED"])\n'
    )
    monkeypatch.setenv("COURSE_DEVICE", "cuda")  # as on a GPU machine
    monkeypatch.setenv("PYTHONHASHSEED", "123")
    execute(src)
    nb = json.loads(src.with_suffix(".ipynb").read_text())
    assert "".join(nb["cells"][0]["outputs"][0]["text"]) == "cpu 0\n"


def _copy_of_the_repository(dest: Path) -> Path:
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True
    ).stdout.split()
    for rel in files:
        if (ROOT / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, dest / rel)
    return dest


@pytest.mark.slow
def test_scaffolded_chapter_passes_the_tests(tmp_path):
    """./course new in a temporary copy: every file and row appears, and the tests that cover
    a chapter (library, conformance, notebook, chapter map) pass on it as it is."""
    repo = _copy_of_the_repository(tmp_path / "repo")
    rows = table_rows((repo / "README.md").read_text())
    planned = [int(row[0]) for row in rows if row[-1] == "planned"]
    # a planned chapter, or one beyond the map
    number = planned[0] if planned else max(int(row[0]) for row in rows) + 1
    stem, package = f"{number:02d}_scaffold_probe", "scaffold_probe"
    env = {**os.environ, "PYTHONPATH": str(repo)}
    run = subprocess.run(
        [sys.executable, "-m", "tools.new_chapter", stem, "--package", package, "--title", "Probe"],
        cwd=repo, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    for rel in (
        f"course_lib/{package}/spec.py",
        f"course_lib/{package}/exercises.py",
        f"tests/test_{package}.py",
        f"notebooks/{stem}.py",
        f"notebooks/{stem}.ipynb",
    ):
        assert (repo / rel).is_file(), rel
    toc = (repo / "book" / "_toc.yml").read_text()
    assert f"notebooks/{stem}" in toc and f"book/lecturers/{stem}" in toc
    mine = [row for row in table_rows((repo / "README.md").read_text()) if int(row[0]) == number]
    assert [row[-1] for row in mine] == ["draft"], mine
    again = subprocess.run(
        [sys.executable, "-m", "tools.new_chapter", stem, "--package", package, "--no-execute"],
        cwd=repo, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert again.returncode != 0 and "exists; nothing was written" in again.stderr
    tests = subprocess.run(
        [
            sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider",
            f"course_lib/{package}", f"tests/test_{package}.py", "tests/test_chapter_map.py",
            "tests/test_conformance.py::test_specs_are_exactly_the_mirrored_functions",
            "tests/test_notebook_sources.py::test_pairs_are_complete",
            *(
                f"tests/test_notebook_sources.py::{name}[{stem}]"
                for name in (
                    "test_py_and_ipynb_are_in_sync",
                    "test_notebook_is_executed_in_order_without_errors",
                    "test_chapter_structure",
                    "test_worksheet_keeps_exercises_and_their_context_and_drops_every_solution",
                    "test_solutions_are_folded_in_jupyterlab_too",
                    "test_float64_tensors_never_go_to_the_chosen_device",
                )
            ),
            f"notebooks/{stem}.ipynb",
        ],
        cwd=repo, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-2000:]
    lint = subprocess.run(
        [str(Path(sys.executable).parent / "ruff"), "check", f"course_lib/{package}", "tools"],
        cwd=repo, capture_output=True, text=True,
    )  # fmt: skip
    assert lint.returncode == 0, lint.stdout
