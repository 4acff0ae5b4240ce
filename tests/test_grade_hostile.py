"""A hostile class, graded: every kind of attack of issue 40, written for this suite.

One grading run (two at a time) marks chapter 1's worksheet for about forty submissions: the
key, the untouched hand-out, and submissions that try to forge a verdict, to stop the class, to
escape or outlive their sandbox, to poison the grader's output, or to use the course's own
reference code. Each test below reads that run's rows and asserts that the attack failed (a
failing verdict or a clear error in the row) and that nothing outside changed. Assertions that
depend on a sandbox layer hold where the machine has that layer (``sandbox.plan()`` says).
"""

from __future__ import annotations

import csv
import json
import os
import socket
import threading
import time
from pathlib import Path

import nbformat
import pytest

from tools import sandbox as sb
from tools.grade import KeyReport, Limits, csv_cell, grade_class, read_sheet, summary, write_csv
from tools.handouts import worksheet

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
CHAPTER = ROOT / "notebooks" / "01_matmul.ipynb"
LABELS = ["ex-matmul-outer", "ex-matmul-debug", "ex-matmul-flops", "ex-matmul-predict"]
CANARY = "lecturer-secret-7f3a"
MARK = str(30_000 + os.getpid() % 20_000)  # the argv of processes the submissions leave behind
# COURSE_GRADE_LAYERS=landlock grades the class without namespaces or cgroups, as on a machine
# that has neither, and =bwrap with bwrap's namespaces instead of the grader's own (to try the
# fallback layers where the machine has more)
_LAYERS = os.environ.get("COURSE_GRADE_LAYERS", "")
LIMITS = Limits(
    cell_timeout=4, total_timeout=45, memory_mb=512, disk_mb=64, max_notebook_mb=2,
    namespaces=not _LAYERS, cgroups=not _LAYERS, bwrap=_LAYERS != "landlock",
)  # fmt: skip
PLAN = sb.plan(namespaces=LIMITS.namespaces, cgroups=LIMITS.cgroups, bwrap=LIMITS.bwrap)

# the learner's wrong answers that the integrity attacks try to get passed
WRONG = {
    "ex-matmul-outer": "def outer_matmul(X, Y):\n    return np.zeros((len(X), np.shape(Y)[1]))",
    "ex-matmul-debug": "def to_linear_weight(W):\n    return W.reshape(W.shape[1], W.shape[0])",
    "ex-matmul-flops": "def linear_flops(batch, seq_len, d_in, d_out):\n    return 0",
    "ex-matmul-predict": "prediction = (1, 1, 1, 1)",
}


def _stub_cell(nb, label: str) -> int:
    at = next(i for i, c in enumerate(nb.cells) if f":label: {label}" in c.source)
    return next(i for i in range(at, len(nb.cells)) if nb.cells[i].cell_type == "code")


def _end_of(nb, label: str) -> int:
    """The index after the last code cell of exercise ``label`` (its solution included)."""
    i = _stub_cell(nb, label)
    last = i
    for j in range(i + 1, len(nb.cells)):
        c = nb.cells[j]
        if c.cell_type == "markdown" and (":label:" in c.source or c.source.startswith("## ")):
            break
        if c.cell_type == "code":
            last = j
    return last + 1


def with_cell(nb, code: str, after: str | None = None):
    """A copy of ``nb`` with a code cell after the last code cell of exercise ``after`` (its
    solution, in the key), or at the end."""
    out = nbformat.from_dict(nb)
    cell = nbformat.v4.new_code_cell(code)
    if after is None:
        out.cells.append(cell)
    else:
        out.cells.insert(_end_of(out, after), cell)
    return out


def wrong(nb, attack: str = "", before: bool = True):
    """The hand-out with every stub answered wrongly (its checker calls kept) and ``attack``
    as a cell before the exercises, or (``before=False``) in every stub cell after the wrong
    answer, so that what it defines is what each exercise's checker gets."""
    out = nbformat.from_dict(nb)
    for label, code in WRONG.items():
        i = _stub_cell(out, label)
        calls = [ln for ln in out.cells[i].source.splitlines() if ln.startswith("check")]
        inside = "" if before else "\n" + attack
        out.cells[i].source = code + inside + "\n\n" + "\n".join(calls)
    if attack and before:
        out.cells.insert(_stub_cell(out, LABELS[0]), nbformat.v4.new_code_cell(attack))
    return out


