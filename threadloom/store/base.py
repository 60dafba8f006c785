"""The storage seam. Services see only `Store`, `Reader` and `Writer`.

SQL passed through it uses named `:param` placeholders and the subset of SQL
that SQLite and PostgreSQL share; dialect-specific work (full-text, vectors,
upserts) lives in the backend. A backend is one file implementing `Store`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from threadloom.errors import StoreError

T = TypeVar("T")
Row = dict[str, Any]
Params = Mapping[str, Any] | None

SCHEMA_ROWS = "SELECT count(*) FROM schema_migrations"


def upgraded_meanwhile(location: str) -> StoreError:
    """A write found more migrations recorded than this process applied: a newer threadloom upgraded the store
    while it ran. Its code may not know the new columns and rules, so it writes nothing more."""
    return StoreError(
        f"the store at {location} was upgraded by a newer threadloom while this process ran; nothing was "
        "written: restart this server or command with the newer threadloom"
    )


class Reader(Protocol):
    """Queries inside one consistent snapshot. It cannot write."""

    dialect: str  # "sqlite" or "postgresql": for the store modules that keep a statement per engine

    def rows(self, sql: str, params: Params = None) -> list[Row]: ...

    def tuples(self, sql: str, params: Params = None) -> list[tuple[Any, ...]]:
        """Rows as plain tuples in column order: for hot paths that read many rows."""
        ...

    def one(self, sql: str, params: Params = None) -> Row | None: ...

    def scalar(self, sql: str, params: Params = None) -> Any: ...


class Writer(Reader, Protocol):
    """Statements inside one short write transaction."""

    def execute(self, sql: str, params: Params = None) -> int:
        """Run a statement; return the number of rows it changed."""
        ...

    def insert(self, sql: str, params: Params = None) -> int:
        """Run an INSERT; return the new row's integer id."""
        ...

    def execute_many(self, sql: str, params: Sequence[Params]) -> None:
        """Run a statement once for each set of parameters, in order (PostgreSQL: one pipeline, not a round trip
        each; an error may surface at the end, and fails the transaction all the same)."""
        ...

    def insert_many(self, sql: str, params: Sequence[Params]) -> list[int]:
        """`insert` once for each set of parameters, in order: the new ids, in the same order (0 where the
        statement inserted nothing, as `ON CONFLICT DO NOTHING` may)."""
        ...

    def notify(self, channel: str, payload: str = "") -> None:
        """Tell the processes listening on `channel` (any node) once this transaction commits; a backend
        without listeners does nothing, and its processes poll instead (coordination/waiting.py)."""
        ...


class Listener(Protocol):
    """One process's subscription to a notification channel (`Store.listen`)."""

    def wait(self, timeout: float) -> bool:
        """Block until a notification arrives (True) or `timeout` seconds pass (False). True also after a
        lost connection came back, since notifications may have been missed meanwhile."""
        ...

    def close(self) -> None: ...


class Store(Protocol):
    """A threadloom store. Writes are serialised, short and retried on contention."""

    dialect: str

    @property
    def location(self) -> str:
        """Where the data lives, for people (a path or a redacted URL)."""
        ...

    def read(self, fn: Callable[[Reader], T]) -> T:
        """Run `fn` in a read-only snapshot."""
        ...

    def write(self, fn: Callable[[Writer], T]) -> T:
        """Run `fn` in one transaction; it may run again if the store was busy, so keep it pure."""
        ...

    def schema_version(self) -> int: ...

    def engine(self) -> dict[str, str]:
        """Name and version of the database engine and its driver, for status reports."""
        ...

    def backup(self, dest: Path) -> None:
        """Write a consistent copy to `dest` while other processes keep using the store."""
        ...

    def integrity_check(self) -> list[str]:
        """Problems found; an empty list means the store is intact."""
        ...

    def listen(self, channel: str) -> Listener | None:
        """A subscription to `channel` (Writer.notify), or None where the backend has none: then poll."""
        ...

    def close(self) -> None: ...
