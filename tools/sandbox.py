"""The confinement of a graded submission, built from what the machine offers, found at run time.

:mod:`tools.grade_runner` runs one submission in three processes. The *launcher* (trusted)
sets up what must be set up from outside and stays outside; on Linux it makes a new PID
namespace, whose first process, *init* (trusted), builds the submission's view of the file
system and starts the *submission's process*, which confines itself before it runs the first
line of the learner's code. Each layer below is used where this machine has it
(:func:`plan` decides, :func:`describe` says what it decided, ``./course grade
--check-sandbox`` prints it after trying the plan on a probe):

* **lifetime**: a PID namespace (as root, or in a user namespace): when init ends, the kernel
  kills every process of the namespace, whatever ``setsid`` or double forks they did. Where
  there is none, the launcher is a child subreaper (``PR_SET_CHILD_SUBREAPER``) that kills
  every process left below it, and a cgroup or a per-submission user id lets it find them;
* **processes**: a ``pids`` cgroup, or ``RLIMIT_NPROC`` for a dedicated user id (a fork bomb
  stops at :data:`PIDS_MAX` processes);
* **memory**: ``RLIMIT_AS`` per process, and a ``memory`` cgroup for all of them together
  (it counts shared memory and files in memory too); ``memfd_create`` and System V shared
  memory are refused;
* **user**: run as root, the grader runs the submission as a user id of its own
  (:data:`UID_BASE` + the launcher's process id) with no capabilities, or refuses;
* **network**: none of any kind: a network namespace with no interface up, and a seccomp
  filter that refuses ``socket()`` (TCP, UDP, raw, unix, netlink); Landlock also refuses TCP;
* **files**: a private root (a mount namespace) that holds only what Python, the course's
  libraries and data need, read-only, and the submission's own folder, a size-limited
  ``tmpfs`` (the disk quota) that disappears with the namespace; so the other submissions, the
  key, the course's notebooks (and their solutions), the grader's files and home folders are
  not there to read. Without a mount namespace, Landlock restricts reading to the same paths
  and writing to the folder, whose size the launcher watches;
* **metadata**: everything outside the folder is read-only (``EROFS``), and seccomp refuses
  ``chmod``, ``chown``, ``utime``, extended attributes and ``chattr`` everywhere;
* **the rest of the kernel**: seccomp refuses mounting, namespaces, ``ptrace``, keyrings,
  ``bpf``, ``io_uring``, kernel modules, ``reboot`` and the like; ``no_new_privs`` is set;
* **environment**: a minimal one, set by the grader (no variable of the lecturer's).
"""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import json
import os
import platform
import pwd
import resource
import shutil
import signal
import stat
import struct
import sys
import time
from pathlib import Path
from typing import Any

__all__ = [
    "Plan",
    "PIDS_MAX",
    "UID_BASE",
    "describe",
    "landlock_abi",
    "plan",
]

ROOT = Path(__file__).resolve().parent.parent
#: The user ids submissions run as when the grader runs as root: this plus the launcher's pid.
UID_BASE = 2_000_000_000
#: Processes one submission may have at once.
PIDS_MAX = 64

# -- the kernel's numbers -----------------------------------------------------------------------

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
CLONE_NEWCGROUP, CLONE_NEWTIME = 0x02000000, 0x00000080
_NS_FLAGS = (
    CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET
    | CLONE_NEWCGROUP | CLONE_NEWTIME
)  # fmt: skip
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP = 1, 4, 24
PR_SET_NO_NEW_PRIVS, PR_SET_CHILD_SUBREAPER, PR_SET_SECCOMP = 38, 36, 22
PR_SET_SECUREBITS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 28, 47, 4
SECCOMP_MODE_FILTER = 2
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446  # the same on every arch
_SYS_MOUNT_SETATTR = 442
_RULE_PATH_BENEATH = 1

_LL_EXECUTE, _LL_WRITE_FILE, _LL_READ_FILE, _LL_READ_DIR = 1, 2, 4, 8
_LL_READ = _LL_EXECUTE | _LL_READ_FILE | _LL_READ_DIR
_LL_CHANGE = {  # rights that change something, by the ABI that brought them
    1: _LL_WRITE_FILE | (1 << 4) | (1 << 5) | sum(1 << b for b in range(6, 13)),
    2: 1 << 13,  # REFER: linking or renaming across folders
    3: 1 << 14,  # TRUNCATE
    5: 1 << 15,  # IOCTL_DEV
}
_NET_TCP = (1 << 0) | (1 << 1)  # BIND_TCP, CONNECT_TCP (ABI 4)
_SCOPED = (1 << 0) | (1 << 1)  # abstract unix sockets, signals (ABI 6)

