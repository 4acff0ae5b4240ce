"""A simulated class, graded (issues 32 and 40): how long ``./course grade`` takes.

First, chapter 1's worksheet for a class of 30 honest submissions (the key, 30 times), two at a
time: issue 40's target is under 2 minutes on 2 cores; the summary gives the wall time and the
CPU time of every process involved (a cpuacct cgroup where the machine lets this process make
one, else this process and the children it waited for, a lower bound).

Then hand-outs of three chapters, six submissions each: the key (every solution), the untouched
hand-out, a partly wrong one (the first exercise's solution left out), a broken one (a cell that
raises, one that never ends and one that allocates without bound), a hostile one (deletes a file
outside its folder, writes megabytes, signals the grader) and an edited one (the first checker
call replaced by a fake verdict). Each row is one submission as ``./course grade`` marked it,
with its time. ``--quick`` grades one chapter's first two submissions only.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
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
_class: dict[str, float] = {}


@contextlib.contextmanager
def cpu_meter():
    """Yields a dict that gets "cpu" (seconds of every process started inside) and "how"."""
    out: dict = {}
    base = Path("/sys/fs/cgroup/cpuacct")
    group = base / f"grading-bench-{os.getpid()}"
    try:
        group.mkdir()
        (group / "cgroup.procs").write_text(str(os.getpid()))
    except OSError:
        group = None
    before = [resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    try:
        yield out
    finally:
        if group is not None:
            out["cpu"] = int((group / "cpuacct.usage").read_text()) / 1e9
            out["how"] = "cpuacct cgroup: every process"
            (base / "cgroup.procs").write_text(str(os.getpid()))
            group.rmdir()
        else:
            after = [
                resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
            ]
            out["cpu"] = sum(a.ru_utime + a.ru_stime - b.ru_utime - b.ru_stime
                             for a, b in zip(after, before, strict=True))  # fmt: skip
            out["how"] = "this process and the children it waited for (a lower bound)"


def honest_class(n: int = 30) -> dict:
    """Chapter 1's worksheet graded for ``n`` copies of its key, 2 at a time."""
    chapter = nbformat.read(ROOT / "notebooks" / "01_matmul.ipynb", as_version=4)
    hand, key = worksheet(chapter), worksheet(chapter, solutions=True)
    folder = Path(tempfile.mkdtemp(prefix="class30-"))
    paths = []
    for i in range(n):
        paths.append(folder / f"learner{i:02d}.ipynb")
        nbformat.write(key, paths[-1])
    with cpu_meter() as meter:
        start = time.perf_counter()
        rows = grade_class(read_sheet(hand), paths, Limits(), jobs=2, key=read_sheet(key))
        wall = time.perf_counter() - start
    shutil.rmtree(folder)
    passed = sum(r.passed == len(r.results) for r in rows)
    return {"wall": wall, "cpu": meter["cpu"], "how": meter["how"], "passed": passed, "n": n}


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
    if not quick:
        _class.update(honest_class())
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
    text = f"wall time per chapter, 2 at a time: {times}; the file outside every sandbox is intact"
    if _class:
        c = _class
        text = (
            f"chapter 1, {c['n']} honest submissions, 2 at a time: {c['passed']}/{c['n']} score "
            f"full marks in {c['wall']:.0f} s of wall time and {c['cpu']:.0f} s of CPU "
            f"({c['how']}; target: under 120 s on 2 cores); " + text
        )
    return text
