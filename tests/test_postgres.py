"""The store contract on both backends, and PostgreSQL's own refusals: a wrong or unreachable URL, a
database from a newer threadloom, a migration that fails half-way. Real PostgreSQL (tests/postgres_server.py)."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import psycopg
import pytest

from tests.conftest import Backend
from tests.postgres_server import scratch_database
from threadloom.config import Settings
from threadloom.errors import ConfigError, StoreBusy, StoreError
from threadloom.runtime import open_settings_store
from threadloom.store.base import Writer
from threadloom.store.migrations import Migration
from threadloom.store.postgres import PostgresStore, open_postgres, redact
from threadloom.store.postgres_schema import PG_MIGRATIONS
from threadloom.store.sqlite import SqliteStore


def test_the_store_url_selects_the_backend_and_sqlite_stays_the_default(tmp_path: Path) -> None:
    store = open_settings_store(Settings(home=tmp_path / "h"))
    assert isinstance(store, SqliteStore)
    store.close()
    with pytest.raises(ConfigError, match="must start with postgresql://"):
        open_settings_store(Settings(home=tmp_path / "h", store_url="mysql://u:p@localhost/x"))  # type: ignore[arg-type]


def test_an_unreachable_server_is_a_clear_error_without_the_password() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"postgresql://ana:hunter2@127.0.0.1:{port}/team"
    with pytest.raises(StoreError) as caught:
        open_postgres(url)
    assert "cannot open the PostgreSQL store at postgresql://ana:***@127.0.0.1" in str(caught.value)
    assert "hunter2" not in str(caught.value)
    assert redact(url) == f"postgresql://ana:***@127.0.0.1:{port}/team"


@pytest.mark.slow
def test_a_database_that_does_not_exist_is_named_in_the_error(postgres_cluster: str) -> None:
    from tests.postgres_server import with_database

    with pytest.raises(StoreError, match='database "no_such_db" does not exist'):
        open_postgres(with_database(postgres_cluster, "no_such_db"))


@pytest.mark.slow
def test_a_fresh_database_is_migrated_with_pgvector(postgres_cluster: str) -> None:
    for url in scratch_database(postgres_cluster, migrated=False):
        store = open_postgres(url)
        try:
            assert store.schema_version() == len(PG_MIGRATIONS)
            assert store.engine()["pgvector"] >= "0.5"  # HNSW arrived in pgvector 0.5
            assert store.integrity_check() == []
            assert open_postgres(url).migrate() == []  # a second process finds nothing to do
        finally:
            store.close()


@pytest.mark.slow
def test_a_database_from_a_newer_threadloom_is_refused_before_anything_is_applied(postgres_cluster: str) -> None:
    for url in scratch_database(postgres_cluster, migrated=False):
        store = PostgresStore(url)
        store.initialise(PG_MIGRATIONS[:3])
        store.write(lambda w: w.execute("INSERT INTO schema_migrations (name, applied_at) VALUES ('m999_future', 1)"))
        store.close()
        with pytest.raises(StoreError, match=r"newer threadloom .*m999_future"):
            open_postgres(url)
        with psycopg.connect(url) as conn:  # the pending migrations were not applied either
            assert conn.execute("SELECT to_regclass('memories')").fetchone() == (None,)


@pytest.mark.slow
def test_a_failing_migration_leaves_nothing_behind(postgres_cluster: str) -> None:
    for url in scratch_database(postgres_cluster, migrated=False):
        bad = Migration("m900_bad", "CREATE TABLE half_done (x INTEGER); SELECT no_such_function();")
        store = PostgresStore(url)
        with pytest.raises(StoreError, match="migration m900_bad failed"):
            store.initialise((*PG_MIGRATIONS[:2], bad))
        assert store.read(lambda r: r.scalar("SELECT to_regclass('half_done')")) is None
        assert "m900_bad" not in {r["name"] for r in store.read(lambda r: r.rows("SELECT name FROM schema_migrations"))}
        store.close()


# The contract, on both backends.


def test_a_read_path_cannot_write(backend: Backend) -> None:
    store = backend.open()
    with pytest.raises(Exception, match=r"(?i)read.?only|readonly|a read tried to write"):
        store.read(lambda r: r.execute("DELETE FROM sessions"))  # type: ignore[attr-defined]
    store.close()


def test_a_write_that_raises_is_rolled_back(backend: Backend) -> None:
    store = backend.open()

    def half(w: Writer) -> None:
        w.execute("INSERT INTO job_cursors (name, position) VALUES ('x', 1)")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        store.write(half)
    assert store.read(lambda r: r.scalar("SELECT COUNT(*) FROM job_cursors WHERE name = 'x'")) == 0
    store.close()


def test_insert_returns_the_new_id_and_named_params_with_percent_signs_round_trip(backend: Backend) -> None:
    store = backend.open()
    text = "100% of 'quoted' :not_a_param and %(nor_this)s"

    def add(w: Writer) -> tuple[int, int]:
        first = w.insert(
            "INSERT INTO events (at, kind, origin, detail) VALUES (:at, 'k', 'test', :d)", {"at": 1, "d": text}
        )
        second = w.insert("INSERT INTO events (at, kind, origin) VALUES (:at, 'k', 'test')", {"at": 2})
        return first, second

    first, second = store.write(add)
    assert second == first + 1
    assert store.read(lambda r: r.scalar("SELECT detail FROM events WHERE id = :i", {"i": first})) == text
    like = store.read(lambda r: r.scalar("SELECT COUNT(*) FROM events WHERE detail LIKE '100%'"))
    assert like == 1
    store.close()


def test_the_shared_dialect_reads_the_same_on_both(backend: Backend) -> None:
    """Each rewrite the PostgreSQL side makes (postgres_sql.py) gives SQLite's answer."""
    store = backend.open()
    store.write(
        lambda w: w.execute(
            "INSERT INTO events (at, kind, origin, detail) VALUES (5000000000000, 'Kind', 'o', '{\"id\": \"m1\"}')"
        )
    )
    got = store.read(
        lambda r: r.one(
            "SELECT max(at, 7) AS big, min(at, 7) AS small, instr('abcabc', 'ca') AS pos, "
            "substr(kind, -2) AS tail, CAST(at AS INTEGER) AS whole, json_extract(detail, '$.id') AS id, "
            "(SELECT group_concat(kind, ', ') FROM events) AS kinds, "
            "(SELECT COUNT(*) FROM json_each(:ids) j WHERE CAST(j.value AS INTEGER) > 1) AS many, "
            "(SELECT COUNT(*) FROM events WHERE kind LIKE 'kind') AS blind "
            "FROM events",
            {"ids": "[1, 2, 3]"},
        )
    )
    assert got == {
        "big": 5_000_000_000_000,
        "small": 7,
        "pos": 3,
        "tail": "nd",
        "whole": 5_000_000_000_000,
        "id": "m1",
        "kinds": "Kind",
        "many": 2,
        "blind": 1,
    }
    store.close()


