"""The PostgreSQL backend, through psycopg 3 and a connection pool (`THREADLOOM_STORE_URL=postgresql://...`).

Writes keep SQLite's contract (ARCHITECTURE.md): one writer at a time, here across every process and node
on the database, by a transaction-scoped advisory lock taken first in each write transaction; a lock not
had within `THREADLOOM_BUSY_TIMEOUT_MS`, a serialization failure or a deadlock runs the whole transaction
again with the same backoff, then raises `StoreBusy`. Reads run in a `REPEATABLE READ READ ONLY`
transaction: one snapshot, and a write in it is refused by the server. SQL arrives in the seam's
dialect and is translated once per statement (postgres_sql.py).
"""

from __future__ import annotations

import logging
import random
import re
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import errors as pg_errors
from psycopg.abc import Buffer
from psycopg.adapt import Dumper, Loader
from psycopg.rows import dict_row
from psycopg.types.string import StrDumperUnknown
from psycopg_pool import ConnectionPool, PoolTimeout

from threadloom.clock import now_ms
from threadloom.errors import StoreBusy, StoreError
from threadloom.store.base import SCHEMA_ROWS, Params, Row, upgraded_meanwhile
from threadloom.store.migrations import Migration
from threadloom.store.postgres_notify import PgListener, notify
from threadloom.store.postgres_schema import BOOTSTRAP_SQL, PG_MIGRATIONS
from threadloom.store.postgres_sql import translate

T = TypeVar("T")
log = logging.getLogger(__name__)

_BACKOFF_BASE_S = 0.02
_BACKOFF_MAX_S = 0.5
# A call waits this long for a pooled connection (psycopg_pool's default is 30 s), then is told to retry:
# while the database is down, calls answer in seconds instead of hanging.
POOL_WAIT_S = 10.0
WRITER_LOCK_KEY = 0x7468_6C6F  # "thlo": the advisory lock every write transaction holds
_RETRYABLE = (pg_errors.LockNotAvailable, pg_errors.SerializationFailure, pg_errors.DeadlockDetected)


_QUERY_PASSWORD = re.compile(r"(?i)((?:^|[?&])password=)[^&]*")
_NETLOC_PASSWORD = re.compile(r"^([a-z][a-z0-9+.-]*://[^:/?#@]*):[^@/?#]*@", re.IGNORECASE)


def redact(url: str) -> str:
    """The URL without its password (in the user part or as a `password=` parameter), for messages and
    `location`; a URL too malformed to parse still loses it."""
    head, mark, query = url.partition("?")
    query = _QUERY_PASSWORD.sub(r"\1***", query)
    try:
        parts = urlsplit(head)
        password = parts.password
    except ValueError:  # an unclosed [IPv6 bracket, say
        return _NETLOC_PASSWORD.sub(r"\1:***@", head) + mark + query
    if password is not None:
        host = parts.netloc.rsplit("@", 1)[-1]
        head = urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))
    return head + mark + query


class _NumericLoader(Loader):
    """SUM and AVG answer `numeric`: as int or float, as SQLite does, not Decimal."""

    def load(self, data: Any) -> int | float:
        text = bytes(data).decode()
        value = float(text)
        return int(text) if text.lstrip("-").isdigit() else value


class _BoolDumper(Dumper):
    """Flags are INTEGER columns on both engines: a Python bool goes as 0 or 1."""

    oid = psycopg.adapters.types["int8"].oid

    def dump(self, obj: Any) -> bytes:
        return b"1" if obj else b"0"


class _StrDumper(StrDumperUnknown):
    """PostgreSQL's text holds no NUL character, which SQLite's does (a transcript's hostile cwd, a pasted binary):
    stored as U+FFFD, so the row is written rather than refused."""

    def dump(self, obj: str) -> Buffer | None:
        return super().dump(obj.replace("\x00", "\ufffd") if "\x00" in obj else obj)


# An INSERT naming the `id` column among its columns (identity columns are all named `id` here).
_EXPLICIT_ID = re.compile(r"\s*INSERT\s+(?:OR\s+\w+\s+)?INTO\s+\"?(\w+)\"?\s*\((?:[^)]*,)?\s*id\s*[,)]", re.I)


