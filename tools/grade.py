"""Grade a class's worksheets: ``./course grade WORKSHEET SUBMISSION... --out grades.csv``.

    ./course handouts 02_softmax                       # hand out handouts/02_softmax_exercises.ipynb
    ./course grade 02_softmax submissions/*.ipynb --out grades.csv
    ./course grade handouts/02_softmax_exercises.ipynb a.ipynb b.ipynb --gradescope gs/ --canvas canvas.csv

WORKSHEET is a hand-out notebook or a chapter name (its worksheet is then made from the
chapter, as ``./course handouts`` does). Each exercise with a checker (implement and
predict-then-check exercises; conceptual ones have none) is one column of the grades.

Each submission runs in its own process (tools.grade_runner) in a fresh temporary folder,
under a time limit per cell and in all, a memory limit and, on Linux, a sandbox that lets it
write only in that folder (tools.sandbox). Its code cells run in order with their checker
calls taken out; then the checker calls of the grader's worksheet run, with the grader's
checker code: a submission that edits a checker call is graded with the original call and
marked ``edited``, and one that patches the checker library fails every exercise. A cell that
raises, runs past its limit or allocates past the memory limit is recorded and the next cell
runs; a submission that ends badly fails the exercises it did not reach.

Output: one CSV row per submission (pass or fail per exercise, the checker's message for each
failure, the time taken), a summary per exercise on the terminal (how many passed, the most
common failure), and optionally Gradescope results files and a Canvas grade-book CSV.
"""

from __future__ import annotations

import argparse
import ast
import csv
import json
import os
import re
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
CHECKER_NAMES = ("check", "check_prediction")
LABEL = re.compile(r"^:label:\s*(\S+)", re.M)
DIRECTIVE = re.compile(r"```\{exercise\}\s*(.*)")


# -- reading a worksheet ----------------------------------------------------------------------


def _is_checker_call(node: ast.AST) -> bool:
    """A call of ``check.<name>(...)`` or ``check_prediction(...)``."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    while isinstance(func, ast.Attribute):
        func = func.value
    return isinstance(func, ast.Name) and func.id in CHECKER_NAMES


def _contains_checker_call(stmt: ast.stmt) -> bool:
    """An expression or assert statement that calls a checker (definitions and assignments stay)."""
    return isinstance(stmt, ast.Expr | ast.Assert) and any(
        _is_checker_call(n) for n in ast.walk(stmt)
    )


def _normal(call: ast.Call) -> str:
    """A checker call as the grader compares it: ``require=...`` (used by solutions) ignored."""
    call = ast.Call(
        func=call.func, args=call.args, keywords=[k for k in call.keywords if k.arg != "require"]
    )
    return ast.unparse(call)


def split_checks(code: str) -> tuple[str, list[str]]:
    """A code cell without its top-level checker statements, and the checker calls it made.

    Lines of removed statements are left blank so that error messages keep their line numbers.

    >>> code, calls = split_checks("def f(x):\\n    return x\\ncheck.f(f)\\nassert check.g(f).passed")
    >>> calls
    ['check.f(f)', 'check.g(f)']
    >>> code.splitlines()
    ['def f(x):', '    return x', '']
    """
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code, []
    lines = code.splitlines()
    calls: list[str] = []
    for stmt in tree.body:
        if not _contains_checker_call(stmt):
            continue
        calls += [_normal(n) for n in ast.walk(stmt) if _is_checker_call(n)]
        for i in range(stmt.lineno - 1, stmt.end_lineno):
            lines[i] = ""
    return "\n".join(lines), calls


@dataclass
class Sheet:
    """A notebook read as a worksheet: its set-up cell, its code cells and the exercises."""

    setup: str
    cells: list[tuple[str | None, str]]  # (exercise label or None, source), every code cell
    titles: dict[str, str] = field(default_factory=dict)  # label -> title, in order
    calls: dict[str, list[str]] = field(default_factory=dict)  # label -> checker calls

    @property
    def graded(self) -> list[str]:
        """The labels of the exercises that have a checker."""
        return [label for label in self.titles if self.calls.get(label)]


def read_sheet(nb: nbformat.NotebookNode) -> Sheet:
    """Read a worksheet or a submission: which code cell belongs to which exercise."""
    # the Colab set-up cell (tools/publish.py) installs the course on Colab only: not graded
    code_cells = [
        c
        for c in nb.cells
        if c.cell_type == "code" and "colab-setup" not in c.metadata.get("tags", [])
    ]
    if not code_cells:
        raise ValueError("the notebook has no code cells: is it a worksheet?")
    sheet = Sheet(setup=code_cells[0].source, cells=[])
    label: str | None = None
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            if "{exercise}" in cell.source:
                found = LABEL.search(cell.source)
                title = DIRECTIVE.search(cell.source)
                label = found.group(1) if found else f"exercise-{len(sheet.titles) + 1}"
                sheet.titles[label] = title.group(1).strip() if title else label
            elif re.search(r"^## ", cell.source, re.M):
                label = None  # a section after the exercises
            continue
        if cell.cell_type != "code" or cell is code_cells[0] or cell not in code_cells:
            continue
        sheet.cells.append((label, cell.source))
        if label is not None:
            sheet.calls.setdefault(label, []).extend(split_checks(cell.source)[1])
    return sheet


def worksheet_for(name: str) -> nbformat.NotebookNode:
    """A hand-out notebook, from its path or from a chapter's name."""
    path = Path(name)
    if path.suffix == ".ipynb" and path.is_file():
        return nbformat.read(path, as_version=4)
    from tools.handouts import worksheet

    chapter = ROOT / "notebooks" / f"{path.stem}.ipynb"
    if not chapter.is_file():
        raise SystemExit(f"error: {name} is neither a notebook file nor a chapter name")
    return worksheet(nbformat.read(chapter, as_version=4))