# syscalls the submission may not make, by name; numbers per architecture below
_DENIED = (
    "chmod fchmod fchmodat fchmodat2 chown fchown lchown fchownat utime utimes futimesat "
    "utimensat setxattr lsetxattr fsetxattr setxattrat removexattr lremovexattr fremovexattr "
    "removexattrat memfd_create memfd_secret shmget msgget semget mq_open mount umount2 "
    "pivot_root chroot mount_setattr move_mount open_tree fsopen fsconfig fsmount fspick unshare "
    "setns reboot init_module finit_module delete_module kexec_load kexec_file_load ptrace "
    "process_vm_readv process_vm_writev keyctl add_key request_key bpf perf_event_open "
    "userfaultfd io_uring_setup io_uring_enter io_uring_register open_by_handle_at "
    "name_to_handle_at swapon swapoff syslog acct settimeofday clock_settime clock_adjtime "
    "adjtimex sethostname setdomainname quotactl mknod mknodat fanotify_init personality vhangup "
    "iopl ioperm kcmp pidfd_getfd process_madvise lookup_dcookie socket connect"
).split()
_SYSCALLS = {
    "x86_64": (
        0xC000003E,
        dict(
            socket=41, connect=42, chmod=90, fchmod=91, chown=92, fchown=93, lchown=94,
            fchmodat=268, fchownat=260, fchmodat2=452, utime=132, utimes=235, futimesat=261,
            utimensat=280, setxattr=188, lsetxattr=189, fsetxattr=190, setxattrat=463,
            removexattr=197, lremovexattr=198, fremovexattr=199, removexattrat=466, ioctl=16,
            memfd_create=319, memfd_secret=447, shmget=29, msgget=68, semget=64, mq_open=240,
            mount=165, umount2=166, pivot_root=155, chroot=161, mount_setattr=442,
            move_mount=429, open_tree=428, fsopen=430, fsconfig=431, fsmount=432, fspick=433,
            unshare=272, setns=308, clone=56, clone3=435, reboot=169, init_module=175,
            finit_module=313, delete_module=176, kexec_load=246, kexec_file_load=320,
            ptrace=101, process_vm_readv=310, process_vm_writev=311, keyctl=250, add_key=248,
            request_key=249, bpf=321, perf_event_open=298, userfaultfd=323,
            io_uring_setup=425, io_uring_enter=426, io_uring_register=427,
            open_by_handle_at=304, name_to_handle_at=303, swapon=167, swapoff=168,
            syslog=103, acct=163, settimeofday=164, clock_settime=227, clock_adjtime=305,
            adjtimex=159, sethostname=170, setdomainname=171, quotactl=179, mknod=133,
            mknodat=259, fanotify_init=300, personality=135, vhangup=153, iopl=172, ioperm=173,
            kcmp=312, pidfd_getfd=438, process_madvise=440, lookup_dcookie=212,
        ),
    ),
    "aarch64": (
        0xC00000B7,
        dict(
            socket=198, connect=203, fchmod=52, fchmodat=53, fchownat=54, fchown=55,
            fchmodat2=452, utimensat=88, setxattr=5, lsetxattr=6, fsetxattr=7, setxattrat=463,
            removexattr=14, lremovexattr=15, fremovexattr=16, removexattrat=466, ioctl=29,
            memfd_create=279, memfd_secret=447, shmget=194, msgget=186, semget=190, mq_open=180,
            mount=40, umount2=39, pivot_root=41, chroot=51, mount_setattr=442, move_mount=429,
            open_tree=428, fsopen=430, fsconfig=431, fsmount=432, fspick=433, unshare=97,
            setns=268, clone=220, clone3=435, reboot=142, init_module=105, finit_module=273,
            delete_module=106, kexec_load=104, kexec_file_load=294, ptrace=117,
            process_vm_readv=270, process_vm_writev=271, keyctl=219, add_key=217,
            request_key=218, bpf=280, perf_event_open=241, userfaultfd=282,
            io_uring_setup=425, io_uring_enter=426, io_uring_register=427,
            open_by_handle_at=265, name_to_handle_at=264, swapon=224, swapoff=225, syslog=116,
            acct=89, settimeofday=170, clock_settime=112, clock_adjtime=266, adjtimex=171,
            sethostname=161, setdomainname=162, quotactl=60, mknodat=33, fanotify_init=262,
            personality=92, vhangup=58, kcmp=272, pidfd_getfd=438, process_madvise=440,
        ),
    ),
}  # fmt: skip
# ioctl requests that change a file's flags or attributes (chattr +i, +a, project ids)
_IOCTL_DENIED = (0x40086602, 0x40046602, 0x401C5820)  # FS_IOC_SETFLAGS, its 32-bit, FSSETXATTR


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def _prctl(option: int, arg2: int = 0, arg3: int = 0, what: str = "prctl") -> None:
    _check(
        _libc().prctl(option, ctypes.c_ulong(arg2), ctypes.c_ulong(arg3), ctypes.c_ulong(0),
                      ctypes.c_ulong(0)),
        what,
    )  # fmt: skip


def landlock_abi() -> int:
    """The Landlock ABI version this kernel offers, 0 where there is none (or not Linux)."""
    if platform.system() != "Linux":
        return 0
    try:
        version = _libc().syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    except (OSError, AttributeError):
        return 0
    return max(int(version), 0)


_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}


def _machine() -> str:
    machine = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)


def seccomp_arch() -> str | None:
    """The architecture whose syscall numbers the seccomp filter knows, or None."""
    if platform.system() != "Linux":
        return None
    machine = _machine()
    if machine not in _SYSCALLS or struct.calcsize("P") != 8:
        return None
    try:
        with open("/proc/self/status") as f:
            if not any(line.startswith("Seccomp:") for line in f):
                return None
    except OSError:
        return None
    return machine


def _cap_eff() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except OSError:
        pass
    return 0


# -- namespaces ---------------------------------------------------------------------------------


def unshare(flags: int) -> None:
    _check(_libc().unshare(ctypes.c_int(flags)), "unshare")