def predicting(nb, expression: str):
    """``nb`` whose prediction is ``expression`` (an exfiltration channel: the checker's
    message shows the prediction)."""
    return with_cell(nb, f"prediction = {expression}", "ex-matmul-predict")


class Listeners:
    """A UDP socket, a TCP server and a unix-socket server that record anything that reaches them."""

    def __init__(self, folder: Path) -> None:
        self.got: list[str] = []
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen()
        self.unix_path = str(folder / "listen.sock")
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind(self.unix_path)
        os.chmod(self.unix_path, 0o777)
        self.unix.listen()
        self.stop = False
        for sock in (self.udp, self.tcp, self.unix):
            sock.settimeout(0.2)
            threading.Thread(target=self._watch, args=(sock,), daemon=True).start()

    def _watch(self, sock: socket.socket) -> None:
        while not self.stop:
            try:
                if sock.type == socket.SOCK_DGRAM:
                    self.got.append(f"udp: {sock.recv(4096)!r}")
                else:
                    conn, _ = sock.accept()
                    self.got.append(f"{sock.family.name}: {conn.recv(4096)!r}")
                    conn.close()
            except OSError:
                continue

    def close(self) -> None:
        self.stop = True
        time.sleep(0.3)
        for sock in (self.udp, self.tcp, self.unix):
            sock.close()


def _snapshot(path: Path) -> tuple:
    st = os.stat(path)
    try:
        attrs = sorted(os.listxattr(path))
    except OSError:
        attrs = []
    return (path.read_bytes(), st.st_mode, st.st_uid, st.st_mtime_ns, attrs)


def _cmdlines() -> list[list[str]]:
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                out.append(
                    [
                        p.decode()
                        for p in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                        if p
                    ]
                )
            except OSError:
                pass
    return out


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The class, graded once: {name: row}, plus what the tests compare after."""
    if PLAN.refused:
        pytest.skip(f"the grader refuses to run here: {PLAN.refused}")
    tmp = tmp_path_factory.mktemp("class")
    os.chmod(tmp, 0o755)
    chapter = nbformat.read(CHAPTER, as_version=4)
    hand, key = worksheet(chapter), worksheet(chapter, solutions=True)
    victim = tmp / "victim.txt"
    victim.write_text("keep me")
    os.chmod(victim, 0o644)
    visible = [ROOT / "pyproject.toml", ROOT / "course_lib" / "__init__.py"]
    before = {p: _snapshot(p) for p in [victim, *visible]}
    listeners = Listeners(tmp)
    udp_port, tcp_port = listeners.udp.getsockname()[1], listeners.tcp.getsockname()[1]
    key_path = tmp / "key.ipynb"

    net = f"""
import socket
for family, kind, address in [
    (socket.AF_INET, socket.SOCK_DGRAM, ("127.0.0.1", {udp_port})),
    (socket.AF_INET, socket.SOCK_STREAM, ("127.0.0.1", {tcp_port})),
    (socket.AF_UNIX, socket.SOCK_STREAM, {listeners.unix_path!r}),
]:
    try:
        s = socket.socket(family, kind)
        s.settimeout(1)
        s.connect(address)
        s.send(b"exfiltrated")
    except OSError:
        pass
try:
    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    raw = "raw socket opened"
except OSError:
    raw = "no raw socket"
"""
    subs = {
        "key": key,
        "untouched": hand,
        # -- integrity: wrong answers behind every known trick
        "allclose": wrong(
            hand,
            "import numpy as np\nnp.allclose = lambda *a, **k: True\n"
            "np.isclose = lambda *a, **k: True\nnp.array_equal = lambda *a, **k: True",
        ),
        "checker_code": wrong(
            hand,
            """
from course_lib import checker
def passing(*args, **kwargs):
    return checker.Outcome("forged", True)
