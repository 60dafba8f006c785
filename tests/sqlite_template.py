"""A SQLite store migrated once a run and copied for each test that opens a fresh one, as the PostgreSQL tests copy
a template database (tests/postgres_server.py). Migrating a new file runs some 180 schema statements, 20 to 30 ms of
CPU, and the fast tier made about 630 fresh stores.

A copy is the file `open_store` makes: WAL, incremental auto-vacuum, 0600 in a 0700 folder, every migration recorded,
stamped with the time of the copy as a new store's are (a moved store is known by when it was born: its first
migration). Opening it runs the real `initialise`, which finds nothing to apply. The tests of making a store and
of migrating its schema (test_store.py), and every test through a `home`, make their own files and take no copy."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import apsw

from threadloom.clock import now_ms
from threadloom.store.sqlite import ensure_private_dir, open_store

_TEMPLATE: list[Path] = []  # made on first use, removed when the run ends


def _template() -> Path:
    if not _TEMPLATE:
        folder = Path(tempfile.mkdtemp(prefix="threadloom-template-"))
        atexit.register(shutil.rmtree, folder, True)
        path = folder / "template.db"
        open_store(path).close()
        conn = apsw.Connection(str(path))  # the last connection, writable: folds the log into the file and removes it
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        conn.close()
        assert not path.with_name("template.db-wal").exists()
        _TEMPLATE.append(path)
    return _TEMPLATE[0]


def fresh_store(path: Path) -> Path:
    """Put a new migrated store at `path` (which must not exist) as `open_store` would make it; return `path`."""
    ensure_private_dir(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out, _template().open("rb") as template:
        shutil.copyfileobj(template, out)
    conn = apsw.Connection(str(path))
    try:
        conn.execute("UPDATE schema_migrations SET applied_at = ?", (now_ms(),))
    finally:
        conn.close()
    return path


def fresh_home(home: Path) -> Path:
    """A home folder whose store (`threadloom.db`) is a fresh copy; return `home`."""
    fresh_store(home / "threadloom.db")
    return home
