"""Which backend a process opens: PostgreSQL when a store URL is set, else the SQLite file in the home."""

from __future__ import annotations

from pathlib import Path

from threadloom.errors import ConfigError
from threadloom.store.base import Store
from threadloom.store.sqlite import open_store

SCHEMES = ("postgresql://", "postgres://")


def open_selected(url: str | None, database: Path, *, busy_timeout_ms: int, write_attempts: int) -> Store:
    """Open (creating and migrating as needed) the configured store.

    The PostgreSQL driver is imported only here, so a SQLite install never loads it; a URL with another
    scheme, or one set without the `postgres` extra installed, is a clear error, never a silent SQLite.
    """
    if not url:
        return open_store(database, busy_timeout_ms=busy_timeout_ms, write_attempts=write_attempts)
    if not url.startswith(SCHEMES):
        raise ConfigError(f"THREADLOOM_STORE_URL must start with postgresql:// (got {url.split(':', 1)[0]}:...)")
    try:
        from threadloom.store.postgres import open_postgres
    except ImportError as exc:
        raise ConfigError(
            f"THREADLOOM_STORE_URL names PostgreSQL but its driver is missing ({exc.name}): "
            "pip install 'threadloom[postgres]'"
        ) from None
    return open_postgres(url, busy_timeout_ms=busy_timeout_ms, write_attempts=write_attempts)