checker.check_cases.__code__ = passing.__code__
checker.check_prediction.__code__ = passing.__code__
checker.Outcome.__post_init__ = lambda self: setattr(self, "passed", True)
checker.Outcome.__bool__ = lambda self: True
checker.diagnose = lambda *a, **k: None
""",
        ),
        "profile": wrong(
            hand,
            """
import sys
def hook(frame, event, arg):
    for value in list(frame.f_locals.values()):
        if type(value).__name__ == "Outcome":
            value.passed = True
    return hook
sys.setprofile(hook)
sys.settrace(hook)
""",
        ),
        "always_equal": predicting(
            wrong(
                hand,
                """
class Anything:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __float__(self): return 0.0
    def __array__(self, dtype=None, copy=None): return np.zeros((2, 2))
class Flops(int):
    def __eq__(self, other): return True
    __hash__ = int.__hash__
class Close(np.ndarray):
    def __eq__(self, other): return np.ones(np.shape(other), bool)
outer_matmul = lambda X, Y: Anything()
to_linear_weight = lambda W: np.zeros((W.shape[1], W.shape[0])).view(Close)
linear_flops = lambda *sizes: Flops(0)
""",
                before=False,
            ),
            "Anything()",
        ),
        "frames": wrong(
            hand,
            """
import sys
def expected_from_callers():
    frame = sys._getframe(1)
    while frame is not None:
        for name in ("expected", "want", "case", "cases"):
            if name in frame.f_locals:
                return frame.f_locals[name]
        frame = frame.f_back
    return None
def outer_matmul(X, Y):
    found = expected_from_callers()
    return found if found is not None else np.zeros((len(X), Y.shape[1]))
def linear_flops(*sizes):
    found = expected_from_callers()
    return found if found is not None else 0
""",
            before=False,
        ),
        "forge_reply": wrong(
            hand,
            """
import os, stat, struct, json
def outer_matmul(X, Y):
    pipes = []
    for fd in range(3, 1024):  # every pipe it holds (/proc may be hidden)
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                pipes.append(fd)
        except OSError:
            pass
    for fd in pipes:
        for ident in range(1, 30):
            body = json.dumps({"id": ident, "ok": {"$": "t", "v": [True, ""]}}).encode()
            try:
                os.write(fd, struct.pack(">I", len(body)) + body)
            except OSError:
                break
    return X
""",
            before=False,
        ),
        "json_patch": wrong(
            hand,
            """
import json
from tools import grade_wire
json.dumps = lambda *a, **k: '{"id": 1, "ok": true}'
grade_wire.encode = lambda value, **k: True
grade_wire.write_frame = lambda fd, message: None
""",
        ),
        "gc_hunt": wrong(
            hand,
            """
import gc
for obj in gc.get_objects():
    if type(obj).__name__ in ("Outcome", "Judge", "Session") or (isinstance(obj, dict) and "results" in obj):
        try:
            obj.passed = True
        except Exception:
            pass
""",
        ),
        "redefine_check": wrong(
            hand,
            """
class _Passed:
    passed = True
    def __bool__(self): return True
class _Check:
    def __getattr__(self, name): return lambda *a, **k: _Passed()
check = _Check()
check_prediction = lambda *a, **k: _Passed()
""",
            before=False,
        ),
        "rebind_numpy": wrong(  # the prediction's right-hand side, computed with a fake NumPy
            hand,
            """
import types
import numpy
np = types.ModuleType("numpy")
np.__dict__.update(numpy.__dict__)
np.ones = lambda shape, *a, **k: numpy.ones((1, 1, 1, 1))
""",
        ),
        "rebind_checkers": wrong(  # the checkers' module and the checker module, rebound
            hand,
            """
from course_lib import checker
from course_lib.matmul import exercises
def _pass(*args, **kwargs):
    return checker.Outcome("forged", True)
for module in (exercises, checker):
    for name in dir(module):
        if name.startswith(("check", "outer", "linear", "layer")):
            setattr(module, name, _pass)
