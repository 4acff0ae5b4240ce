"""The grader's judge: the worksheet's checker calls, run in the grader's own process.

``python -m tools.grade_judge`` is a worker of :mod:`tools.grade` (a trusted process, one per
``--jobs``): it imports the checkers once, then grades one submission per task it is given.
For each submission it starts the submission's process (:class:`tools.grade_remote.Session`),
which runs the learner's cells in its sandbox, and then evaluates every checker call of the
*grader's* worksheet here, with the grader's checkers:

* ``check.NAME(a, b, ...)``: each argument that is a literal is taken as written; any other
  (``outer_matmul``, ``PATTERN``) is evaluated in the submission's process and arrives as plain
  data or as a proxy (a learner's function, class or other object);
* ``check_prediction(p, actual, ...)``: the learner's prediction ``p`` comes from the
  submission's process as plain data; ``actual`` and every other argument come from the
  grader's own run of the worksheet (the key when there is one), made once per grading run.

The checker's :class:`~course_lib.checker.Outcome` is the verdict. The submission's process
never sees the checkers, the expected values or the verdicts.

A row also says whether the learner's code used the course's public reference code for a graded
exercise (``flags``): names of ``course_lib`` functions that the learner's cells refer to, or
that the learner's functions called while they were checked, beyond those the key itself uses.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import resource
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from tools import grade_wire as wire
from tools import sandbox as sb
from tools.grade_remote import Session, SessionEnded, Zygote

ROOT = Path(__file__).resolve().parent.parent
CHECKERS = ("check", "check_prediction")
#: course_lib modules whose use is never flagged (helpers every chapter uses)
_HELPERS = (
    "course_lib.checker", "course_lib.checks", "course_lib.device", "course_lib.seed",
    "course_lib.plotting", "course_lib.paths", "course_lib.progress", "course_lib.measure",
    "course_lib.colab",
)  # fmt: skip
_FILE_HINTS = (".ipynb", "notebooks", "solutions", "handouts", "/proc/", "grades.csv")


# -- the checker calls --------------------------------------------------------------------------


@dataclasses.dataclass
class Arg:
    kind: str  # "const" (a literal), "remote" (the submission's), "trusted" (the grader's run)
    source: str
    value: Any = None


@dataclasses.dataclass
class CheckCall:
    label: str
    index: int
    source: str
    func: str  # "check.stable_softmax" or "check_prediction"
    args: list[Arg]
    kwargs: dict[str, Arg]

    @property
    def prediction(self) -> bool:
        return self.func == "check_prediction"


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id in CHECKERS:
        return ".".join([node.id, *reversed(parts)])
    return None


def parse_call(label: str, index: int, source: str) -> CheckCall:
    """How the judge evaluates one checker call of the worksheet (see the module docstring)."""
    node = ast.parse(source, mode="eval").body
    if not isinstance(node, ast.Call) or _dotted(node.func) is None:
        raise ValueError(f"not a checker call: {source}")
    func = _dotted(node.func)
    prediction = func == "check_prediction"

    def arg(expr: ast.expr, position: int | str) -> Arg:
        text = ast.unparse(expr)
        try:
            return Arg("const", text, ast.literal_eval(expr))
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            pass
        learner = not prediction or position == 0
        return Arg("remote" if learner else "trusted", text)

    if any(isinstance(a, ast.Starred) for a in node.args) or any(
        k.arg is None for k in node.keywords
    ):
        raise ValueError(f"a checker call with * or ** arguments cannot be graded: {source}")
    args = [arg(a, i) for i, a in enumerate(node.args)]
    kwargs = {k.arg: arg(k.value, k.arg) for k in node.keywords if k.arg != "require"}
    return CheckCall(label, index, source, func, args, kwargs)


def checker_imports(setup: str) -> str:
    """The import statements of the worksheet's set-up cell that bind ``check`` or
    ``check_prediction`` (the rest of the cell is not needed to judge)."""
    keep = []
    for stmt in ast.parse(setup).body:
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            names = [a.asname or a.name.split(".")[0] for a in stmt.names]
            if any(n in CHECKERS for n in names):
                keep.append(ast.unparse(stmt))
    return "\n".join(keep)


# -- use of the course's reference ----------------------------------------------------------------


def _course_aliases(sources: list[str]) -> dict[str, str]:
    """name -> course_lib module or function it is bound to by imports in ``sources``."""
    out: dict[str, str] = {}
    for src in sources:
        try:
            tree = ast.parse(src)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("course_lib"):
                        out[a.asname or a.name.split(".")[0]] = a.asname and a.name or "course_lib"
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("course_lib"):
                for a in node.names:
                    out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _flaggable(name: str) -> bool:
    return (
        name.startswith("course_lib")
        and not any(name == h or name.startswith(h + ".") for h in _HELPERS)
        and ".exercises" not in name
    )


def static_references(cells: list[str], setup: str) -> set[str]:
    """Course functions the learner's cells name (``ref.matmul_outer``, an import of one),
    and hints of reading the course's or the grader's files."""
    aliases = _course_aliases([setup, *cells])
    found: set[str] = set()
    for src in cells:
        try:
            tree = ast.parse(src)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                base = aliases.get(node.value.id)
                if base and _flaggable(f"{base}.{node.attr}"):
                    found.add(f"{base}.{node.attr}")
            elif isinstance(node, ast.Name) and node.id in aliases and node.id not in CHECKERS:
                if _flaggable(aliases[node.id]) and isinstance(node.ctx, ast.Load):
                    found.add(aliases[node.id])
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                for hint in _FILE_HINTS:
                    if hint in node.value:
                        found.add(f"reads files: {hint!r}")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                if node.func.id in ("__import__",) or node.func.id == "exec":
                    found.add(f"dynamic code: {node.func.id}()")
    return found


# -- one submission -----------------------------------------------------------------------------


@dataclasses.dataclass
class Config:
    """What every worker knows of the grading run (sent by tools.grade as JSON)."""

    setup: str
    calls: dict[str, list[str]]  # label -> the worksheet's checker calls
    cells: dict[str, list[str]]  # label -> the key's (or worksheet's) cells of that exercise
    limits: dict[str, Any]
    plan: dict[str, Any]
    seed: int | None = None
    trusted: dict[str, Any] = dataclasses.field(default_factory=dict)  # wire-encoded values
    baseline: dict[str, list[str]] = dataclasses.field(default_factory=dict)  # label -> names
    max_notebook_mb: float = 20.0
    max_cells: int = 20_000


class Judge:
    """A worker's state: the checkers, imported once, and the run's configuration."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.plan = sb.Plan.from_json(config.plan)
        self._zygote: Zygote | None = None
        self.ns: dict[str, Any] = {}
        exec(compile(checker_imports(config.setup), "<worksheet imports>", "exec"), self.ns)
        missing = [n for n in CHECKERS if n not in self.ns and any(
            c.startswith(n) for calls in config.calls.values() for c in calls)]  # fmt: skip
        if missing:
            raise RuntimeError(f"the worksheet's set-up cell does not import {missing}")
        self.calls = {
            label: [parse_call(label, i, src) for i, src in enumerate(srcs)]
            for label, srcs in config.calls.items()
        }
        if config.seed is not None:
            from course_lib import checker

            checker.fresh_inputs(config.seed)

    def job(self, cells: list[str], folder: str, **extra: Any) -> dict:
        lim = self.config.limits
        return {
            "folder": folder,
            "setup": [self.config.setup],
            "cells": cells,
            "cell_timeout": lim["cell_timeout"],
            "total_timeout": lim["total_timeout"],
            "memory_mb": lim["memory_mb"],
            "disk_mb": lim["disk_mb"],
            "file_mb": lim["file_mb"],
            "output_limit": lim["output_limit"],
            "sandbox": lim["sandbox"],
            "readable": sb.readable_paths(),
            **extra,
        }

    def zygote(self) -> Zygote:
        """The zygote that has run the worksheet's set-up cell (started, or restarted, here)."""
        if self._zygote is None or not self._zygote.alive():
            if self._zygote is not None:
                self._zygote.close()
            base = self.job([], "")
            base.pop("folder")
            base.pop("cells")
            self._zygote = Zygote(base, self.plan)
        return self._zygote

    def snap(self, kind: str) -> dict[str, list[str]]:
        """label -> the expressions of its checker calls of ``kind`` ("remote" or "trusted"),
        which the submission's process evaluates right after the exercise's last cell."""
        out: dict[str, list[str]] = {}
        for label, calls in self.calls.items():
            for call in calls:
                for arg in [*call.args, *call.kwargs.values()]:
                    if arg.kind == kind and arg.source not in out.setdefault(label, []):
                        out[label].append(arg.source)
        return out

    def session(
        self,
        cells: list[str],
        labels: list[str | None] | None = None,
        kind: str = "remote",
        **extra: Any,
    ) -> tuple[Session, str]:
        folder = tempfile.mkdtemp(prefix="grade-")
        os.chmod(folder, 0o755)
        lim = self.config.limits
        job = {"folder": folder, "cells": cells, "labels": labels, "snap": self.snap(kind), **extra}
        s = Session(
            job, self.zygote(), cell_timeout=lim["cell_timeout"], total_timeout=lim["total_timeout"]
        )
        return s, folder

    def _value(self, session: Session, call: CheckCall, where: int | str, arg: Arg) -> Any:
        if arg.kind == "const":
            return arg.value
        if arg.kind == "remote":
            return session.request("eval", expr=arg.source, label=call.label)
        key = f"{call.label}|{call.index}|{where}"
        found = self.config.trusted.get(key)
        if not isinstance(found, dict):
            raise LookupError("the grader has no value of its own for " + arg.source)
        if "error" in found:
            raise LookupError(
                f"the grader's own run could not compute {arg.source}: {found['error']}"
            )
        return wire.decode(found["value"])

    def verdicts(self, session: Session | None, why: str = "") -> tuple[dict, dict]:
        """label -> (passed, message), and label -> course functions called while checked."""
        from course_lib.checker import Outcome

        results: dict[str, tuple[bool, str]] = {}
        called: dict[str, list[str]] = {}
        for label, calls in self.calls.items():
            if session is None or session.ended:
                results[label] = (False, why or (session.ended if session else "not run"))
                continue
            verdict: tuple[bool, str] = (True, "")
            session.course_calls, session.trace = [], True
            judged = False
            for call in calls:
                try:
                    func = eval(call.func, dict(self.ns))
                    args = [self._value(session, call, i, a) for i, a in enumerate(call.args)]
                    kwargs = {k: self._value(session, call, k, a) for k, a in call.kwargs.items()}
                    WATCHDOG.arm(label)
                    try:
                        outcome = func(*args, **kwargs)
                    finally:
                        WATCHDOG.disarm()
                except SessionEnded as exc:
                    verdict = (False, str(exc))
                    break
                except LookupError as exc:
                    verdict = (False, str(exc))
                    break
                except Exception as exc:  # the checker itself failed on what it was given
                    verdict = (
                        False,
                        f"the checker could not run: {type(exc).__name__}: {exc}"[:500],
                    )
                    break
                if session.ended:  # a call inside the checker ended the process
                    verdict = (False, session.ended)
                    break
                if not isinstance(outcome, Outcome):  # a helper of the checkers' module
                    continue  # (e.g. check.attend_in_blocks in an assert), not a verdict
                judged = True
                if not outcome.passed:
                    verdict = (False, "; ".join(outcome.details) or outcome.title)
                    break
            session.trace = False
            if verdict[0] and not judged:
                verdict = (False, "no checker of this exercise gave a verdict")
            results[label] = verdict
            called[label] = list(session.course_calls)
        return results, called

    def grade(self, path: str, name: str) -> dict:
        """One submission's row (a JSON-able dict)."""
        from tools.grade import read_sheet, split_checks

        started = time.perf_counter()
        labels = list(self.calls)
        row: dict[str, Any] = {
            "submission": name, "status": "ok", "results": {}, "edited": [], "cell_errors": [],
            "flags": [], "sandbox": "", "leftover": "", "seconds": 0.0,
        }  # fmt: skip

        def fail_all(why: str) -> dict:
            row["status"] = why
            row["results"] = {lb: (False, why) for lb in labels}
            row["seconds"] = time.perf_counter() - started
            return row

        try:
            size = os.path.getsize(path)
            if size > self.config.max_notebook_mb * 2**20:
                return fail_all(
                    f"not graded: the notebook is {size / 2**20:.0f} MB, over the limit of "
                    f"{self.config.max_notebook_mb:g} MB"
                )
            with open(path, "rb") as f:
                nb = json.loads(f.read().decode("utf-8", errors="replace"))
            if isinstance(nb, dict) and nb.get("nbformat", 4) != 4:
                raise ValueError(
                    f"notebook format {nb.get('nbformat')!r}, not 4 (save it again in Jupyter)"
                )
            mine = read_sheet(nb)
        except RecursionError:
            return fail_all("not a readable notebook (nested too deeply)")
        except Exception as exc:
            return fail_all(f"not a readable notebook ({type(exc).__name__}: {str(exc)[:200]})")
        if len(mine.cells) > self.config.max_cells:
            return fail_all(
                f"not graded: {len(mine.cells)} code cells, over the limit of {self.config.max_cells}"
            )
        row["edited"] = [  # a call of the worksheet missing (changed or removed) from its cells
            lb for lb in labels if not set(self.config.calls[lb]) <= set(mine.calls.get(lb, []))
        ]
        cells = [split_checks(src)[0] for _, src in mine.cells]
        session, folder = self.session(cells, [label for label, _ in mine.cells])
        try:
            try:
                ran = session.start()
                row["cell_errors"] = [f"cell {i + 1}: {e}" for i, e in enumerate(ran["cells"]) if e]
                if ran["missing"]:
                    row["status"] = f"ok (sandbox without {', '.join(ran['missing'])})"
                results, called = self.verdicts(session)
            except SessionEnded as exc:
                row["status"] = str(exc)
                results, called = self.verdicts(None, str(exc))
            row["results"] = results
            if session.ended and row["status"] == "ok":
                row["status"] = session.ended
        finally:
            final = session.stop()
            try:
                os.rmdir(folder)
            except OSError:
                pass
            self.clean_up()
        row["leftover"] = _leftover(final, folder)
        row["sandbox"] = sandbox_summary(self.plan, final)
        if final.get("oom"):
            row["status"] += "; it reached the memory limit"
        if final.get("pids_max"):
            row["status"] += f"; it reached the limit of {sb.PIDS_MAX} processes"
        if final.get("why") == "disk":
            row["status"] = (
                f"stopped: its folder grew past the quota of {self.config.limits['disk_mb']} MB"
            )
        row["flags"] = self.flags(mine, called)
        row["seconds"] = time.perf_counter() - started
        return row

    def clean_up(self) -> None:
        """This worker is a child subreaper: kill anything below it but its zygote."""
        keep = {self._zygote.proc.pid} if self._zygote is not None else set()
        sb.kill_children(keep=keep)

    def flags(self, mine: Any, called: dict[str, list[str]]) -> list[str]:
        out = []
        from tools.grade import split_checks

        by_label: dict[str, list[str]] = {}
        for label, src in mine.cells:  # its checker calls are not its code (the originals run)
            if label is not None:
                by_label.setdefault(label, []).append(split_checks(src)[0])
        for label in self.calls:
            base = set(self.config.baseline.get(label, []))
            named = static_references(by_label.get(label, []), self.config.setup) - base
            dyn = {n for n in called.get(label, []) if _flaggable(n)} - base
            found = sorted(named | dyn)
            if found:
                out.append(f"{label}: {', '.join(found)}")
        return out

    def key(
        self, cells: list[str], labels: list[str | None], by_label: dict[str, list[str]]
    ) -> dict:
        """The grader's own run of the worksheet: the values its predictions compare with,
        the key's verdicts under this run's inputs, and the course functions the key uses."""
        snap = {
            lb: self.snap("trusted").get(lb, []) + self.snap("remote").get(lb, [])
            for lb in self.calls
        }
        session, folder = self.session(cells, labels, snap=snap)
        trusted: dict[str, Any] = {}
        try:
            try:
                ran = session.start()
                errors = [f"cell {i + 1}: {e}" for i, e in enumerate(ran["cells"]) if e]
            except SessionEnded as exc:
                return {"error": f"the grader's own run of the worksheet failed: {exc}"}
            for calls in self.calls.values():
                for call in calls:
                    if not call.prediction:
                        continue
                    for where, arg in [*enumerate(call.args), *call.kwargs.items()]:
                        if arg.kind != "trusted":
                            continue
                        key = f"{call.label}|{call.index}|{where}"
                        try:
                            value = session.request("eval", expr=arg.source, label=call.label)
                            trusted[key] = {"value": session.send(value)}
                        except Exception as exc:
                            trusted[key] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
            self.config.trusted = trusted
            results, called = self.verdicts(session)
        finally:
            session.stop()
            try:
                os.rmdir(folder)
            except OSError:
                pass
            self.clean_up()
        baseline = {}
        for label in self.calls:
            named = static_references(by_label.get(label, []), self.config.setup)
            baseline[label] = sorted(named | set(called.get(label, [])))
        return {"trusted": trusted, "results": results, "baseline": baseline, "cell_errors": errors}


