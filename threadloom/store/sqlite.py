"""The embedded SQLite backend, through apsw.

Why apsw: the stdlib `sqlite3` on many Python builds (this one among them)
cannot load extensions, which the vector index needs; apsw ships a current
SQLite with FTS5, loads extensions, and leaves transactions entirely to us (no
implicit BEGIN), so `BEGIN IMMEDIATE` means what it says. See ARCHITECTURE.md.

One writer connection per process, behind a lock; reads go to per-thread
connections opened read-only, so a read path cannot write even by mistake.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import apsw

from threadloom.clock import now_ms
from threadloom.errors import ConfigError, StoreBusy, StoreError, StoreFull
from threadloom.store.base import SCHEMA_ROWS, Params, Row, upgraded_meanwhile
from threadloom.store.migrations import BOOTSTRAP_SQL, MIGRATIONS, Migration

T = TypeVar("T")
log = logging.getLogger(__name__)

_BACKOFF_BASE_S = 0.02
_BACKOFF_MAX_S = 0.5


def _dict_row(cursor: apsw.Cursor, row: Sequence[Any]) -> Row:
    return dict(zip((d[0] for d in cursor.get_description()), row, strict=True))


def ensure_private_dir(path: Path) -> None:
    """Create `path` (and parents) and make it 0700."""
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise ConfigError(f"cannot make the folder {path}: {exc.strerror or exc}") from None
    if path.stat().st_mode & 0o077:
        path.chmod(0o700)


def ensure_private_file(path: Path) -> None:
    """Create `path` if missing and make it 0600, before SQLite opens it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    os.close(fd)
    if path.stat().st_mode & 0o077:
        path.chmod(0o600)


class _Cursor:
    """Reader and Writer over one apsw connection."""

    dialect = "sqlite"

    def __init__(self, conn: apsw.Connection) -> None:
        self._conn = conn

    def rows(self, sql: str, params: Params = None) -> list[Row]:
        return list(self._conn.execute(sql, params or {}))

    def tuples(self, sql: str, params: Params = None) -> list[tuple[Any, ...]]:
        cursor = self._conn.cursor()
        cursor.row_trace = None  # skip the dict conversion
        return list(cursor.execute(sql, params or {}))

    def one(self, sql: str, params: Params = None) -> Row | None:
        for row in self._conn.execute(sql, params or {}):
            return dict(row)
        return None

    def scalar(self, sql: str, params: Params = None) -> Any:
        row = self.one(sql, params)
        return None if row is None else next(iter(row.values()))

    def execute(self, sql: str, params: Params = None) -> int:
        self._conn.execute(sql, params or {})
        return int(self._conn.changes())

    def insert(self, sql: str, params: Params = None) -> int:
        self._conn.execute(sql, params or {})
        return int(self._conn.last_insert_rowid())

    def execute_many(self, sql: str, params: Sequence[Params]) -> None:
        if params:
            self._conn.cursor().executemany(sql, [p or {} for p in params])

    def insert_many(self, sql: str, params: Sequence[Params]) -> list[int]:
        ids = []
        for p in params:
            cursor = self._conn.cursor()
            cursor.row_trace = None
            for _ in cursor.execute(sql, p or {}):  # to its end (a RETURNING row too): changes() is then this one's
                pass
            ids.append(int(self._conn.last_insert_rowid()) if self._conn.changes() else 0)
        return ids

    def notify(self, channel: str, payload: str = "") -> None:
        """Nothing: SQLite has no listeners; its processes poll (coordination/waiting.py)."""


READ_MMAP_BYTES = 1 << 30
# The writer's page cache: inserts land all over the unique and session indexes of a growing table (random
# message keys); 2 MB (the default) let a 100k-message ingest re-read index pages (3,241 -> 3,537 a second).
WRITE_CACHE_KIB = 65_536
CHECKPOINT_PAGES = 10_000  # 40 MB of 4 KiB pages
LOG_KEEP_BYTES = 4 << 20  # a folded log is cut back to this: a quiet store keeps no 40 MB log


