"""Submissions' processes: ``python -m tools.grade_runner``, the *zygote* of a judge.

A judge (:mod:`tools.grade_judge`) starts one zygote for a grading run. The zygote (trusted)
runs the worksheet's set-up cell once (the grader's own code: imports, the chapter's context),
then, for each submission, receives the job (its code cells with their checker calls taken
out, the limits, its folder) and four pipes over a unix socket, and forks a *launcher* for it.
The launcher (trusted) stays outside the sandbox and

1. makes a new cgroup (where the plan of :mod:`tools.sandbox` has one) and a new PID namespace
   (where it has one), then forks *init*, PID 1 of that namespace, which builds the private
   root and forks the *submission's process*; without namespaces it forks that process itself;
2. waits; when the grader closes its stop pipe (grading is over), when the submission's
   process ends, when the folder outgrows its quota or when the total time is up, it kills
   every process of the submission (see :func:`tools.sandbox.kill_children`), removes the
   folder and reports on its control pipe what it found (leftover processes or files, memory
   or process limits hit).

The submission's process is a fork of the zygote, so the set-up cell's work is done already.
It confines itself (user, capabilities, limits, Landlock, seccomp) before anything else, tells
the launcher how much memory it holds, limits its address space, runs the learner's cells one
by one (an error or a time-out is recorded and the next cell runs), reports those, and then
answers the grader's calls (:func:`serve`) until the grader closes the request pipe. Every
answer is plain data (:mod:`tools.grade_wire`); an object that is not stays here and the
grader gets a reference to it, whose methods it may call the same way. Nothing this process
sends decides a verdict: the grader compares the data with its own reference values.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import sys
import time
import traceback
from typing import Any

from tools import grade_wire as wire
from tools import sandbox as sb


class CellTimeout(BaseException):
    """Raised in the running cell when its time is up (a BaseException: `except Exception` in
    the learner's code does not swallow it)."""


class _Bounded:
    """A text stream that keeps the first ``limit`` characters written to it."""

    def __init__(self, limit: int) -> None:
        self.limit, self.parts, self.size, self.dropped = limit, [], 0, 0

    def write(self, text: str) -> int:
        text = str(text)
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
    try:
        tb = traceback.extract_tb(exc.__traceback__)
        if tb and tb[-1].filename.startswith("<cell"):
            line = f" ({tb[-1].filename[1:-1]}, line {tb[-1].lineno})"
        message = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
    except BaseException:
        message = "(its message could not be read)"
    return f"{type(exc).__name__}: {message}{line}"


def _run(code: str, name: str, ns: dict, limit: float) -> str | None:
    """Execute ``code`` in ``ns`` under a time limit; None, or what went wrong."""
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        exec(compile(code, name, "exec"), ns)
        return None
    except BaseException as exc:
        signal.setitimer(signal.ITIMER_REAL, 0)
        return _describe(exc, limit)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


# -- the call server ------------------------------------------------------------------------------

_IDENT = re.compile(r"[^A-Za-z0-9_]")


def _type_name(obj: Any) -> str:
    name = _IDENT.sub("", getattr(type(obj), "__name__", "object"))[:60]
    return name if name and not name[0].isdigit() else "object"


class _Objects:
    """The objects the grader holds references to, by number."""

    def __init__(self) -> None:
        self.by_id: dict[int, Any] = {}
        self.next = 1

    def add(self, obj: Any) -> dict:
        ident = self.next
        self.next += 1
        self.by_id[ident] = obj
        return {"$": "r", "id": ident, "type": _type_name(obj), "call": callable(obj)}

    def get(self, ref: wire.Ref) -> Any:
        if ref.id not in self.by_id:
            raise KeyError(f"no object {ref.id} in the submission's process")
        return self.by_id[ref.id]


def _plain(objects: _Objects) -> Any:
    """The fallback of :func:`tools.grade_wire.encode` on this side: what is nearly plain data
    becomes plain data, anything else stays here behind a reference."""

    def fallback(obj: Any) -> Any:
        np = sys.modules.get("numpy")
        torch = sys.modules.get("torch")
        try:
            if isinstance(obj, bool):
                return bool(obj)
            if isinstance(obj, int):
                return int(obj)
            if isinstance(obj, float):
                return float(obj)
            if isinstance(obj, str):
                return "".join([obj[:]])
            if isinstance(obj, bytes):
                return wire.encode(bytes(obj))
            if isinstance(obj, tuple):
                return wire.encode(tuple(obj), fallback=fallback)
            if isinstance(obj, list):
                return wire.encode(list(obj), fallback=fallback)
            if isinstance(obj, dict):
                return wire.encode(dict(obj), fallback=fallback)
            if torch is not None and isinstance(obj, torch.Tensor):
                plain = obj.detach().as_subclass(torch.Tensor)
                return wire.encode(plain, fallback=None)
            if np is not None:
                if isinstance(obj, np.ndarray) and obj.dtype.kind in "biufcUS":
                    return wire.encode(np.asarray(obj).view(np.ndarray))
                if (
                    not isinstance(obj, np.ndarray)
                    and hasattr(type(obj), "__array__")
                    and not callable(getattr(obj, "__next__", None))
                ):
                    arr = np.asarray(obj)
                    if arr.dtype.kind in "biufc":
                        return wire.encode(arr)
        except Exception:
            pass
        return objects.add(obj)

    return fallback


def _exception(exc: BaseException) -> dict:
    """An exception as plain data: its type's name, the built-in exception classes it derives
    from, its arguments where they are plain, its message and the line it was raised at."""
    import builtins

    if isinstance(exc, CellTimeout):
        exc = TimeoutError("the function ran longer than the time limit and was stopped")
    bases = [
        c.__name__
        for c in type(exc).__mro__
        if getattr(builtins, c.__name__, None) is c and issubclass(c, BaseException)
    ]
    try:
        args = wire.encode(tuple(exc.args))
    except BaseException:
        args = None
    try:
        message = str(exc)[:2000]
    except BaseException:
        message = ""
    try:
        line = traceback.extract_tb(exc.__traceback__)[-1].lineno or 0
    except BaseException:
        line = 0
    return {
        "type": _type_name(exc),
        "bases": bases[:20],
        "args": args,
        "msg": message,
        "line": line,
    }


def _course_tracer(found: list[str]) -> Any:
    """A profile function that notes every course_lib function called from outside course_lib
    (the learner's code calling the course's reference)."""

    def tracer(frame: Any, event: str, arg: Any) -> None:
        if event != "call" or len(found) >= 50:
            return
        module = frame.f_globals.get("__name__", "")
        if not isinstance(module, str) or not module.startswith("course_lib"):
            return
        caller = frame.f_back
        outer = caller.f_globals.get("__name__", "") if caller is not None else ""
        if isinstance(outer, str) and outer.startswith("course_lib"):
            return
        name = f"{module}.{getattr(frame.f_code, 'co_qualname', frame.f_code.co_name)}"
        if name not in found:
            found.append(name)

    return tracer


_MUTABLE = (list, dict, bytearray)


class Server:
    """The submission's side of the calls: its objects by number, and one reply per request."""

    def __init__(self, ns: dict, limit: float, snaps: dict | None = None) -> None:
        self.ns, self.limit, self.snaps = ns, limit, snaps or {}
        self.objects = _Objects()
        self.fallback = _plain(self.objects)

    def lookup(self, ref: wire.Ref) -> Any:
        return self.objects.get(ref)

    @staticmethod
    def mutable(x: Any) -> bool:
        np, torch = sys.modules.get("numpy"), sys.modules.get("torch")
        return (
            type(x) in _MUTABLE
            or (np is not None and type(x) is np.ndarray)
            or (torch is not None and type(x) is torch.Tensor)
        )

    def handle(self, msg: Any) -> dict:
        """The reply to one request (a JSON-ready dict): ``ok`` with the value, or ``err``."""
        ident = msg.get("id") if isinstance(msg, dict) else None
        reply: dict[str, Any] = {"id": ident}
        course: list[str] = []
        objects, fallback = self.objects, self.fallback
        try:
            op = msg["op"]
            if op == "eval":
                key = (msg.get("label"), msg["expr"])
                if key in self.snaps:
                    value, problem = self.snaps[key]
                    if problem is not None:
                        raise problem
                else:
                    value = eval(compile(msg["expr"], "<grader>", "eval"), self.ns)
            elif op == "call":
                fn = objects.get(wire.Ref(int(msg["ref"])))
                args = wire.decode(msg["args"], refs=self.lookup)
                kwargs = wire.decode(msg["kwargs"], refs=self.lookup)
                before = {}
                for i, a in enumerate(args):
                    if self.mutable(a):
                        try:
                            before[i] = json.dumps(wire.encode(a, fallback=fallback))
                        except Exception:
                            pass
                if msg.get("trace"):
                    sys.setprofile(_course_tracer(course))
                if self.limit:
                    signal.setitimer(signal.ITIMER_REAL, self.limit)
                try:
                    value = fn(*args, **kwargs)
                finally:
                    if self.limit:
                        signal.setitimer(signal.ITIMER_REAL, 0)
                    sys.setprofile(None)
                writeback = []
                for i, text in before.items():
                    now = wire.encode(args[i], fallback=fallback)
                    if json.dumps(now) != text:
                        writeback.append([i, now])
                reply["wb"] = writeback
            elif op == "getattr":
                name = msg["name"]
                if not isinstance(name, str) or name.startswith("__"):
                    raise AttributeError(name)
                value = getattr(objects.get(wire.Ref(int(msg["ref"]))), name)
            elif op == "len":
                value = len(objects.get(wire.Ref(int(msg["ref"]))))
            elif op == "getitem":
                key = wire.decode(msg["key"], refs=self.lookup)
                value = objects.get(wire.Ref(int(msg["ref"])))[key]
            elif op == "iter":
                value = iter(objects.get(wire.Ref(int(msg["ref"]))))
                reply["ok"] = objects.add(value)
            elif op == "next":
                value = next(objects.get(wire.Ref(int(msg["ref"]))))
            elif op == "release":
                objects.by_id.pop(int(msg["ref"]), None)
                value = None
            else:
                raise ValueError(f"unknown request {op!r}")
            if "ok" not in reply:
                reply["ok"] = wire.encode(value, fallback=fallback)
        except BaseException as exc:
            if self.limit:
                signal.setitimer(signal.ITIMER_REAL, 0)
            reply = {"id": ident, "err": _exception(exc)}
        if course:
            reply["course"] = course
        return reply


def serve(ns: dict, req: int, rep: int, limit: float, snaps: dict | None = None) -> None:
    """Answer the grader's requests until it closes the request pipe (``snaps``: values of
    expressions taken right after an exercise's cells, by (label, expression))."""
    server = Server(ns, limit, snaps)
    while True:
        try:
            msg = wire.read_frame(req)
        except (EOFError, OSError):
            return
        reply = server.handle(msg)
        try:
            wire.write_frame(rep, reply)
        except wire.WireError as exc:
            wire.write_frame(rep, {"id": reply.get("id"), "err": _exception(exc)})
        except OSError:
            return


# -- the submission's process ---------------------------------------------------------------------


def _confine(job: dict, plan: sb.Plan, uid: int | None) -> list[str]:
    """Confine this process (the order matters: user first, then limits, then Landlock and
    seccomp, which also stop any later change of them); what could not be applied."""
    missing = []
    folder = job["folder"]
    if plan.root and uid is not None:
        sb.drop_root(uid)
    elif plan.userns:
        sb.drop_capabilities()
    if plan.cgroup:
        nproc = None
    elif plan.root:
        nproc = sb.PIDS_MAX
    else:
        nproc = sb.count_processes_of(os.getuid()) + sb.PIDS_MAX
    sb.set_limits(cpu_seconds=int(job["total_timeout"]) + 5, file_mb=job["file_mb"], nproc=nproc)
    if job["sandbox"]:
        readable = None if plan.view else job["readable"]  # a private root hides the rest
        abi = sb.landlock([folder, os.devnull], readable)
        if not abi and not plan.view:
            missing.append("landlock")
        if plan.seccomp:
            sb.seccomp_filter(plan.seccomp)
    else:
        sb._prctl(sb.PR_SET_NO_NEW_PRIVS, 1)
    return missing


def _probe(job: dict) -> dict:
    """What this confined process can do that it should not (``--check-sandbox``)."""
    import errno
    import socket

    results: dict[str, Any] = {}

    def attempt(name: str, fn: Any) -> None:
        try:
            fn()
            results[name] = "allowed"
        except OSError as exc:
            results[name] = f"refused ({errno.errorcode.get(exc.errno, exc.errno)})"
        except Exception as exc:
            results[name] = f"refused ({type(exc).__name__})"

    target = job["probe_target"]
    attempt("write a file outside its folder", lambda: open(target + ".new", "w").close())
    attempt("read a file the grader hid", lambda: open(target).read())
    attempt("read the course's notebooks", lambda: open(job["probe_hidden"]).read())
    attempt("list the course's notebooks", lambda: os.listdir(os.path.dirname(job["probe_hidden"])))
    attempt("chmod a file outside its folder", lambda: os.chmod(target, 0o777))
    attempt("set a timestamp outside its folder", lambda: os.utime(target, (0, 0)))
    attempt("open a UDP socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).close())
    attempt("open a TCP socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close())
    attempt("open a unix socket", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close())
    attempt("create a memfd", lambda: os.close(os.memfd_create("x")))
    attempt("signal the grader", lambda: os.kill(job["probe_grader"], 0))
    attempt("make a namespace", lambda: sb.unshare(sb.CLONE_NEWUSER))
    results["user id"] = os.getuid()
    results["capabilities"] = hex(sb._cap_eff())
    results["environment variables"] = sorted(os.environ)
    count, kids = 0, []
    for _ in range(sb.PIDS_MAX * 3):
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        kids.append(pid)
        count += 1
    results["processes it could start"] = count
    for pid in kids:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    try:  # a grandchild in a new session that outlives its parent, for the launcher to find
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execv("/bin/sleep", ["sleep", job["probe_marker"]])
            os._exit(0)
    except OSError as exc:
        results["a process in a new session"] = f"refused ({exc})"
    return results


def submission(job: dict, plan: sb.Plan, uid: int | None, fds: dict[str, int], ns: dict) -> None:
    """The submission's process: confine, run the cells, then answer the grader's calls.

    ``ns`` holds what the worksheet's set-up cell made (run once, in the zygote)."""
    req, rep = fds["req"], fds["rep"]
    try:
        sb._prctl(sb.PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass
    folder = job["folder"]
    os.chdir(folder)
    os.environ.update({"HOME": folder, "TMPDIR": folder, "MPLCONFIGDIR": folder})
    import tempfile

    tempfile.tempdir = folder
    used = sb.address_space()  # before Landlock, which may hide /proc
    try:
        missing = _confine(job, plan, uid)
    except BaseException as exc:
        wire.write_frame(rep, {"fatal": f"the sandbox could not be set up: {exc}"})
        os._exit(3)
    if job.get("mode") == "probe":
        results = _probe(job)
        wire.write_frame(rep, {"probe": wire.encode(results)})
        os._exit(0)
    signal.signal(signal.SIGALRM, _on_alarm)
    out = _Bounded(int(job["output_limit"]))
    sys.stdout = sys.stderr = out
    # the learner's code has not run yet: this message about memory in use can be trusted
    os.write(fds["hs_w"], b"ready\n")
    os.close(fds["hs_w"])
    select.select([fds["go_r"]], [], [], 30)
    os.close(fds["go_r"])
    sb.limit_memory(int(job["memory_mb"]), used)
    limit = float(job["cell_timeout"])
    labels = job.get("labels") or [None] * len(job["cells"])
    wanted = job.get("snap") or {}
    last = {label: i for i, label in enumerate(labels) if label in wanted}
    snaps: dict[tuple[str, str], tuple[Any, BaseException | None]] = {}

    def snapshot(label: str) -> None:
        """What the checker calls of ``label`` name, as it is right after that exercise's last
        cell (a later cell that reuses ``prediction`` must not change an earlier answer)."""
        for expr in wanted.get(label, []):
            signal.setitimer(signal.ITIMER_REAL, limit)
            try:
                snaps[(label, expr)] = (eval(compile(expr, "<grader>", "eval"), ns), None)
            except BaseException as exc:
                snaps[(label, expr)] = (None, exc)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)

    errors = []
    for i, code in enumerate(job["cells"]):
        try:  # the grader's clock for this cell starts now
            wire.write_frame(rep, {"cell": i})
        except OSError:
            os._exit(0)
        errors.append(_run(code, f"<cell {i + 1}>", ns, limit))
        for label, at in last.items():
            if at == i:
                snapshot(label)
    try:
        wire.write_frame(rep, {"cells": errors, "output": out.text()[-2000:], "missing": missing})
    except OSError:
        os._exit(0)
    serve(ns, req, rep, limit, snaps)
    os._exit(0)


# -- init, the launcher and the zygote -----------------------------------------------------------


def init(job: dict, plan: sb.Plan, uid: int | None, fds: dict[str, int], ns: dict) -> None:
    """PID 1 of the new PID namespace: build the private root, start the submission's
    process, reap every orphan, and end (taking the namespace with it) when it ends."""
    try:
        sb._prctl(sb.PR_SET_PDEATHSIG, signal.SIGKILL)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        os.umask(0o022)
        sb.unshare(
            sb.CLONE_NEWNS | sb.CLONE_NEWNET | sb.CLONE_NEWIPC | sb.CLONE_NEWUTS
            | sb.CLONE_NEWCGROUP
        )  # fmt: skip
        try:
            os.sethostname("sandbox") if hasattr(os, "sethostname") else None
        except OSError:
            pass
        owner = uid if (plan.root and uid is not None) else os.getuid()
        sb.build_view(job["folder"], int(job["disk_mb"]), owner, job["readable"])
    except BaseException as exc:
        try:
            wire.write_frame(fds["rep"], {"fatal": f"the sandbox could not be set up: {exc}"})
        finally:
            os._exit(3)
    child = os.fork()
    if child == 0:
        submission(job, plan, uid, fds, ns)
        os._exit(0)
    for fd in (fds["req"], fds["rep"], fds["hs_w"], fds["go_r"]):
        os.close(fd)
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            os._exit(0)
        except InterruptedError:
            continue
        if pid == child:  # its exit code, or 128 + the signal that killed it
            code = os.waitstatus_to_exitcode(status)
            os._exit(128 - code if code < 0 else code & 0xFF)


def _folder_bytes(folder: str, cap: int) -> int:
    total = 0
    for base, dirs, files in os.walk(folder):
        for name in files + dirs:
            try:
                total += os.lstat(os.path.join(base, name)).st_blocks * 512
            except OSError:
                pass
            if total > cap:
                return total
    return total


def _remove(folder: str) -> list[str]:
    """Remove ``folder`` whatever its modes; what is left (relative paths)."""

    def unlock(func: Any, path: str, exc: Any) -> None:
        try:
            os.chmod(os.path.dirname(path), 0o700)
            os.chmod(path, 0o700)
        except OSError:
            pass
        try:
            func(path)
        except OSError:
            pass

    for _ in range(2):
        if not os.path.lexists(folder):
            return []
        shutil.rmtree(folder, onerror=unlock)
    left = []
    for base, dirs, files in os.walk(folder):
        left += [os.path.relpath(os.path.join(base, n), folder) for n in files + dirs]
    return left[:20] or ([] if not os.path.lexists(folder) else ["."])


def launch(job: dict, plan: sb.Plan, fds: dict[str, int], ns: dict) -> None:
    """One submission's launcher (a fork of the zygote; trusted): see the module docstring.
    ``fds``: ``req``/``rep`` (the call pipes, passed on), ``ctl`` (its reports to the grader)
    and ``stop`` (closed by the grader when grading is over)."""
    ctl, stop = fds["ctl"], fds["stop"]

    def report(**event: Any) -> None:
        try:
            os.write(ctl, (json.dumps(event) + "\n").encode())
        except OSError:
            pass

    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    if plan.linux:
        try:
            sb._prctl(sb.PR_SET_PDEATHSIG, signal.SIGKILL)
            sb._prctl(sb.PR_SET_CHILD_SUBREAPER, 1)
            sb._prctl(sb.PR_SET_DUMPABLE, 0)
        except OSError:
            pass
    uid = sb.UID_BASE + os.getpid() if plan.root and plan.uid is not None else None
    folder = job["folder"]
    if uid is not None:
        os.chown(folder, uid, uid)
    memory = int(job["memory_mb"]) * 2**20
    disk = int(job["disk_mb"]) * 2**20
    group = None
    if plan.cgroup:
        group = sb.Cgroup.create(f"grade-{os.getpid()}", memory + 2**31, sb.PIDS_MAX + 2)
    placed_r, placed_w = os.pipe()  # the child waits until it is in the cgroup
    hs_r, hs_w = os.pipe()
    go_r, go_w = os.pipe()
    fds = {**fds, "hs_w": hs_w, "go_r": go_r}
    wrapped = plan.wrapper == "bwrap" and not plan.namespaces
    if wrapped:  # bwrap runs a fresh Python (tools.grade_runner --inside); its job comes here
        job_r, job_w = os.pipe()
    if plan.namespaces:
        real_uid, real_gid = os.getuid(), os.getgid()
        if plan.userns:  # writing one's own uid_map needs a dumpable process, for a moment
            sb._prctl(sb.PR_SET_DUMPABLE, 1)
        sb.unshare(sb.CLONE_NEWPID | (sb.CLONE_NEWUSER if plan.userns else 0))
        if plan.userns:
            sb.map_user(real_uid, real_gid)
            sb._prctl(sb.PR_SET_DUMPABLE, 0)
    child = os.fork()
    if child == 0:
        # nothing of the launcher's channels to the grader stays open below it
        for fd in (hs_r, go_w, ctl, stop, placed_w):
            os.close(fd)
        os.read(placed_r, 1)
        os.close(placed_r)
        null = os.open(os.devnull, os.O_RDWR)
        for target in (0, 1, 2):
            os.dup2(null, target)
        os.close(null)
        if wrapped:
            os.close(job_w)
            os.dup2(job_r, 0)
            for name in ("req", "rep", "hs_w", "go_r"):
                os.set_inheritable(fds[name], True)
            command = sb.bwrap_command(plan.bwrap, folder, int(job["disk_mb"]), job["readable"])
            command += ["--", sys.executable, "-m", "tools.grade_runner", "--inside"]
            env = sb.minimal_environment(folder, {"PYTHONPATH": str(sb.ROOT)})
            try:
                os.execve(plan.bwrap, command, env)
            finally:
                os._exit(127)
        if plan.namespaces:
            init(job, plan, uid, fds, ns)
        else:
            submission(job, plan, uid, fds, ns)
        os._exit(0)
    for fd in (fds["req"], fds["rep"], hs_w, go_r, placed_r):
        os.close(fd)
    if wrapped:
        os.close(job_r)
        inner = {**job, "fds": {n: fds[n] for n in ("req", "rep", "hs_w", "go_r")}}
        data = json.dumps(inner).encode()

        def feed() -> None:
            try:
                with os.fdopen(job_w, "wb") as f:
                    f.write(data)
            except OSError:
                pass

        import threading

        threading.Thread(target=feed, daemon=True).start()
    if group is not None:
        try:
            group.join(child)
        except OSError:
            group.kill_all()
            group.remove()
            group = None
    os.write(placed_w, b"x")
    os.close(placed_w)
    report(event="started", uid=uid, cgroup=group.version if group else 0)
    if not plan.view:
        report(event="pid", pid=child)
    deadline = time.monotonic() + float(job["total_timeout"]) + 10
    disk_cap = int(job["disk_mb"]) * 2**20
    why, status, next_disk = "", None, 0.0
    watch = [stop, hs_r]
    while True:
        ready, _, _ = select.select(watch, [], [], 0.2)
        if stop in ready and not os.read(stop, 4096):
            why = "grading ended"
            break
        if hs_r in ready:
            os.read(hs_r, 64)
            if group is not None:  # all its processes together: above RLIMIT_AS, which
                # should stop one runaway allocation first (a MemoryError, not a kill), plus
                # the folder's tmpfs, which is memory too
                try:
                    group.set_memory(group.memory_usage() + memory + disk + 2**28)
                except OSError:
                    pass
            if plan.view:  # the submission's process, as this namespace numbers it
                kids = sb.children_of(child) if plan.namespaces else [
                    p for p in sb.descendants(child) if _is_inside(p)
                ]  # fmt: skip
                if kids:
                    report(event="pid", pid=kids[0])
            try:
                os.write(go_w, b"go\n")
            except OSError:
                pass
            watch.remove(hs_r)
            os.close(hs_r)
        pid, st = os.waitpid(child, os.WNOHANG)
        if pid:
            status = os.waitstatus_to_exitcode(st)
            why = "its process ended"
            break
        now = time.monotonic()
        if now > deadline:
            why = "the total time limit"
            break
        if not plan.view and now > next_disk:
            next_disk = now + 0.5
            if _folder_bytes(folder, disk_cap) > disk_cap:
                why = "disk"
                break
    # kill everything: the namespace's init (the kernel does the rest), the cgroup, the user
    if status is None:
        try:
            os.kill(child, signal.SIGKILL)
        except OSError:
            pass
    left = sb.kill_children()
    if group is not None:
        left = max(left, group.kill_all())
    if uid is not None and not plan.namespaces:
        sb.kill_user(uid)
        time.sleep(0.05)
        left = max(left, len(sb.processes_of(uid)))
        left = max(left, sb.kill_children())
    oom = group.out_of_memory() if group is not None else False
    pids = group.pids_exhausted() if group is not None else False
    if group is not None:
        group.remove()
    files = _remove(folder)
    report(
        event="ended", why=why, status=status, leftover_processes=left, leftover_files=files,
        oom=oom, pids_max=pids,
    )  # fmt: skip
    os._exit(0)


def _is_inside(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().endswith(b"--inside\0")
    except OSError:
        return False


def inside() -> None:
    """``python -m tools.grade_runner --inside``: the submission's process under bwrap, which
    runs the worksheet's set-up cell itself (no zygote to fork from), then as a fork would."""
    job = json.loads(sys.stdin.buffer.read())
    plan = sb.Plan.from_json(job["plan"])
    fds = job["fds"]
    ns: dict[str, Any] = {"__name__": "__main__"}
    os.chdir(job["folder"])
    for i, code in enumerate(job["setup"]):
        problem = _run(code, f"<setup {i + 1}>", ns, 600.0)
        if problem:
            wire.write_frame(fds["rep"], {"fatal": f"the grader's set-up cell failed: {problem}"})
            os._exit(3)
    submission(job, plan, None, fds, ns)


def zygote() -> None:
    """``python -m tools.grade_runner`` (started by a judge, trusted): run the worksheet's
    set-up cell once, then fork one launcher per request on the control socket (fd 3), each
    with the pipes that came with the request (SCM_RIGHTS)."""
    import socket

    base = json.loads(sys.stdin.buffer.readline())
    plan = sb.Plan.from_json(base["plan"])
    control = socket.socket(fileno=int(base["control"]))
    if plan.linux:
        try:
            sb._prctl(sb.PR_SET_PDEATHSIG, signal.SIGKILL)
            sb._prctl(sb.PR_SET_CHILD_SUBREAPER, 1)
            sb._prctl(sb.PR_SET_DUMPABLE, 0)  # no other process of this user may read it
        except OSError:
            pass
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # launchers are reaped by the kernel
    os.chdir(base["folder"])
    ns: dict[str, Any] = {"__name__": "__main__"}
    problem = None
    for i, code in enumerate(base["setup"]):
        problem = problem or _run(code, f"<setup {i + 1}>", ns, 600.0)
    if "matplotlib" in sys.modules:  # its font list, built once here rather than per submission
        try:
            import matplotlib.font_manager  # noqa: F401
        except Exception:
            pass
    control.sendall(json.dumps({"ready": problem is None, "problem": problem}).encode())
    control.settimeout(1.0)
    launchers: set[int] = set()
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(control, 1 << 20, 8)
        except TimeoutError:
            # a process below a launcher that was killed comes back here: none may stay
            for pid in sb.children_of(os.getpid()):
                if pid not in launchers:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
            launchers = {p for p in launchers if os.path.exists(f"/proc/{p}")}
            continue
        except OSError:
            os._exit(0)
        if not data:
            os._exit(0)
        request = json.loads(data)
        names = request["fds"]
        if len(fds) != len(names):
            for fd in fds:
                os.close(fd)
            control.sendall(b'{"pid": 0}')
            continue
        pid = os.fork()
        if pid == 0:
            control.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            channels = dict(zip(names, fds, strict=True))
            with os.fdopen(channels.pop("job"), "rb") as f:
                job = {**base, **json.loads(f.read())}
            launch(job, plan, channels, ns)
            os._exit(0)
        launchers.add(pid)
        for fd in fds:
            os.close(fd)
        control.sendall(json.dumps({"pid": pid}).encode())


if __name__ == "__main__":
    inside() if sys.argv[1:] == ["--inside"] else zygote()