class Watchdog:
    """Stops this judge process when one checker call uses more than ``limit`` seconds of
    this process's CPU: the learner's data can make a checker work without end (a pattern
    that backtracks catastrophically, say), and time spent waiting for the submission's
    process uses none. The grader then gives that submission a row and starts a new judge."""

    def __init__(self, limit: float = 120.0) -> None:
        self.limit, self.label, self.start, self.out = limit, None, 0.0, None
        self.lock = threading.Lock()

    @staticmethod
    def cpu() -> float:
        use = resource.getrusage(resource.RUSAGE_SELF)
        return use.ru_utime + use.ru_stime

    def arm(self, label: str) -> None:
        with self.lock:
            self.label, self.start = label, self.cpu()

    def disarm(self) -> None:
        with self.lock:
            self.label = None

    def watch(self, out: Any) -> None:
        self.out = out
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while True:
            time.sleep(0.5)
            with self.lock:
                if self.label is None or self.cpu() - self.start < self.limit:
                    continue
                message = (
                    f"the checker of {self.label} worked past {self.limit:g} s of the grader's "
                    "CPU on this submission's answer and was stopped"
                )
                try:
                    self.out.write(json.dumps({"error": message}) + "\n")
                    self.out.flush()
                finally:
                    os._exit(70)


