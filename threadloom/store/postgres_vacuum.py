"""VACUUM on PostgreSQL: what `forget` and `threadloom compact` run there in place of SQLite's VACUUM,
checkpoint and incremental_vacuum (store/erasure.py, store/compaction.py).

A DELETE or UPDATE in PostgreSQL leaves the old row version (a dead tuple) in its table's pages, in its
TOAST table's and as entries in its indexes (the full-text GIN index included) until VACUUM removes them.
VACUUM (https://www.postgresql.org/docs/current/routine-vacuuming.html) runs outside any transaction and
takes only a SHARE UPDATE EXCLUSIVE lock, so readers and writers go on meanwhile. It removes a dead tuple
only when no open transaction can still see it: one holding an older snapshot keeps it, and VERBOSE's
report says how many it kept ("dead but not yet removable"), which `vacuum` returns.

What PostgreSQL still holds after it, said in `KEPT`: the removed tuples' bytes stay in the pages' free
space until new rows overwrite them (only `VACUUM FULL`, which rewrites a table under an ACCESS EXCLUSIVE
lock, or a dump and restore drops them), in the write-ahead log until its segments are recycled, and in
archived WAL, base backups and dumps until they expire.

`full` (`threadloom compact --full`) runs VACUUM FULL instead: each table and its indexes rewritten into new
files, the old ones removed, so the free space goes back to the operating system. It holds an ACCESS
EXCLUSIVE lock on the table it rewrites (every read and write of that table waits, table after table) and
needs free disk about the size of the largest table. It waits at most `FULL_LOCK_TIMEOUT_MS` for that lock
(a longer wait would queue every other query behind it) and stops there, the tables before it done.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import Any, Final

import psycopg
from psycopg import sql

from threadloom.clock import now_ms
from threadloom.errors import StoreBusy, StoreError
from threadloom.store.base import Writer
from threadloom.store.postgres import PostgresStore

KEPT: Final = (
    "PostgreSQL: the touched tables were vacuumed, so the erased rows' old versions and their index entries are "
    "gone from every query and their space is free for reuse; their bytes stay in the data files' free space "
    "until new rows overwrite them (VACUUM FULL <table>, which locks the table while it rewrites it, drops them "
    "at once), in the write-ahead log until its segments are recycled, and in archived WAL, base backups and "
    "pg_dump files until those expire"
)
_DEAD = re.compile(r"(\d+) removed, \d+ remain, (\d+) are dead but not yet removable")
_FULL_REMOVED = re.compile(r"found (\d+) removable, \d+ nonremovable row versions")
_FULL_KEPT = re.compile(r"(\d+) dead row versions cannot be removed yet")
FULL_LOCK_TIMEOUT_MS: Final = 10_000
# A table an erasure changed, until a VACUUM of it has removed every dead row: a job cursor (its position the
# erasure's time) written in the erasure's own transaction, so a forget killed (or failed, or held by an older
# snapshot) before its VACUUM leaves it, and the next forget vacuums the table even when it erases nothing.
PENDING: Final = "vacuum.pending:"


def mark_pending(w: Writer, tables: Sequence[str]) -> None:
    for name in tables:
        w.execute(
            "INSERT INTO job_cursors (name, position) VALUES (:n, :p) ON CONFLICT (name) DO UPDATE SET position = :p",
            {"n": PENDING + name, "p": now_ms()},
        )


def pending(store: PostgresStore) -> dict[str, int]:
    """The tables an erasure changed that no VACUUM has cleaned since: table -> its mark's position."""
    rows = store.read(lambda r: r.tuples("SELECT name, position FROM job_cursors WHERE name LIKE 'vacuum.pending:%'"))
    return {str(name).removeprefix(PENDING): int(position) for name, position in rows}


def _bytes(conn: psycopg.Connection[Any], tables: Sequence[str]) -> int:
    row = conn.execute(
        "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND c.relname = ANY(%s)",
        (list(tables),),
    ).fetchone()
    return int(row[0]) if row is not None else 0


def all_tables(store: PostgresStore) -> list[str]:
    return [
        str(name)
        for (name,) in store.read(
            lambda r: r.tuples("SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename")
        )
    ]


