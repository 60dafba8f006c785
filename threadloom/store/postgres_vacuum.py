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
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import Any, Final

import psycopg
from psycopg import sql

from threadloom.errors import StoreError
from threadloom.store.postgres import PostgresStore

KEPT: Final = (
    "PostgreSQL: the touched tables were vacuumed, so the erased rows' old versions and their index entries are "
    "gone from every query and their space is free for reuse; their bytes stay in the data files' free space "
    "until new rows overwrite them (VACUUM FULL <table>, which locks the table while it rewrites it, drops them "
    "at once), in the write-ahead log until its segments are recycled, and in archived WAL, base backups and "
    "pg_dump files until those expire"
)
_DEAD = re.compile(r"(\d+) removed, \d+ remain, (\d+) are dead but not yet removable")


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


def vacuum(store: PostgresStore, tables: Sequence[str] | None = None) -> dict[str, Any]:
    """VACUUM (VERBOSE, ANALYZE) each of `tables` (every table of the schema when None); what it removed,
    what an older snapshot kept, the tables' bytes before and after, and `KEPT`."""
    names = list(tables) if tables is not None else all_tables(store)
    removed = kept = 0
    started = time.monotonic()
    notices: list[str] = []

    def heard(diagnostic: psycopg.errors.Diagnostic) -> None:
        notices.append(str(diagnostic.message_primary or ""))

    try:
        with store.pool().connection() as conn:  # the pool's connections autocommit: VACUUM refuses a transaction
            conn.add_notice_handler(heard)
            try:
                before = _bytes(conn, names)
                for name in names:
                    conn.execute(sql.SQL("VACUUM (VERBOSE, ANALYZE) {}").format(sql.Identifier(name)))
                after = _bytes(conn, names)
            finally:
                conn.remove_notice_handler(heard)  # the connection goes back to the pool
    except psycopg.Error as exc:
        raise StoreError(f"VACUUM on {store.location} failed: {exc}; the rows are erased, run again") from None
    skipped = [line for line in notices if "skipping" in line]  # e.g. a table this role does not own
    for line in notices:
        for match in _DEAD.finditer(line):
            removed += int(match.group(1))
            kept += int(match.group(2))
    report: dict[str, Any] = {
        "vacuumed": names,
        "dead_rows_removed": removed,
        "dead_rows_kept": kept,
        "bytes_before": before,
        "bytes_after": after,
        "seconds": round(time.monotonic() - started, 3),
        "complete": kept == 0 and not skipped,
    }
    if skipped:
        report["skipped"] = skipped
        report["reason"] = "this role may not vacuum the tables in `skipped`: vacuum them as their owner"
    if kept:
        report["reason"] = (
            "a transaction that started before the erasure still sees the old rows, so VACUUM kept them; "
            "autovacuum removes them after it ends, or run forget again"
        )
    return report
