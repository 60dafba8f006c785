"""`threadloom compact --full`: after many rows are deleted, a whole rewrite gives their space back (PostgreSQL:
VACUUM FULL, the tables' files shrink; SQLite: one VACUUM, the file shrinks), says what it locks, and the store
works as before. A table another transaction holds makes it stop with a clear, retryable refusal instead of
queueing every query behind its lock. Both backends (tests/backend_home.py), the real CLI."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests import helpers
from tests.backend_home import _URLS, home, open_home_store, store_env
from threadloom.identity import Provenance
from threadloom.sessions import record_event
from threadloom.store.base import Writer

__all__ = ["home"]
ROWS = 4_000
PROV = Provenance(session_id="s-ada", vendor="claude", project="p", user="ada")


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return helpers.cli(home, *args, timeout=300, **store_env(home))


def size(home: Path) -> int:
    """The events table's bytes (PostgreSQL, with its indexes and TOAST) or the store file's (SQLite)."""
    if home in _URLS:
        with psycopg.connect(_URLS[home]) as conn:
            return int(conn.execute("SELECT pg_total_relation_size('events')").fetchone()[0])  # type: ignore[index]
    wal = home / "threadloom.db-wal"
    return (home / "threadloom.db").stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def fill_and_delete(home: Path) -> int:
    store = open_home_store(home)
    try:

        def add(w: Writer, start: int) -> None:
            for i in range(start, start + 1_000):
                # text that does not compress away, 2 kB a row
                pad = "".join(hashlib.sha256(f"{i}:{k}".encode()).hexdigest() for k in range(32))
                record_event(w, PROV, "test.bulk", {"n": i, "pad": pad}, bookkeeping=True)

        for start in range(0, ROWS, 1_000):
            store.write(lambda w, s=start: add(w, s))  # type: ignore[misc]
        # nine rows in ten: every page keeps a row, so only a rewrite can give its space back
        store.write(lambda w: w.execute("DELETE FROM events WHERE kind = 'test.bulk' AND id % 10 <> 0"))
        return int(store.read(lambda r: r.scalar("SELECT count(*) FROM events WHERE kind = 'test.bulk'")))
    finally:
        store.close()


def test_a_full_compaction_gives_space_back_and_the_store_works_after(home: Path) -> None:
    assert cli(home, "stats").returncode == 0  # the store made, migrated
    kept = fill_and_delete(home)
    assert 0 < kept < ROWS // 5
    if home in _URLS:  # a plain pass (VACUUM) keeps the space for new rows; on SQLite it would give it back
        plain = cli(home, "compact", "--json")
        assert plain.returncode == 0, plain.stderr
    before = size(home)
    assert before > ROWS * 2_000

    done = cli(home, "compact", "--full", "--json")
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    after = size(home)
    assert after < before // 4, (before, after)
    if home in _URLS:
        assert "ACCESS EXCLUSIVE" in done.stderr
        assert report["vacuum"]["full"] is True and report["vacuum"]["bytes_after"] < report["vacuum"]["bytes_before"]
    else:
        assert "the whole file locked" in done.stderr and report["full"] is True
        assert report["freed_bytes"] > before // 2  # the file and its log, before and after
    shown = cli(home, "compact", "--full")
    assert shown.returncode == 0 and "VACUUM" in shown.stdout, shown.stdout

    store = open_home_store(home)  # the store goes on: a write takes a fresh id and reads back
    try:
        new = store.write(lambda w: record_event(w, PROV, "test.after", {"ok": True}, bookkeeping=True))
        assert store.read(lambda r: r.scalar("SELECT kind FROM events WHERE id = :i", {"i": new})) == "test.after"
        assert store.read(lambda r: r.scalar("SELECT count(*) FROM events WHERE kind = 'test.bulk'")) == kept
    finally:
        store.close()
    assert cli(home, "stats").returncode == 0


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)  # PostgreSQL's table locks
def test_a_table_held_by_another_transaction_stops_a_full_compaction_clearly(home: Path) -> None:
    assert cli(home, "stats").returncode == 0
    with psycopg.connect(_URLS[home]) as conn:
        conn.execute("SELECT count(*) FROM events").fetchone()  # an open transaction: ACCESS SHARE on events
        done = cli(home, "compact", "--full")
        conn.rollback()
    assert done.returncode != 0
    assert "VACUUM FULL waited 10 s for table 'events'" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    again = cli(home, "compact", "--full")
    assert again.returncode == 0, again.stderr
