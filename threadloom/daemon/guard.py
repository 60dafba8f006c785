"""The daemon's guard over itself: its own resident memory under THREADLOOM_DAEMON_MEMORY_MB, and its log rotated.

Every TICK_S the guard reads this process's VmRSS (/proc/self/status). Over the cap it first degrades: the
embedding model is unloaded (or kept from loading), searches go full-text with a caveat saying why, and
`daemon status`, the `status` and `health` tools and the log say so. Still over the cap at the next tick, it
asks the daemon to restart itself: the daemon stops listening, ends its sessions (a bridge sends a safe call
again and answers any other with a retryable error, as after `daemon stop`), lets its jobs finish their
current step and release their leases, closes the store and execs a fresh daemon holding the same daemon lock.
At most MAX_RESTARTS restarts in RESTART_WINDOW_S (kept in the home, across the execs): a cap the daemon
cannot get under even when fresh leaves it serving, degraded, and saying so, instead of restarting forever.

The guard acts on one process only: its own (it unloads, trims and execs itself). It sends no signal to any
process and looks no process up by name; processes the daemon spawned are governed by their own supervisors
(coordination/supervision.py), which name them by pid and start time.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import json
import logging
import os
import sys
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import anyio

from threadloom.clock import now_ms
from threadloom.coordination import processes
from threadloom.daemon import logs
from threadloom.runtime import Runtime
from threadloom.search.embedders import resident_mb

log = logging.getLogger(__name__)
TICK_S: Final = 2.0
MAX_RESTARTS: Final = 3
UNLOAD_WAIT_TICKS: Final = 15  # a call still embedding with the unloaded model keeps it alive: ticks it may take
RESTART_WINDOW_S: Final = 600.0
STATE_FILE: Final = "daemon.guard.json"  # the guard's restarts, read by the daemon it execs


def restarts_file(home: Path) -> Path:
    return home / STATE_FILE


def read_restarts(home: Path) -> list[dict[str, Any]]:
    """The guard's restarts on record (each {at, rss_mb, cap_mb}); none when the file is missing or broken."""
    try:
        value = json.loads(restarts_file(home).read_text())
    except (OSError, ValueError):
        return []
    rows = value.get("restarts") if isinstance(value, dict) else None
    if not isinstance(rows, list):
        return []
    now = now_ms()  # a time to come is not a restart that happened: it must not hold restarts back for ever
    return [r for r in rows if isinstance(r, dict) and isinstance(r.get("at"), int) and r["at"] <= now]


def _write_restarts(home: Path, rows: list[dict[str, Any]], children: list[tuple[int, int]]) -> None:
    path = restarts_file(home)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"restarts": rows, "children": children}))
    tmp.replace(path)


def own_children() -> list[tuple[int, int]]:
    """This process's children (the supervisors of spawned tasks), by pid and start time."""
    me = os.getpid()
    return [(p.pid, p.start) for p in processes.table().values() if p.ppid == me]


def inherited_children(home: Path) -> list[tuple[int, int]]:
    """The children the image before an exec left this process (it knew them as subprocesses; this one
    does not), by pid and start time."""
    try:
        value = json.loads(restarts_file(home).read_text())
        return [(int(pid), int(start)) for pid, start in value.get("children", [])]
    except (OSError, ValueError, TypeError, AttributeError):
        return []