class SqliteStore:
    """A store in one SQLite file, in WAL mode."""

    dialect = "sqlite"

    def __init__(self, path: Path, *, busy_timeout_ms: int = 2000, write_attempts: int = 5) -> None:
        self.path = path
        self._busy_timeout_ms = busy_timeout_ms
        self._write_attempts = write_attempts
        self._write_lock = threading.Lock()
        self._local = threading.local()
        self._all_conns: list[apsw.Connection] = []
        self._conns_lock = threading.Lock()
        self._writer: apsw.Connection | None = None
        self._schema_rows: int | None = None  # migrations recorded when this process last applied them

    @property
    def location(self) -> str:
        return str(self.path)

    # connections

    def _connect(self, *, readonly: bool) -> apsw.Connection:
        flags = apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
        try:
            conn = apsw.Connection(str(self.path), flags=flags)
        except apsw.Error as exc:
            raise StoreError(f"cannot open the store at {self.path}: {exc}") from exc
        conn.set_busy_timeout(self._busy_timeout_ms)
        conn.row_trace = _dict_row
        if readonly:
            conn.execute("PRAGMA query_only = ON")
            # Searches look rows up by key all over the file (a vector, a message, a document per candidate):
            # mapped pages cost no read call or copy each, half the time of a dialog search's re-scoring
            # (600 candidates: 40 -> 20 ms at 100k messages, bench/dialog.py). Address space, not memory:
            # the pages are the OS's file cache.
            conn.execute(f"PRAGMA mmap_size = {READ_MMAP_BYTES}")
        else:
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute(f"PRAGMA cache_size = -{WRITE_CACHE_KIB}")
            # The log is folded into the file every CHECKPOINT_PAGES written pages, by the committing writer,
            # with two fsyncs each. At SQLite's 1,000 a 40k-message ingest made 111 of them, 2 s of its wall
            # time; 10,000 made 21, and a page rewritten by many batches is copied once per fold, not once per
            # batch (bench/ingest.py). The log is then cut back to LOG_KEEP_BYTES.
            conn.execute(f"PRAGMA wal_autocheckpoint = {CHECKPOINT_PAGES}")
            conn.execute(f"PRAGMA journal_size_limit = {LOG_KEEP_BYTES}")
        with self._conns_lock:
            self._all_conns.append(conn)
        return conn

    def _reader_conn(self) -> apsw.Connection:
        conn: apsw.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect(readonly=True)
            self._local.conn = conn
        return conn

    def _writer_conn(self) -> apsw.Connection:
        if self._writer is None:
            self._writer = self._connect(readonly=False)
        return self._writer

    # opening

    def initialise(self, migrations: Sequence[Migration] = MIGRATIONS) -> None:
        """Create the file with private permissions, switch to WAL and apply pending migrations."""
        ensure_private_dir(self.path.parent)
        ensure_private_file(self.path)
        conn = self._writer_conn()
        # Takes effect only in a file with no table yet: free pages can then be given back in short steps while
        # the store serves (store/compaction.py); an older store is converted once by `threadloom compact`.
        self._retry_busy(lambda: conn.execute("PRAGMA auto_vacuum = INCREMENTAL").fetchall())
        self._retry_busy(lambda: conn.execute("PRAGMA journal_mode = WAL").fetchall())
        conn.execute("PRAGMA synchronous = NORMAL")
        self._retry_busy(lambda: conn.execute(BOOTSTRAP_SQL).fetchall())
        self.migrate(migrations)

    def migrate(self, migrations: Sequence[Migration] = MIGRATIONS) -> list[str]:
        """Apply each migration not yet recorded, one transaction each; return the names applied."""
        known = {m.name for m in migrations}
        applied_now: list[str] = []
        self._schema_rows = None
        for migration in migrations:

            def apply(w: _Cursor, m: Migration = migration) -> bool:
                if w.one("SELECT 1 AS x FROM schema_migrations WHERE name = :n", {"n": m.name}):
                    return False
                w.execute(m.sql)
                w.execute(
                    "INSERT INTO schema_migrations (name, applied_at) VALUES (:n, :t)",
                    {"n": m.name, "t": now_ms()},
                )
                return True

            if self.write(apply):
                log.info("applied migration %s", migration.name)
                applied_now.append(migration.name)
        recorded = {r["name"] for r in self.read(lambda r: r.rows("SELECT name FROM schema_migrations"))}
        unknown = sorted(recorded - known)
        if unknown:
            raise StoreError(
                f"the store at {self.path} was written by a newer threadloom (unknown migrations: "
                f"{', '.join(unknown)}); upgrade threadloom"
            )
        self._schema_rows = len(recorded)
        return applied_now

    def _retry_busy(self, fn: Callable[[], T]) -> T:
        """The one place that waits out other writers: bounded attempts with jittered backoff."""
        for attempt in range(self._write_attempts):
            try:
                return fn()
            except apsw.BusyError:
                if attempt == self._write_attempts - 1:
                    break
                time.sleep(min(_BACKOFF_MAX_S, _BACKOFF_BASE_S * 2**attempt) * random.uniform(0.5, 1.0))
        raise StoreBusy(f"the store stayed locked by another writer for {self._write_attempts} attempts; try again")

    # the seam

    def read(self, fn: Callable[[_Cursor], T]) -> T:
        conn = self._reader_conn()
        conn.execute("BEGIN")
        try:
            return fn(_Cursor(conn))
        finally:
            conn.execute("COMMIT")

    def write(self, fn: Callable[[_Cursor], T]) -> T:
        with self._write_lock:
            conn = self._writer_conn()
            try:
                return self._retry_busy(lambda: self._transaction(conn, self._checked(fn)))
            except apsw.FullError:
                raise StoreFull(
                    f"the disk holding the store ({self.path.parent}) is full: nothing was written; "
                    "free some space and retry (reads still work)"
                ) from None

    def _checked(self, fn: Callable[[_Cursor], T]) -> Callable[[_Cursor], T]:
        """`fn`, after a look that no newer threadloom has migrated the store since this process did."""
        expected = self._schema_rows
        if expected is None:  # migrating
            return fn

        def run(w: _Cursor) -> T:
            if w.scalar(SCHEMA_ROWS) != expected:
                raise upgraded_meanwhile(str(self.path))
            return fn(w)

        return run

    @staticmethod
    def _transaction(conn: apsw.Connection, fn: Callable[[_Cursor], T]) -> T:
        conn.execute("BEGIN IMMEDIATE")
        try:
            result = fn(_Cursor(conn))
            conn.execute("COMMIT")
        except BaseException:
            if not conn.get_autocommit():
                conn.execute("ROLLBACK")
            raise
        return result

    def listen(self, channel: str) -> None:
        """None: SQLite has no notifications to listen for; processes poll."""
        return None

    def engine(self) -> dict[str, str]:
        return {"sqlite": apsw.sqlite_lib_version(), "apsw": apsw.apsw_version()}

    def schema_version(self) -> int:
        names = {m.name for m in MIGRATIONS}
        rows = self.read(lambda r: r.rows("SELECT name FROM schema_migrations"))
        return sum(1 for row in rows if row["name"] in names)

    def backup(self, dest: Path) -> None:
        if dest.exists():
            raise StoreError(f"{dest} already exists; choose a new path")
        if not dest.parent.is_dir():
            raise StoreError(f"{dest.parent} is not a folder")
        # VACUUM INTO reads one snapshot and never blocks writers in WAL mode; it needs a
        # connection without query_only, so it gets its own short-lived one.
        conn = apsw.Connection(str(self.path), flags=apsw.SQLITE_OPEN_READONLY)
        try:
            conn.set_busy_timeout(self._busy_timeout_ms)
            old_umask = os.umask(0o077)
            try:
                conn.execute("VACUUM INTO :dest", {"dest": str(dest)})
            finally:
                os.umask(old_umask)
        except apsw.Error as exc:
            raise StoreError(f"backup to {dest} failed: {exc}") from exc
        finally:
            conn.close()
        dest.chmod(0o600)

    def integrity_check(self) -> list[str]:
        rows = self.read(lambda r: r.rows("PRAGMA integrity_check"))
        problems = [str(next(iter(row.values()))) for row in rows]
        return [] if problems == ["ok"] else problems

    def close(self) -> None:
        with self._conns_lock:
            conns, self._all_conns = self._all_conns, []
        for conn in conns:
            conn.close()
        self._writer = None
        self._local = threading.local()


def open_store(path: Path, *, busy_timeout_ms: int = 2000, write_attempts: int = 5) -> SqliteStore:
    """Open (creating and migrating as needed) the store at `path`."""
    store = SqliteStore(path, busy_timeout_ms=busy_timeout_ms, write_attempts=write_attempts)
    store.initialise()
    return store
