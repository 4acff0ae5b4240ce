"""The limits a graded submission runs under: resource limits and, on Linux, a Landlock sandbox.

A submission is untrusted code. :mod:`tools.grade` runs each one in its own process, and that
process calls :func:`confine` before it executes the first line of the learner's code:

* **memory**: ``RLIMIT_AS`` at the address space already in use plus ``memory_mb`` (the
  libraries are imported first, so the limit bounds what the submission allocates);
* **CPU time**: ``RLIMIT_CPU`` (the kernel stops a process that spins past it);
* **files**: ``RLIMIT_FSIZE`` caps the size of any file written (a write past it fails with
  ``OSError`` instead of filling the disk), ``RLIMIT_NOFILE`` the number of open files, and no
  core dumps;
* **where it may write** (Linux 5.13 and newer, Landlock, no root needed): only beneath its
  temporary folder (and ``/dev/null``); it cannot create, change or delete a file anywhere
  else, open a TCP connection (Landlock ABI 4, Linux 6.7), or signal processes outside its own
  sandbox, the grader included (ABI 6, Linux 6.12).

What this does not do: it hides no file from reading (a submission can read what the
grader's user can read), and on a system without Landlock (macOS, Windows, older Linux) only
the resource limits hold. :func:`landlock_abi` says which; the grader refuses to run there
unless told ``--no-sandbox``.
"""

from __future__ import annotations

import ctypes
import os
import platform
import resource
import signal

__all__ = ["confine", "landlock_abi"]

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446  # the same on every arch
_PR_SET_NO_NEW_PRIVS = 38
_RULE_PATH_BENEATH = 1
# filesystem rights that change something (reading and executing stay allowed everywhere)
_FS_WRITE = {
    1: (1 << 1) | (1 << 4) | (1 << 5) | sum(1 << b for b in range(6, 13)),  # write, remove, make
    2: 1 << 13,  # REFER: linking or renaming across folders
    3: 1 << 14,  # TRUNCATE
}
_NET_TCP = (1 << 0) | (1 << 1)  # BIND_TCP, CONNECT_TCP (ABI 4)
_SCOPED = (1 << 0) | (1 << 1)  # abstract unix sockets, signals (ABI 6)


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def landlock_abi() -> int:
    """The Landlock ABI version this kernel offers, 0 where there is none (or not Linux)."""
    if platform.system() != "Linux":
        return 0
    try:
        version = _libc().syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    except (OSError, AttributeError):
        return 0
    return max(int(version), 0)


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _landlock(writable: list[str]) -> int:
    """Forbid every write outside ``writable`` for this process and its children; the ABI used."""
    abi = landlock_abi()
    if abi < 1:
        return 0
    libc = _libc()
    fs = sum(bits for version, bits in _FS_WRITE.items() if abi >= version)
    attr = _RulesetAttr(fs, _NET_TCP if abi >= 4 else 0, _SCOPED if abi >= 6 else 0)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else (16 if abi >= 4 else 8)
    ruleset = libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0)
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    try:
        for path in writable:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                allowed = fs if os.path.isdir(path) else (1 << 1) | (fs & (1 << 14))
                rule = _PathBeneath(allowed, fd)
                if libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0):
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0):
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if libc.syscall(_SYS_RESTRICT_SELF, ruleset, 0):
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(ruleset)
    return abi


def _address_space() -> int:
    """Bytes of address space this process uses now (VmSize)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def confine(
    folder: str, *, memory_mb: int, cpu_seconds: int, file_mb: int = 64, sandbox: bool = True
) -> int:
    """Apply the limits of the module docstring to this process; return the Landlock ABI used.

    ``sandbox=False`` applies the resource limits only (the grader's ``--no-sandbox``).
    """
    if memory_mb <= 0 or cpu_seconds <= 0 or file_mb <= 0:
        raise ValueError(
            f"limits must be positive, got memory_mb={memory_mb}, cpu_seconds={cpu_seconds}, "
            f"file_mb={file_mb}"
        )
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an oversized write fails instead of killing
    used = _address_space() if platform.system() == "Linux" else 0
    limits = [
        (resource.RLIMIT_CPU, cpu_seconds),
        (resource.RLIMIT_FSIZE, file_mb * 2**20),
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_NOFILE, 256),
    ]
    if used:
        limits.append((resource.RLIMIT_AS, used + memory_mb * 2**20))
    for which, value in limits:
        _, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(which, (value, value))
    return _landlock([folder, os.devnull]) if sandbox else 0
