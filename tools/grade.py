"""Grade a class's worksheets: ``./course grade WORKSHEET SUBMISSION... --out grades.csv``.

    ./course handouts 02_softmax                       # hand out handouts/02_softmax_exercises.ipynb
    ./course grade 02_softmax submissions/*.ipynb --out grades.csv
    ./course grade handouts/02_softmax_exercises.ipynb a.ipynb b.ipynb --gradescope gs/ --canvas canvas.csv
    ./course grade --check-sandbox                     # what this machine protects, tried

WORKSHEET is a hand-out notebook or a chapter name (its worksheet and key are then made from
the chapter, as ``./course handouts`` does). Each exercise with a checker (implement and
predict-then-check exercises; conceptual ones have none) is one column of the grades.

How a submission is graded (the README's "Grading a class" says what that protects):

* its code cells run in a process of their own (:mod:`tools.grade_runner`), in the sandbox
  :mod:`tools.sandbox` builds from what this machine offers, with their checker calls taken
  out; a cell that raises or runs past its limit is recorded and the next cell runs;
* the verdicts are computed in the grader's own processes (:mod:`tools.grade_judge`), by the
  grader's checkers on its worksheet's checker calls: they call the learner's functions in
  the submission's process through proxies and get plain data back
  (:mod:`tools.grade_remote`, :mod:`tools.grade_wire`); a prediction is compared with the
  value of the grader's own run of the worksheet. A submission that edits a checker call is
  graded with the original one and listed as ``edited``;
* each run draws the checkers' random inputs afresh (``--seed`` repeats a run), and first
  grades the key, whose result the summary gives;
* every submission gets a row, whatever it does (a crash, a hang, malformed data, a notebook
  too large to read); rows are written to the CSV as they finish, and put in order at the end.

Output: one CSV row per submission (pass or fail per exercise, the checker's message for each
failure, edited calls, cell errors, use of the course's reference code, the sandbox used, the
time taken), a summary per exercise on the terminal, and optionally Gradescope results files
and a Canvas grade-book CSV. Everything a submission wrote is cleaned of control characters,
and CSV cells that a spreadsheet would read as a formula are neutralised.
"""

from __future__ import annotations

import argparse
import ast
import csv
import json
import os
import queue
import re
import secrets
import select
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
    A cell Python cannot parse (a syntax error, or nesting too deep for the parser) is returned
    as it is, with no calls: running it reports the error.

    >>> code, calls = split_checks("def f(x):\\n    return x\\ncheck.f(f)\\nassert check.g(f).passed")
    >>> calls
    ['check.f(f)', 'check.g(f)']
    >>> code.splitlines()
    ['def f(x):', '    return x', '']
    """
    try:
        tree = ast.parse(code)
        lines = code.splitlines()
        calls: list[str] = []
        for stmt in tree.body:
            if not _contains_checker_call(stmt):
                continue
            calls += [_normal(n) for n in ast.walk(stmt) if _is_checker_call(n)]
            for i in range(stmt.lineno - 1, stmt.end_lineno):
                lines[i] = ""
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return code, []
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


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    if isinstance(src, list):
        src = "".join(s for s in src if isinstance(s, str))
    if not isinstance(src, str):
        raise ValueError("a cell's source is neither text nor a list of lines")
    return src


def _tags(cell: dict) -> list:
    meta = cell.get("metadata") or {}
    tags = meta.get("tags", []) if isinstance(meta, dict) else []
    return tags if isinstance(tags, list) else []


def read_sheet(nb: Any) -> Sheet:
    """Read a worksheet or a submission (a notebook as nbformat or plain JSON gives it): which
    code cell belongs to which exercise."""
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list) or not all(isinstance(c, dict) for c in cells):
        raise ValueError("not a notebook: no list of cells")
    # the Colab set-up cell (tools/publish.py) installs the course on Colab only: not graded
    code_cells = [
        c for c in cells if c.get("cell_type") == "code" and "colab-setup" not in _tags(c)
    ]
    if not code_cells:
        raise ValueError("the notebook has no code cells: is it a worksheet?")
    graded_ids = {id(c) for c in code_cells[1:]}
    sheet = Sheet(setup=_source(code_cells[0]), cells=[])
    label: str | None = None
    for cell in cells:
        source = _source(cell)
        if cell.get("cell_type") == "markdown":
            if "{exercise}" in source:
                found = LABEL.search(source)
                title = DIRECTIVE.search(source)
                label = found.group(1) if found else f"exercise-{len(sheet.titles) + 1}"
                sheet.titles[label] = title.group(1).strip() if title else label
            elif re.search(r"^## ", source, re.M):
                label = None  # a section after the exercises
            continue
        if id(cell) not in graded_ids:
            continue
        sheet.cells.append((label, source))
        if label is not None:
            sheet.calls.setdefault(label, []).extend(split_checks(source)[1])
    return sheet


def worksheet_for(name: str) -> tuple[Any, Any]:
    """A hand-out notebook and its key (None when given a file: the file is then the grader's
    own worksheet, hand-out or key), from a path or from a chapter's name."""
    import nbformat

    path = Path(name)
    if path.suffix == ".ipynb" and path.is_file():
        return nbformat.read(path, as_version=4), None
    from tools.handouts import worksheet

    chapter = ROOT / "notebooks" / f"{path.stem}.ipynb"
    if not chapter.is_file():
        raise SystemExit(f"error: {name} is neither a notebook file nor a chapter name")
    nb = nbformat.read(chapter, as_version=4)
    return worksheet(nb), worksheet(nb, solutions=True)


