"""The chapters whose NumPy half stands alone run in a kernel where PyTorch is not installed, up
to the first PyTorch cell, which tells the learner what to do (issue 30, item 5).

Torch is hidden the way a machine without it hides it: a ``sitecustomize`` on the kernel's
``PYTHONPATH`` swaps the path finder on ``sys.meta_path`` for one that finds everything but
``torch`` (and its sibling packages). Every real finder then fails to find it, so the learner's
``import torch`` reaches :class:`course_lib.optional.MissingTorch` and its message, as it would
where torch was never installed. (``sys.modules["torch"] = None`` would fail every import too,
but with Python's own "import of torch halted; None in sys.modules", which no learner sees.)

Cells that need PyTorch, directly or through the results of an earlier PyTorch cell, carry the
cell tag ``needs-torch`` in the notebook source. The test runs every cell in order, in one
kernel, and asserts that

* every cell without the tag runs without error (the lesson, the NumPy exercises and their
  checkers, before the first PyTorch cell and after it);
* the first cell tagged ``needs-torch`` fails with ModuleNotFoundError carrying the course's
  message, raised within a few frames of the learner's own line (not a NameError, not a trace
  through the library);
* the cells tagged ``needs-torch`` after it are not run (they would fail the same way).

It starts a kernel per chapter and runs most of each chapter, so it is left out of the quick
tier (marked slow).
"""

from __future__ import annotations

import os
import re
import textwrap
from pathlib import Path

import jupytext
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from course_lib.optional import MESSAGE
from tools.execute_notebooks import KERNEL_ENV

ROOT = Path(__file__).resolve().parent.parent
#: the chapters whose NumPy reference and exercises need no torch (tests/test_numpy_half.py)
CHAPTERS = (
    "01_matmul",
    "02_softmax",
    "03_text_metrics",
    "04_attention",
    "06_positional_encodings",
    "12_number_formats",
)
TAG = "needs-torch"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
HIDE_TORCH = '''
"""Hide PyTorch from this interpreter, as if it were not installed (tests/{test})."""
import sys
from importlib.machinery import PathFinder

HIDDEN = ("torch", "functorch", "torchgen", "torchvision", "torchaudio")


class PathFinderWithoutTorch(PathFinder):
    """The standard path finder, blind to the packages above and to their metadata."""

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname.partition(".")[0] in HIDDEN:
            return None
        return super().find_spec(fullname, path, target)

    @classmethod
    def find_distributions(cls, *args, **kwargs):
        found = super().find_distributions(*args, **kwargs)
        return (d for d in found if (d.name or "").lower() not in HIDDEN)


sys.meta_path[:] = [PathFinderWithoutTorch if f is PathFinder else f for f in sys.meta_path]
'''


@pytest.fixture(scope="module")
def kernel_env(tmp_path_factory) -> dict[str, str]:
    site = tmp_path_factory.mktemp("no_torch")
    (site / "sitecustomize.py").write_text(
        textwrap.dedent(HIDE_TORCH.format(test=Path(__file__).name)).lstrip()
    )
    path = os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, **KERNEL_ENV, "PYTHONPATH": path.rstrip(os.pathsep)}


def torch_cells(stem: str) -> list[int]:
    nb = jupytext.read(ROOT / "notebooks" / f"{stem}.py")
    return [i for i, c in enumerate(nb.cells) if TAG in c.metadata.get("tags", [])]


@pytest.mark.parametrize("stem", CHAPTERS)
def test_torch_cells_are_tagged_and_code(stem):
    nb = jupytext.read(ROOT / "notebooks" / f"{stem}.py")
    tagged = torch_cells(stem)
    assert all(nb.cells[i].cell_type == "code" for i in tagged)
    opening = next(c for c in nb.cells[1:] if c.cell_type == "code")  # after the Colab cell
    assert not re.search(r"^\s*(import torch|from torch)", opening.source, re.M), (
        "the opening imports need no torch; import it in the first PyTorch cell"
    )
    untagged = [
        i
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code" and i not in tagged and re.search(r"\btorch\.", c.source)
    ]
    assert not untagged, f"cells {untagged} use torch but are not tagged {TAG}"


@pytest.mark.slow
@pytest.mark.parametrize("stem", CHAPTERS)
def test_the_numpy_half_runs_without_torch(stem, kernel_env):
    src = ROOT / "notebooks" / f"{stem}.py"
    nb = jupytext.read(src)
    nb.metadata["kernelspec"] = {
        "display_name": "Python 3",
        "language": "python",
        "name": "python3",
    }
    client = NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(src.parent)}}
    )
    tagged = torch_cells(stem)
    first = tagged[0] if tagged else None  # chapter 3 has no PyTorch cell: all of it runs
    ran = 0
    with client.setup_kernel(env=kernel_env):
        for i, cell in enumerate(nb.cells):
            if cell.cell_type != "code" or (i in tagged and i != first):
                continue
            if i == first:
                client.allow_errors = True
                client.execute_cell(cell, i)
                client.allow_errors = False
                errors = [o for o in cell.outputs if o.output_type == "error"]
                assert errors, f"cell {i}, the first tagged {TAG}, ran without torch"
                (error,) = errors
                assert error.ename == "ModuleNotFoundError", (error.ename, error.evalue)
                assert error.evalue.startswith(MESSAGE.split("{name}")[0]), error.evalue
                trace = ANSI.sub("", "\n".join(error.traceback))
                frames = re.findall(r"^(?:File|Cell) .*line \d+", trace, re.M)
                assert 1 <= len(frames) <= 3, trace
                continue
            try:
                client.execute_cell(cell, i)
            except CellExecutionError as exc:
                pytest.fail(f"{stem} cell {i} (not tagged {TAG}) fails without torch:\n{exc}")
            ran += 1
    assert ran >= 5
    if first is not None:
        print(f"{stem}: {ran} cells ran without torch; cell {first} said:\n{trace}")