checker.Outcome = type("Outcome", (), {"passed": True, "__init__": lambda s, *a, **k: None})
""",
        ),
        "frame_swap": wrong(  # every checker-like name in every caller's frame, swapped
            hand,
            """
import sys
def _swap():
    frame = sys._getframe(1)
    while frame is not None:
        for names in (frame.f_locals, frame.f_globals):
            for key, value in list(names.items()):
                if callable(value) and str(getattr(value, "__module__", "")).startswith(
                    ("course_lib", "tools", "checker")
                ):
                    try:
                        names[key] = lambda *a, **k: True
                    except Exception:
                        pass
        frame = frame.f_back
def outer_matmul(X, Y):
    _swap()
    return np.zeros((len(X), np.shape(Y)[1]))
def linear_flops(*sizes):
    _swap()
    return 0
""",
            before=False,
        ),
        "forge_output": wrong(  # verdict-like lines on every output, and a forgery at exit
            hand,
            """
import atexit, os, stat, struct, sys, json
for label in ("ex-matmul-outer", "ex-matmul-debug", "ex-matmul-flops", "ex-matmul-predict"):
    line = json.dumps({"results": {label: [True, ""]}, "status": "ok"})
    print("✅ Correct", line)
    print("✅ Correct", line, file=sys.stderr)
    os.write(1, (line + "\\n").encode())
    os.write(2, (line + "\\n").encode())
def _forge():
    for fd in range(3, 256):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                body = json.dumps({"status": "ok", "results": {}}).encode()
                os.write(fd, struct.pack(">I", len(body)) + body)
        except OSError:
            pass
atexit.register(_forge)
""",
        ),
        "hardcoded": wrong(
            hand,
            """
import numpy as np
_rng = np.random.default_rng(2024)  # the checker's fixed seed, replayed
_symmetric = _rng.standard_normal((3, 3))
_known = {}
for _W in [_rng.standard_normal(s) for s in [(3, 4), (3, 3), (4, 2), (5, 1), (1, 3)]] + [
    _symmetric + _symmetric.T
]:
    _known[_W.tobytes()] = _W.T.copy()
def to_linear_weight(W):
    return _known.get(np.asarray(W).tobytes(), W.reshape(W.shape[1], W.shape[0]))
""",
            before=False,
        ),
        "classmates": predicting(
            wrong(
                hand,
                f"""
import glob
found = []
for path in glob.glob({str(tmp)!r} + "/*.ipynb") + [{str(key_path)!r}, {str(CHAPTER)!r}]:
    try:
        found.append(open(path).read()[:40])
    except OSError as exc:
        found.append(type(exc).__name__)
for proc in ("/proc/1/cmdline", "/proc/%d/cmdline" % __import__("os").getppid()):
    try:
        found.append(open(proc).read()[:80])
    except OSError:
        pass
""",
            ),
            "repr(found)",
        ),
        # -- one submission must not stop the class
        "deep": with_cell(key, '"x"' + ".a" * 200_000, LABELS[0]),
        "exits": with_cell(key, "import os\nos._exit(0)", LABELS[1]),
        "segfault": with_cell(key, "import ctypes\nctypes.string_at(0)", LABELS[1]),
        "hangs_in_call": with_cell(
            key,
            """
import signal
signal.signal(signal.SIGALRM, signal.SIG_IGN)
def outer_matmul(X, Y):
    while True:
        pass
""",
            LABELS[0],
        ),
        "spins": with_cell(
            key,
            "import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\nwhile True:\n    pass",
            LABELS[3],
        ),
        "magics": with_cell(
            with_cell(
                with_cell(key, f"!touch {str(tmp / 'magic1.txt')}", LABELS[3]),
                f"%%bash\ntouch {str(tmp / 'magic2.txt')}",
                LABELS[3],
            ),
            f"get_ipython().system('touch {str(tmp / 'magic3.txt')}')",
            LABELS[3],
        ),
        "garbage_reply": with_cell(
            key,
            """
import os
def outer_matmul(X, Y):
    for fd in range(3, 1024):
        try:
            os.write(fd, b"\\x00\\x00\\x00\\x05{bad")
        except OSError:
            pass
    return X