WATCHDOG = Watchdog()


def _leftover(final: dict, folder: str) -> str:
    parts = []
    n = final.get("leftover_processes")
    if n:
        parts.append(f"{n} process(es) could not be killed" if n > 0 else "the launcher hung")
    files = final.get("leftover_files") or []
    if files or os.path.lexists(folder):
        shown = ", ".join(str(f) for f in files[:5])
        parts.append(f"files left in {folder}: {shown}")
    if not final:
        parts.append("no report from the launcher")
    return "; ".join(parts)


def sandbox_summary(plan: sb.Plan, final: dict | None = None) -> str:
    """A short description of the layers used, for the CSV's sandbox column."""
    layers = []
    if plan.namespaces:
        layers.append("userns" if plan.userns else "namespaces")
    elif plan.wrapper:
        layers.append(plan.wrapper)
    if plan.root:
        layers.append("own uid")
    if plan.cgroup:
        layers.append(f"cgroup v{plan.cgroup}")
    if plan.landlock:
        layers.append(f"landlock {plan.landlock}")
    if plan.seccomp:
        layers.append("seccomp")
    return "+".join(layers) or "limits only"


# -- the worker loop ----------------------------------------------------------------------------


def main() -> None:
    out = os.fdopen(os.dup(1), "w", buffering=1)
    sys.stdout = sys.stderr  # checkers that print must not write into the protocol
    try:
        sb._prctl(sb.PR_SET_CHILD_SUBREAPER, 1)
        sb._prctl(sb.PR_SET_PDEATHSIG, 9)
    except (OSError, AttributeError):
        pass
    config = Config(**json.loads(sys.stdin.readline()))
    judge = Judge(config)
    WATCHDOG.limit = float(config.limits.get("checker_timeout", 120.0))
    WATCHDOG.watch(out)
    out.write(json.dumps({"ready": True}) + "\n")
    try:
        _serve(judge, out)
    finally:
        if judge._zygote is not None:
            judge._zygote.close()