def map_user(uid: int, gid: int) -> None:
    """In a new user namespace: keep the same ``uid``/``gid`` in it (not root there; the
    capabilities its creator holds in it are dropped before the submission runs)."""
    with open("/proc/self/setgroups", "w") as f:
        f.write("deny")
    with open("/proc/self/uid_map", "w") as f:
        f.write(f"{uid} {uid} 1")
    with open("/proc/self/gid_map", "w") as f:
        f.write(f"{gid} {gid} 1")


def _mount(
    source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None
) -> None:
    libc = _libc()
    enc = lambda s: None if s is None else os.fsencode(s)  # noqa: E731
    _check(
        libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
        f"mount {source} on {target}",
    )


def _try_namespaces(userns: bool) -> str | None:
    """Fork a child that makes the namespaces the launcher would and mounts a tmpfs and a
    fresh /proc in them; None if that worked, else why not."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report and leave without running any Python clean-up
        os.close(read_end)
        why = b""
        try:
            uid, gid = os.getuid(), os.getgid()
            unshare(CLONE_NEWPID | (CLONE_NEWUSER if userns else 0))
            if userns:
                map_user(uid, gid)
            child = os.fork()
            if child == 0:
                code = 0
                try:
                    unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS)
                    _mount(None, "/", None, MS_REC | MS_PRIVATE)
                    _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=1m")
                    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
                    with open("/proc/self/stat") as f:
                        if f.read().split()[0] != "1":
                            code = 3
                except OSError as exc:
                    os.write(write_end, str(exc).encode()[:200])
                    code = 2
                os._exit(code)
            _, status = os.waitpid(child, 0)
            if status:
                why = b"a mount in the new namespaces failed"
        except OSError as exc:
            why = str(exc).encode()[:200]
        os.write(write_end, why)
        os._exit(0)
    os.close(write_end)
    chunks = []
    while True:
        chunk = os.read(read_end, 4096)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read_end)
    os.waitpid(pid, 0)
    text = b"".join(chunks).decode(errors="replace").strip()
    return text or None


# -- cgroups ------------------------------------------------------------------------------------


def _own_cgroups() -> dict[str, str]:
    """controller (or "" for cgroup v2) -> this process's cgroup path."""
    out: dict[str, str] = {}
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                for c in controllers.split(",") if controllers else [""]:
                    out[c] = path
    except OSError:
        pass
    return out


def _cgroup_mounts() -> dict[str, str]:
    """controller (or "" for v2) -> where its hierarchy is mounted."""
    out: dict[str, str] = {}
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, right = line.split(" - ", 1)
                fstype, _, options = right.split()[:3]
                mount_point = left.split()[4]
                if fstype == "cgroup2":
                    out.setdefault("", mount_point)
                elif fstype == "cgroup":
                    for opt in options.split(","):
                        if opt in ("memory", "pids"):
                            out.setdefault(opt, mount_point)
    except OSError:
        pass
    return out


@dataclasses.dataclass
class Cgroup:
    """One submission's cgroups: ``dirs`` maps "memory"/"pids" (v1) or "" (v2) to a folder."""

    version: int
    dirs: dict[str, str]

    @classmethod
    def create(cls, name: str, memory_bytes: int, pids: int) -> Cgroup | None:
        """A new cgroup below this process's own, with the limits set, or None where the
        machine offers none this process may create."""
        own, mounts = _own_cgroups(), _cgroup_mounts()
        made: dict[str, str] = {}
        try:
            if "memory" in mounts and "pids" in mounts and "memory" in own and "pids" in own:
                for c in ("memory", "pids"):
                    d = os.path.join(mounts[c], own[c].lstrip("/"), name)
                    os.mkdir(d)
                    made[c] = d
                group = cls(1, made)
                group._write("memory", "memory.limit_in_bytes", memory_bytes)
                if os.path.exists(os.path.join(made["memory"], "memory.memsw.limit_in_bytes")):
                    try:
                        group._write("memory", "memory.memsw.limit_in_bytes", memory_bytes)
                    except OSError:
                        pass
                group._write("pids", "pids.max", pids)
                return group
            if "" in mounts and "" in own:
                parent = os.path.join(mounts[""], own[""].lstrip("/"))
                with open(os.path.join(parent, "cgroup.subtree_control")) as f:
                    enabled = f.read().split()
                if not {"memory", "pids"} <= set(enabled):
                    return None
                d = os.path.join(parent, name)
                os.mkdir(d)
                made[""] = d
                group = cls(2, made)
                group._write("", "memory.max", memory_bytes)
                try:
                    group._write("", "memory.swap.max", 0)
                except OSError:
                    pass
                group._write("", "pids.max", pids)
                return group
        except OSError:
            for d in made.values():
                try:
                    os.rmdir(d)
                except OSError:
                    pass
        return None

    def _write(self, controller: str, name: str, value: Any) -> None:
        with open(os.path.join(self.dirs[controller], name), "w") as f:
            f.write(str(value))

    def _read(self, controller: str, name: str) -> str:
        try:
            with open(os.path.join(self.dirs[controller], name)) as f:
                return f.read()
        except OSError:
            return ""

    def join(self, pid: int) -> None:
        for c in self.dirs:
            self._write(c, "cgroup.procs", pid)

    def memory_usage(self) -> int:
        if self.version == 1:
            return int(self._read("memory", "memory.usage_in_bytes") or 0)
        return int(self._read("", "memory.current") or 0)

    def set_memory(self, limit: int) -> None:
        if self.version == 1:  # memsw (memory + swap) may never be below the memory limit
            names = ["memory.limit_in_bytes"]
            if os.path.exists(os.path.join(self.dirs["memory"], "memory.memsw.limit_in_bytes")):
                names.append("memory.memsw.limit_in_bytes")
            current = int(self._read("memory", "memory.limit_in_bytes") or 0)
            for name in names if limit < current else names[::-1]:
                self._write("memory", name, limit)
        else:
            self._write("", "memory.max", limit)

    def out_of_memory(self) -> bool:
        if self.version == 1:
            return self._read("memory", "memory.failcnt").strip() not in ("", "0")
        for line in self._read("", "memory.events").splitlines():
            key, _, value = line.partition(" ")
            if key in ("oom", "oom_kill", "max") and value.strip() not in ("", "0"):
                return True
        return False

    def pids_exhausted(self) -> bool:
        if self.version == 1:
            events = self._read("pids", "pids.events")
        else:
            events = self._read("", "pids.events")
        return any(line.split()[-1] != "0" for line in events.splitlines() if line.strip())

    def procs(self) -> list[int]:
        c = "pids" if self.version == 1 else ""
        return [int(p) for p in self._read(c, "cgroup.procs").split()]

    def kill_all(self) -> int:
        """Kill every process in the group; the number still alive afterwards."""
        if self.version == 2 and os.path.exists(os.path.join(self.dirs[""], "cgroup.kill")):
            try:
                self._write("", "cgroup.kill", 1)
            except OSError:
                pass
        for _ in range(200):
            procs = self.procs()
            if not procs:
                return 0
            for pid in procs:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.01)
        return len(self.procs())

    def remove(self) -> None:
        for d in self.dirs.values():
            for _ in range(50):
                try:
                    os.rmdir(d)
                    break
                except OSError as exc:
                    if exc.errno == errno.ENOENT:
                        break
                    time.sleep(0.02)