# -- running one submission -------------------------------------------------------------------


@dataclass
class Limits:
    cell_timeout: float = 60.0
    total_timeout: float = 600.0
    memory_mb: int = 2048
    output_limit: int = 20_000
    sandbox: bool = True


@dataclass
class Row:
    submission: str
    seconds: float
    status: str  # ok, or what stopped it
    results: dict[str, tuple[bool, str]]
    edited: list[str]
    cell_errors: list[str]
    sandbox: int = 0

    @property
    def passed(self) -> int:
        return sum(ok for ok, _ in self.results.values())


def _read_result(fd: int, deadline: float, limit: int = 2**20) -> bytes:
    """What the runner wrote to ``fd`` before it closed it or the deadline came."""
    data = b""
    while len(data) < limit:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            break
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        data += chunk
    return data


def grade_one(path: Path, sheet: Sheet, limits: Limits) -> Row:
    """Run one submission against the grader's worksheet ``sheet``."""
    started = time.perf_counter()
    graded = sheet.graded
    try:
        mine = read_sheet(nbformat.read(path, as_version=4))
    except Exception as exc:
        reason = f"not a readable notebook ({type(exc).__name__}: {exc})"
        return Row(path.name, 0.0, reason, dict.fromkeys(graded, (False, reason)), [], [])
    # the same checker calls, each at least once (a solution cell may repeat one with require=)
    edited = [
        label for label in graded if set(mine.calls.get(label, [])) != set(sheet.calls[label])
    ]
    cells = [split_checks(src)[0] for _, src in mine.cells]
    folder = tempfile.mkdtemp(prefix="grade-")
    nonce = secrets.token_hex(16)
    read_end, write_end = os.pipe()
    job = {
        "setup": [sheet.setup],
        "cells": cells,
        "checks": {label: sheet.calls[label] for label in graded},
        "cell_timeout": limits.cell_timeout,
        "total_timeout": limits.total_timeout,
        "memory_mb": limits.memory_mb,
        "output_limit": limits.output_limit,
        "sandbox": limits.sandbox,
        "folder": folder,
        "nonce": nonce,
        "fd": write_end,
    }
    env = {
        **os.environ,
        "HOME": folder,
        "MPLCONFIGDIR": folder,
        "MPLBACKEND": "Agg",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "PYTHONDONTWRITEBYTECODE": "1",
        "COURSE_PROGRESS": "off",
        "TMPDIR": folder,
    }
    status, out_of_time = "ok", False
    proc = subprocess.Popen(
        [sys.executable, "-m", "tools.grade_runner"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        pass_fds=(write_end,),
        cwd=folder,
        env=env,
        start_new_session=True,
    )
    os.close(write_end)
    try:
        proc.stdin.write(json.dumps(job).encode())
        proc.stdin.close()
        deadline = time.monotonic() + limits.total_timeout
        raw = _read_result(read_end, deadline)
        # Out of time if the deadline came first, whatever ends the process afterwards: its CPU
        # limit (total + 5 s, tools/sandbox.py) can kill it during the wait below, and on a fast
        # machine with a busy start it does, which must not read as a crash.
        out_of_time = time.monotonic() >= deadline
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            out_of_time = True
    except BrokenPipeError:
        raw = b""
    finally:
        os.close(read_end)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        shutil.rmtree(folder, ignore_errors=True)
    result: dict = {}
    line = raw.decode(errors="replace").strip().splitlines()
    if line and line[-1].startswith(nonce):
        result = json.loads(line[-1][len(nonce) :])
    elif out_of_time:
        status = f"stopped after the total time limit of {limits.total_timeout:g} s"
    elif status == "ok":
        code = proc.returncode
        how = f"signal {-code}" if code and code < 0 else f"exit code {code}"
        status = f"the submission's process ended without a result ({how})"
    if "error" in result:
        status = result["error"]
    checks = result.get("checks", {})
    results = {
        label: tuple(checks[label]) if label in checks else (False, status) for label in graded
    }
    errors = [f"cell {i + 1}: {e}" for i, e in enumerate(result.get("cells", [])) if e]
    seconds = time.perf_counter() - started
    return Row(path.name, seconds, status, results, edited, errors, result.get("sandbox", 0))


# -- the class ------------------------------------------------------------------------------


def grade_class(sheet: Sheet, submissions: list[Path], limits: Limits, jobs: int = 1) -> list[Row]:
    if not sheet.graded:
        raise SystemExit("error: the worksheet has no exercise with a checker to grade")
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(lambda p: grade_one(p, sheet, limits), submissions))


