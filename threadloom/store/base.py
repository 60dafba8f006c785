"""The storage seam. Services see only `Store`, `Reader` and `Writer`.

SQL passed through it uses named `:param` placeholders and the subset of SQL
that SQLite and PostgreSQL share; dialect-specific work (full-text, vectors,
upserts) lives in the backend. A backend is one file implementing `Store`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol, TypeVar

T = TypeVar("T")
Row = dict[str, Any]
Params = Mapping[str, Any] | None


class Reader(Protocol):
    """Queries inside one consistent snapshot. It cannot write."""

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


class Store(Protocol):
    """A threadloom store. Writes are serialised, short and retried on contention."""

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

    def close(self) -> None: ...
