"""Background job bookkeeping: a lease per job name (single-flight across processes) and a
record of every pass.
"""

from __future__ import annotations

import functools
import json
import os
import secrets
import zlib
from pathlib import Path
from typing import Any, Final

from threadloom.coordination import processes
from threadloom.store.base import Reader, Writer

# A node's lease (`beat`), by default: THREADLOOM_NODE_LEASE_SECONDS, refreshed at least every sixth of it (the
# liveness sweep) while the node has tasks; six missed, and other nodes take its tasks for lost. Expired ones are
# dropped after a day.
NODE_LEASE_MS: Final = 90_000
_NODE_LEASES_KEPT_MS: Final = 86_400_000
_IMAGE = secrets.token_hex(3)  # this program image: a daemon that exec'd a fresh one keeps its pid and start


@functools.cache
def _machine() -> str:
    """This boot of this machine and this pid namespace, short: a pid means a process only within them (a
    store on a shared disk, or in a container, is read by processes whose pids are not ours to look up)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return "unknown"
    return f"{zlib.crc32(f'{boot}/{namespace}'.encode()):08x}"


def holder_id() -> str:
    """A lease holder name that says which process holds it (`pid.start.image@machine:random`), so that the
    lease of a process that has died (kill -9, OOM) or exec'd another program is free at once instead of at
    its expiry."""
    start = processes.start_time(os.getpid())
    return f"{os.getpid()}.{start}.{_IMAGE}@{_machine()}:{secrets.token_hex(4)}"


def holder_gone(holder: str) -> bool:
    """Whether a holder named by `holder_id` is a process of this machine that no longer runs (its pid
    ended, or now names a process started at another time). Any other name is never judged: it waits out
    its expiry."""
    process, _, rest = holder.partition("@")
    machine, _, _ = rest.partition(":")
    pid, _, rest = process.partition(".")
    start, _, image = rest.partition(".")
    if machine != _machine() or machine == "unknown" or not pid.isdigit() or not start.isdigit():
        return False
    if int(pid) == os.getpid() and image != _IMAGE:  # this process before it exec'd itself (a guard restart)
        return True
    return not processes.running(int(pid), int(start))


def node_id(name: str = "") -> str:
    """This node among the servers that share one database: this machine's tag (`_machine`), or `name@tag` for
    a server given a name (THREADLOOM_NODE). Only the node that started a task judges it by its pids."""
    return f"{name}@{_machine()}" if name else _machine()


def beat(w: Writer, node: str, now: int, ttl_ms: int = NODE_LEASE_MS) -> None:
    """`node` is alive until `now + ttl_ms`: until then, other nodes count its tasks as running."""
    w.execute(
        "INSERT INTO job_leases (name, holder, expires_at) VALUES (:n, :h, :e) "
        "ON CONFLICT (name) DO UPDATE SET holder = :h, expires_at = :e",
        {"n": "node:" + node, "h": node, "e": now + ttl_ms},
    )
    w.execute(
        "DELETE FROM job_leases WHERE name LIKE 'node:%' AND expires_at < :old", {"old": now - _NODE_LEASES_KEPT_MS}
    )


def live_nodes(r: Reader, now: int) -> set[str]:
    """The nodes whose lease (`beat`) has not expired."""
    rows = r.rows("SELECT holder FROM job_leases WHERE name LIKE 'node:%' AND expires_at > :now", {"now": now})
    return {str(row["holder"]) for row in rows}


def acquire(w: Writer, name: str, holder: str, now: int, ttl_ms: int) -> bool:
    """Take the lease unless another holder's is still live: unexpired, and not a process known to have
    ended. Run inside BEGIN IMMEDIATE, so two processes cannot both see it free."""
    row = w.one("SELECT holder, expires_at FROM job_leases WHERE name = :n", {"n": name})
    if row is not None and row["holder"] != holder and int(row["expires_at"]) > now and not holder_gone(row["holder"]):
        return False
    w.execute(
        "INSERT INTO job_leases (name, holder, expires_at) VALUES (:n, :h, :e) "
        "ON CONFLICT (name) DO UPDATE SET holder = :h, expires_at = :e",
        {"n": name, "h": holder, "e": now + ttl_ms},
    )
    return True


def release(w: Writer, name: str, holder: str) -> None:
    w.execute("DELETE FROM job_leases WHERE name = :n AND holder = :h", {"n": name, "h": holder})


def record_run(w: Writer, name: str, started: int, finished: int, dry_run: bool, outcome: dict[str, Any]) -> None:
    w.execute(
        "INSERT INTO job_runs (name, started_at, finished_at, dry_run, outcome) VALUES (:n, :s, :f, :d, :o)",
        {"n": name, "s": started, "f": finished, "d": int(dry_run), "o": json.dumps(outcome, separators=(",", ":"))},
    )


def last_run(r: Reader, name: str) -> dict[str, Any] | None:
    row = r.one(
        "SELECT started_at, finished_at, dry_run, outcome FROM job_runs WHERE name = :n ORDER BY id DESC LIMIT 1",
        {"n": name},
    )
    if row is None:
        return None
    return {
        "started_at": row["started_at"],
        "finished_at": row["finished_at"],
        "dry_run": bool(row["dry_run"]),
        "outcome": json.loads(row["outcome"]),
    }


def cursor(r: Reader, name: str) -> int:
    """How far a job has applied the events journal (an event id; 0 before it ever ran)."""
    return int(r.scalar("SELECT position FROM job_cursors WHERE name = :n", {"n": name}) or 0)


def set_cursor(w: Writer, name: str, position: int) -> None:
    w.execute(
        "INSERT INTO job_cursors (name, position) VALUES (:n, :p) ON CONFLICT (name) DO UPDATE SET position = :p",
        {"n": name, "p": position},
    )