# -- processes ----------------------------------------------------------------------------------


def children_of(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                data = f.read()
        except OSError:
            continue
        fields = data[data.rfind(")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) == pid:
            out.append(int(entry))
    return out


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process (from /proc)."""
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    data = f.read()
                out[int(entry)] = int(data[data.rfind(")") + 2 :].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    return out


def descendants(root: int, parents: dict[int, int] | None = None) -> list[int]:
    parents = _parents() if parents is None else parents
    below: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        below.setdefault(ppid, []).append(pid)
    out, todo = [], list(below.get(root, []))
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += below.get(pid, [])
    return out


def kill_children(rounds: int = 200, keep: set[int] = frozenset()) -> int:
    """Kill every process below this one but ``keep`` (and what is below those it keeps is
    left alone too) and reap them; the number still alive. Every descendant is stopped
    first, until a scan finds none running, so that a fork bomb cannot outrun the killing;
    this process should be a child subreaper, so that orphans come back to it."""
    me = os.getpid()

    def mine() -> list[int]:
        parents = _parents()
        kept = set(keep)
        for k in keep:
            kept.update(descendants(k, parents))
        return [p for p in descendants(me, parents) if p not in kept]

    stopped: set[int] = set()
    for _ in range(rounds):
        found = [p for p in mine() if p not in stopped]
        if not found:
            break
        for pid in found:
            try:
                os.kill(pid, signal.SIGSTOP)
            except OSError:
                pass
        stopped.update(found)
    for _ in range(rounds):
        found = mine()
        if not found:
            return 0
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for pid in found:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
        time.sleep(0.005)
    return len(mine())


def kill_user(uid: int) -> None:
    """Kill every process of ``uid`` (root only): a child takes the uid and signals -1."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            for _ in range(20):
                try:
                    os.kill(-1, signal.SIGKILL)
                except ProcessLookupError:
                    break
                except OSError:
                    break
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def processes_of(uid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    out.append(int(entry))
            except OSError:
                pass
    return out


def count_processes_of(uid: int) -> int:
    return len(processes_of(uid))


# -- the plan -----------------------------------------------------------------------------------


@dataclasses.dataclass
class Plan:
    """What the grader will use on this machine (see the module docstring)."""

    linux: bool = False
    root: bool = False
    uid: int | None = None  # the user id submissions run as (root only)
    namespaces: bool = False  # PID, mount (private root), network, IPC, UTS
    userns: bool = False  # ... inside a user namespace (a grader that is not root)
    cgroup: int = 0  # 1 or 2 where a memory and pids cgroup is made per submission
    landlock: int = 0  # the ABI
    seccomp: str | None = None  # the architecture of the filter
    subreaper: bool = False
    bwrap: str | None = None  # found on the PATH
    wrapper: str | None = None  # "bwrap" where it makes the namespaces the kernel lets us not
    refused: str | None = None  # why grading must not go on here
    notes: list[str] = dataclasses.field(default_factory=list)

    @property
    def view(self) -> bool:
        """A private root (own namespaces, or bwrap's)."""
        return self.namespaces or self.wrapper == "bwrap"

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> Plan:
        return cls(**data)


_PLAN: Plan | None = None


def plan(
    *, sandbox: bool = True, namespaces: bool = True, cgroups: bool = True, bwrap: bool = True
) -> Plan:
    """Find out what this machine offers and decide what to use (cached per process).

    Namespaces are made by the grader itself where the kernel lets it (root, or unprivileged
    user namespaces), else by ``bwrap`` where that works (e.g. where AppArmor allows user
    namespaces to bwrap only). ``namespaces=False`` leaves the grader's own namespaces out
    (with ``bwrap=False`` too, all of them), ``cgroups=False`` the cgroups: the tests use them
    to exercise the fallbacks. ``sandbox=False`` (``--no-sandbox``) keeps the resource limits,
    the process clean-up and the minimal environment only.
    """
    global _PLAN
    key = (sandbox, namespaces, cgroups, bwrap)
    if _PLAN is not None and getattr(_PLAN, "_key", None) == key:
        return _PLAN
    p = Plan()
    p.linux = platform.system() == "Linux"
    p.root = hasattr(os, "geteuid") and os.geteuid() == 0
    p.bwrap = shutil.which("bwrap")
    if not p.linux:
        if sandbox:
            p.refused = (
                f"{platform.system()} offers none of the Linux sandbox layers (namespaces, "
                "Landlock, seccomp): grade in a Linux container or VM, or pass --no-sandbox "
                "(resource limits only)"
            )
        _PLAN = p
        p._key = key  # type: ignore[attr-defined]
        return p
    p.subreaper = True
    if sandbox:
        p.landlock = landlock_abi()
        p.seccomp = seccomp_arch()
        if namespaces and _machine() not in _PIVOT_ROOT:
            p.notes.append(f"no namespaces: the private root is not written for {_machine()}")
        elif namespaces:
            why = _try_namespaces(userns=not p.root)
            if why is None:
                p.namespaces, p.userns = True, not p.root
            else:
                p.notes.append(f"no namespaces of the grader's own here ({why})")
        if not p.namespaces and bwrap and p.bwrap and not p.root:
            why = _try_bwrap(p.bwrap)
            if why is None:
                p.wrapper = "bwrap"
            else:
                p.notes.append(f"bwrap does not work here ({why})")
    if p.root:
        if not (_cap_eff() >> 7) & 1:  # CAP_SETUID
            p.refused = (
                "the grader runs as root without the capability to change user (CAP_SETUID), "
                "so submissions would run as root: run it as an ordinary user"
            )
        p.uid = UID_BASE  # + the launcher's pid, at run time
        if not p.view:
            blocked = _unreadable_for_others(_needed_paths())
            if blocked:
                p.refused = (
                    f"the grader runs as root, submissions must run as another user, and that "
                    f"user cannot read {blocked} (no mount namespace here to show it to them): "
                    "run the grader as an ordinary user, or install Python where every user "
                    "can read it"
                )
    if sandbox and cgroups:
        probe = Cgroup.create(f"grade-probe-{os.getpid()}", 2**30, PIDS_MAX)
        if probe is not None:
            p.cgroup = probe.version
            probe.remove()
    if sandbox and not (p.view or p.landlock):
        p.refused = (
            "this kernel has neither namespaces the grader may use nor Landlock (Linux 5.13 or "
            "newer), so a submission could write anywhere your user can: grade in a container "
            "or VM, or pass --no-sandbox (resource limits only)"
        )
    _PLAN = p
    p._key = key  # type: ignore[attr-defined]
    return p


def _try_bwrap(path: str) -> str | None:
    """None if bwrap can make its namespaces here (it runs ``true`` in them), else why not."""
    import subprocess

    try:
        proc = subprocess.run(
            [path, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--proc", "/proc",
             "--dev", "/dev", "--", "true"],
            capture_output=True, timeout=20, check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)[:200]
    return None if proc.returncode == 0 else proc.stderr.decode(errors="replace").strip()[:200]


def bwrap_command(path: str, folder: str, disk_mb: int, readable: list[str]) -> list[str]:
    """bwrap's arguments for a submission: every namespace, no capability, a root that holds
    ``readable`` read-only, a fresh /proc and /dev, and ``folder`` as a tmpfs of ``disk_mb``."""
    args = [path, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    args += ["--hostname", "sandbox"]
    for p in readable:
        if os.path.islink(p) and os.path.dirname(p) == "/":
            args += ["--symlink", os.readlink(p), p]
        else:
            args += ["--ro-bind", p, p]
    args += ["--proc", "/proc", "--dev", "/dev", "--size", str(disk_mb * 2**20), "--tmpfs", folder]
    return args + ["--chdir", folder]


def _needed_paths() -> list[str]:
    """The paths the submission's Python must read (besides the system's own folders)."""
    from course_lib.paths import cache_dir

    out = [sys.base_prefix, sys.prefix, str(ROOT / "course_lib"), str(ROOT / "tools")]
    out += [str(ROOT / "data"), str(ROOT / "pyproject.toml")]
    try:
        out.append(str(cache_dir()))
    except OSError:
        pass
    # the library folders on sys.path (never the repository itself, the current folder or a
    # folder above them: those hold the notebooks and their solutions)
    prefixes = {os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)}
    for p in sys.path:
        real = os.path.realpath(p) if p else ""
        if not real or not os.path.isdir(real):
            continue
        inside = any(real == q or real.startswith(q + os.sep) for q in prefixes)
        if inside or {"site-packages", "dist-packages"} & set(Path(real).parts):
            out.append(p)
    seen: list[str] = []
    for p in out:
        if os.path.exists(p) and p not in seen:
            seen.append(p)
    return seen


_SYSTEM_PATHS = [
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt",
    "/sys/devices/system/cpu",
]  # fmt: skip


def readable_paths() -> list[str]:
    """What a submission may read: the system's programs and libraries, Python, the course's
    code, data and cache. Not: home folders, the repository's notebooks, other submissions."""
    paths = [p for p in _SYSTEM_PATHS if os.path.lexists(p)] + _needed_paths()
    out: list[str] = []
    for p in sorted(set(paths), key=len):
        if not any(p == q or p.startswith(q.rstrip("/") + "/") for q in out):
            out.append(p)
    return out


def _unreadable_for_others(paths: list[str]) -> str | None:
    """The first path that a user other than its owner cannot reach and read, or None."""
    for path in paths:
        parts = Path(path).parts
        for i in range(1, len(parts) + 1):
            p = os.path.join(*parts[:i])
            try:
                st = os.stat(p)
            except OSError:
                break
            need = stat.S_IXOTH if stat.S_ISDIR(st.st_mode) or i < len(parts) else stat.S_IROTH
            if not st.st_mode & need:
                return p
    return None


def describe(p: Plan, limits: dict[str, Any] | None = None) -> list[tuple[str, bool, str]]:
    """(protection, in place, how) for every layer, as ``--check-sandbox`` prints them."""
    limits = limits or {}
    lines: list[tuple[str, bool, str]] = []
    ns = p.view
    made = "bwrap's" if p.wrapper == "bwrap" and not p.namespaces else "its"

    def add(what: str, ok: bool, how: str) -> None:
        lines.append((what, ok, how))

    add(
        "verdicts computed outside the submission",
        True,
        "the grader's own process runs the checkers; the submission's process only answers "
        "calls with plain data",
    )
    if p.root:
        add("no root in the submission", p.refused is None, "runs as its own user id "
            f"(from {UID_BASE}) with no capabilities and no_new_privs")  # fmt: skip
    else:
        add(
            "no root in the submission",
            True,
            "the grader is not root; the submission runs as the grader's user"
            + (
                " (root only inside its own user namespace, all capabilities dropped)"
                if p.userns
                else ""
            ),
        )
    add(
        "nothing outlives its grading",
        p.linux,
        (f"{made} PID namespace: the kernel kills every process in it when grading ends"
         if ns else "a child subreaper kills every process left below the launcher"
         + (", and a cgroup finds the rest" if p.cgroup else "")
         + (", and its own user id" if p.root else ""))
        if p.linux else "a process group only (setsid escapes it)",
    )  # fmt: skip
    add(
        "fork bomb bounded",
        bool(p.cgroup or p.root or p.linux),
        f"at most {PIDS_MAX} processes: "
        + ("a pids cgroup" if p.cgroup else "RLIMIT_NPROC for its own user id" if p.root
           else "RLIMIT_NPROC over the user's current count"),
    )  # fmt: skip
    add(
        "memory bounded",
        True,
        "RLIMIT_AS per process"
        + (", and a memory cgroup for all its processes together (shared memory and files in "
           "memory count)" if p.cgroup else "; no cgroup here, so N processes may use N times "
           "the limit (N at most the process bound)")
        + ("; memfd_create and System V shared memory refused" if p.seccomp else ""),
    )  # fmt: skip
    add(
        "disk quota",
        bool(ns or p.linux),
        "its folder is a tmpfs of the quota's size inside its mount namespace" if ns
        else "the launcher measures its folder and stops it past the quota; any file is "
        "capped by RLIMIT_FSIZE",
    )  # fmt: skip
    add(
        "no network (TCP, UDP, raw, unix sockets)",
        bool(ns or p.seccomp),
        " and ".join(
            ([ "a network namespace with no interface up"] if ns else [])
            + (["seccomp refuses socket() and connect()"] if p.seccomp else [])
            + (["Landlock refuses TCP"] if p.landlock >= 4 else [])
        ) or "nothing: a submission can use the network",
    )  # fmt: skip
    add(
        "writes only in its own folder",
        bool(ns or p.landlock),
        ("everything else is read-only in its private root" if ns else "")
        + (" and " if ns and p.landlock else "")
        + (f"Landlock ABI {p.landlock}" if p.landlock else ""),
    )
    add(
        "no metadata changes outside its folder (chmod, chown, utime, xattrs, chattr)",
        bool(ns or p.seccomp or p.root),
        ", ".join(
            (["read-only mounts"] if ns else [])
            + (["seccomp refuses them everywhere"] if p.seccomp else [])
            + (["another user's files (DAC), no CAP_FOWNER/CAP_LINUX_IMMUTABLE"] if p.root else [])
        ) or "nothing: the submission may change the metadata of the grader's user's files",
    )  # fmt: skip
    add(
        "other submissions, the key and the solutions hidden",
        bool(ns or p.landlock),
        f"{made} private root holds only Python, the course's libraries, data and cache" if ns
        else "Landlock lets it read only Python, the course's libraries, data and cache"
        if p.landlock else "nothing hidden: it can read what the grader's user can",
    )  # fmt: skip
    add(
        "no signals to the grader or other processes",
        bool(ns or p.root or p.landlock >= 6),
        ", ".join(
            (["it sees only its own PID namespace"] if ns else [])
            + (["another user id"] if p.root else [])
            + (["Landlock's signal scope"] if p.landlock >= 6 else [])
        ) or "nothing",
    )  # fmt: skip
    add(
        "dangerous system calls refused",
        bool(p.seccomp),
        "seccomp: mount, unshare, ptrace, bpf, io_uring, keyrings, modules, reboot ..."
        if p.seccomp
        else "no seccomp filter for this architecture",
    )
    add("minimal environment", True, "PATH, HOME, TMPDIR, LANG and the course's own variables only")
    return lines


# -- inside: the submission's view, its user, its limits ------------------------------------------


def _mirror(root: str, path: str, bind_to: str | None = None) -> str | None:
    """Make ``path`` exist under ``root`` as it does on the host: folders created, symbolic
    links copied; the last component is returned for binding (None if it was a link)."""
    parts = Path(path).parts
    current = "/"
    for i, part in enumerate(parts[1:], 1):
        host = os.path.join(current, part)
        target = root + host
        last = i == len(parts) - 1
        if os.path.islink(host):
            link = os.readlink(host)
            if not os.path.lexists(target):
                os.symlink(link, target)
            resolved = os.path.normpath(os.path.join(current, link))
            rest = parts[i + 1 :]
            full = os.path.join(resolved, *rest) if rest else resolved
            return _mirror(root, full, bind_to)
        if last:
            if os.path.isdir(host):
                os.makedirs(target, exist_ok=True)
            elif not os.path.exists(target):
                with open(target, "w"):
                    pass
            return host
        os.makedirs(target, exist_ok=True)
        current = host
    return None


def _statvfs_flags(path: str) -> int:
    flags = os.statvfs(path).f_flag
    out = 0
    for st_flag, ms_flag in ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV),
                             (os.ST_NOEXEC, MS_NOEXEC), (os.ST_RDONLY, MS_RDONLY)):  # fmt: skip
        if flags & st_flag:
            out |= ms_flag
    return out


def _bind_read_only(source: str, target: str) -> None:
    _mount(source, target, None, MS_BIND | MS_REC)
    attr = struct.pack("QQQQ", 1 | 2, 0, 0, 0)  # MOUNT_ATTR_RDONLY | NOSUID, recursively
    libc = _libc()
    res = libc.syscall(
        _SYS_MOUNT_SETATTR, ctypes.c_int(-100), os.fsencode(target), ctypes.c_uint(0x8000),
        ctypes.c_char_p(attr), ctypes.c_size_t(32),
    )  # fmt: skip
    if res < 0:  # an older kernel: read-only at the top only
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | _statvfs_flags(source)
        _mount(None, target, None, flags)


def build_view(folder: str, disk_mb: int, owner: int, readable: list[str]) -> None:
    """In a new mount namespace: a root that holds ``readable`` (read-only), /dev's harmless
    devices, a fresh /proc, and ``folder`` as an empty tmpfs of ``disk_mb`` owned by
    ``owner``; then pivot into it. Runs in init (PID 1 of the new PID namespace)."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    new = folder  # the host's (empty) folder hosts the new root while it is being built
    _mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "size=4m,nr_inodes=4096,mode=0755")
    bound: list[str] = []
    for path in readable:
        last = _mirror(new, path)  # the host path it stands for, links followed
        if last is None or any(last == b or last.startswith(b.rstrip("/") + "/") for b in bound):
            continue
        _bind_read_only(last, new + last)
        bound.append(last)
    _mirror(new, folder)
    work = new + folder
    _mount(
        "tmpfs", work, "tmpfs", MS_NOSUID | MS_NODEV,
        f"size={disk_mb}m,nr_inodes=65536,mode=0700,uid={owner},gid={owner}",
    )  # fmt: skip
    os.makedirs(new + "/proc", exist_ok=True)
    _mount("proc", new + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.makedirs(new + "/dev", exist_ok=True)
    _mount("tmpfs", new + "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=0755")
    for dev in ("null", "zero", "full", "random", "urandom"):
        with open(f"{new}/dev/{dev}", "w"):
            pass
        _mount(f"/dev/{dev}", f"{new}/dev/{dev}", None, MS_BIND)
    for name, link in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                       ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):  # fmt: skip
        os.symlink(link, f"{new}/dev/{name}")
    _mount(None, new + "/dev", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC)
    os.makedirs(new + "/.old", exist_ok=True)
    os.chdir(new)
    libc = _libc()
    _check(libc.syscall(ctypes.c_long(_PIVOT_ROOT[_machine()]), b".", b".old"), "pivot_root")
    os.chdir("/")
    _check(libc.umount2(b"/.old", ctypes.c_int(MNT_DETACH)), "umount the old root")
    os.rmdir("/.old")
    _mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def drop_root(uid: int) -> None:
    """From root: to ``uid`` (and the same gid), no supplementary groups, no capabilities left
    in any set (the bounding set included), and no way back."""
    for cap in range(64):
        try:
            _prctl(PR_CAPBSET_DROP, cap)
        except OSError:
            break
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    _prctl(PR_SET_NO_NEW_PRIVS, 1, what="no_new_privs")
    if _cap_eff():
        raise OSError(errno.EPERM, "capabilities left after changing user")


def drop_capabilities() -> None:
    """Root inside a user namespace: keep the uid, drop every capability and lock it so."""
    try:
        _prctl(PR_SET_SECUREBITS, 0x2F)  # NOROOT, NO_SETUID_FIXUP, KEEP_CAPS_LOCKED and locks
    except OSError:
        pass
    for cap in range(64):
        try:
            _prctl(PR_CAPBSET_DROP, cap)
        except OSError:
            break
    try:
        _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    except OSError:
        pass

    class _Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class _Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]  # fmt: skip

    header, data = _Header(0x20080522, 0), (_Data * 2)()
    _check(_libc().capset(ctypes.byref(header), ctypes.byref(data)), "capset")
    _prctl(PR_SET_NO_NEW_PRIVS, 1, what="no_new_privs")


def set_limits(*, cpu_seconds: int, file_mb: int, nproc: int | None) -> None:
    """The per-process limits that need no measurement (see :func:`limit_memory` too)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an oversized write fails instead of killing
    limits = [
        (resource.RLIMIT_CPU, cpu_seconds),
        (resource.RLIMIT_FSIZE, file_mb * 2**20),
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_NOFILE, 256),
    ]
    if nproc is not None:
        limits.append((resource.RLIMIT_NPROC, nproc))
    for which, value in limits:
        _, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(which, (value, value))


def address_space() -> int:
    """Bytes of address space this process uses now (VmSize)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def limit_memory(memory_mb: int, used: int | None = None) -> None:
    """``RLIMIT_AS`` at ``used`` (default: what is in use now) plus ``memory_mb``. Measure
    ``used`` before Landlock, which may hide /proc."""
    used = address_space() if used is None else used
    if used:
        value = used + memory_mb * 2**20
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(resource.RLIMIT_AS, (value, value))


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock(writable: list[str], readable: list[str] | None) -> int:
    """Forbid, for this process and its children, every change outside ``writable``, every
    read outside ``writable + readable`` (unless ``readable`` is None: reads stay free), TCP and
    signals out of the sandbox; return the ABI used (0: none here)."""
    abi = landlock_abi()
    if abi < 1:
        return 0
    libc = _libc()
    change = sum(bits for version, bits in _LL_CHANGE.items() if abi >= version)
    fs = change | (_LL_READ if readable is not None else 0)
    attr = _RulesetAttr(fs, _NET_TCP if abi >= 4 else 0, _SCOPED if abi >= 6 else 0)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else (16 if abi >= 4 else 8)
    ruleset = libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0)
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    rules = [(p, fs) for p in writable] + [(p, _LL_READ) for p in readable or ()]
    try:
        for path, allowed in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                if not os.path.isdir(path):  # a file: only the rights that apply to files
                    allowed &= _LL_EXECUTE | _LL_WRITE_FILE | _LL_READ_FILE | (1 << 14) | (1 << 15)
                rule = _PathBeneath(allowed, fd)
                if libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0):
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
            finally:
                os.close(fd)
        _prctl(PR_SET_NO_NEW_PRIVS, 1, what="no_new_privs")
        if libc.syscall(_SYS_RESTRICT_SELF, ruleset, 0):
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(ruleset)
    return abi


def _bpf(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k & 0xFFFFFFFF)


def seccomp_filter(arch: str) -> None:
    """Install the filter: the syscalls of ``_DENIED`` fail with EPERM (``socket`` and
    ``connect`` with EACCES), ``clone`` with a namespace flag and ``ioctl``s that change file
    flags fail, ``clone3`` is ENOSYS (so the C library uses clone), a foreign ABI is killed."""
    audit, numbers = _SYSCALLS[arch]
    ld_w, jeq, jset, ret = 0x20, 0x15, 0x45, 0x06
    allow, kill = 0x7FFF0000, 0x80000000

    def errno_(e: int) -> int:
        return 0x00050000 | e

    denied = [(numbers[n], errno.EACCES if n in ("socket", "connect") else errno.EPERM)
              for n in _DENIED if n in numbers]  # fmt: skip
    prog = [_bpf(ld_w, 0, 0, 4), _bpf(jeq, 1, 0, audit), _bpf(ret, 0, 0, kill), _bpf(ld_w, 0, 0, 0)]
    if arch == "x86_64":  # the x32 ABI shares the arch value: refuse it
        prog += [_bpf(0x35, 0, 1, 0x40000000), _bpf(ret, 0, 0, errno_(errno.ENOSYS))]
    for nr, err in denied:
        prog += [_bpf(jeq, 0, 1, nr), _bpf(ret, 0, 0, errno_(err))]
    prog += [_bpf(jeq, 0, 1, numbers["clone3"]), _bpf(ret, 0, 0, errno_(errno.ENOSYS))]
    # clone: the flags are the first argument (the low 32 bits, at offset 16)
    prog += [
        _bpf(jeq, 0, 4, numbers["clone"]),
        _bpf(ld_w, 0, 0, 16),
        _bpf(jset, 0, 1, _NS_FLAGS),
        _bpf(ret, 0, 0, errno_(errno.EPERM)),
        _bpf(ret, 0, 0, allow),
    ]
    # ioctl: the request is the second argument (low 32 bits at offset 24)
    checks = []
    for request in _IOCTL_DENIED:
        checks += [_bpf(jeq, 0, 1, request), _bpf(ret, 0, 0, errno_(errno.EPERM))]
    prog += [_bpf(jeq, 0, 1 + len(checks) + 1, numbers["ioctl"]), _bpf(ld_w, 0, 0, 24)]
    prog += checks + [_bpf(ret, 0, 0, allow)]
    prog += [_bpf(ret, 0, 0, allow)]
    data = b"".join(prog)
    buf = ctypes.create_string_buffer(data, len(data))

    class _Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = _Prog(len(prog), ctypes.cast(buf, ctypes.c_void_p))
    _prctl(PR_SET_NO_NEW_PRIVS, 1, what="no_new_privs")
    _check(
        _libc().prctl(PR_SET_SECCOMP, ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(fprog),
                      ctypes.c_ulong(0), ctypes.c_ulong(0)),
        "seccomp",
    )  # fmt: skip


def minimal_environment(folder: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The whole environment a submission gets: nothing of the lecturer's."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": folder,
        "TMPDIR": folder,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": folder,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "COURSE_PROGRESS": "off",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    env.update(extra or {})
    return env


def user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def dump(obj: Any) -> str:
    return json.dumps(obj)
