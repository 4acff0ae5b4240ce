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

This module finds what the machine offers and decides (:func:`plan`, :func:`describe`); the
layers themselves are in :mod:`tools.sandbox_kernel` (namespaces, private root, user,
limits, Landlock, seccomp) and :mod:`tools.sandbox_procs` (cgroups, finding and killing a
submission's processes), and are also reachable from here.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import pwd
import shutil
import stat
import sys
from pathlib import Path
from typing import Any

from tools.sandbox_kernel import (  # noqa: F401 (the layers, used as sandbox.NAME)
    _DENIED,
    _IOCTL_DENIED,
    _LL_CHANGE,
    _LL_EXECUTE,
    _LL_READ,
    _LL_READ_DIR,
    _LL_READ_FILE,
    _LL_WRITE_FILE,
    _NET_TCP,
    _NS_FLAGS,
    _PIVOT_ROOT,
    _RULE_PATH_BENEATH,
    _SCOPED,
    _SYS_ADD_RULE,
    _SYS_CREATE_RULESET,
    _SYS_MOUNT_SETATTR,
    _SYS_RESTRICT_SELF,
    _SYSCALLS,
    CLONE_NEWCGROUP,
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    CLONE_NEWTIME,
    CLONE_NEWUSER,
    CLONE_NEWUTS,
    MNT_DETACH,
    MS_BIND,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_RDONLY,
    MS_REC,
    MS_REMOUNT,
    PR_CAP_AMBIENT,
    PR_CAP_AMBIENT_CLEAR_ALL,
    PR_CAPBSET_DROP,
    PR_SET_CHILD_SUBREAPER,
    PR_SET_DUMPABLE,
    PR_SET_NO_NEW_PRIVS,
    PR_SET_PDEATHSIG,
    PR_SET_SECCOMP,
    PR_SET_SECUREBITS,
    SECCOMP_MODE_FILTER,
    _bind_read_only,
    _bpf,
    _cap_eff,
    _check,
    _libc,
    _machine,
    _mirror,
    _mount,
    _PathBeneath,
    _prctl,
    _RulesetAttr,
    _statvfs_flags,
    address_space,
    build_view,
    drop_capabilities,
    drop_root,
    landlock,
    landlock_abi,
    limit_memory,
    map_user,
    seccomp_arch,
    seccomp_filter,
    set_limits,
    unshare,
)
from tools.sandbox_procs import (  # noqa: F401 (the layers, used as sandbox.NAME)
    Cgroup,
    _cgroup_mounts,
    _own_cgroups,
    _parents,
    children_of,
    count_processes_of,
    descendants,
    kill_children,
    kill_user,
    processes_of,
)

__all__ = ["Plan", "PIDS_MAX", "UID_BASE", "describe", "landlock_abi", "plan"]


ROOT = Path(__file__).resolve().parent.parent
#: The user ids submissions run as when the grader runs as root: this plus the launcher's pid.
UID_BASE = 2_000_000_000
#: Processes one submission may have at once.
PIDS_MAX = 64


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
        + (f"Landlock ABI {p.landlock}" if p.landlock else "")
        or "nothing: it can write wherever the grader's user can",
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
        else "no seccomp filter for this architecture"
        if p.linux and (p.landlock or p.view)
        else "nothing (no sandbox)",
    )
    add("minimal environment", True, "PATH, HOME, TMPDIR, LANG and the course's own variables only")
    return lines


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
