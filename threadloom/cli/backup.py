"""`threadloom backup create|restore`."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Annotated

import typer

from threadloom.cli.app import out, settings
from threadloom.config import Settings
from threadloom.daemon import control
from threadloom.errors import StoreError
from threadloom.home import try_lock
from threadloom.store.migrations import MIGRATIONS
from threadloom.store.sqlite import SqliteStore, ensure_private_file

backup_app = typer.Typer(help="Consistent copies of the store, taken while servers run.", no_args_is_help=True)


@backup_app.command()
def create(path: Annotated[Path, typer.Argument(help="Where to write the copy (must not exist).")]) -> None:
    """Write a consistent snapshot of the store to PATH (VACUUM INTO), even while servers run."""
    s = settings()
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
    """Check that `path` is an intact threadloom store this version understands; return its schema version."""
    if not path.is_file():
        raise StoreError(f"{path} is not a file")
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
) -> None:
    """Replace the store with the backup at PATH. The current store is kept beside it.

    Refuses while any threadloom server uses the store, unless --force.
    """
    s = settings()
    version = validate_backup(path.absolute())
    if _store_in_use(s):
        if not force:
            raise StoreError("a threadloom server is using the store; stop it (threadloom daemon stop) or pass --force")
        control.stop(s.layout.socket)
    db = s.layout.database
    staged = db.with_name(db.name + ".restoring")
    ensure_private_file(staged)
    shutil.copyfile(path, staged)
    with open(staged, "rb+") as fh:
        os.fsync(fh.fileno())
    kept = None
    if db.exists():
        kept = db.with_name(f"{db.name}.pre-restore-{time.strftime('%Y%m%d-%H%M%S')}")
        for suffix in ("-wal", "-shm"):
            side = db.with_name(db.name + suffix)
            if side.exists():
                side.replace(kept.with_name(kept.name + suffix))
        db.replace(kept)
    staged.replace(db)
    out.print(f"restored {path} (schema version {version}) into {db}")
    if kept is not None:
        out.print(f"the previous store is kept at {kept}")
