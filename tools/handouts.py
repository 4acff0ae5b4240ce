"""Exercise hand-outs for lecturers: each chapter without its solutions and without outputs.

    python -m tools.handouts                  # every chapter, into handouts/
    python -m tools.handouts 01_matmul --out /tmp/class

Cells tagged ``solution`` (the solution code and the ``{solution-start}``/``{solution-end}``
markers around it) are removed; every output is cleared so that students run the notebook
themselves. The stub cells, which call the checkers, stay.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
TAG = "solution"


def strip(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Return a copy of ``nb`` without solution cells, outputs or widget state."""
    out = nbformat.from_dict(nb)
    out.cells = [c for c in out.cells if TAG not in c.get("metadata", {}).get("tags", [])]
    for cell in out.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    out.metadata.pop("widgets", None)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="chapters such as 01_matmul (default: all)")
    parser.add_argument("--out", type=Path, default=ROOT / "handouts", help="output folder")
    args = parser.parse_args(argv)
    notebooks = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    if args.names:
        wanted = {Path(n).stem for n in args.names}
        unknown = wanted - {p.stem for p in notebooks}
        if unknown:
            parser.error(f"no such chapter(s): {sorted(unknown)}")
        notebooks = [p for p in notebooks if p.stem in wanted]
    args.out.mkdir(parents=True, exist_ok=True)
    for path in notebooks:
        target = args.out / f"{path.stem}_exercises.ipynb"
        nbformat.write(strip(nbformat.read(path, as_version=4)), target)
        print(f"{target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
