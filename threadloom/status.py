"""The status service: what a store holds and which versions are running."""

from __future__ import annotations

import json
import platform
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from threadloom import __version__
from threadloom.ingest.report import transcript_status
from threadloom.learning.evolve import Loop, loops_status
from threadloom.learning.harvest import learning_status
from threadloom.store.base import Reader, Store

COUNTED_TABLES = ("sessions", "events", "documents")  # store-wide sizes: how big the file is, not whose rows


def versions(store: Store) -> dict[str, str]:
    def dist(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    return {
        "threadloom": __version__,
        "mcp": dist("mcp"),
        "python": platform.python_version(),
        **store.engine(),
    }


@dataclass(frozen=True)
class StoreStatus:
    location: str | None  # None where the caller may not learn where the store is (a team server's account)
    schema_version: int
    counts: dict[str, int]
    active_sessions: int
    scope: str = "store"  # "store": every user's rows; "yours": the caller's own

    def as_dict(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "path": self.location,
            "schema_version": self.schema_version,
            "counts": self.counts,
            "open_sessions": self.active_sessions,
        }


class StatusService:
    def __init__(self, store: Store) -> None:
        self._store = store

    def store_status(self) -> StoreStatus:
        def q(r: Reader) -> tuple[dict[str, int], int]:
            counts = {t: int(r.scalar(f"SELECT COUNT(*) AS n FROM {t}")) for t in COUNTED_TABLES}
            open_sessions = int(r.scalar("SELECT COUNT(*) AS n FROM sessions WHERE ended_at IS NULL"))
            return counts, open_sessions

        counts, open_sessions = self._store.read(q)
        return StoreStatus(self._store.location, self._store.schema_version(), counts, open_sessions)

    def own_status(self, user: str) -> StoreStatus:
        """`user`'s own sessions and the events of their sessions: what a team server shows an account."""

        def q(r: Reader) -> tuple[dict[str, int], int]:
            u = {"u": user}
            sessions = int(r.scalar("SELECT COUNT(*) AS n FROM sessions WHERE user = :u", u))
            events = r.scalar(
                "SELECT COUNT(*) AS n FROM events e JOIN sessions s ON s.id = e.session_id WHERE s.user = :u", u
            )
            open_sessions = int(r.scalar("SELECT COUNT(*) AS n FROM sessions WHERE user = :u AND ended_at IS NULL", u))
            return {"sessions": sessions, "events": int(events)}, open_sessions

        counts, open_sessions = self._store.read(q)
        return StoreStatus(None, self._store.schema_version(), counts, open_sessions, scope="yours")

    def transcripts(self, user: str, enabled: bool) -> dict[str, Any]:
        """`user`'s ingested transcripts: per source counts, the covered span, the alarms (ingest/report.py)."""
        return transcript_status(self._store, user, enabled)

    def learning(
        self, user: str, extract: bool, interval: float, loops: Sequence[tuple[Loop, bool]] = ()
    ) -> dict[str, Any]:
        """The learning loops: whether extract is on, when it last ran and what it did; `user`'s candidates;
        each reviewer loop's last pass and last child (learning/evolve.py)."""
        return learning_status(self._store, user, extract, interval) | {"loops": loops_status(self._store, user, loops)}

    def recent_events(self, user: str, limit: int) -> list[dict[str, Any]]:
        """The latest journal events of `user`'s own sessions (nobody reads another user's journal)."""
        rows = self._store.read(
            lambda r: r.rows(
                "SELECT e.at, e.kind, e.session_id, e.vendor, e.project, e.origin, e.detail FROM events e "
                "JOIN sessions s ON s.id = e.session_id WHERE s.user = :u ORDER BY e.id DESC LIMIT :n",
                {"u": user, "n": limit},
            )
        )
        return [row | {"detail": json.loads(row["detail"])} for row in rows]
