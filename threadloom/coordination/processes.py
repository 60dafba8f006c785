"""Processes as Linux's /proc shows them: who is whose child, in which group, since when, holding how
much memory. Standard library only: the per-child supervisor imports it.

A pid alone does not name a process for long (pids are recycled), so a process is named by its pid and
its start time (clock ticks since boot, field 22 of /proc/<pid>/stat): a recorded pair that no longer
matches is a process that has ended, whatever now holds the number.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing itself costs the supervisor's start ~20 ms: kept out, as are dataclasses
if TYPE_CHECKING:
    from collections.abc import Iterable

PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


class Proc:
    __slots__ = ("pgrp", "pid", "ppid", "rss_bytes", "start", "state")

    def __init__(self, pid: int, ppid: int, pgrp: int, state: str, start: int, rss_bytes: int) -> None:
        self.pid = pid
        self.ppid = ppid
        self.pgrp = pgrp
        self.state = state  # R, S, D, Z (zombie), ...
        self.start = start  # clock ticks after boot
        self.rss_bytes = rss_bytes

    @property
    def live(self) -> bool:
        return self.state not in ("Z", "X")


def read(pid: int) -> Proc | None:
    """One process, or None when there is none by that pid."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: split after its last ')'
    fields = stat.rsplit(")", 1)[1].split()
    try:
        return Proc(pid, int(fields[1]), int(fields[2]), fields[0], int(fields[19]), int(fields[21]) * PAGE_BYTES)
    except (IndexError, ValueError):
        return None


def table() -> dict[int, Proc]:
    """Every process visible now."""
    found = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and (proc := read(int(entry.name))) is not None:
            found[proc.pid] = proc
    return found


def start_time(pid: int) -> int | None:
    proc = read(pid)
    return proc.start if proc is not None else None


def running(pid: int, start: int | None) -> bool:
    """The process started at `start` still runs as `pid` (not a zombie, not a recycled pid). With no
    recorded start, any live process by that pid counts."""
    proc = read(pid)
    return proc is not None and proc.live and (start is None or proc.start == start)


def tree(root: int, procs: dict[int, Proc]) -> list[Proc]:
    """`root` and its live descendants, plus any live process in a group one of them leads (a child's
    process group keeps members whose parent has gone)."""
    children: dict[int, list[int]] = {}
    for proc in procs.values():
        children.setdefault(proc.ppid, []).append(proc.pid)
    seen: set[int] = set()
    stack = [root]
    while stack:
        pid = stack.pop()
        if pid in seen or pid not in procs:
            continue
        seen.add(pid)
        stack.extend(children.get(pid, ()))
    leaders = seen.copy()
    seen.update(p.pid for p in procs.values() if p.pgrp in leaders)
    return [procs[pid] for pid in sorted(seen) if procs[pid].live]


def resident_mb(roots: Iterable[int], procs: dict[int, Proc] | None = None) -> float:
    """Resident memory of the process trees under `roots` together, in MB (each process counted once)."""
    procs = procs if procs is not None else table()
    members = {p.pid: p for root in roots for p in tree(root, procs)}
    return sum(p.rss_bytes for p in members.values()) / 2**20
