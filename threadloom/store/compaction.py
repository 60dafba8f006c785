"""Compaction of the SQLite store while servers keep serving it.

VACUUM rewrites the whole file inside one write transaction: every writer waits for all of it (seconds per
hundred megabytes). Here the same end is reached in small steps, each its own short `BEGIN IMMEDIATE`
transaction through the store's writer, so a writer in another process waits at most one step:

- the full-text index's segments are merged a bounded number of pages at a time (FTS5's 'merge' command: a
  negative page count starts an incremental 'optimize', positive ones continue it, and a step that changed
  fewer than 2 rows had nothing left to do; https://sqlite.org/fts5.html#the_merge_command), which drops the
  entries of deleted rows that older segments still hold;
- free pages are cut off the end of the file `incremental_vacuum(N)` pages a step
  (https://sqlite.org/pragma.html#pragma_incremental_vacuum). That needs `auto_vacuum = INCREMENTAL`, which a
  store created by this version has from its first page (store/sqlite.py); an older store is converted once
  by one VACUUM (`convert`), the only step that holds writers for the whole file;
- the write-ahead log is folded into the file and truncated (`wal_checkpoint(TRUNCATE)`) under a short busy
  timeout: a reader holding an old snapshot makes it give up rather than hold writers back while it waits
  (https://sqlite.org/pragma.html#pragma_wal_checkpoint).

The seam: `compactor_for(store)` gives a `Compactor` for a backend that has one. PostgreSQL reclaims space
with its own (auto)vacuum, a backend file there would implement the same four methods.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

import apsw

from threadloom.errors import StoreBusy, StoreError
from threadloom.store.base import Store, Writer
from threadloom.store.sqlite import SqliteStore

INCREMENTAL: Final = 2  # PRAGMA auto_vacuum's value for INCREMENTAL
CHECKPOINT_BUSY_MS: Final = 100  # how long a truncating checkpoint may hold writers while readers finish


@dataclass(frozen=True)
class Step:
    """One step: whether it did anything, and how long it held the write lock (ms)."""

    worked: bool
    held_ms: float
    pages: int = 0


class Compactor(Protocol):
    def sizes(self) -> dict[str, Any]:
        """The store's file figures (bytes of the file and its log, free bytes, bytes per table)."""
        ...

    def ready(self) -> bool:
        """Whether space can be given back in steps (else `convert` must run once)."""
        ...

    def convert(self) -> float:
        """Make step-wise reclaiming possible; seconds the writers were held."""
        ...

    def index_step(self, pages: int, first: bool) -> Step: ...

    def space_step(self, pages: int) -> Step: ...

    def checkpoint(self) -> dict[str, Any]: ...


def compactor_for(store: Store) -> Compactor | None:
    return SqliteCompactor(store) if isinstance(store, SqliteStore) else None


class SqliteCompactor:
    def __init__(self, store: SqliteStore) -> None:
        self._store = store
        self.path = store.path

    def sizes(self) -> dict[str, Any]:
        wal = self.path.with_name(self.path.name + "-wal")

        def read(r: Any) -> dict[str, Any]:
            page = int(r.scalar("PRAGMA page_size"))
            tables: dict[str, int] = {}
            for name, size in r.tuples(
                "SELECT COALESCE(m.tbl_name, d.name), SUM(d.pgsize) FROM dbstat('main', 1) d "
                "LEFT JOIN sqlite_schema m ON m.name = d.name GROUP BY 1"
            ):
                tables[str(name)] = int(size)
            return {
                "free_bytes": int(r.scalar("PRAGMA freelist_count")) * page,
                "tables": dict(sorted(tables.items(), key=lambda kv: -kv[1])),
            }

        figures = self._store.read(read)
        return {
            "file_bytes": _size(self.path),
            "wal_bytes": _size(wal),
            "free_bytes": figures["free_bytes"],
            "tables": _fold_fts(figures["tables"]),
        }

    def ready(self) -> bool:
        return int(self._store.read(lambda r: r.scalar("PRAGMA auto_vacuum"))) == INCREMENTAL

    def convert(self) -> float:
        """One VACUUM with auto_vacuum set to INCREMENTAL: the whole file rewritten once, writers held."""
        conn = apsw.Connection(str(self.path), flags=apsw.SQLITE_OPEN_READWRITE)
        try:
            conn.set_busy_timeout(10_000)
            conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
            start = time.perf_counter()
            conn.execute("VACUUM")
            return time.perf_counter() - start
        except apsw.BusyError:
            raise StoreBusy("the store stayed busy for 10 s; VACUUM did not run (nothing changed): try again") from None
        except apsw.Error as exc:
            raise StoreError(f"VACUUM of {self.path} failed (nothing changed): {exc}") from None
        finally:
            conn.close()

    def index_step(self, pages: int, first: bool) -> Step:
        def step(w: Writer) -> Step:
            start = time.perf_counter()
            before = int(w.scalar("SELECT total_changes()"))
            w.execute(
                "INSERT INTO documents_fts (documents_fts, rank) VALUES ('merge', :n)",
                {"n": -pages if first else pages},
            )
            worked = int(w.scalar("SELECT total_changes()")) - before >= 2
            return Step(worked, (time.perf_counter() - start) * 1000)

        return self._store.write(step)

    def space_step(self, pages: int) -> Step:
        def step(w: Writer) -> Step:
            start = time.perf_counter()
            free = int(w.scalar("PRAGMA freelist_count"))
            if free == 0:
                return Step(False, (time.perf_counter() - start) * 1000)
            w.rows(f"PRAGMA incremental_vacuum({int(pages)})")  # every row stepped: one page a step
            left = int(w.scalar("PRAGMA freelist_count"))
            return Step(left < free, (time.perf_counter() - start) * 1000, free - left)

        return self._store.write(step)

    def checkpoint(self) -> dict[str, Any]:
        """Fold the log into the file and truncate it, unless a reader's snapshot keeps it (then say so)."""
        conn = apsw.Connection(str(self.path), flags=apsw.SQLITE_OPEN_READWRITE)
        try:
            conn.set_busy_timeout(CHECKPOINT_BUSY_MS)
            start = time.perf_counter()
            busy, frames, moved = next(iter(conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")))
            held = (time.perf_counter() - start) * 1000
        except apsw.BusyError:
            return {"truncated": False, "held_ms": float(CHECKPOINT_BUSY_MS), "reason": "another writer was busy"}
        except apsw.Error as exc:
            raise StoreError(f"checkpointing {self.path} failed: {exc}") from None
        finally:
            conn.close()
        done = int(busy) == 0
        return {"truncated": done, "held_ms": round(held, 2), "frames": int(frames), "moved": int(moved)} | (
            {} if done else {"reason": "a reader held an older snapshot; the next pass truncates the log"}
        )


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0


def _fold_fts(tables: dict[str, int]) -> dict[str, int]:
    """FTS5's shadow tables (documents_fts_data, _idx, ...) counted as the index they are."""
    folded: dict[str, int] = {}
    for name, size in tables.items():
        key = "documents_fts" if name.startswith("documents_fts") else name
        folded[key] = folded.get(key, 0) + size
    return dict(sorted(folded.items(), key=lambda kv: -kv[1]))
