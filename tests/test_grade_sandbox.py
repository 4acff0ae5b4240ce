"""The grader's sandbox layers (tools/sandbox.py), each tried in a forked child of the tests.

Each layer is tested where this machine has it and skipped where it has not (a CI runner
without Landlock, seccomp for its architecture, namespaces or cgroups still passes): what
``./course grade --check-sandbox`` reports on a machine comes from the same functions.
"""

from __future__ import annotations

import errno
import os
import socket
import time
from pathlib import Path

import pytest

from tools import sandbox as sb

ROOT = Path(__file__).resolve().parent.parent
ROOT_USER = os.geteuid() == 0


def in_child(fn) -> dict:
    """Run ``fn()`` in a forked child; return the dict it returns (as JSON)."""
    import json

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            out = fn()
        except BaseException as exc:  # report, never fall back into pytest
            out = {"error": f"{type(exc).__name__}: {exc}"}
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return json.loads(data)


def attempt(fn) -> str:
    try:
        fn()
        return "allowed"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))


needs_landlock = pytest.mark.skipif(sb.landlock_abi() < 1, reason="no Landlock on this kernel")
needs_seccomp = pytest.mark.skipif(sb.seccomp_arch() is None, reason="no seccomp filter here")


@needs_landlock
def test_landlock_confines_writes_to_the_folder_and_reads_to_the_course(tmp_path):
    folder, secret = tmp_path / "work", tmp_path / "secret.txt"
    folder.mkdir()
    secret.write_text("the key")

    def child():
        abi = sb.landlock([str(folder), os.devnull], sb.readable_paths())
        return {
            "abi": abi,
            "write inside": attempt(lambda: (folder / "a.txt").write_text("x")),
            "write outside": attempt(lambda: (tmp_path / "b.txt").write_text("x")),
            "read the secret": attempt(lambda: secret.read_text()),
            "read a solution": attempt(lambda: (ROOT / "notebooks" / "01_matmul.py").read_text()),
            "list the notebooks": attempt(lambda: os.listdir(ROOT / "notebooks")),
            "read the library": attempt(lambda: (ROOT / "course_lib" / "checker.py").read_text()),
        }

    found = in_child(child)
    assert found["abi"] >= 1
    assert found["write inside"] == "allowed" and found["read the library"] == "allowed"
    assert found["write outside"] == "EACCES" and not (tmp_path / "b.txt").exists()
    assert found["read the secret"] == "EACCES" and found["read a solution"] == "EACCES"
    assert found["list the notebooks"] == "EACCES"


@needs_seccomp
def test_seccomp_refuses_sockets_metadata_memfd_and_namespaces(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("x")
    mode = victim.stat().st_mode

    def child():
        sb.seccomp_filter(sb.seccomp_arch())
        return {
            "udp": attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM)),
            "unix": attempt(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)),
            "raw": attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, 1)),
            "socketpair": attempt(lambda: socket.socketpair()),
            "chmod": attempt(lambda: os.chmod(victim, 0o777)),
            "utime": attempt(lambda: os.utime(victim, (0, 0))),
            "xattr": attempt(lambda: os.setxattr(victim, "user.x", b"1")),
            "memfd": attempt(lambda: os.memfd_create("x")),
            "unshare": attempt(lambda: sb.unshare(sb.CLONE_NEWUSER)),
            "fork": attempt(lambda: os.waitpid(os.fork() or os._exit(0), 0)),
            "read": attempt(lambda: victim.read_text()),
        }

    found = in_child(child)
    for name in ("udp", "unix", "raw"):
        assert found[name] == "EACCES", (name, found)
    for name in ("chmod", "utime", "xattr", "memfd", "unshare"):
        assert found[name] == "EPERM", (name, found)
    assert found["socketpair"] == found["fork"] == found["read"] == "allowed"
    assert victim.stat().st_mode == mode


@pytest.mark.skipif(not ROOT_USER, reason="changing user needs root")
def test_root_drops_to_its_own_user_with_no_capability_left(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("x")

    def child():
        sb.drop_root(sb.UID_BASE + 1)
        with open("/proc/self/status") as f:
            caps = [line.split()[1] for line in f if line.startswith("Cap")]
        return {
            "uid": os.getuid(),
            "caps": caps,
            "chmod": attempt(lambda: os.chmod(victim, 0o777)),
            "setuid back": attempt(lambda: os.setuid(0)),
        }

    found = in_child(child)
    assert found["uid"] == sb.UID_BASE + 1
    assert all(int(c, 16) == 0 for c in found["caps"][1:])  # CapInh stays 0 too
    assert found["chmod"] in ("EPERM", "EACCES") and found["setuid back"] == "EPERM"


def test_the_subreaper_kills_what_setsid_and_double_forks_left_behind():
    marker = str(20_000 + os.getpid() % 10_000)

    def child():
        sb._prctl(sb.PR_SET_CHILD_SUBREAPER, 1)
        pid = os.fork()
        if pid == 0:  # a middle process that starts a new session and leaves an orphan
            os.setsid()
            if os.fork() == 0:
                os.execv("/bin/sleep", ["sleep", marker])
            os._exit(0)
        os.waitpid(pid, 0)
        time.sleep(0.2)
        orphans = len(sb.children_of(os.getpid()))
        left = sb.kill_children()
        return {"orphans": orphans, "left": left}

    found = in_child(child)
    assert found == {"orphans": 1, "left": 0}
    time.sleep(0.1)
    assert not any(_cmdline(p) == ["sleep", marker] for p in os.listdir("/proc") if p.isdigit())


def _cmdline(pid: str) -> list[str]:
    try:
        return [p.decode() for p in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if p]
    except OSError:
        return []


def test_a_cgroup_bounds_processes_and_kills_them_all():
    group = sb.Cgroup.create(f"grade-test-{os.getpid()}", 256 * 2**20, 8)
    if group is None:
        pytest.skip("no memory and pids cgroup this process may create")
    try:

        def child():
            group.join(os.getpid())
            made = 0
            for _ in range(20):
                try:
                    if os.fork() == 0:
                        os.closerange(3, 1024)  # not the pipe to the test
                        time.sleep(30)
                        os._exit(0)
                    made += 1
                except OSError:
                    break
            return {"made": made}

        found = in_child(child)
        assert found["made"] < 8 and group.pids_exhausted()
        assert group.kill_all() == 0 and group.procs() == []
    finally:
        group.kill_all()
        group.remove()


def test_the_plan_says_what_it_uses_and_refuses_only_with_a_reason():
    plan = sb.plan()
    lines = sb.describe(plan)
    assert len(lines) >= 10 and all(how for _, _, how in lines)
    if plan.refused:
        assert len(plan.refused) > 40
    env = sb.minimal_environment("/tmp/x")
    assert env["HOME"] == "/tmp/x" and "PATH" in env and len(env) < 16
    paths = sb.readable_paths()
    assert str(ROOT / "course_lib") in paths and not any("notebooks" in p for p in paths)
    assert str(ROOT) not in paths
