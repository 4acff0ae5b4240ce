"""The kernel's layers of a submission's sandbox (:mod:`tools.sandbox` decides which to use):
namespaces and the private root, the user and its capabilities, resource limits, Landlock and
the seccomp filter. Each function applies one layer to the process that calls it."""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import resource
import signal
import struct
from pathlib import Path

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