def vacuum(
    store: PostgresStore, tables: Sequence[str] | None = None, *, retry_after_s: float = 1.0, full: bool = False
) -> dict[str, Any]:
    """VACUUM (VERBOSE, ANALYZE) each of `tables` (every table of the schema when None); what it removed,
    what an older snapshot kept, the tables' bytes before and after. A table where rows were kept is vacuumed
    once more after `retry_after_s` (an autovacuum ANALYZE holds an older snapshot for a moment). `full`:
    VACUUM FULL (the module's docstring), never repeated."""
    names = list(tables) if tables is not None else all_tables(store)
    marks = {name: position for name, position in pending(store).items() if name in names}
    started = time.monotonic()
    notices: list[str] = []
    command = "VACUUM (FULL, VERBOSE, ANALYZE) {}" if full else "VACUUM (VERBOSE, ANALYZE) {}"

    def heard(diagnostic: psycopg.errors.Diagnostic) -> None:
        notices.append(f"{diagnostic.message_primary or ''} {diagnostic.message_detail or ''}")

    def one(conn: psycopg.Connection[Any], name: str) -> tuple[int, int]:
        first = len(notices)
        conn.execute(sql.SQL(command).format(sql.Identifier(name)))
        said = notices[first:]
        if full:
            removed = sum(int(m.group(1)) for line in said for m in _FULL_REMOVED.finditer(line))
            return removed, sum(int(m.group(1)) for line in said for m in _FULL_KEPT.finditer(line))
        found = [(int(m.group(1)), int(m.group(2))) for line in said for m in _DEAD.finditer(line)]
        return sum(r for r, _ in found), sum(k for _, k in found)

    removed: dict[str, int] = {}
    kept: dict[str, int] = {}
    try:
        with store.pool().connection() as conn:  # the pool's connections autocommit: VACUUM refuses a transaction
            conn.add_notice_handler(heard)
            if full:
                conn.execute(sql.SQL("SET lock_timeout = {}").format(sql.Literal(f"{FULL_LOCK_TIMEOUT_MS}ms")))
            try:
                before = _bytes(conn, names)
                for name in names:
                    removed[name], kept[name] = one(conn, name)
                again = [name for name in names if kept[name] and not full]
                if again:
                    time.sleep(retry_after_s)
                for name in again:
                    more, kept[name] = one(conn, name)
                    removed[name] += more
                after = _bytes(conn, names)
            finally:
                conn.remove_notice_handler(heard)  # the connection goes back to the pool
                if full and not conn.closed:
                    conn.execute("RESET lock_timeout")
    except psycopg.errors.LockNotAvailable:
        done = ", ".join(removed) or "none"
        raise StoreBusy(
            f"VACUUM FULL waited {FULL_LOCK_TIMEOUT_MS // 1000} s for table {names[len(removed)]!r}, which another "
            f"transaction holds, and stopped (tables rewritten: {done}); run it again when the store is quieter"
        ) from None
    except psycopg.Error as exc:
        after_what = "" if full else "; the rows are erased, run again"
        raise StoreError(
            f"{'VACUUM FULL' if full else 'VACUUM'} on {store.location} failed: {exc}{after_what}"
        ) from None
    skipped = [line for line in notices if "skipping" in line]  # e.g. a table this role does not own
    held = {name: n for name, n in kept.items() if n}
    report: dict[str, Any] = {
        "vacuumed": names,
        "dead_rows_removed": sum(removed.values()),
        "dead_rows_kept": sum(held.values()),
        "bytes_before": before,
        "bytes_after": after,
        "seconds": round(time.monotonic() - started, 3),
        "complete": not held and not skipped,
        "full": full,
    }
    if skipped:
        report["skipped"] = skipped
        report["reason"] = "this role may not vacuum the tables in `skipped`: vacuum them as their owner"
    cleaned = [(PENDING + name, marks[name]) for name in marks if not held.get(name) and not skipped]
    if cleaned:  # the same mark only: an erasure since has marked the table again
        store.write(lambda w: w.execute_many("DELETE FROM job_cursors WHERE name = :n AND position = :p",
                                             [{"n": n, "p": p} for n, p in cleaned]))  # fmt: skip
    if held:
        report["kept_in"] = held
        report["reason"] = (
            "a transaction older than the erasure (another session's, a pg_dump's, or autovacuum's ANALYZE) could "
            "still see these old row versions, so VACUUM kept them; autovacuum removes them after it ends, or run "
            "forget again"
        )
    return report
