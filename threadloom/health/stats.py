"""`HealthService`: one report of how threadloom is doing for one user, read in one snapshot.

What is per user is the caller's alone (counts and growth per kind, tool calls, ingest, jobs run per user);
what describes the store or threadloom itself is whole (the file's size, the search index's freshness, the
runs of jobs that act for no user, the self-test's reliability), as `status` reports the store's size to
anyone using it; on a team server an account gets its own figures alone (`HealthOptions.store_wide`)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Final

from threadloom.clock import now_ms
from threadloom.health import counts, journal, reliability
from threadloom.ingest.report import transcript_status
from threadloom.store.base import Reader, Store

DAY_MS: Final = 86_400_000
MAX_WINDOW_DAYS: Final = 30


@dataclass(frozen=True)
class HealthOptions:
    window_days: int = 7  # tool calls' latency and errors over this many days
    fingerprint: str | None = None  # the embedder in use: index freshness is measured for its vectors
    ingest: bool = True
    # False on a team server's account: the store's parts (its size, the search index over every user's
    # documents, the runs of jobs that act for no user and what they changed) are left out.
    store_wide: bool = True


class HealthService:
    def __init__(self, store: Store) -> None:
        self._store = store

    def report(self, user: str, options: HealthOptions = HealthOptions()) -> dict[str, Any]:
        now = now_ms()
        days = max(1, min(MAX_WINDOW_DAYS, options.window_days))

        def read(r: Reader) -> dict[str, Any]:
            found = {
                "at": now,
                "user": user,
                "scope": "store" if options.store_wide else "yours",
                "counts": counts.counts(r, user, now),
                "tool_calls": {"window_days": days} | journal.tool_calls(r, user, now - days * DAY_MS),
                "jobs": journal.jobs(r, user, now, store_wide=options.store_wide),
                "probes": reliability.reliability(r, now),
            }
            return found | ({"index": index_freshness(r, options.fingerprint)} if options.store_wide else {})

        found = self._store.read(read)
        ingest = transcript_status(self._store, user, options.ingest)
        return found | ({"store": store_size(self._store)} if options.store_wide else {}) | {"ingest": ingest}


def index_freshness(r: Reader, fingerprint: str | None) -> dict[str, Any]:
    """Documents in the search index and how many lack a current vector (none written yet, or written for an
    older text) of the embedder in use, else of the embedder with the most vectors. Store-wide."""
    documents = int(r.scalar("SELECT COUNT(*) FROM documents") or 0)
    rows = r.rows(
        "SELECT v.fingerprint, COUNT(*) AS n FROM document_vectors v JOIN documents d ON d.id = v.doc_id "
        "WHERE v.content_hash = d.content_hash GROUP BY v.fingerprint ORDER BY n DESC, v.fingerprint"
    )
    current = {str(x["fingerprint"]): int(x["n"]) for x in rows}
    chosen = fingerprint if fingerprint is not None else next(iter(current), None)
    if chosen is None:
        return {"documents": documents, "fingerprint": None, "with_vectors": 0, "without_vectors": documents}
    done = current.get(chosen, 0)
    return {
        "documents": documents,
        "fingerprint": chosen,
        "with_vectors": done,
        "without_vectors": documents - done,
        "other_fingerprints": {fp: n for fp, n in current.items() if fp != chosen},
    }


def store_size(store: Store) -> dict[str, Any]:
    """Bytes of the database file and its WAL and shared-memory files (0 for one not there); on PostgreSQL,
    of the database (pg_database_size: its tables and indexes, the server's WAL not counted)."""
    path = store.location
    if store.dialect == "postgresql":
        size = int(store.read(lambda r: r.scalar("SELECT pg_database_size(current_database())")) or 0)
        return {"path": path, "bytes": {"database": size, "total": size}}
    sizes = {name: _bytes(path + suffix) for name, suffix in (("file", ""), ("wal", "-wal"), ("shm", "-shm"))}
    return {"path": path, "bytes": sizes | {"total": sum(sizes.values())}}


def _bytes(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0
