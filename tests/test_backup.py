"""Backups: what `backup restore` keeps is itself a backup, and a file is validated exactly as it is used."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.helpers import cli, count_rows
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
