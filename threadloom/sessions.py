"""Sessions (one per agent conversation) and the activity journal of events."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from threadloom import requests
from threadloom.clock import now_ms
from threadloom.errors import InvalidInput
from threadloom.identity import Provenance
from threadloom.store import jobs
from threadloom.store.base import Store, Writer


@dataclass(frozen=True)
class SessionInfo:
    id: str
    vendor: str
    transport: str
    project: str | None
    cwd: str | None
    pid: int | None
    client_name: str | None = None
    client_version: str | None = None
    origin: str = "foreground"
    parent_id: str | None = None  # the session that spawned this one
    user: str = ""
    author: str = ""
    org: str = ""

    def provenance(self) -> Provenance:
        return Provenance(
            session_id=self.id,
            vendor=self.vendor,
            project=self.project,
            origin=self.origin,
            user=self.user,
            author=self.author,
            org=self.org,
        )


def record_event(
    w: Writer, provenance: Provenance, kind: str, detail: dict[str, Any] | None = None, *, bookkeeping: bool = False
) -> int:
    """Append one event inside the caller's transaction. A tool's own write also claims the call's
    idempotency key there; session bookkeeping (`bookkeeping`) does not."""
    if not bookkeeping:
        requests.claim(w)
    return w.insert(
        "INSERT INTO events (at, kind, session_id, vendor, project, origin, detail) "
        "VALUES (:at, :kind, :sid, :vendor, :project, :origin, :detail)",
        {
            "at": now_ms(),
            "kind": kind,
            "sid": provenance.session_id,
            "vendor": provenance.vendor,
            "project": provenance.project,
            "origin": provenance.origin,
            "detail": json.dumps(detail or {}, separators=(",", ":"), sort_keys=True),
        },
    )


class SessionService:
    def __init__(self, store: Store) -> None:
        self._store = store

    def open(self, info: SessionInfo) -> None:
        """Record the session as started (or resumed, when a known id reconnects)."""

        def tx(w: Writer) -> None:
            t = now_ms()
            owner = w.scalar("SELECT user FROM sessions WHERE id = :id", {"id": info.id})
            if owner is not None and owner != info.user:
                raise InvalidInput(f"session id {info.id} belongs to another user; start a new session")
            if info.parent_id is not None:
                parent = w.scalar("SELECT user FROM sessions WHERE id = :id", {"id": info.parent_id})
                if parent is not None and parent != info.user:
                    raise InvalidInput(f"THREADLOOM_PARENT_SESSION {info.parent_id} is not a session of this user")
            changed = w.execute(
                "UPDATE sessions SET vendor = :vendor, client_name = :cname, client_version = :cver, "
                "transport = :transport, project = :project, cwd = :cwd, pid = :pid, machine = :machine, "
                "parent_id = :parent_id, user = :user, org = :org, last_seen_at = :t, ended_at = NULL WHERE id = :id",
                _params(info, t),
            )
            if not changed:
                w.execute(
                    "INSERT INTO sessions (id, vendor, client_name, client_version, transport, project, cwd, pid, "
                    "machine, origin, parent_id, user, org, started_at, last_seen_at) VALUES (:id, :vendor, :cname, "
                    ":cver, :transport, :project, :cwd, :pid, :machine, :origin, :parent_id, :user, :org, :t, :t)",
                    _params(info, t),
                )
            record_event(
                w,
                info.provenance(),
                "session.started" if not changed else "session.resumed",
                {"transport": info.transport, "client": info.client_name},
                bookkeeping=True,
            )

        self._store.write(tx)

    def touch(self, session_id: str) -> None:
        self._store.write(
            lambda w: w.execute(
                "UPDATE sessions SET last_seen_at = :t WHERE id = :id", {"t": now_ms(), "id": session_id}
            )
        )

    def close(self, info: SessionInfo) -> None:
        def tx(w: Writer) -> None:
            t = now_ms()
            w.execute("UPDATE sessions SET ended_at = :t, last_seen_at = :t WHERE id = :id", {"t": t, "id": info.id})
            record_event(w, info.provenance(), "session.ended", bookkeeping=True)

        self._store.write(tx)

    def record(self, provenance: Provenance, kind: str, detail: dict[str, Any] | None = None) -> int:
        return self._store.write(lambda w: record_event(w, provenance, kind, detail, bookkeeping=True))


def _params(info: SessionInfo, t: int) -> dict[str, Any]:
    return {
        "id": info.id,
        "vendor": info.vendor,
        "cname": info.client_name,
        "cver": info.client_version,
        "transport": info.transport,
        "project": info.project,
        "cwd": info.cwd,
        "pid": info.pid,
        "machine": jobs.node_id() if info.pid is not None else None,  # where the pid names a process
        "parent_id": info.parent_id,
        "origin": info.origin,
        "user": info.user or None,
        "org": (info.org or info.user) or None,
        "t": t,
    }