def test_a_write_waits_for_another_writer_and_gives_up_retryably(backend: Backend) -> None:
    store = backend.open(busy_timeout_ms=50, write_attempts=2)
    other = backend.open(busy_timeout_ms=50, write_attempts=2)
    held, release = threading.Event(), threading.Event()

    def hold(w: Writer) -> None:
        w.execute("INSERT INTO job_cursors (name, position) VALUES ('held', 1)")
        held.set()
        release.wait(10)

    holder = threading.Thread(target=lambda: other.write(hold))
    holder.start()
    held.wait(10)
    try:
        with pytest.raises(StoreBusy):
            store.write(lambda w: w.execute("INSERT INTO job_cursors (name, position) VALUES ('late', 1)"))
    finally:
        release.set()
        holder.join()
    store.write(lambda w: w.execute("INSERT INTO job_cursors (name, position) VALUES ('late', 1)"))
    assert store.read(lambda r: r.scalar("SELECT COUNT(*) FROM job_cursors WHERE name IN ('held', 'late')")) == 2
    store.close()
    other.close()


def test_concurrent_writers_from_many_threads_lose_nothing(backend: Backend) -> None:
    store = backend.open(busy_timeout_ms=2000, write_attempts=20)

    def bump(w: Writer) -> None:  # read then write: safe only if writers are serialised
        value = w.scalar("SELECT position FROM job_cursors WHERE name = 'n'") or 0
        w.execute(
            "INSERT INTO job_cursors (name, position) VALUES ('n', :v) "
            "ON CONFLICT (name) DO UPDATE SET position = excluded.position",
            {"v": int(value) + 1},
        )

    threads = [threading.Thread(target=lambda: [store.write(bump) for _ in range(10)]) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert store.read(lambda r: r.scalar("SELECT position FROM job_cursors WHERE name = 'n'")) == 80
    store.close()


@pytest.mark.slow
@pytest.mark.timeout(600)  # a whole cluster is made: initdb alone takes a minute on a busy machine
def test_a_server_without_pgvector_is_refused_and_nothing_is_written(postgres_cluster: str) -> None:
    """A copy of the test cluster's PostgreSQL with pgvector's files taken out, started in a folder."""
    import os
    import shutil
    import subprocess
    import tempfile

    pgserver = pytest.importorskip("pgserver", reason="needs pgserver's PostgreSQL to copy")
    installed = Path(pgserver.__file__).parent
    folder = Path(tempfile.mkdtemp(prefix="threadloom-nopgvector-"))
    bin_dir = folder / "x" / "y" / "pg" / "bin"  # binaries find their libraries at $ORIGIN/../../../pgserver.libs
    shutil.copytree(installed / "pginstall", folder / "x" / "y" / "pg")
    shutil.copytree(installed.parent / "pgserver.libs", folder / "x" / "pgserver.libs")
    for control in (folder / "x" / "y" / "pg" / "share" / "postgresql" / "extension").glob("vector*"):
        control.unlink()
    as_user: list[str] = []
    if os.geteuid() == 0:  # postgres refuses root: run it as the user pgserver made for the shared cluster
        as_user = ["runuser", "-u", "pgserver", "--"]
        subprocess.run(["chown", "-R", "pgserver", str(folder)], check=True)
        folder.chmod(0o755)
    data, log = folder / "data", folder / "server.log"

    def pg(*args: str) -> None:  # the server's output goes to its log: a pipe would stay open with it
        subprocess.run([*as_user, *args], check=True, stdin=subprocess.DEVNULL, capture_output=True, timeout=300)

    pg(str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "--no-sync")
    pg(
        str(bin_dir / "pg_ctl"),
        "-D",
        str(data),
        "-l",
        str(log),
        "-o",
        f"-k {folder} -c listen_addresses=''",
        "-w",
        "start",
    )
    try:
        url = f"postgresql://postgres@/postgres?host={folder}"
        with pytest.raises(StoreError, match="has no pgvector extension: install it"):
            open_postgres(url)
        with psycopg.connect(url) as conn:
            tables = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()
            functions = conn.execute("SELECT count(*) FROM pg_proc WHERE proname LIKE 'tl\\_%'").fetchone()
        assert (tables, functions) == ((0,), (0,))
    finally:
        pg(str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(folder, ignore_errors=True)
