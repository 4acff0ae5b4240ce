"""One submission, graded in its own process: ``python -m tools.grade_runner`` (run by tools.grade).

The job comes as JSON on standard input: the grader's set-up cells (trusted: they import the
checkers), the submission's code cells with every checker call taken out, the grader's own
checker calls per exercise, the limits, the temporary folder and a nonce. The runner

1. runs the set-up cells and keeps the checker objects they bound (``check``,
   ``check_prediction``) and a snapshot of every ``course_lib`` module's attributes;
2. confines itself (tools.sandbox: memory, CPU, file size, writes only in its folder);
3. runs the submission's cells one by one, each under a time limit; an error or a time-out
   is recorded and the next cell runs;
4. checks that the submission replaced nothing in ``course_lib`` (a patched checker is caught
   here), then evaluates the grader's checker calls with the grader's checker objects;
5. writes one line, the nonce and the results as JSON, to the file descriptor it was given.

Everything the submission prints is cut to a few kilobytes; its own standard output and error
go nowhere.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback
import types
from typing import Any


class CellTimeout(BaseException):
    """Raised in the running cell when its time is up (a BaseException: `except Exception` in
    the learner's code does not swallow it)."""


class _Bounded:
    """A text stream that keeps the first ``limit`` characters written to it."""

    def __init__(self, limit: int) -> None:
        self.limit, self.parts, self.size, self.dropped = limit, [], 0, 0

    def write(self, text: str) -> int:
        room = self.limit - self.size
        if room > 0:
            self.parts.append(text[:room])
            self.size += min(len(text), room)
        self.dropped += max(0, len(text) - max(room, 0))
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def text(self) -> str:
        more = f"\n[... {self.dropped} more characters not kept]" if self.dropped else ""
        return "".join(self.parts) + more


def _on_alarm(signum: int, frame: Any) -> None:
    raise CellTimeout


def _describe(exc: BaseException, limit: float) -> str:
    if isinstance(exc, CellTimeout):
        return f"the cell ran longer than its limit of {limit:g} s and was stopped"
    if isinstance(exc, MemoryError) or "can't allocate memory" in str(exc):
        return f"{type(exc).__name__}: the cell asked for more memory than the limit allows"
    line = ""
    tb = traceback.extract_tb(exc.__traceback__)
    if tb and tb[-1].filename.startswith("<cell"):
        line = f" ({tb[-1].filename[1:-1]}, line {tb[-1].lineno})"
    message = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {message}{line}"


def _run(code: str, name: str, ns: dict, limit: float) -> str | None:
    """Execute ``code`` in ``ns`` under a time limit; None, or what went wrong."""
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        exec(compile(code, name, "exec"), ns)
        return None
    except BaseException as exc:
        return _describe(exc, limit)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _course_modules() -> dict[str, dict[str, int]]:
    """The identity of every function, class and module bound in a loaded course_lib module
    (data such as caches may change as the library is used; code must not)."""
    code = (types.FunctionType, types.BuiltinFunctionType, type, types.ModuleType)
    return {
        name: {k: id(v) for k, v in vars(mod).items() if isinstance(v, code)}
        for name, mod in list(sys.modules.items())
        if mod is not None and (name == "course_lib" or name.startswith("course_lib."))
    }


def _tampering(before: dict[str, dict[str, int]]) -> str | None:
    after = _course_modules()
    for name, attrs in before.items():
        if name not in after:
            return f"the submission removed the module {name}"
        for key, ident in attrs.items():
            if after[name].get(key) != ident:
                return f"the submission replaced {name}.{key}"
    return None


def grade(job: dict[str, Any], out: _Bounded) -> dict[str, Any]:
    from tools.sandbox import confine

    started = time.perf_counter()
    ns: dict[str, Any] = {"__name__": "__main__"}
    limit = float(job["cell_timeout"])
    result: dict[str, Any] = {"cells": [], "checks": {}, "sandbox": 0}
    for i, code in enumerate(job["setup"]):
        problem = _run(code, f"<setup {i + 1}>", ns, max(limit, 300.0))
        if problem:
            result["error"] = f"the grader's set-up cell failed: {problem}"
            return result
    trusted = {k: ns[k] for k in ("check", "check_prediction") if k in ns}
    calls = {
        label: [compile(src, f"<check {label}>", "eval") for src in sources]
        for label, sources in job["checks"].items()
    }
    snapshot = _course_modules()
    result["sandbox"] = confine(
        job["folder"],
        memory_mb=job["memory_mb"],
        cpu_seconds=int(job["total_timeout"]) + 5,
        sandbox=job["sandbox"],
    )
    for i, code in enumerate(job["cells"]):
        problem = _run(code, f"<cell {i + 1}>", ns, limit)
        result["cells"].append(problem)
    tampered = _tampering(snapshot)
    for label, codes in calls.items():
        if tampered:
            result["checks"][label] = [False, tampered]
            continue
        scope = {**ns, **trusted}
        verdict: list[Any] = [True, ""]
        for code in codes:
            signal.setitimer(signal.ITIMER_REAL, limit)
            try:
                outcome = eval(code, scope)
            except BaseException as exc:
                verdict = [False, f"the checker could not run: {_describe(exc, limit)}"]
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            if verdict[0] and type(outcome).__name__ != "Outcome":
                verdict = [False, f"the checker returned a {type(outcome).__name__}"]
            elif verdict[0] and not outcome.passed:
                verdict = [False, "; ".join(outcome.details) or outcome.title]
            if not verdict[0]:
                break
        result["checks"][label] = verdict
    result["seconds"] = time.perf_counter() - started
    result["output"] = out.text()[-2000:]
    return result


def main() -> None:
    job = json.loads(sys.stdin.read())
    fd = int(job["fd"])
    nonce = job["nonce"]
    os.chdir(job["folder"])
    signal.signal(signal.SIGALRM, _on_alarm)
    out = _Bounded(int(job["output_limit"]))
    sys.stdout = sys.stderr = out
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    try:
        result = grade(job, out)
    except BaseException as exc:  # the runner itself must always answer
        result = {"error": f"the grader's runner failed: {_describe(exc, 0)}"}
    os.write(fd, (nonce + json.dumps(result) + "\n").encode())
    os.close(fd)
    os._exit(0)


if __name__ == "__main__":
    main()
