"""Execute ``notebooks/*.py`` (jupytext py:percent sources) into ``notebooks/*.ipynb`` with outputs.

    python -m tools.execute_notebooks                 # every chapter
    python -m tools.execute_notebooks 01_matmul       # one chapter (name or path)

Widget state is stored in the notebook so that the website shows widgets without a kernel.
Prints each notebook's run time (the budget is 60 s on 2 CPU cores).

The kernel always runs on the CPU (``COURSE_DEVICE=cpu``) with a fixed hash seed, on the pinned
CPU code path (``tools/code_paths.py``: one thread, MKL's COMPATIBLE branch, AVX2 kernels): the
stored outputs are what nbval compares every later run against, on any machine, so they must
not depend on whether the machine that executed them had a GPU, an Intel or an AMD CPU,
AVX-512 or not, or how many cores. ``python -m tools.portability NN_topic`` then says whether a
printed number sits near its rounding edge.
"""

from __future__ import annotations

import argparse
import atexit
import os
import sys
import time
from pathlib import Path

import jupytext
import nbformat
from nbclient import NotebookClient

from tools import code_paths

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}
#: The kernel's environment, whatever the caller's: stored outputs are CPU outputs.
KERNEL_ENV = {"COURSE_DEVICE": "cpu", "PYTHONHASHSEED": "0", "COURSE_PROGRESS": "off"}


def kernel_env(path: str = code_paths.PINNED) -> dict[str, str]:
    """The environment the stored outputs are made in: this one, on the CPU, on ``path``."""
    return code_paths.apply({**os.environ, **KERNEL_ENV}, path)


def sources(names: list[str]) -> list[Path]:
    if not names:
        return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py"))
    out = []
    for name in names:
        stem = Path(name).name.removesuffix(".py").removesuffix(".ipynb")
        path = NOTEBOOKS / f"{stem}.py"
        if not path.exists():
            sys.exit(f"error: no notebook source {path.relative_to(ROOT)}")
        out.append(path)
    return out


def fold_solutions(nb: nbformat.NotebookNode) -> None:
    """Fold every cell tagged ``solution`` in JupyterLab (``jupyter.source_hidden``), as the
    website folds them in a dropdown: a learner sees that a solution is there, not what it is."""
    for cell in nb.cells:
        if "solution" in cell.metadata.get("tags", []):
            cell.metadata.setdefault("jupyter", {})["source_hidden"] = True


def execute(src: Path, timeout: int = 600) -> float:
    nb = jupytext.read(src)
    nb.metadata["kernelspec"] = KERNELSPEC
    nb.metadata.setdefault("jupytext", {})["formats"] = "ipynb,py:percent"
    nb.metadata["language_info"] = {"name": "python"}
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        store_widget_state=True,
        resources={"metadata": {"path": str(src.parent)}},
    )
    start = time.perf_counter()
    try:
        client.execute(env=kernel_env())
    except Exception:
        # nbclient leaves an exit hook that fails with its own traceback where the kernel
        # never started: the kernel is gone either way
        atexit.unregister(client._cleanup_kernel)
        raise
    elapsed = time.perf_counter() - start
    if not nb.metadata.get("widgets"):  # no widget in this chapter: store no empty state
        nb.metadata.pop("widgets", None)
    fold_solutions(nb)
    out = src.with_suffix(".ipynb")
    nbformat.write(nb, out)
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="chapter names such as 01_matmul (default: all)")
    args = parser.parse_args(argv)
    from jupyter_client.kernelspec import NoSuchKernel
    from nbclient.exceptions import CellExecutionError, DeadKernelError

    for src in sources(args.names):
        try:
            seconds = execute(src)
        except NoSuchKernel:
            sys.exit(
                f"error: no Jupyter kernel named {KERNELSPEC['name']!r} in this environment: "
                "./course setup installs it"
            )
        except CellExecutionError as exc:  # the cell's own error, not nbclient's stack
            sys.exit(f"error: {src.relative_to(ROOT)}: a cell failed; nothing written\n{exc}")
        except (DeadKernelError, RuntimeError) as exc:  # the kernel did not start, or died
            sys.exit(
                f"error: {src.relative_to(ROOT)}: the notebook's kernel stopped ({exc}); nothing "
                "written; ./course doctor checks the environment"
            )
        flag = "" if seconds < 60 else "  <-- over the 60 s budget"
        print(f"{src.with_suffix('.ipynb').relative_to(ROOT)}: executed in {seconds:.1f} s{flag}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