def reap_inherited(children: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Reap those of `children` that have exited, which no one else will (the image that started them is
    gone); the ones still to watch. Only a process whose parent is this one and whose start time is the one
    recorded is waited for: a pid that now names anything else is dropped from the list, never touched."""
    me, left = os.getpid(), []
    for pid, start in children:
        proc = processes.read(pid)
        if proc is None or proc.start != start or proc.ppid != me:
            continue
        if proc.live:
            left.append((pid, start))
            continue
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
    return left


def peak_mb() -> int | None:
    """This process's highest resident memory so far (VmHWM: a tick every TICK_S would miss a short burst)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def give_back_memory() -> None:
    """Collect what was freed and hand glibc's free pages back to the system (a no-op elsewhere)."""
    gc.collect()
    name = ctypes.util.find_library("c")
    if name is None:
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(name).malloc_trim(0)


class MemoryGuard:
    def __init__(self, runtime: Runtime, restart: Callable[[str], None], owns_log: Callable[[], bool]) -> None:
        s = runtime.settings
        self.runtime = runtime
        self.cap_mb = s.daemon_memory_mb
        self._restart = restart
        self._owns_log = owns_log
        self._log_path = s.layout.daemon_log
        self._log_max = s.daemon_log_max_kb * 1024
        self._log_keep = s.daemon_log_keep
        self.rss_mb: int | None = resident_mb()
        self.peak_mb = max(self.rss_mb or 0, peak_mb() or 0)
        self.degraded: str | None = None  # why the model is out, once the guard took it out
        self.restarting: str | None = None
        self.held_back = False  # over the cap with its restarts used up
        self.dropped_clients = 0
        self.rotations = 0
        self.checks = 0
        self._unloading: weakref.ref[object] | None = None  # the model unloaded, until its last user lets go
        self._settling = False  # unloaded, its memory not yet given back (a load under way, a call using it)
        self._inherited = inherited_children(s.home)  # from before a restart: reaped here as they exit
        self._waited = 0
        self._now: Callable[[], int] = now_ms

    async def run(self) -> None:
        while self.restarting is None:
            self.tick()
            await anyio.sleep(TICK_S)

    def tick(self) -> None:
        """One look: rotate the log if due, then hold the resident memory to the cap."""
        self.checks += 1
        if self._inherited:
            self._inherited = reap_inherited(self._inherited)
        if self._owns_log() and logs.rotate_if_due(self._log_path, self._log_max, self._log_keep):
            self.rotations += 1
        self.rss_mb = resident_mb()
        if self.rss_mb is None:
            return
        self.peak_mb = max(self.peak_mb, self.rss_mb, peak_mb() or 0)
        if self.degraded:
            self._keep_model_out()
        if self._settling:  # "still over" is judged once the model's memory is given back
            held = self._unloading is not None and self._unloading() is not None
            if (held or self.runtime.embedder.loading) and self._waited < UNLOAD_WAIT_TICKS:
                self._waited += 1
                return
            self._unloading, self._settling = None, False
            give_back_memory()
            self.rss_mb = resident_mb() or self.rss_mb
        if not self.cap_mb or self.rss_mb <= self.cap_mb:
            return
        if self.degraded is None:
            self.degrade(self.rss_mb)
        elif self._restart_allowed():
            self.restart(self.rss_mb)
        elif not self.held_back:
            self.held_back = True
            log.warning(
                "memory guard: still %d MB over the %d MB cap after %d restart(s) in %.0f minutes; serving on "
                "without the model and not restarting again (raise THREADLOOM_DAEMON_MEMORY_MB)",
                self.rss_mb - self.cap_mb,
                self.cap_mb,
                MAX_RESTARTS,
                RESTART_WINDOW_S / 60,
            )

    def degrade(self, rss: int) -> None:
        """Take the embedding model out of this process and say so everywhere."""
        why = (
            f"(resident {rss} MB over the {self.cap_mb} MB cap, THREADLOOM_DAEMON_MEMORY_MB): searches are "
            "full-text only until the daemon restarts"
        )
        lazy = self.runtime.embedder
        with contextlib.suppress(TypeError):  # a model that cannot be weakly referenced is not waited for
            self._unloading = weakref.ref(lazy.get()) if lazy.get() is not None else None
        self._settling = True
        had = lazy.unload(f"the daemon's memory guard unloaded the embedding model {why}")
        if not had:
            lazy.unloaded = f"the daemon's memory guard keeps the embedding model out {why}"
        self.degraded = lazy.unloaded
        self._keep_model_out()
        give_back_memory()
        after = resident_mb()
        log.warning(
            "memory guard: resident %d MB over the %d MB cap; %s; %s MB after",
            rss,
            self.cap_mb,
            "unloaded the embedding model" if had else "no model was loaded: it is kept from loading",
            after,
        )

    def _keep_model_out(self) -> None:
        """Detach the model from search (again: a load that was finishing may have attached it meanwhile)."""
        self.runtime.search.embedder = None
        self.runtime.search.fallback = self.degraded

    def _restart_allowed(self) -> bool:
        since = self._now() - int(RESTART_WINDOW_S * 1000)
        return sum(1 for r in read_restarts(self.runtime.settings.home) if r["at"] >= since) < MAX_RESTARTS

    def restart(self, rss: int) -> None:
        home, since = self.runtime.settings.home, self._now() - int(RESTART_WINDOW_S * 1000)
        rows = [r for r in read_restarts(home) if r["at"] >= since]
        children = own_children() + self._inherited
        _write_restarts(home, [*rows, {"at": self._now(), "rss_mb": rss, "cap_mb": self.cap_mb}], children)
        self.restarting = f"resident {rss} MB still over the {self.cap_mb} MB cap without the model"
        log.warning("memory guard: %s; restarting the daemon", self.restarting)
        self._restart(self.restarting)

    def note_dropped(self) -> None:
        self.dropped_clients += 1

    def report(self) -> dict[str, Any]:
        """What `daemon status` and the `status` and `health` tools show of the guard."""
        home, since = self.runtime.settings.home, self._now() - int(RESTART_WINDOW_S * 1000)
        restarts = read_restarts(home)
        self.rss_mb = resident_mb() or self.rss_mb  # now, not at the last tick
        self.peak_mb = max(self.peak_mb, self.rss_mb or 0, peak_mb() or 0)
        state = "ok"
        if self.restarting:
            state = "restarting"
        elif self.held_back:
            state = "over the cap, restarts used up"
        elif self.degraded:
            state = "degraded"
        return {
            "state": state,
            "resident_mb": self.rss_mb,
            "peak_mb": self.peak_mb,
            "cap_mb": self.cap_mb or None,
            "model_unloaded": self.degraded,
            "restarts_recent": sum(1 for r in restarts if r["at"] >= since),
            "last_restart": restarts[-1] if restarts else None,
            "dropped_clients": self.dropped_clients,
            "log_rotations": self.rotations,
        }


_GUARDS: dict[int, MemoryGuard] = {}  # the daemon's guard, by id(runtime): what the tools ask


def install(guard: MemoryGuard) -> MemoryGuard:
    _GUARDS[id(guard.runtime)] = guard
    return guard


def report_for(runtime: Runtime) -> dict[str, Any] | None:
    """The guard's report in the daemon; None in any other serving process."""
    guard = _GUARDS.get(id(runtime))
    return guard.report() if guard is not None else None


def exec_fresh(lock_fd: int) -> None:
    """Replace this process with a fresh daemon that keeps the daemon lock (entry.py takes it over)."""
    for handler in logging.getLogger().handlers:
        handler.flush()
    sys.stdout.flush()
    sys.stderr.flush()
    os.set_inheritable(lock_fd, True)
    try:
        os.execv(sys.executable, [sys.executable, "-m", "threadloom", "daemon", "run", "--lock-fd", str(lock_fd)])
    except OSError as exc:  # the interpreter gone (an upgrade under way): exit; the next client starts a daemon
        log.error("memory guard: could not start a fresh daemon (%s); exiting", exc)