# -- rows and output hygiene ------------------------------------------------------------------


@dataclass
class Limits:
    cell_timeout: float = 60.0
    total_timeout: float = 600.0
    memory_mb: int = 2048
    output_limit: int = 20_000
    sandbox: bool = True
    disk_mb: int = 256
    file_mb: int = 64
    checker_timeout: float = 120.0  # the grader's own time for one submission's checks
    max_notebook_mb: float = 20.0
    namespaces: bool = True  # False leaves out the grader's own namespaces
    cgroups: bool = True  # False leaves out cgroups (the tests use both to try the fallbacks)
    bwrap: bool = True  # False leaves out bwrap's namespaces too


@dataclass
class Row:
    submission: str
    seconds: float
    status: str  # ok, or what stopped it
    results: dict[str, tuple[bool, str]]
    edited: list[str]
    cell_errors: list[str]
    sandbox: str = ""
    flags: list[str] = field(default_factory=list)
    leftover: str = ""

    @property
    def passed(self) -> int:
        return sum(ok for ok, _ in self.results.values())


_CONTROL = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]"
)


def clean(text: object, limit: int = 2000) -> str:
    """``text`` without control characters (ANSI and OSC escapes lose their ESC and BEL, so a
    terminal shows them as text), bidi overrides or zero-width characters; line breaks and
    tabs become spaces; cut to ``limit`` characters."""
    s = str(text)
    s = s.replace("\r\n", " ").replace("\n", " ").replace("\r", " ").replace("\t", " ")
    s = _CONTROL.sub("", s)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def csv_cell(text: object, limit: int = 2000) -> str:
    """A text cell of a CSV: :func:`clean`, and a leading ``= + - @`` neutralised with a ``'``
    so that a spreadsheet shows it as text instead of running it as a formula."""
    s = clean(text, limit)
    return "'" + s if s[:1] in ("=", "+", "-", "@") else s


def display_names(paths: list[Path]) -> list[str]:
    """The name of each submission in the grades: its file name, or, where two have the same
    file name, its path relative to the folder they share."""
    names = [p.name for p in paths]
    if len(set(names)) == len(names):
        return names
    resolved = [p.resolve() for p in paths]
    common = Path(os.path.commonpath([str(r.parent) for r in resolved]))
    return [str(r.relative_to(common)) for r in resolved]


_SAFE_STEM = re.compile(r"^[^\x00-\x1f\x7f/\\]+$")