class _Cursor:
    """Reader and Writer over one psycopg connection inside a transaction."""

    dialect = "postgresql"

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def _run(self, sql: str, params: Params, *, dicts: bool) -> psycopg.Cursor[Any]:
        cur = self._conn.cursor(row_factory=dict_row) if dicts else self._conn.cursor()
        cur.execute(translate(sql), dict(params or {}))
        if (named := _EXPLICIT_ID.match(sql)) is not None:
            self._advance_identity(named.group(1))
        return cur

    def _advance_identity(self, table: str) -> None:
        """An INSERT that gave `id` itself (an import, a copy, a restore) leaves the identity's sequence behind:
        moved at once past the largest id, never back, so the next plain insert (in this transaction too)
        cannot collide. SQLite needs nothing: its rowid follows the largest."""
        quoted = f'"{table.lower()}"'
        sequence = self._conn.execute("SELECT pg_get_serial_sequence(%s, 'id')", (quoted,)).fetchone()
        if sequence is None or sequence[0] is None:  # keyed by text: no sequence
            return
        self._conn.execute(
            "SELECT setval(%(s)s, GREATEST(COALESCE(pg_sequence_last_value(%(s)s::regclass), 1), "
            f"(SELECT COALESCE(max(id), 1) FROM {quoted})))",
            {"s": sequence[0]},
        )

    def rows(self, sql: str, params: Params = None) -> list[Row]:
        return list(self._run(sql, params, dicts=True).fetchall())

    def tuples(self, sql: str, params: Params = None) -> list[tuple[Any, ...]]:
        return list(self._run(sql, params, dicts=False).fetchall())

    def one(self, sql: str, params: Params = None) -> Row | None:
        row: Row | None = self._run(sql, params, dicts=True).fetchone()
        return row

    def scalar(self, sql: str, params: Params = None) -> Any:
        row = self._run(sql, params, dicts=False).fetchone()
        return None if row is None else row[0]

    def execute(self, sql: str, params: Params = None) -> int:
        return max(0, self._run(sql, params, dicts=False).rowcount)

    def insert(self, sql: str, params: Params = None) -> int:
        return _new_id(self._run(_returning(sql), params, dicts=False).fetchone())

    # Many: psycopg sends them in pipeline mode, so a batch costs about one round trip, not one a statement.

    def execute_many(self, sql: str, params: Sequence[Params]) -> None:
        if params:
            self._conn.cursor().executemany(translate(sql), [dict(p or {}) for p in params])

    def insert_many(self, sql: str, params: Sequence[Params]) -> list[int]:
        if not params:
            return []
        cur = self._conn.cursor()
        cur.executemany(translate(_returning(sql)), [dict(p or {}) for p in params], returning=True)
        ids = [_new_id(cur.fetchone())]
        while cur.nextset():
            ids.append(_new_id(cur.fetchone()))
        return ids

    def notify(self, channel: str, payload: str = "") -> None:
        notify(self._conn, channel, payload)


def _returning(sql: str) -> str:
    return sql if "RETURNING" in sql.upper() else sql.rstrip().rstrip(";") + " RETURNING id"


def _new_id(row: tuple[Any, ...] | None) -> int:
    # A table keyed by text has no integer id (SQLite would answer its hidden rowid, which no caller reads).
    return row[0] if row is not None and isinstance(row[0], int) else 0


def _configure(conn: psycopg.Connection[Any]) -> None:
    conn.adapters.register_loader("numeric", _NumericLoader)
    conn.adapters.register_dumper(bool, _BoolDumper)
    conn.adapters.register_dumper(str, _StrDumper)


