"""Background job bookkeeping: a lease per job name (single-flight across processes) and a
record of every pass.
"""

from __future__ import annotations

import json
from typing import Any

from threadloom.store.base import Reader, Writer


def acquire(w: Writer, name: str, holder: str, now: int, ttl_ms: int) -> bool:
    """Take the lease unless another holder's is still live. Run inside BEGIN IMMEDIATE, so two
    processes cannot both see it free."""
    row = w.one("SELECT holder, expires_at FROM job_leases WHERE name = :n", {"n": name})
    if row is not None and row["holder"] != holder and int(row["expires_at"]) > now:
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
