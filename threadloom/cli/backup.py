"""`threadloom backup create|restore`."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Annotated

import typer

from threadloom.cli.app import err, out, settings
from threadloom.config import Settings
from threadloom.daemon import control
from threadloom.errors import InvalidInput, StoreError
from threadloom.home import try_lock
from threadloom.store.migrations import MIGRATIONS
from threadloom.store.sqlite import SqliteStore, ensure_private_file

FORCE_WAIT_S = 10.0
backup_app = typer.Typer(help="Consistent copies of the store, taken while servers run.", no_args_is_help=True)


PgBin = Annotated[
    Path | None,
    typer.Option("--pg-bin", help="PostgreSQL store: the folder holding pg_dump and pg_restore (default: PATH)."),
]


def _url(s: Settings) -> str | None:
    return s.store_url.get_secret_value() if s.store_url is not None else None


@backup_app.command()
def create(
    path: Annotated[Path, typer.Argument(help="Where to write the copy (must not exist).")], pg_bin: PgBin = None
) -> None:
    """Write a consistent snapshot of the store to PATH, even while servers run: SQLite by VACUUM INTO; a
    PostgreSQL store (THREADLOOM_STORE_URL) by pg_dump, the whole database in its custom format."""
    s = settings()
    url = _url(s)
    if url:
        from threadloom.store.postgres_dump import dump

        done = dump(url, path.absolute(), pg_bin)
        out.print(
            f"pg_dump of the whole database written to {done['path']} ({done['bytes']:,} bytes, {done['tables']} "
            f"tables; {done['pg_dump']}); restore it into a new database with `threadloom backup restore`",
            markup=False,
            highlight=False,
        )
        return
    _no_pg_bin(pg_bin)
    if not s.layout.database.exists():
        raise StoreError(f"there is no store at {s.layout.database} yet")
    store = SqliteStore(s.layout.database)
    try:
        store.backup(path.absolute())
    finally:
        store.close()
    out.print(f"backup written to {path.absolute()} ({path.stat().st_size:,} bytes)")


def _store_in_use(s: Settings) -> bool:
    fd = try_lock(s.layout.store_lock)
    if fd is None:
        return True
    os.close(fd)
    return False


def validate_backup(path: Path) -> int:
    """Check that the single file `path` is an intact threadloom store this version understands; return its
    schema version. A write-ahead log beside it means it is a live store or a plain copy of one, whose
    latest writes a copy of the file alone would lose: that is refused, not read."""
    if not path.is_file():
        raise StoreError(f"{path} is not a file")
    wal = path.with_name(path.name + "-wal")
    if wal.exists() and wal.stat().st_size > 0:
        raise StoreError(
            f"{path} has a write-ahead log beside it ({wal}): it is a live store or a plain copy of one, and its "
            "latest writes are in that log; make a backup with `threadloom backup create`"
        )
    candidate = SqliteStore(path)
    try:
        problems = candidate.integrity_check()
        names = {r["name"] for r in candidate.read(lambda r: r.rows("SELECT name FROM schema_migrations"))}
    except Exception as exc:  # noqa: BLE001 - any failure here means "not a usable backup"
        raise StoreError(f"{path} is not a threadloom store: {exc}") from None
    finally:
        candidate.close()
    if problems:
        raise StoreError(f"{path} fails the integrity check: {'; '.join(problems[:3])}")
    unknown = names - {m.name for m in MIGRATIONS}
    if unknown:
        raise StoreError(f"{path} comes from a newer threadloom (migrations {', '.join(sorted(unknown))})")
    return len(names)


@backup_app.command()
def restore(
    path: Annotated[Path, typer.Argument(help="A backup made by `backup create`.")],
    force: Annotated[
        bool, typer.Option("--force", help="Stop the daemon and restore even while servers use the store.")
    ] = False,
    pg_bin: PgBin = None,
) -> None:
    """Replace the store with the backup at PATH. The current store is kept beside it.

    Refuses while any threadloom server uses the store, unless --force. A PostgreSQL store
    (THREADLOOM_STORE_URL): the pg_dump archive is loaded by pg_restore into that database, which must be
    new and empty; a database holding a store is never overwritten.
    """
    s = settings()
    url = _url(s)
    if url:
        from threadloom.store.postgres_dump import restore as pg_restore

        done = pg_restore(url, path.absolute(), pg_bin)
        out.print(
            f"restored {path} ({done['tables']} tables, schema version {done['schema_version']}) into "
            f"{done['database']}",
            markup=False,
            highlight=False,
        )
        return
    _no_pg_bin(pg_bin)
    validate_backup(path.absolute())
    # Holding the store lock exclusively keeps every new server waiting until the restore is done.
    lock_fd = try_lock(s.layout.store_lock)
    if lock_fd is None:
        if not force:
            raise StoreError("a threadloom server is using the store; stop it (threadloom daemon stop) or pass --force")
        control.stop(s.layout.socket)
        lock_fd = _wait_for_lock(s.layout.store_lock, FORCE_WAIT_S)
        if lock_fd is None:
            err.print(
                "[yellow]warning:[/yellow] in-process or HTTP servers still have the store open; they keep "
                "writing to the old file until restarted"
            )
    try:
        kept, version = _swap_in(path.absolute(), s.layout.database)
    finally:
        if lock_fd is not None:
            os.close(lock_fd)
    out.print(f"restored {path} (schema version {version}) into {s.layout.database}")
    if kept is not None:
        out.print(f"the previous store is kept at {kept}")


def _wait_for_lock(path: Path, seconds: float) -> int | None:
    deadline = time.monotonic() + seconds
    while True:
        fd = try_lock(path)
        if fd is not None or time.monotonic() > deadline:
            return fd
        time.sleep(0.05)


def _swap_in(backup: Path, db: Path) -> tuple[Path | None, int]:
    """Put a copy of `backup` in place of `db`, validated as the copy that will be used. The old store is
    kept beside it as one consistent file (its write-ahead log included), so restoring that undoes this."""
    validate_backup(backup)
    staged = db.with_name(db.name + ".restoring")
    for leftover in (staged, *(staged.with_name(staged.name + x) for x in ("-wal", "-shm"))):
        leftover.unlink(missing_ok=True)
    ensure_private_file(staged)
    shutil.copyfile(backup, staged)
    with open(staged, "rb+") as fh:
        os.fsync(fh.fileno())
    version = validate_backup(staged)
    kept = None
    if db.exists():
        kept = _kept_name(db)
        old = SqliteStore(db)
        try:
            old.backup(kept)  # a consistent snapshot of the file and its log, as `backup create` makes
        finally:
            old.close()
        for suffix in ("-wal", "-shm"):
            db.with_name(db.name + suffix).unlink(missing_ok=True)
    staged.replace(db)
    for suffix in ("-wal", "-shm"):
        staged.with_name(staged.name + suffix).unlink(missing_ok=True)
    return kept, version


def _kept_name(db: Path) -> Path:
    """Where the replaced store is kept: by the second, with -2, -3, ... for another restore in that second."""
    stamp = f"{db.name}.pre-restore-{time.strftime('%Y%m%d-%H%M%S')}"
    kept, n = db.with_name(stamp), 1
    while kept.exists():
        n += 1
        kept = db.with_name(f"{stamp}-{n}")
    return kept


def _no_pg_bin(pg_bin: Path | None) -> None:
    """--pg-bin on a SQLite store would do nothing: refused, not ignored."""
    if pg_bin is not None:
        raise InvalidInput("--pg-bin goes with a PostgreSQL store (THREADLOOM_STORE_URL); this store is SQLite")