class PostgresStore:
    """A store in one PostgreSQL database (with pgvector), shared by any number of processes."""

    dialect = "postgresql"

    def __init__(self, url: str, *, busy_timeout_ms: int = 2000, write_attempts: int = 5, pool_size: int = 8) -> None:
        self.url = url
        self._busy_timeout_ms = busy_timeout_ms
        self._write_attempts = write_attempts
        self._pool_size = pool_size
        self._pool: ConnectionPool[psycopg.Connection[Any]] | None = None
        self._pool_lock = threading.Lock()
        self._schema_rows: int | None = None  # migrations recorded when this process last applied them

    @property
    def location(self) -> str:
        return redact(self.url)

    # opening

    def _check_reachable(self) -> None:
        """Connect once by hand: the driver's own reason (no such host, password, database) in the error."""
        try:
            psycopg.connect(self.url, connect_timeout=10).close()
        except psycopg.Error as exc:
            # Every line: the failure ("Connection refused") and libpq's hint after it; the driver may quote
            # the URL it could not parse, password and all.
            reason = " ".join(line.strip() for line in str(exc).splitlines() if line.strip()) or type(exc).__name__
            reason = reason.replace(self.url, self.location)
            raise StoreError(f"cannot open the PostgreSQL store at {self.location}: {reason}") from None

    def pool(self) -> ConnectionPool[psycopg.Connection[Any]]:
        with self._pool_lock:
            if self._pool is None:
                pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
                    self.url,
                    min_size=1,
                    max_size=self._pool_size,
                    kwargs={"autocommit": True, "connect_timeout": 10},
                    configure=_configure,
                    timeout=POOL_WAIT_S,
                    open=False,
                    name="threadloom",
                )
                pool.open(wait=True, timeout=15)
                self._pool = pool
            return self._pool

    def initialise(self, migrations: Sequence[Migration] = PG_MIGRATIONS) -> None:
        """The extension and bookkeeping first (one transaction), then each pending migration."""
        self._check_reachable()
        with self.pool().connection() as conn:
            try:
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITER_LOCK_KEY,))
                    if not conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone():
                        raise StoreError(
                            f"the PostgreSQL server of {self.location} has no pgvector extension: install it "
                            "(the pgvector package for your PostgreSQL, or the pgvector/pgvector image) and retry"
                        )
                    conn.execute(BOOTSTRAP_SQL)
            except psycopg.Error as exc:
                raise StoreError(f"cannot prepare the PostgreSQL store at {self.location}: {exc}") from None
        self.migrate(migrations)

    def migrate(self, migrations: Sequence[Migration] = PG_MIGRATIONS) -> list[str]:
        """Refuse a database from a newer threadloom before anything, then apply each pending migration
        in its own transaction, recorded in it."""
        known = {m.name for m in migrations}
        recorded = self._recorded(known)
        applied_now: list[str] = []
        self._schema_rows = None
        for migration in migrations:
            if migration.name in recorded:
                continue

            def apply(conn: psycopg.Connection[Any], m: Migration = migration) -> bool:
                if conn.execute("SELECT 1 FROM schema_migrations WHERE name = %s", (m.name,)).fetchone():
                    return False  # another process applied it meanwhile
                conn.execute(m.sql.encode())  # raw: DDL has no placeholders, and may hold `%`
                conn.execute("INSERT INTO schema_migrations (name, applied_at) VALUES (%s, %s)", (m.name, now_ms()))
                return True

            try:
                done = self._retry_busy(partial(self._transaction_raw, apply))
            except psycopg.Error as exc:
                raise StoreError(f"migration {migration.name} failed on {self.location}: {exc}") from None
            if done:
                log.info("applied migration %s", migration.name)
                applied_now.append(migration.name)
        self._schema_rows = len(self._recorded(known))
        return applied_now

    def _recorded(self, known: set[str]) -> set[str]:
        """The migrations the database records, refused when one is unknown here (a newer threadloom's)."""
        recorded = {str(r["name"]) for r in self.read(lambda r: r.rows("SELECT name FROM schema_migrations"))}
        unknown = sorted(recorded - known)
        if unknown:
            raise StoreError(
                f"the store at {self.location} was written by a newer threadloom (unknown migrations: "
                f"{', '.join(unknown)}); upgrade threadloom"
            )
        return recorded

    def _transaction_raw(self, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        with self.pool().connection() as conn, conn.transaction():
            conn.execute(f"SET LOCAL lock_timeout = {max(1, self._busy_timeout_ms)}")
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITER_LOCK_KEY,))
            # Migrations hold the same lock, so this count is the schema every statement below writes to.
            expected = self._schema_rows
            if expected is not None and (conn.execute(SCHEMA_ROWS).fetchone() or (None,))[0] != expected:
                raise upgraded_meanwhile(self.location)
            return fn(conn)

    def _retry_busy(self, fn: Callable[[], T]) -> T:
        for attempt in range(self._write_attempts):
            try:
                return fn()
            except _RETRYABLE:
                if attempt == self._write_attempts - 1:
                    break
                time.sleep(min(_BACKOFF_MAX_S, _BACKOFF_BASE_S * 2**attempt) * random.uniform(0.5, 1.0))
            except psycopg.OperationalError as exc:
                raise self._unreachable(exc) from None
        raise StoreBusy(f"the store stayed locked by another writer for {self._write_attempts} attempts; try again")

    # the seam

    def _unreachable(self, exc: psycopg.OperationalError) -> StoreBusy:
        """A connection was lost (the server restarted, or ended it): every idle one of the pool is checked and
        the dead ones replaced now, so a server that is back is served at the next call, not after one failed
        call per pooled connection."""
        if not isinstance(exc, PoolTimeout) and self._pool is not None:
            self._pool.check()
        return StoreBusy(f"the PostgreSQL store at {self.location} is unreachable ({exc}); try again")

    def read(self, fn: Callable[[_Cursor], T]) -> T:
        try:
            return self._read_once(fn)
        except PoolTimeout as exc:
            raise self._unreachable(exc) from None
        except psycopg.OperationalError as exc:  # a read is safe to run again: once, on a checked connection
            self._unreachable(exc)
        try:
            return self._read_once(fn)
        except psycopg.OperationalError as exc:
            raise self._unreachable(exc) from None

    def _read_once(self, fn: Callable[[_Cursor], T]) -> T:
        try:
            with self.pool().connection() as conn:
                conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                try:
                    return fn(_Cursor(conn))
                finally:
                    conn.execute("ROLLBACK")
        except pg_errors.ReadOnlySqlTransaction as exc:
            raise StoreError(f"a read tried to write: {exc}") from None

    def write(self, fn: Callable[[_Cursor], T]) -> T:
        return self._retry_busy(lambda: self._transaction_raw(lambda conn: fn(_Cursor(conn))))

    def listen(self, channel: str) -> PgListener:
        return PgListener(self.url, channel, self.location)

    def engine(self) -> dict[str, str]:
        def versions(r: _Cursor) -> dict[str, str]:
            server = str(r.scalar("SHOW server_version"))
            vector = r.scalar("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            return {"postgresql": server, "pgvector": str(vector), "psycopg": psycopg.__version__}

        return self.read(versions)

    def schema_version(self) -> int:
        names = {m.name for m in PG_MIGRATIONS}
        rows = self.read(lambda r: r.rows("SELECT name FROM schema_migrations"))
        return sum(1 for row in rows if row["name"] in names)

    def backup(self, dest: Path) -> None:
        """pg_dump of the whole database into `dest` (postgres_dump.py; pg_dump must be on PATH)."""
        from threadloom.store.postgres_dump import dump

        dump(self.url, dest)

    def integrity_check(self) -> list[str]:
        def check(r: _Cursor) -> list[str]:
            problems: list[str] = []
            if r.scalar("SELECT extversion FROM pg_extension WHERE extname = 'vector'") is None:
                problems.append("the pgvector extension is not installed in this database")
            invalid = r.tuples(
                "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE NOT i.indisvalid AND n.nspname = current_schema()"
            )
            problems.extend(f"index {name} is invalid" for (name,) in invalid)
            return problems

        return self.read(check)

    def close(self) -> None:
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()


def open_postgres(url: str, *, busy_timeout_ms: int = 2000, write_attempts: int = 5) -> PostgresStore:
    """Open (migrating as needed) the PostgreSQL store at `url`; any failure closes what was opened."""
    store = PostgresStore(url, busy_timeout_ms=busy_timeout_ms, write_attempts=write_attempts)
    try:
        store.initialise()
    except BaseException:
        store.close()
        raise
    return store