def export_problems(paths: list[Path], gradescope: Path | None, canvas: Path | None) -> list[str]:
    """Why the Gradescope or Canvas files could not name every submission apart and safely."""
    problems = []
    stems = [p.stem for p in paths]
    dup = sorted(s for s, n in Counter(stems).items() if n > 1)
    if dup and (gradescope or canvas):
        where = " and ".join(
            x for x, on in (("--gradescope", gradescope), ("--canvas", canvas)) if on
        )
        problems.append(
            f"{where} name each learner by the file name, and these are used more than once: "
            f"{', '.join(clean(d, 60) for d in dup)} (rename the files, e.g. by login)"
        )
    if gradescope:
        base = gradescope.resolve()
        for p in paths:
            s = p.stem
            bad = not _SAFE_STEM.match(s) or s in (".", "..") or s.startswith(".")
            if bad or (base / s).resolve().parent != base:
                problems.append(
                    f"--gradescope cannot use the file name {clean(p.name, 80)!r} as a folder"
                )
    return problems


# -- the worker processes ---------------------------------------------------------------------


class _Worker:
    """A judge process (tools.grade_judge): checkers imported once, one submission at a time."""

    def __init__(self, config: dict) -> None:
        self.config = config
        self.start()

    def start(self) -> None:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        }
        env["COURSE_PROGRESS"] = "off"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tools.grade_judge"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=str(ROOT),
            env=env,
            start_new_session=True,
        )
        self.buffer = b""
        self.send(self.config)
        ready = self.receive(time.monotonic() + 300)
        if not ready or not ready.get("ready"):
            raise RuntimeError(f"the grader's judge process did not start: {ready}")

    def send(self, obj: dict) -> None:
        self.proc.stdin.write(json.dumps(obj).encode() + b"\n")
        self.proc.stdin.flush()

    def receive(self, deadline: float) -> dict | None:
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                return None
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return {"error": "the grader's judge process ended"}
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def run(self, task: dict, seconds: float) -> dict:
        """The answer to ``task``, or an error after ``seconds`` (the process is then replaced)."""
        try:
            self.send(task)
            answer = self.receive(time.monotonic() + seconds)
        except (OSError, ValueError) as exc:
            answer = {"error": f"the grader's judge process failed ({type(exc).__name__})"}
        if answer is None or (
            isinstance(answer, dict) and "error" in answer and "trace" not in answer
        ):
            self.kill()
            self.start()
            if answer is None:
                answer = {"error": f"the grader's checks did not finish within {seconds:.0f} s"}
        return answer

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        self.proc.wait()

    def close(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.kill()


def _config(sheet: Sheet, limits: Limits, plan: dict, seed: int | None, setup: str) -> dict:
    return {
        "setup": setup,
        "calls": {label: sheet.calls[label] for label in sheet.graded},
        "cells": {},
        "limits": {
            "cell_timeout": limits.cell_timeout,
            "total_timeout": limits.total_timeout,
            "memory_mb": limits.memory_mb,
            "disk_mb": limits.disk_mb,
            "file_mb": limits.file_mb,
            "output_limit": limits.output_limit,
            "sandbox": limits.sandbox,
            "checker_timeout": limits.checker_timeout,
        },
        "plan": plan,
        "seed": seed,
        "max_notebook_mb": limits.max_notebook_mb,
    }


def _row(data: dict, name: str, labels: list[str]) -> Row:
    if "error" in data:  # the grader's own process failed on this one: still a row
        why = f"could not be graded: {data['error']}"
        return Row(name, 0.0, why, dict.fromkeys(labels, (False, why)), [], [])
    results = {lb: tuple(data["results"].get(lb, (False, data.get("status", "")))) for lb in labels}
    return Row(
        data["submission"], float(data["seconds"]), data["status"], results, data["edited"],
        data["cell_errors"], data["sandbox"], data["flags"], data["leftover"],
    )  # fmt: skip


@dataclass
class KeyReport:
    results: dict[str, tuple[bool, str]]
    cell_errors: list[str]
    error: str = ""


def grade_class(
    sheet: Sheet,
    submissions: list[Path],
    limits: Limits,
    jobs: int = 1,
    *,
    key: Sheet | None = None,
    seed: int | None = None,
    on_row: Callable[[Row], None] | None = None,
    names: list[str] | None = None,
    key_report: list | None = None,
) -> list[Row]:
    """Grade ``submissions`` against ``sheet``, ``jobs`` at a time; the rows in their order.

    ``key`` is the grader's own run for predictions (default: ``sheet``); ``seed`` fixes the
    checkers' random inputs (default: fresh ones); ``on_row`` gets each row as it finishes.
    """
    from tools import sandbox as sb

    if not sheet.graded:
        raise SystemExit("error: the worksheet has no exercise with a checker to grade")
    plan = sb.plan(
        sandbox=limits.sandbox, namespaces=limits.namespaces, cgroups=limits.cgroups,
        bwrap=limits.bwrap,
    )  # fmt: skip
    if plan.refused:
        raise SystemExit(f"error: {plan.refused}")
    key = key or sheet
    seed = secrets.randbits(31) if seed is None else seed
    names = names or display_names(submissions)
    labels = sheet.graded
    config = _config(sheet, limits, plan.to_json(), seed, sheet.setup)
    budget = limits.total_timeout + limits.checker_timeout + 60
    workers = [_Worker(config) for _ in range(max(1, min(jobs, len(submissions) or 1)))]
    try:
        by_label: dict[str, list[str]] = {}
        for label, src in key.cells:
            if label is not None:
                by_label.setdefault(label, []).append(split_checks(src)[0])
        cells = [split_checks(src)[0] for _, src in key.cells]
        labels_of = [label for label, _ in key.cells]
        task = {"task": "key", "cells": cells, "labels": labels_of, "by_label": by_label}
        answer = workers[0].run(task, budget)
        trusted = answer.get("trusted", {})
        baseline = answer.get("baseline", {})
        if key_report is not None:
            key_report.append(
                KeyReport(
                    {lb: tuple(v) for lb, v in answer.get("results", {}).items()},
                    answer.get("cell_errors", []),
                    answer.get("error", ""),
                )
            )
        for w in workers:
            w.config = {**config, "trusted": trusted, "baseline": baseline}
            w.run({"task": "trusted", "trusted": trusted, "baseline": baseline}, 60)
        tasks: queue.Queue = queue.Queue()
        for i in range(len(submissions)):
            tasks.put(i)
        rows: list[Row | None] = [None] * len(submissions)
        lock = threading.Lock()

        def work(w: _Worker) -> None:
            while True:
                try:
                    i = tasks.get_nowait()
                except queue.Empty:
                    return
                task = {"task": "grade", "path": str(submissions[i]), "name": names[i]}
                alive = True
                try:
                    row = _row(w.run(task, budget), names[i], labels)
                except Exception as exc:  # the grader's own failure: a row, and the class goes on
                    why = f"the grader failed on it ({type(exc).__name__}: {clean(exc, 200)})"
                    row = _row({"error": why}, names[i], labels)
                    try:
                        w.kill()
                        w.start()
                    except Exception:
                        alive = False  # the others (or the rows below) take the rest
                with lock:
                    rows[i] = row
                    if on_row is not None:
                        on_row(row)
                if not alive:
                    return

        threads = [threading.Thread(target=work, args=(w,), daemon=True) for w in workers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        for w in workers:
            w.close()
    for i, r in enumerate(rows):
        if r is None:  # every judge process failed before this one's turn
            rows[i] = _row({"error": "no judge process was left to grade it"}, names[i], labels)
            if on_row is not None:
                on_row(rows[i])
    return [r for r in rows if r is not None]


# -- writing the grades -----------------------------------------------------------------------


def _csv_head(sheet: Sheet) -> list[str]:
    labels = sheet.graded
    head = ["submission", "score", "passed", "total", "seconds", "status", "edited_checks"]
    head += labels + [f"{label} message" for label in labels]
    return head + ["cell errors", "reference_use", "leftovers", "sandbox"]


def _csv_row(r: Row, sheet: Sheet) -> list:
    labels = sheet.graded
    return (
        [csv_cell(r.submission), f"{r.passed / len(labels):.3f}", r.passed, len(labels)]
        + [f"{r.seconds:.1f}", csv_cell(r.status), csv_cell(" ".join(r.edited))]
        + ["pass" if r.results[lb][0] else "fail" for lb in labels]
        + [csv_cell(r.results[lb][1]) if not r.results[lb][0] else "" for lb in labels]
        + [csv_cell(" | ".join(r.cell_errors)), csv_cell(" | ".join(r.flags))]
        + [csv_cell(r.leftover), csv_cell(r.sandbox or "none")]
    )


class CsvWriter:
    """The grades CSV: each row appended (and flushed) as it finishes; :meth:`finish` rewrites
    the file with the rows in the submissions' order."""

    def __init__(self, out: Path, sheet: Sheet) -> None:
        self.out, self.sheet = out, sheet
        self.file = open(out, "w", newline="")
        self.writer = csv.writer(self.file)
        self.writer.writerow(_csv_head(sheet))
        self.file.flush()

    def add(self, row: Row) -> None:
        self.writer.writerow(_csv_row(row, self.sheet))
        self.file.flush()

    def finish(self, rows: list[Row]) -> None:
        self.file.close()
        write_csv(rows, self.sheet, self.out)


def write_csv(rows: list[Row], sheet: Sheet, out: Path) -> None:
    tmp = out.with_name(out.name + ".tmp")
    with open(tmp, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(_csv_head(sheet))
        for r in rows:
            w.writerow(_csv_row(r, sheet))
    os.replace(tmp, out)


def write_gradescope(rows: list[Row], sheet: Sheet, folder: Path, paths: list[Path]) -> None:
    """One ``results.json`` per submission in Gradescope's autograder format."""
    base = folder.resolve()
    for r, path in zip(rows, paths, strict=True):
        tests = [
            {
                "name": clean(f"{label}: {sheet.titles[label]}"),
                "score": float(r.results[label][0]),
                "max_score": 1.0,
                "output": clean(r.results[label][1] or "passed"),
            }
            for label in sheet.graded
        ]
        out = (base / path.stem).resolve()
        if out.parent != base:  # export_problems refused these before grading
            raise ValueError(f"{path.name} would leave the Gradescope folder")
        out.mkdir(parents=True, exist_ok=True)
        data = {"score": float(r.passed), "execution_time": round(r.seconds, 1), "tests": tests}
        (out / "results.json").write_text(json.dumps(data, indent=1))


def write_canvas(
    rows: list[Row], sheet: Sheet, out: Path, assignment: str, paths: list[Path]
) -> None:
    """A Canvas grade-book import: the submission's file name is read as the SIS login."""
    with open(out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", csv_cell(assignment)]
        )
        w.writerow(["Points Possible", "", "", "", "", len(sheet.graded)])
        for r, path in zip(rows, paths, strict=True):
            w.writerow(["", "", "", csv_cell(path.stem), "", r.passed])


def summary(rows: list[Row], sheet: Sheet) -> str:
    lines = [f"{len(rows)} submissions, {len(sheet.graded)} graded exercises"]
    for label in sheet.graded:
        failures = Counter(clean(r.results[label][1], 150) for r in rows if not r.results[label][0])
        n = sum(r.results[label][0] for r in rows)
        common = f"; most common failure: {failures.most_common(1)[0][0]}" if failures else ""
        lines.append(f"  {label}: {n}/{len(rows)} passed{common}")
    for what, pick in [
        ("edited checker calls (graded with the original ones)", lambda r: r.edited),
        ("use of the course's reference code (see reference_use)", lambda r: r.flags),
        ("left something behind (see leftovers)", lambda r: r.leftover),
    ]:
        found = [clean(r.submission, 80) for r in rows if pick(r)]
        if found:
            lines.append(f"  {what}: {', '.join(found)}")
    return "\n".join(lines)


# -- the sandbox check ------------------------------------------------------------------------


def check_sandbox(limits: Limits) -> str:
    """What this machine protects, as the plan says and as a probe found (``--check-sandbox``)."""
    from tools import sandbox as sb

    plan = sb.plan(
        sandbox=limits.sandbox, namespaces=limits.namespaces, cgroups=limits.cgroups,
        bwrap=limits.bwrap,
    )  # fmt: skip
    lines = [f"The grader's sandbox on this machine ({os.uname().sysname} {os.uname().release}, "
             f"{'root' if plan.root else 'user ' + sb.user_name(os.getuid())}):", ""]  # fmt: skip
    for what, ok, how in sb.describe(plan):
        lines.append(f"  [{'yes' if ok else ' NO'}] {what}: {how}")
    for note in plan.notes:
        lines.append(f"  note: {note}")
    if plan.refused:
        lines += ["", f"The grader refuses to run here: {plan.refused}"]
        return "\n".join(lines)
    config = _config(Sheet("", []), limits, plan.to_json(), None, "")
    worker = _Worker(config)
    try:
        answer = worker.run({"task": "probe"}, 120)
    finally:
        worker.close()
    found = answer.get("probe", {})
    lines += ["", "A probe ran in the sandbox and tried what a submission should not manage:"]
    expected_refused = [
        "write a file outside its folder", "read a file the grader hid",
        "read the course's notebooks", "list the course's notebooks",
        "chmod a file outside its folder",
        "set a timestamp outside its folder", "open a UDP socket", "open a TCP socket",
        "open a unix socket", "create a memfd", "signal the grader", "make a namespace",
    ]  # fmt: skip
    weak = []
    for name in expected_refused:
        result = str(found.get(name, "not tried"))
        lines.append(f"  {name}: {result}")
        if not result.startswith("refused"):
            weak.append(name)
    uid, caps = found.get("user id"), found.get("capabilities")
    lines.append(f"  ran as user id {uid}, capabilities {caps}")
    env = found.get("environment variables", [])
    lines.append(f"  environment: {len(env)} variables ({', '.join(env)})")
    started = found.get("processes it could start")
    lines.append(f"  processes it could start: {started} (the bound is {sb.PIDS_MAX})")
    left = found.get("processes left after grading")
    lines.append(f"  processes left after grading: {left}")
    if found.get("chmod changed the file"):
        weak.append("chmod changed a file outside its folder")
    if isinstance(started, int) and started > sb.PIDS_MAX:
        weak.append("process count unbounded")
    if left:
        weak.append("processes outlived the grading")
    if uid == 0 or (isinstance(caps, str) and caps not in ("0x0", "0")):
        weak.append("the submission kept root or capabilities")
    if "error" in found:
        weak.append(f"the probe failed: {found['error']}")
    lines.append("")
    lines.append(
        "Not protected here: " + "; ".join(weak) if weak
        else "Every probe was refused or contained."
    )  # fmt: skip
    lines.append(
        "Not protected anywhere: a submission's own CPU time up to the limits, and its use of "
        "the course's public reference code (flagged in the reference_use column, not "
        "prevented). When grades count, grade as a dedicated user in a container or VM."
    )
    return "\n".join(lines)


# -- the command ------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "worksheet", nargs="?", help="a hand-out .ipynb, or a chapter name such as 02_softmax"
    )
    parser.add_argument("submissions", nargs="*", type=Path, help="the learners' notebooks")
    parser.add_argument("--out", type=Path, default=Path("grades.csv"), help="the grades CSV")
    parser.add_argument("--gradescope", type=Path, help="write Gradescope results.json files here")
    parser.add_argument("--canvas", type=Path, help="write a Canvas grade-book CSV here")
    parser.add_argument("--assignment", default="Worksheet", help="the Canvas column's name")
    parser.add_argument("--cell-timeout", type=float, default=60.0, help="seconds per cell")
    parser.add_argument("--total-timeout", type=float, default=600.0, help="seconds per submission")
    parser.add_argument("--memory-mb", type=int, default=2048, help="memory per submission")
    parser.add_argument("--disk-mb", type=int, default=256, help="disk per submission")
    parser.add_argument("--jobs", type=int, default=1, help="submissions graded at once")
    parser.add_argument("--seed", type=int, help="the checkers' random inputs (default: fresh)")
    parser.add_argument(
        "--check-sandbox",
        action="store_true",
        help="print what this machine protects, try it on a probe, and exit",
    )
    parser.add_argument(
        "--no-namespaces",
        action="store_true",
        help="leave out namespaces and cgroups even where they exist (Landlock, seccomp and "
        "limits only: to compare, or where namespaces misbehave)",
    )
    parser.add_argument(
        "--no-sandbox",
        action="store_true",
        help="run where no sandbox layer exists (limits and clean-up only: see the README)",
    )
    args = parser.parse_args(argv)
    if sys.platform == "win32" or not hasattr(os, "fork"):
        parser.error(
            f"the grader cannot run on {sys.platform}: it forks its processes and confines them "
            "with the Linux kernel's layers; grade in WSL 2, a Linux container or a Linux VM"
        )
    limits = Limits(
        args.cell_timeout, args.total_timeout, args.memory_mb, sandbox=not args.no_sandbox,
        disk_mb=args.disk_mb, namespaces=not args.no_namespaces, cgroups=not args.no_namespaces,
        bwrap=not args.no_namespaces,
    )  # fmt: skip
    if os.environ.get("COURSE_GRADE_LAYERS") == "bwrap":  # (tests: bwrap's namespaces only)
        limits.namespaces = False
    if args.check_sandbox:
        print(check_sandbox(limits))
        return 0
    if not args.worksheet or not args.submissions:
        parser.error("give a worksheet and at least one submission (or --check-sandbox)")
    from tools import sandbox as sb

    plan = sb.plan(
        sandbox=limits.sandbox, namespaces=limits.namespaces, cgroups=limits.cgroups,
        bwrap=limits.bwrap,
    )  # fmt: skip
    if plan.refused:
        parser.error(plan.refused)
    missing = [str(p) for p in args.submissions if not p.is_file()]
    if missing:
        parser.error(f"no such submission file(s): {', '.join(missing)}")
    for name, value in [
        ("--cell-timeout", args.cell_timeout),
        ("--total-timeout", args.total_timeout),
    ]:
        if value <= 0:
            parser.error(f"{name} must be positive, got {value}")
    for name, value in [
        ("--memory-mb", args.memory_mb),
        ("--disk-mb", args.disk_mb),
        ("--jobs", args.jobs),
    ]:
        if value <= 0:
            parser.error(f"{name} must be positive, got {value}")
    problems = export_problems(args.submissions, args.gradescope, args.canvas)
    if problems:
        parser.error("; ".join(problems))
    hand_out, key_nb = worksheet_for(args.worksheet)
    sheet = read_sheet(hand_out)
    key = read_sheet(key_nb) if key_nb is not None else None
    seed = args.seed if args.seed is not None else secrets.randbits(31)
    started = time.perf_counter()
    writer = CsvWriter(args.out, sheet)
    report: list[KeyReport] = []
    rows = grade_class(
        sheet, args.submissions, limits, args.jobs, key=key, seed=seed, on_row=writer.add,
        key_report=report,
    )  # fmt: skip
    writer.finish(rows)
    if args.gradescope:
        write_gradescope(rows, sheet, args.gradescope, args.submissions)
    if args.canvas:
        write_canvas(rows, sheet, args.canvas, args.assignment, args.submissions)
    print(summary(rows, sheet))
    if report and key is not None:
        k = report[0]
        bad = [f"{lb} ({clean(m, 120)})" for lb, (ok, m) in k.results.items() if not ok]
        if k.error or bad:
            print(f"  warning: with this run's inputs (--seed {seed}) the key fails "
                  f"{k.error or ', '.join(bad)}")  # fmt: skip
            for error in k.cell_errors[:5]:
                print(f"    the key's {clean(error, 200)}")
        else:
            print(f"  the key passes every exercise with this run's inputs (--seed {seed})")
    print(f"grades: {args.out} ({time.perf_counter() - started:.0f} s in all)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