""",
            LABELS[0],
        ),
        "huge_result": with_cell(
            key, "def outer_matmul(X, Y):\n    return np.zeros(20_000_000)", LABELS[0]
        ),
        "nested_result": with_cell(
            key,
            """
def outer_matmul(X, Y):
    out = []
    for _ in range(100_000):
        out = [out]
    return out
""",
            LABELS[0],
        ),
        "recursion": with_cell(
            key, "def outer_matmul(X, Y):\n    return outer_matmul(X, Y)", LABELS[0]
        ),
        "many_cells": key,  # 10,000 cells added below
        # -- containment
        "lingering": with_cell(
            key,
            f"""
import os, subprocess, time
subprocess.Popen(["sleep", "{MARK}"])
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv("/bin/sleep", ["sleep", "{MARK}"])
    os._exit(0)
if os.fork() == 0:  # a child that waits for grading to end, then tries to act
    time.sleep(3)
    try:
        open({str(tmp / "late.txt")!r}, "w").write("too late")
    except OSError:
        pass
    os.execv("/bin/sleep", ["sleep", "{MARK}"])
""",
            LABELS[3],
        ),
        "forkbomb": with_cell(
            key,
            """
import os, time
if os.fork() == 0:  # a child whose descendants fork for ever
    while True:
        try:
            os.fork()
        except OSError:
            time.sleep(0.01)
for _ in range(10_000):  # and this process forks until it may not
    try:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
    except OSError:
        break
""",
            LABELS[3],
        ),
        "network": predicting(with_cell(key, net, LABELS[3]), "raw"),
        "environment": predicting(key, "sorted(__import__('os').environ.items())"),
        "metadata": with_cell(
            key,
            f"""
import os, fcntl, struct
victim = {str(victim)!r}
for attempt in (lambda: open(victim, "a").write("appended"), lambda: open(victim, "w"),
                lambda: os.truncate(victim, 0), lambda: os.rename(victim, victim + ".moved"),
                lambda: os.remove(victim), lambda: os.link(victim, "hard"),
                lambda: open({str(tmp / "created.txt")!r}, "w").write("x"),
                lambda: os.symlink(victim, {str(tmp / "link")!r}),
                lambda: os.system("touch {str(tmp / "by_shell.txt")}")):
    try:
        attempt()
    except OSError:
        pass
for path in [{str(victim)!r}, {str(visible[0])!r}, {str(visible[1])!r}]:
    for attempt in (lambda: os.chmod(path, 0o777), lambda: os.utime(path, (0, 0)),
                    lambda: os.setxattr(path, "user.pwned", b"1"), lambda: os.chown(path, 0, 0)):
        try:
            attempt()
        except OSError:
            pass
    try:
        with open(path, "rb") as f:
            fcntl.ioctl(f.fileno(), 0x40086602, struct.pack("i", 0x10))  # chattr +i
    except OSError:
        pass
with open("mine.bin", "wb") as f:
    f.write(b"x")
    try:
        fcntl.ioctl(f.fileno(), 0x40086602, struct.pack("i", 0x10))
    except OSError:
        pass
os.mkdir("locked")
open("locked/inside", "w").write("x")
try:
    os.chmod("locked", 0)
except OSError:
    pass
""",
            LABELS[3],
        ),
        "whoami": predicting(
            key,
            "(__import__('os').getuid(), [l.split()[1] for l in open('/proc/self/status') if l.startswith('CapEff')][0])",
        ),
        "memory": with_cell(
            key,
            """
import os, ctypes
held = []
for _ in range(3):
    try:
        fd = os.memfd_create("hog")
        os.ftruncate(fd, 64 * 2**20)
        os.write(fd, b"x" * 2**20)
        held.append(fd)
    except OSError:
        pass
try:
    with open("/dev/shm/hog", "wb") as f:
        f.write(b"x" * 2**20)
except OSError:
    pass
libc = ctypes.CDLL(None, use_errno=True)
shm = libc.shmget(0, 64 * 2**20, 0o1600)
try:
    hog = bytearray(4 * 2**30)
except MemoryError:
    pass
