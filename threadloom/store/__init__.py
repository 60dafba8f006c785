"""Storage: the narrow seam every service talks to, and its SQLite backend."""

from threadloom.store.base import Reader, Store, Writer
from threadloom.store.sqlite import SqliteStore, open_store

__all__ = ["Reader", "SqliteStore", "Store", "Writer", "open_store"]
