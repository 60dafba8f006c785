"""`threadloom migrate --to postgresql://...`: move this home's SQLite store into a PostgreSQL team database
(store/transfer.py: ids kept, resumable, safe to run again)."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from threadloom.cli.app import err, out, settings
from threadloom.errors import ConfigError, StoreError
from threadloom.runtime import hold_store_lock
from threadloom.store.select import SCHEMES, open_selected
from threadloom.store.sqlite import open_store
from threadloom.store.transfer import copy_store


def _check_source(path: Path) -> None:
    """Refuse, before opening it for writing (which would add threadloom's tables), a file that is not a
    threadloom store: not SQLite, empty, or another program's database."""
    with path.open("rb") as f:
        header = f.read(16)
    if header != b"SQLite format 3\x00":
        raise StoreError(f"{path} is not a SQLite database" + (" (it is empty)" if not header else ""))
    try:
        with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as db:
            found = db.execute("SELECT 1 FROM sqlite_master WHERE name = 'schema_migrations'").fetchone()
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read {path}: {exc}") from None
    if found is None:
        raise StoreError(f"{path} is a SQLite database but not a threadloom store: nothing to copy")


def migrate(
    to: Annotated[str, typer.Option("--to", help="The team database: postgresql://user:password@host/db.")],
    source: Annotated[
        Path | None, typer.Option("--from", help="The SQLite store to copy (default: this home's).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Copy a personal SQLite store into a PostgreSQL team database, keeping every id, edge, validity and
    provenance; beside a store that moved in first, integer ids move past its own, with every reference to
    them. Safe to run again, and an interrupted run resumes where it stopped."""
    s = settings()
    if not to.startswith(SCHEMES):
        raise ConfigError(f"--to takes a postgresql:// URL (got {to.split(':', 1)[0]}:...)")
    path = source or s.layout.database
    if not path.is_file():
        raise StoreError(f"no SQLite store at {path} to copy (name one with --from)")
    _check_source(path)
    lock = hold_store_lock(s) if source is None else None  # as every command on the home's store
    src = open_store(path, busy_timeout_ms=s.busy_timeout_ms, write_attempts=s.write_attempts)
    try:
        target = open_selected(to, path, busy_timeout_ms=s.busy_timeout_ms, write_attempts=s.write_attempts)
        try:
            with Progress(
                TextColumn("{task.description:<24}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                console=err, transient=as_json,
            ) as bar:  # fmt: skip
                shown: dict[str, object] = {}

                def advance(table: str, copied: int, total: int) -> None:
                    if table not in shown:
                        shown[table] = bar.add_task(table, total=max(total, copied))
                    bar.update(shown[table], completed=copied, total=max(total, copied))  # type: ignore[arg-type]

                try:
                    report = copy_store(src, path, target, advance)
                except KeyboardInterrupt:  # the batch in flight rolled back; every committed one is recorded
                    bar.stop()
                    err.print("interrupted: run the same command again to resume where it stopped")
                    raise typer.Exit(130) from None
        finally:
            target.close()
    finally:
        src.close()
        if lock is not None:
            os.close(lock)
    if as_json:
        out.print_json(json.dumps(report.as_dict()))
        return
    done = report.as_dict()
    how = "again (rows refreshed)" if report.again else "resumed" if report.resumed else "done"
    out.print(f"copied {done['rows']:,} rows in {len(report.tables)} tables to {report.target}: {how}")