def write_csv(rows: list[Row], sheet: Sheet, out: Path) -> None:
    labels = sheet.graded
    head = ["submission", "score", "passed", "total", "seconds", "status", "edited_checks"]
    head += labels + [f"{label} message" for label in labels] + ["cell errors", "sandbox"]
    with open(out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(head)
        for r in rows:
            w.writerow(
                [r.submission, f"{r.passed / len(labels):.3f}", r.passed, len(labels)]
                + [f"{r.seconds:.1f}", r.status, " ".join(r.edited)]
                + ["pass" if r.results[lb][0] else "fail" for lb in labels]
                + [r.results[lb][1] if not r.results[lb][0] else "" for lb in labels]
                + [" | ".join(r.cell_errors), f"landlock ABI {r.sandbox}" if r.sandbox else "none"]
            )


def write_gradescope(rows: list[Row], sheet: Sheet, folder: Path) -> None:
    """One ``results.json`` per submission in Gradescope's autograder format."""
    for r in rows:
        tests = [
            {
                "name": f"{label}: {sheet.titles[label]}",
                "score": float(r.results[label][0]),
                "max_score": 1.0,
                "output": r.results[label][1] or "passed",
            }
            for label in sheet.graded
        ]
        out = folder / Path(r.submission).stem
        out.mkdir(parents=True, exist_ok=True)
        data = {"score": float(r.passed), "execution_time": round(r.seconds, 1), "tests": tests}
        (out / "results.json").write_text(json.dumps(data, indent=1))


def write_canvas(rows: list[Row], sheet: Sheet, out: Path, assignment: str) -> None:
    """A Canvas grade-book import: the submission's file name is read as the SIS login."""
    with open(out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section", assignment])
        w.writerow(["Points Possible", "", "", "", "", len(sheet.graded)])
        for r in rows:
            w.writerow(["", "", "", Path(r.submission).stem, "", r.passed])


def summary(rows: list[Row], sheet: Sheet) -> str:
    lines = [f"{len(rows)} submissions, {len(sheet.graded)} graded exercises"]
    for label in sheet.graded:
        failures = Counter(r.results[label][1] for r in rows if not r.results[label][0])
        n = sum(r.results[label][0] for r in rows)
        common = f"; most common failure: {failures.most_common(1)[0][0][:150]}" if failures else ""
        lines.append(f"  {label}: {n}/{len(rows)} passed{common}")
    edited = [r.submission for r in rows if r.edited]
    if edited:
        lines.append(f"  edited checker calls (graded with the original ones): {', '.join(edited)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("worksheet", help="a hand-out .ipynb, or a chapter name such as 02_softmax")
    parser.add_argument("submissions", nargs="+", type=Path, help="the learners' notebooks")
    parser.add_argument("--out", type=Path, default=Path("grades.csv"), help="the grades CSV")
    parser.add_argument("--gradescope", type=Path, help="write Gradescope results.json files here")
    parser.add_argument("--canvas", type=Path, help="write a Canvas grade-book CSV here")
    parser.add_argument("--assignment", default="Worksheet", help="the Canvas column's name")
    parser.add_argument("--cell-timeout", type=float, default=60.0, help="seconds per cell")
    parser.add_argument("--total-timeout", type=float, default=600.0, help="seconds per submission")
    parser.add_argument("--memory-mb", type=int, default=2048, help="memory per submission")
    parser.add_argument("--jobs", type=int, default=1, help="submissions graded at once")
    parser.add_argument(
        "--no-sandbox",
        action="store_true",
        help="run where Landlock is missing (resource limits only: see the README)",
    )
    args = parser.parse_args(argv)
    from tools.sandbox import landlock_abi

    if not args.no_sandbox and landlock_abi() < 1:
        parser.error(
            "this system has no Landlock sandbox (Linux 5.13 or newer), so a submission could "
            "write anywhere your user can; grade in a container or VM, or pass --no-sandbox"
        )
    missing = [str(p) for p in args.submissions if not p.is_file()]
    if missing:
        parser.error(f"no such submission file(s): {', '.join(missing)}")
    for name, value in [
        ("--cell-timeout", args.cell_timeout),
        ("--total-timeout", args.total_timeout),
    ]:
        if value <= 0:
            parser.error(f"{name} must be positive, got {value}")
    if args.memory_mb <= 0:
        parser.error(f"--memory-mb must be positive, got {args.memory_mb}")
    sheet = read_sheet(worksheet_for(args.worksheet))
    limits = Limits(
        args.cell_timeout, args.total_timeout, args.memory_mb, sandbox=not args.no_sandbox
    )
    started = time.perf_counter()
    rows = grade_class(sheet, args.submissions, limits, args.jobs)
    write_csv(rows, sheet, args.out)
    if args.gradescope:
        write_gradescope(rows, sheet, args.gradescope)
    if args.canvas:
        write_canvas(rows, sheet, args.canvas, args.assignment)
    print(summary(rows, sheet))
    print(f"grades: {args.out} ({time.perf_counter() - started:.0f} s in all)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
