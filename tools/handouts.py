"""Exercise worksheets for lecturers: each chapter's exercises with the context they need.

    python -m tools.handouts                  # every chapter, into handouts/
    python -m tools.handouts 01_matmul --out /tmp/class

A worksheet keeps the chapter's title cell, its set-up cell (the imports and the checkers), any
cell tagged ``worksheet`` (context an exercise needs: a definition, a dataset, an exercise set
inside the lesson, whose solution cells the key keeps), and the ``## Exercises`` section up to
the summary. Cells tagged ``solution`` (the solution code and the
``{solution-start}``/``{solution-end}`` markers around it) are removed, and every output is
cleared so that students run it themselves. The stub cells, which call the checkers, stay.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
TAG = "solution"
CONTEXT_TAG = "worksheet"
COLAB_TAG = "colab-setup"  # tools/publish.py: the hidden set-up cell that runs only on Colab


def _heading_at(cell: nbformat.NotebookNode, prefix: str) -> int | None:
    """The offset in a markdown cell's source of a line starting with ``prefix``, or None."""
    if cell.cell_type != "markdown":
        return None
    source = cell.source
    if source.startswith(prefix):
        return 0
    at = source.find("\n" + prefix)
    return None if at < 0 else at + 1


def worksheet(nb: nbformat.NotebookNode, solutions: bool = False) -> nbformat.NotebookNode:
    """The exercises of a chapter with the cells they need, without outputs and (unless
    ``solutions``) without solutions: the key a lecturer grades against keeps them."""
    cells = [nbformat.from_dict(c) for c in nb.cells]
    # the Colab set-up cell (tools/publish.py) stays first: a worksheet opened in Colab needs it
    lead = int(bool(cells) and COLAB_TAG in cells[0].metadata.get("tags", []))
    first_code = next(i for i, c in enumerate(cells) if i > lead and c.cell_type == "code")
    start = next(i for i, c in enumerate(cells) if _heading_at(c, "## Exercises") is not None)
    cells[start].source = cells[start].source[_heading_at(cells[start], "## Exercises") :]
    end = start + 1
    while end < len(cells):  # up to the next section heading after the exercises
        at = _heading_at(cells[end], "## ")
        if at is not None:
            cells[end].source = cells[end].source[:at].rstrip()
            if cells[end].source:
                end += 1
            break
        end += 1
    keep = [*cells[:lead], cells[lead], cells[first_code]]
    keep += _context(cells[first_code + 1 : start])
    keep += cells[start:end]
    out = nbformat.from_dict(nb)
    out.cells = keep
    return strip(out, solutions=solutions)


_LABEL = re.compile(r":label:\s*(\S+)")
_SOLUTION_START = re.compile(r"\{solution-start\}\s*(\S+)")


def _context(lesson: list) -> list:
    """The lesson's cells tagged ``worksheet``, and the solution cells (from its
    ``{solution-start}`` to its ``{solution-end}``) of each exercise among them, so that the
    key of an exercise set inside the lesson holds its solution too (a hand-out drops them)."""
    out, labels, inside = [], set(), False
    for c in lesson:
        tags = c.metadata.get("tags", [])
        if CONTEXT_TAG in tags:
            out.append(c)
            labels.update(_LABEL.findall(c.source) if c.cell_type == "markdown" else [])
            continue
        if TAG not in tags:
            continue
        start = _SOLUTION_START.search(c.source)
        inside = inside or bool(start and start.group(1) in labels)
        if inside:
            out.append(c)
            inside = "{solution-end}" not in c.source
    return out


def strip(nb: nbformat.NotebookNode, solutions: bool = False) -> nbformat.NotebookNode:
    """Return a copy of ``nb`` without outputs, widget state and (unless ``solutions``)
    solution cells."""
    out = nbformat.from_dict(nb)
    if not solutions:
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
    parser.add_argument(
        "--solutions",
        action="store_true",
        help="also write NN_topic_solutions.ipynb, the worksheet with its solutions (a key)",
    )
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
        chapter = nbformat.read(path, as_version=4)
        nbformat.write(worksheet(chapter), target)
        print(f"{target}")
        if args.solutions:
            key = args.out / f"{path.stem}_solutions.ipynb"
            nbformat.write(worksheet(chapter, solutions=True), key)
            print(f"{key}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
