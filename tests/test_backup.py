"""Backups: what `backup restore` keeps is itself a backup, and a file is validated exactly as it is used; a
PostgreSQL store is dumped by pg_dump and restored by pg_restore into a new database only."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests import postgres_server
from tests.helpers import cli, count_rows
from threadloom.store.postgres import open_postgres
from threadloom.store.sqlite import SqliteStore


def _store_three(home: Path) -> None:
    for n in range(3):
        assert cli(home, "memory", "store", f"fact number {n} about the deploy pipeline").returncode == 0


def test_the_store_kept_by_a_restore_restores_everything_it_held(home: Path, tmp_path: Path) -> None:
    assert cli(home, "memory", "store", "an old fact").returncode == 0
    backup = tmp_path / "old.db"
    assert cli(home, "backup", "create", str(backup)).returncode == 0
    reader = SqliteStore(home / "threadloom.db")  # a connection left open keeps recent writes in the WAL
    reader.read(lambda r: r.scalar("SELECT count(*) FROM memories"))
    try:
        _store_three(home)
        restored = cli(home, "backup", "restore", str(backup))
        assert restored.returncode == 0, restored.stderr
    finally:
        reader.close()
    assert count_rows(home, "memories") == 1
    kept = next(home.glob("threadloom.db.pre-restore-*"))
    assert not kept.with_name(kept.name + "-wal").exists()
    undo = cli(home, "backup", "restore", str(kept))
    assert undo.returncode == 0, undo.stderr
    assert count_rows(home, "memories") == 4


def test_a_copy_whose_data_is_in_a_wal_beside_it_is_refused_not_restored_empty(home: Path, tmp_path: Path) -> None:
    assert cli(home, "memory", "store", "a fact to keep").returncode == 0
    live = SqliteStore(home / "threadloom.db")
    live.read(lambda r: r.scalar("SELECT count(*) FROM memories"))
    try:
        _store_three(home)
        copy = tmp_path / "cp.db"
        shutil.copyfile(home / "threadloom.db", copy)  # what `cp` of a live store gives: data still in the WAL
        shutil.copyfile(home / "threadloom.db-wal", tmp_path / "cp.db-wal")
    finally:
        live.close()
    before = count_rows(home, "memories")
    refused = cli(home, "backup", "restore", str(copy))
    assert refused.returncode == 2
    assert "cp.db-wal" in refused.stderr and "backup create" in refused.stderr
    assert count_rows(home, "memories") == before


# A PostgreSQL store (THREADLOOM_STORE_URL): pg_dump and pg_restore, driven by the same commands.


def _pg_bin() -> Path | None:
    """The client tools of the test server's version: pgserver's, else (a server of your own) PATH's."""
    try:
        import pgserver
    except ImportError:
        return None
    return Path(pgserver.__file__).parent / "pginstall" / "bin"


def _bin_args() -> list[str]:
    folder = _pg_bin()
    return [] if folder is None else ["--pg-bin", str(folder)]


def _memories(url: str) -> list[str]:
    store = open_postgres(url)
    try:
        return sorted(str(c) for (c,) in store.read(lambda r: r.tuples("SELECT content FROM memories")))
    finally:
        store.close()


@pytest.mark.slow
def test_a_postgresql_store_is_dumped_whole_and_restored_into_a_new_database_only(
    home: Path, tmp_path: Path, postgres_url: str, postgres_cluster: str
) -> None:
    for n in range(3):
        stored = cli(home, "memory", "store", f"team fact {n} about the deploy", THREADLOOM_STORE_URL=postgres_url)
        assert stored.returncode == 0, stored.stderr
    dump = tmp_path / "team.dump"
    made = cli(home, "backup", "create", str(dump), *_bin_args(), THREADLOOM_STORE_URL=postgres_url)
    assert made.returncode == 0, made.stderr
    assert "pg_dump of the whole database" in made.stdout and dump.stat().st_size > 0
    assert dump.stat().st_mode & 0o077 == 0  # private, like the store
    again = cli(home, "backup", "create", str(dump), *_bin_args(), THREADLOOM_STORE_URL=postgres_url)
    assert again.returncode == 2 and "already exists" in again.stderr

    over = cli(home, "backup", "restore", str(dump), *_bin_args(), THREADLOOM_STORE_URL=postgres_url)
    assert over.returncode == 2 and "not empty" in over.stderr and "new database" in over.stderr
    for empty in postgres_server.scratch_database(postgres_cluster, migrated=False):
        restored = cli(home, "backup", "restore", str(dump), *_bin_args(), THREADLOOM_STORE_URL=empty)
        assert restored.returncode == 0, restored.stderr
        assert "schema version" in restored.stdout
        assert _memories(empty) == _memories(postgres_url) == [f"team fact {n} about the deploy" for n in range(3)]


