"""A submission's processes, found and ended (:mod:`tools.sandbox` decides how): its cgroups,
the process tree below a launcher, and killing all of it, a fork bomb included."""

from __future__ import annotations

import dataclasses
import errno
import os
import signal
import time
from typing import Any

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