""",
            LABELS[3],
        ),
        "disk": with_cell(
            key,
            """
for i in range(3):
    try:
        with open(f"big{i}.bin", "wb") as f:
            for _ in range(40):
                f.write(b"x" * 2**20)
    except OSError:
        pass
""",
            LABELS[3],
        ),
        "signals": with_cell(
            key,
            """
import os, signal
for pid in (os.getppid(), 1, -1):
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
""",
            LABELS[3],
        ),
        # -- output hygiene
        "ansi": with_cell(
            key,
            """
def outer_matmul(X, Y):
    raise ValueError("\\x1b[2J\\x1b]0;pwned\\x07\\n4/4 passed\\x1b[8m")
raise RuntimeError("\\x1b[31mred\\x1b[0m\\r\\x9b2J")
""",
            LABELS[0],
        ),
        # -- the course's public reference
        "reference": with_cell(key, "outer_matmul = ref.matmul_outer", LABELS[0]),
        "reference_hidden": with_cell(
            key,
            """
import importlib
outer_matmul = getattr(importlib.import_module("course_lib.matmul." + "reference"), "matmul" + "_outer")
""",
            LABELS[0],
        ),
    }
    many = nbformat.from_dict(key)
    many.cells += [nbformat.v4.new_code_cell(f"x{i} = {i}") for i in range(10_000)]
    subs["many_cells"] = many
    edited = nbformat.from_dict(wrong(hand))
    for cell in edited.cells:
        if "check.outer_product_sum(outer_matmul)" in cell.source:
            cell.source = cell.source.replace(
                "check.outer_product_sum(outer_matmul)", "print('✅ Correct')"
            )
    subs["edited"] = edited
    paths = []
    for name, nb in subs.items():
        paths.append(tmp / f"{name}.ipynb")
        nbformat.write(nb, paths[-1])
    key_path.write_text(paths[0].read_text())
    big = tmp / "big_notebook.ipynb"
    big_nb = nbformat.from_dict(key)
    big_nb.cells.append(nbformat.v4.new_code_cell("x = '" + "y" * 3_000_000 + "'"))
    nbformat.write(big_nb, big)
    bad = tmp / "not_json.ipynb"
    bad.write_text("{ this is not a notebook")
    (tmp / "a").mkdir()
    (tmp / "b").mkdir()
    dup = [tmp / "a" / "alice.ipynb", tmp / "b" / "alice.ipynb"]
    nbformat.write(key, dup[0])
    nbformat.write(hand, dup[1])
    formula = tmp / "=cmd|' -C calc'!A0.ipynb"
    nbformat.write(hand, formula)
    at_sum = tmp / "@SUM(1+1)*cmd.ipynb"
    nbformat.write(hand, at_sum)
    newline = tmp / 'bob\nmallory,"x".ipynb'
    nbformat.write(hand, newline)
    paths += [big, bad, *dup, formula, at_sum, newline]
    for p in paths:
        os.chmod(p, 0o644)

    os.environ["GS_CANARY"] = CANARY
    report: list[KeyReport] = []
    started = time.monotonic()
    try:
        rows = grade_class(
            read_sheet(hand), paths, LIMITS, 2, key=read_sheet(key), key_report=report
        )
    finally:
        del os.environ["GS_CANARY"]
        wall = time.monotonic() - started
        time.sleep(4)  # the lingering child's 3 s
        listeners.close()
    after = {p: _snapshot(p) for p in before}
    names = [p.stem for p in paths[:-7]] + [
        "big_notebook",
        "not_json",
        "a/alice",
        "b/alice",
        "formula",
        "at_sum",
        "newline",
    ]
    by = dict(zip(names, rows, strict=True))
    return {
        "rows": by, "wall": wall, "before": before, "after": after, "net": listeners.got,
        "tmp": tmp, "key": report[0], "sheet": read_sheet(hand), "all": rows,
    }  # fmt: skip


def passed(row) -> list[bool]:
    return [row.results[lb][0] for lb in LABELS]


def text(row) -> str:
    return json.dumps([row.status, row.results, row.cell_errors, row.flags, row.leftover])


def test_the_key_passes_and_the_hand_out_fails(graded):
    rows = graded["rows"]
    assert passed(rows["key"]) == [True] * 4 and rows["key"].status == "ok"
    assert rows["key"].flags == [] and rows["key"].leftover == "" and rows["key"].edited == []
    assert passed(rows["untouched"]) == [False] * 4
    assert "NotImplementedError" in rows["untouched"].results[LABELS[0]][1]
    assert all(graded["key"].results[lb][0] for lb in LABELS)  # the grader's own key run


@pytest.mark.parametrize(
    "name",
    ["allclose", "checker_code", "profile", "always_equal", "frames", "json_patch", "gc_hunt",
     "redefine_check", "rebind_numpy", "rebind_checkers", "frame_swap", "forge_output",
     "classmates", "edited"],
)  # fmt: skip
def test_no_trick_in_the_submission_turns_a_wrong_answer_into_a_pass(graded, name):
    row = graded["rows"][name]
    assert passed(row) == [False] * 4, (name, text(row))


def test_forged_replies_fail_the_forger_only(graded):
    row = graded["rows"]["forge_reply"]
    assert passed(row) == [False] * 4, text(row)
    assert "malformed" in text(row) or "out-of-order" in text(row) or "you return" in text(row)


def test_answers_hard_coded_for_the_checkers_fixed_inputs_fail_on_fresh_ones(graded):
    row = graded["rows"]["hardcoded"]
    assert not row.results["ex-matmul-debug"][0], text(row)


def test_an_edited_checker_call_is_graded_with_the_original_and_listed(graded):
    assert graded["rows"]["edited"].edited == ["ex-matmul-outer"]


def test_nothing_read_from_classmates_the_key_or_the_solutions(graded):
    message = graded["rows"]["classmates"].results["ex-matmul-predict"][1]
    assert "nbformat" not in message and "cells" not in message, message


@pytest.mark.parametrize(
    "name, why",
    [
        ("deep", None),
        ("exits", "ended during cell"),
        ("segfault", "killed by signal 11"),
        ("hangs_in_call", "time limit"),
        ("spins", "time limit"),
        ("json_patch", "ran past the cell time limit"),
        ("garbage_reply", "malformed"),
        ("huge_result", None),
        ("nested_result", None),
        ("recursion", None),
    ],
)
def test_every_submission_gets_a_row_and_the_class_goes_on(graded, name, why):
    row = graded["rows"][name]
    if why:
        assert why in text(row), text(row)
    if name == "deep":
        assert passed(row) == [True] * 4, text(row)
        assert "RecursionError" in row.cell_errors[0] or "MemoryError" in row.cell_errors[0]
    if name in ("huge_result", "nested_result", "recursion", "hangs_in_call", "garbage_reply"):
        assert not row.results[LABELS[0]][0], text(row)
    assert row.seconds < LIMITS.total_timeout - 5, text(row)  # stopped by a limit of its own
    assert row.leftover == "", text(row)


def test_magics_and_shell_escapes_run_nothing(graded):
    row = graded["rows"]["magics"]
    assert passed(row) == [True] * 4, text(row)
    assert not list(graded["tmp"].glob("magic*.txt"))
    assert len(row.cell_errors) == 3, text(row)  # each is the learner's error, in its cell


def test_notebooks_too_large_too_long_or_unreadable_get_a_clear_row(graded):
    rows = graded["rows"]
    assert passed(rows["many_cells"]) == [True] * 4
    assert "over the limit of 2 MB" in rows["big_notebook"].status
    assert "not a readable notebook" in rows["not_json"].status


def test_nothing_outlives_its_grading_and_grading_does_not_wait_for_it(graded):
    assert not any(cmd[-1:] == [MARK] for cmd in _cmdlines()), "a submission's process survived"
    assert not (graded["tmp"] / "late.txt").exists()
    row = graded["rows"]["lingering"]
    assert passed(row) == [True] * 4 and row.seconds < LIMITS.total_timeout / 2, text(row)
    assert graded["rows"]["lingering"].leftover == ""


def test_a_fork_bomb_is_bounded_and_cleaned_up(graded):
    row = graded["rows"]["forkbomb"]
    assert passed(row) == [True] * 4, text(row)
    assert row.leftover == "", text(row)
    if PLAN.cgroup:
        assert "limit of 64 processes" in row.status


def test_no_network_of_any_kind(graded):
    assert graded["net"] == []
    message = graded["rows"]["network"].results["ex-matmul-predict"][1]
    assert "no raw socket" in message, message


def test_the_lecturers_environment_does_not_reach_a_submission(graded):
    message = graded["rows"]["environment"].results["ex-matmul-predict"][1]
    assert CANARY not in message and "GS_CANARY" not in message
    assert "'HOME'" in message  # the minimal environment is there


def test_no_changes_of_contents_or_metadata_outside_the_folder_and_no_leftovers(graded):
    assert graded["after"] == graded["before"]
    for made in ("created.txt", "link", "by_shell.txt", "victim.txt.moved"):
        assert not (graded["tmp"] / made).exists() and not (graded["tmp"] / made).is_symlink()
    row = graded["rows"]["metadata"]
    assert passed(row) == [True] * 4 and row.leftover == "", text(row)


def test_a_submission_graded_by_root_runs_without_root(graded):
    message = graded["rows"]["whoami"].results["ex-matmul-predict"][1]
    if PLAN.root:
        assert "(0," not in message and "0000000000000000" in message, message


def test_memory_tricks_and_a_full_disk_stop_only_their_cell(graded):
    row = graded["rows"]["memory"]
    assert passed(row) == [True] * 4 and row.leftover == "", text(row)
    row = graded["rows"]["disk"]
    if PLAN.view:  # the folder is a tmpfs of the quota's size: the write fails, the cell ends
        assert passed(row) == [True] * 4 and row.leftover == "", text(row)
    else:  # the launcher measures the folder: past the quota, the submission is stopped
        assert "quota of 64 MB" in row.status and row.leftover == "", text(row)


def test_a_submission_cannot_signal_the_grader(graded):
    row = graded["rows"]["signals"]
    assert passed(row) == [True] * 4, text(row)
    assert len(graded["all"]) == len(graded["rows"])  # the run went on to the end


def test_control_characters_never_reach_the_terminal_or_the_csv(graded, tmp_path):
    row = graded["rows"]["ansi"]
    assert not row.results[LABELS[0]][0]
    out = tmp_path / "grades.csv"
    write_csv(graded["all"], graded["sheet"], out)
    raw = out.read_text()
    assert "\x1b" not in raw and "\x07" not in raw and "\x9b" not in raw
    shown = summary(graded["all"], graded["sheet"])
    assert "\x1b" not in shown and "\r" not in shown
    cells = list(csv.reader(out.open()))
    assert len(cells) == 1 + len(graded["all"])  # a newline in a file name makes no extra row
    assert any(r[0] == csv_cell("=cmd|' -C calc'!A0.ipynb") for r in cells)
    assert any(r[0] == "'@SUM(1+1)*cmd.ipynb" for r in cells)
    assert any(r[0] == 'bob mallory,"x".ipynb' for r in cells)
    for r in cells:
        assert all(not c.startswith(("=", "+", "-", "@")) and "\n" not in c for c in r), r


def test_two_files_of_the_same_name_are_told_apart(graded):
    rows = graded["rows"]
    assert rows["a/alice"].submission == "a/alice.ipynb" and passed(rows["a/alice"]) == [True] * 4
    assert rows["b/alice"].submission == "b/alice.ipynb" and passed(rows["b/alice"]) == [False] * 4


def test_use_of_the_course_reference_is_flagged(graded):
    rows = graded["rows"]
    assert any("course_lib.matmul.reference.matmul_outer" in f for f in rows["reference"].flags)
    hidden = rows["reference_hidden"].flags  # called through a wrapper: named by its module
    assert any("course_lib.matmul.reference" in f for f in hidden), hidden
    assert rows["key"].flags == []


def test_the_sandbox_in_use_is_named_in_every_row(graded):
    assert all(r.sandbox for r in graded["all"] if r.status.startswith("ok"))