def _serve(judge: Judge, out: Any) -> None:
    config = judge.config
    for line in sys.stdin:
        task = json.loads(line)
        try:
            if task["task"] == "key":
                result = judge.key(task["cells"], task["labels"], task["by_label"])
            elif task["task"] == "trusted":
                config.trusted, config.baseline = task["trusted"], task["baseline"]
                result = {"ok": True}
            elif task["task"] == "probe":
                result = probe(judge)
            else:
                result = judge.grade(task["path"], task["name"])
        except Exception as exc:
            result = {
                "error": f"{type(exc).__name__}: {exc}",
                "trace": traceback.format_exc()[-2000:],
            }
        out.write(json.dumps(result) + "\n")


def probe(judge: Judge) -> dict:
    """Run the sandbox on a probe that tries what a submission should not manage."""
    target_dir = tempfile.mkdtemp(prefix="grade-probe-")
    os.chmod(target_dir, 0o755)
    target = os.path.join(target_dir, "hidden.txt")
    with open(target, "w") as f:
        f.write("the probe should not read this")
    os.chmod(target, 0o644)
    marker = str(10_000 + os.getpid() % 50_000)
    session, folder = judge.session(
        [], mode="probe", probe_target=target, probe_hidden=str(ROOT / "notebooks" / "01_matmul.py"),
        probe_grader=os.getpid(), probe_marker=marker,
    )  # fmt: skip
    mode_before = os.stat(target).st_mode
    try:
        try:
            found = session.start().get("probe", {})
        except SessionEnded as exc:
            found = {"error": str(exc)}
    finally:
        final = session.stop()
        judge.clean_up()
        try:
            os.rmdir(folder)
        except OSError:
            pass
    time.sleep(0.2)
    survivors = [p for p in os.listdir("/proc") if p.isdigit() and _cmdline(p) == ["sleep", marker]]
    found["chmod changed the file"] = os.stat(target).st_mode != mode_before
    found["processes left after grading"] = len(survivors) + (final.get("leftover_processes") or 0)
    for pid in survivors:
        try:
            os.kill(int(pid), 9)
        except OSError:
            pass
    for name in os.listdir(target_dir):
        os.remove(os.path.join(target_dir, name))
    os.rmdir(target_dir)
    return {"probe": found, "final": final}


def _cmdline(pid: str) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [p.decode(errors="replace") for p in f.read().split(b"\0") if p]
    except OSError:
        return []


if __name__ == "__main__":
    main()