@pytest.mark.slow
def test_without_pg_dump_the_error_names_what_to_install_and_writes_nothing(
    home: Path, tmp_path: Path, postgres_url: str
) -> None:
    dump = tmp_path / "team.dump"
    bare = tmp_path / "bin"
    bare.mkdir()
    refused = cli(home, "backup", "create", str(dump), THREADLOOM_STORE_URL=postgres_url, PATH=str(bare))
    assert refused.returncode == 2 and "pg_dump is not on PATH" in refused.stderr
    assert "postgresql-client" in refused.stderr and "threadloom export" in refused.stderr
    assert not dump.exists()
    not_a_dump = tmp_path / "notes.txt"
    not_a_dump.write_text("hello")
    bad = cli(home, "backup", "restore", str(not_a_dump), *_bin_args(), THREADLOOM_STORE_URL=postgres_url)
    assert bad.returncode == 2 and "pg_dump archive" in bad.stderr


@pytest.mark.slow
def test_a_pg_dump_older_than_the_server_is_refused_with_why(home: Path, tmp_path: Path, postgres_url: str) -> None:
    old = Path("/usr/bin/pg_dump")  # Debian 12's PostgreSQL 15 client, beside a server of 16
    server = open_postgres(postgres_url)
    try:
        major = int(str(server.engine()["postgresql"]).split(".")[0])
    finally:
        server.close()
    if (
        not old.exists()
        or f"PostgreSQL) {major}" in subprocess.run([old, "--version"], capture_output=True, text=True).stdout
    ):
        pytest.skip(f"no pg_dump older than the server's {major} at {old}")
    dump = tmp_path / "team.dump"
    refused = cli(home, "backup", "create", str(dump), "--pg-bin", str(old.parent), THREADLOOM_STORE_URL=postgres_url)
    assert refused.returncode == 2 and "version mismatch" in refused.stderr
    assert "server's major version or newer" in refused.stderr and not dump.exists()


@pytest.mark.slow
def test_a_dump_restores_as_the_owner_of_the_new_database_not_only_as_a_superuser(
    home: Path, tmp_path: Path, postgres_url: str, postgres_cluster: str
) -> None:
    """A managed server's role owns its database but is no superuser: an administrator makes the database and
    its vector extension, and the restore must not need to own the extension (its comment is not restored)."""
    assert cli(home, "memory", "store", "owner restore fact", THREADLOOM_STORE_URL=postgres_url).returncode == 0
    dump = tmp_path / "team.dump"
    assert cli(home, "backup", "create", str(dump), *_bin_args(), THREADLOOM_STORE_URL=postgres_url).returncode == 0
    role, name = f"tl_owner_{os.getpid()}", f"tl_owned_{os.getpid()}"
    admin = postgres_server.with_database(postgres_cluster, name)
    postgres_server._admin(
        postgres_cluster, f"CREATE ROLE {role} LOGIN PASSWORD 'pw'", f"CREATE DATABASE {name} OWNER {role}"
    )
    try:
        postgres_server._admin(admin, "CREATE EXTENSION vector")
        scheme, _, rest = admin.partition("://")
        owner = f"{scheme}://{role}:pw@{rest.split('@', 1)[-1]}"
        restored = cli(home, "backup", "restore", str(dump), *_bin_args(), THREADLOOM_STORE_URL=owner)
        assert restored.returncode == 0, restored.stderr
        assert _memories(owner) == ["owner restore fact"]
    finally:
        postgres_server._admin(postgres_cluster, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)", f"DROP ROLE {role}")


def test_two_restores_in_one_second_keep_two_copies(tmp_path: Path) -> None:
    from threadloom.cli.backup import _kept_name

    db = tmp_path / "threadloom.db"
    names = []
    for _ in range(3):  # as fast as a script restores, then undoes, then restores again
        kept = _kept_name(db)
        assert not kept.exists()
        kept.write_bytes(b"")
        names.append(kept.name)
    assert len(set(names)) == 3 and all(n.startswith("threadloom.db.pre-restore-") for n in names)
