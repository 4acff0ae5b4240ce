"""A simulated class, graded (issue 32): hand-outs of three chapters, six submissions each.

Per chapter: the key (every solution), the untouched hand-out, a partly wrong one (the first
exercise's solution left out), a broken one (a cell that raises, one that never ends and one
that allocates without bound), a hostile one (deletes a file outside its folder, writes
megabytes, signals the grader) and an edited one (the first checker call replaced by a fake
verdict). Each row is one submission as ``./course grade`` marked it, with its time; the
summary gives the time of the whole class. ``--quick`` grades one chapter's first two.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import nbformat

from tools.grade import Limits, grade_class, read_sheet
from tools.handouts import worksheet

TITLE = "Grading a simulated class (./course grade)"
ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = ["01_matmul", "02_softmax", "12_number_formats"]
_total: dict[str, float] = {}


def _after(nb, label: str, code: str):
    """A copy of ``nb`` with ``code`` as a new cell after the first code cell of ``label``."""
    out = nbformat.from_dict(nb)
    at = next(i for i, c in enumerate(out.cells) if f":label: {label}" in c.source)
    at = next(i for i in range(at, len(out.cells)) if out.cells[i].cell_type == "code")
    out.cells.insert(at + 1, nbformat.v4.new_code_cell(code))
    return out


def submissions(chapter: str, folder: Path, sentinel: Path) -> list[Path]:
    nb = nbformat.read(ROOT / "notebooks" / f"{chapter}.ipynb", as_version=4)
    hand_out, key = worksheet(nb), worksheet(nb, solutions=True)
    first = read_sheet(hand_out).graded[0]
    at = next(i for i, c in enumerate(key.cells) if f":label: {first}" in c.source)
    end = next(i for i in range(at + 1, len(key.cells)) if "{solution-end}" in key.cells[i].source)
    partly = nbformat.from_dict(key)
    partly.cells = [
        c
        for i, c in enumerate(key.cells)
        if not (at < i <= end and "solution" in c.metadata.get("tags", []))
    ]
    broken = _after(key, first, "raise ValueError('a bug')")
    broken = _after(broken, first, "while True:\n    pass")
    broken = _after(broken, first, "grow = []\nwhile True:\n    grow.append(bytearray(2**26))")
    hostile = _after(
        key,
        first,
        f"import os, signal\nos.remove({str(sentinel)!r})\nprint('x' * 20_000_000)\n"
        "os.kill(os.getppid(), signal.SIGTERM)",
    )
    edited = nbformat.from_dict(hand_out)
    for cell in edited.cells:
        calls = read_sheet(hand_out).calls[first]
        if cell.cell_type == "code" and calls[0] in cell.source:
            cell.source = cell.source.replace(calls[0], "print('✅ Correct')")
            break
    paths = []
    for name, book in [
        ("key", key),
        ("untouched", hand_out),
        ("partly", partly),
        ("broken", broken),
        ("hostile", hostile),
        ("edited", edited),
    ]:
        paths.append(folder / f"{chapter}-{name}.ipynb")
        nbformat.write(book, paths[-1])
    return paths


def run(quick: bool = False) -> list[dict]:
    rows = []
    folder = Path(tempfile.mkdtemp(prefix="class-"))
    sentinel = folder / "precious.txt"
    sentinel.write_text("keep")
    limits = Limits(cell_timeout=5, total_timeout=120, memory_mb=1024)
    for chapter in CHAPTERS[:1] if quick else CHAPTERS:
        paths = submissions(chapter, folder, sentinel)[: 2 if quick else None]
        sheet = read_sheet(
            worksheet(nbformat.read(ROOT / "notebooks" / f"{chapter}.ipynb", as_version=4))
        )
        start = time.perf_counter()
        graded = grade_class(sheet, paths, limits, jobs=2)
        _total[chapter] = time.perf_counter() - start
        for r in graded:
            rows.append(
                {
                    "chapter": chapter,
                    "submission": r.submission.removeprefix(chapter + "-"),
                    "passed": r.passed,
                    "total": len(sheet.graded),
                    "edited": len(r.edited),
                    "cell_errors": len(r.cell_errors),
                    "status": r.status[:40],
                    "seconds": round(r.seconds, 1),
                }
            )
    if sentinel.read_text() != "keep":
        raise AssertionError("a submission changed a file outside its folder")
    return rows


def summary(rows: list[dict]) -> str:
    times = ", ".join(f"{c} {s:.0f} s" for c, s in _total.items())
    return f"wall time per chapter, 2 at a time: {times}; the file outside every sandbox is intact"
