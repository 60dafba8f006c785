"""Backups of a PostgreSQL store by the database's own tools: `pg_dump` writes one consistent snapshot of the
whole database (every user's rows, the schema, the pgvector extension) in its custom format while servers keep
serving, and `pg_restore` loads it into a new, empty database. `threadloom backup create|restore` drives them.

Why these and not `threadloom export`: an export is one user's items as files to read or carry, not the team
store; a restore from it would lose every other user, the journal and the accounts. Restoring over a database
that already holds a store is refused: servers may be writing to it, and `pg_restore --clean` would drop their
tables under them; restore into a new database, then point THREADLOOM_STORE_URL at it.

pg_dump refuses a server newer than itself, so the client must be of the server's major version or newer
(the error says so). The URL's password goes to the tools as PGPASSWORD, never on their command line, where
any local user could read it in the process list.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, Final
from urllib.parse import unquote, urlsplit, urlunsplit

import psycopg

from threadloom.errors import StoreError
from threadloom.store.postgres import open_postgres, redact

MARK: Final = "schema_migrations"  # a dump that has no such table is not a threadloom store's
INSTEAD: Final = (
    "install the PostgreSQL client tools of the server's major version or newer (Debian/Ubuntu: the "
    "postgresql-client-<major> package from apt.postgresql.org; the postgres image has them) or name their "
    "folder with --pg-bin; `threadloom export` is no substitute: it holds one user's items, not the team store"
)


def tool(name: str, folder: Path | None) -> Path:
    """`name` (pg_dump, pg_restore) in `folder`, else on PATH; a clear error naming what to install."""
    if folder is not None:
        found = folder / name
        if not (found.is_file() and os.access(found, os.X_OK)):
            raise StoreError(f"there is no executable {name} in {folder}; {INSTEAD}")
        return found
    on_path = shutil.which(name)
    if on_path is None:
        raise StoreError(f"{name} is not on PATH, and a PostgreSQL store is backed up by pg_dump: {INSTEAD}")
    return Path(on_path)


def _target(url: str) -> tuple[str, dict[str, str]]:
    """The URL without its password, and the environment that gives the password to libpq."""
    parts = urlsplit(url)
    env = dict(os.environ)
    if parts.password is None:
        return url, env
    env["PGPASSWORD"] = unquote(parts.password)
    user = f"{parts.username}@" if parts.username else ""
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{user}{host}")), env


def _run(args: list[str], env: dict[str, str], what: str) -> str:
    done = subprocess.run(args, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False)
    if done.returncode != 0:
        reason = " ".join(done.stderr.strip().splitlines()[-3:]) or f"exit status {done.returncode}"
        hint = "; use a pg_dump of the server's major version or newer" if "version mismatch" in reason else ""
        raise StoreError(f"{what} failed: {reason}{hint}")
    return done.stdout


def _contents(restore: Path, path: Path) -> list[str]:
    """The dump's table of contents (pg_restore --list); refused when it is no threadloom store's dump."""
    listing = _run([str(restore), "--list", str(path)], dict(os.environ), f"reading {path} as a pg_dump archive")
    entries = [line for line in listing.splitlines() if line and not line.startswith(";")]
    # a line: "<id>; <oid> <oid> TABLE DATA <schema> <table> <owner>"
    if not any(" TABLE DATA " in line and line.split()[-2] == MARK for line in entries):
        raise StoreError(f"{path} is a pg_dump archive but not of a threadloom store (it has no {MARK} table)")
    return entries


def dump(url: str, dest: Path, folder: Path | None = None) -> dict[str, Any]:
    """pg_dump of the database at `url` into `dest` (custom format, 0600, must not exist), read back by
    pg_restore --list before it is reported written."""
    pg_dump = tool("pg_dump", folder)
    pg_restore = tool("pg_restore", pg_dump.parent)  # the same client's, so it reads what its pg_dump writes
    if dest.exists():
        raise StoreError(f"{dest} already exists; name a new file")
    if not dest.parent.is_dir():
        raise StoreError(f"{dest.parent} is not a folder")
    target, env = _target(url)
    os.close(os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))  # private before a byte is written
    try:
        _run([str(pg_dump), "--format=custom", "--file", str(dest), "--dbname", target], env, "pg_dump")
        entries = _contents(pg_restore, dest)
    except BaseException:
        dest.unlink(missing_ok=True)
        raise
    version = _run([str(pg_dump), "--version"], env, "pg_dump --version").strip()
    return {"path": str(dest), "bytes": dest.stat().st_size, "tables": _count(entries), "pg_dump": version}


def _count(entries: list[str]) -> int:
    return sum(" TABLE DATA " in line for line in entries)


def restore(url: str, src: Path, folder: Path | None = None) -> dict[str, Any]:
    """Load the dump at `src` into the empty database at `url` (all or nothing), then open it as a store:
    a dump from a newer threadloom is refused there, and the migrations it lacks are applied."""
    pg_restore = tool("pg_restore", folder)
    if not src.is_file():
        raise StoreError(f"{src} is not a file")
    entries = _contents(pg_restore, src)
    target, env = _target(url)
    try:
        with psycopg.connect(url, connect_timeout=10) as conn:
            held = conn.execute(
                "SELECT COUNT(*) FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')"
            ).fetchone()
    except psycopg.Error as exc:
        raise StoreError(f"cannot open {redact(url)}: {str(exc).strip().splitlines()[-1]}") from None
    if held is not None and int(held[0]) > 0:
        raise StoreError(
            f"the database at {redact(url)} is not empty ({int(held[0])} tables): threadloom restores only into a "
            "new database (createdb <name>; then THREADLOOM_STORE_URL=postgresql://.../<name>), never over a store "
            "servers may be using"
        )
    # --no-comments: the one comment is pgvector's own, and only the extension's owner (a superuser) may set it;
    # the database's owner restores without it.
    args = [str(pg_restore), "--exit-on-error", "--single-transaction", "--no-owner", "--no-comments"]
    args += ["--dbname", target, str(src)]
    _run(args, env, "pg_restore")
    store = open_postgres(url)
    try:
        version = store.schema_version()
    finally:
        store.close()
    return {"database": redact(url), "tables": _count(entries), "schema_version": version}
