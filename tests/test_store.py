from __future__ import annotations

import stat
import threading
from pathlib import Path

import apsw
import pytest

from threadloom.errors import StoreBusy, StoreError
from threadloom.store import terms
from threadloom.store.migrations import MIGRATIONS, Migration
from threadloom.store.sqlite import SqliteStore, open_store


def schema(path: Path) -> list[tuple[str, str, str]]:
    conn = apsw.Connection(str(path))
    try:
        rows = conn.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name"
        ).fetchall()
        return [(t, n, " ".join((s or "").split())) for t, n, s in rows]
    finally:
        conn.close()


def test_a_new_store_is_private_and_in_wal_mode(tmp_path: Path) -> None:
    store = open_store(tmp_path / "home" / "t.db")
    try:
        assert stat.S_IMODE((tmp_path / "home").stat().st_mode) == 0o700
        for name in ("t.db", "t.db-wal", "t.db-shm"):
            assert stat.S_IMODE((tmp_path / "home" / name).stat().st_mode) == 0o600, name
        assert store.read(lambda r: r.scalar("PRAGMA journal_mode")) == "wal"
        assert store.schema_version() == len(MIGRATIONS)
    finally:
        store.close()


def test_a_loose_home_folder_is_tightened(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    home.chmod(0o755)
    open_store(home / "t.db").close()
    assert stat.S_IMODE(home.stat().st_mode) == 0o700


def test_migrations_are_recorded_by_name(tmp_path: Path) -> None:
    store = open_store(tmp_path / "t.db")
    names = store.read(lambda r: [row["name"] for row in r.rows("SELECT name FROM schema_migrations")])
    store.close()
    assert names == [m.name for m in MIGRATIONS]


@pytest.fixture(scope="module")
def fresh_schema(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, str, str]]:
    """The schema `open_store` makes in a new file: made once, it is the same for every test that compares."""
    path = tmp_path_factory.mktemp("fresh") / "fresh.db"
    open_store(path).close()
    return schema(path)


@pytest.mark.parametrize("applied_first", range(len(MIGRATIONS) + 1))
def test_a_store_migrated_forward_equals_a_fresh_one(
    tmp_path: Path, applied_first: int, fresh_schema: list[tuple[str, str, str]]
) -> None:
    old = SqliteStore(tmp_path / "old.db")
    old.initialise(MIGRATIONS[:applied_first])
    old.close()
    reopened = open_store(tmp_path / "old.db")
    reopened.close()
    assert schema(tmp_path / "old.db") == fresh_schema


def test_a_failing_migration_leaves_nothing_behind(tmp_path: Path) -> None:
    broken = Migration("m999_broken", "CREATE TABLE half_done (x INTEGER); INSERT INTO no_such_table VALUES (1);")
    store = SqliteStore(tmp_path / "t.db")
    with pytest.raises(apsw.SQLError):
        store.initialise([*MIGRATIONS, broken])
    tables = store.read(lambda r: [row["name"] for row in r.rows("SELECT name FROM sqlite_master")])
    recorded = store.read(lambda r: [row["name"] for row in r.rows("SELECT name FROM schema_migrations")])
    store.close()
    assert "half_done" not in tables
    assert "m999_broken" not in recorded
    assert recorded == [m.name for m in MIGRATIONS]


def test_a_store_from_a_newer_threadloom_is_refused(tmp_path: Path) -> None:
    future = Migration("m999_future", "CREATE TABLE future (x INTEGER)")
    newer = SqliteStore(tmp_path / "t.db")
    newer.initialise([*MIGRATIONS, future])
    newer.close()
    with pytest.raises(StoreError, match="newer threadloom"):
        open_store(tmp_path / "t.db")


def test_a_read_path_cannot_write(tmp_path: Path) -> None:
    store = open_store(tmp_path / "t.db")
    try:
        with pytest.raises(apsw.ReadOnlyError):
            store.read(lambda r: r.rows("INSERT INTO events (at, kind, origin) VALUES (1, 'x', 'foreground')"))
        assert store.read(lambda r: r.scalar("SELECT COUNT(*) FROM events")) == 0
    finally:
        store.close()


def test_a_write_that_raises_is_rolled_back(tmp_path: Path) -> None:
    store = open_store(tmp_path / "t.db")

    def tx(w: object) -> None:
        w.execute("INSERT INTO events (at, kind, origin) VALUES (1, 'x', 'foreground')")  # type: ignore[attr-defined]
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        store.write(tx)
    assert store.read(lambda r: r.scalar("SELECT COUNT(*) FROM events")) == 0
    store.close()


def test_a_write_waits_for_another_writer_and_then_succeeds(tmp_path: Path) -> None:
    store = open_store(tmp_path / "t.db")
    other = apsw.Connection(str(tmp_path / "t.db"))
    other.execute("BEGIN IMMEDIATE")
    done = threading.Event()

    def write() -> None:
        store.write(lambda w: w.execute("INSERT INTO events (at, kind, origin) VALUES (1, 'x', 'foreground')"))
        done.set()

    worker = threading.Thread(target=write)
    worker.start()
    assert not done.wait(0.2)  # blocked behind the other writer
    other.execute("COMMIT")
    worker.join(timeout=30)
    assert done.is_set()
    assert store.read(lambda r: r.scalar("SELECT COUNT(*) FROM events")) == 1
    other.close()
    store.close()


def test_a_write_gives_up_with_a_retryable_error_when_the_lock_is_never_released(tmp_path: Path) -> None:
    store = open_store(tmp_path / "t.db", busy_timeout_ms=10, write_attempts=2)
    other = apsw.Connection(str(tmp_path / "t.db"))
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreBusy) as caught:
            store.write(lambda w: w.execute("INSERT INTO events (at, kind, origin) VALUES (1, 'x', 'foreground')"))
        assert caught.value.retryable
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert store.read(lambda r: r.scalar("SELECT COUNT(*) FROM events")) == 0
    store.close()


def test_a_backup_is_a_consistent_private_copy(tmp_path: Path) -> None:
    store = open_store(tmp_path / "t.db")
    store.write(lambda w: w.execute("INSERT INTO events (at, kind, origin) VALUES (1, 'x', 'foreground')"))
    store.backup(tmp_path / "copy.db")
    with pytest.raises(StoreError, match="already exists"):
        store.backup(tmp_path / "copy.db")
    store.close()
    assert stat.S_IMODE((tmp_path / "copy.db").stat().st_mode) == 0o600
    copy = open_store(tmp_path / "copy.db")
    assert copy.read(lambda r: r.scalar("SELECT COUNT(*) FROM events")) == 1
    assert copy.integrity_check() == []
    copy.close()


def test_term_frequencies_are_backfilled_for_documents_written_before_they_existed(tmp_path: Path) -> None:
    old = SqliteStore(tmp_path / "old.db")
    names = [m.name for m in MIGRATIONS]
    old.initialise(MIGRATIONS[: names.index("m005_term_frequencies")])
    old.write(
        lambda w: [
            w.execute(
                "INSERT INTO documents (kind, ref, body, content_hash, created_at, updated_at) "
                "VALUES ('note', :r, :b, 'h', 0, 0)",
                {"r": str(i), "b": f"migrating databases {i}"},
            )
            for i in range(3)
        ]
    )
    old.close()
    store = open_store(tmp_path / "old.db")
    found = store.read(lambda r: terms.frequencies(r, ["migrating", "database", "1"]))
    store.close()
    assert found == (3, {"migrating": 3, "database": 3, "1": 1})
