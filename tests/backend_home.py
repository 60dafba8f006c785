"""A home whose store is on each backend, for end-to-end tests of served servers and CLI processes.

A module that imports `home` from here overrides the conftest fixture: each of its tests that takes `home` runs
on SQLite (the home's file) and on PostgreSQL (a scratch database, the slow tier). Processes started for the
home get the database by `store_env(home)`; the test opens the same store by `open_home_store(home)`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Backend
from threadloom.store.base import Store
from threadloom.store.select import open_selected

_URLS: dict[Path, str] = {}  # a home whose store is a PostgreSQL database: that database


@pytest.fixture
def home(home: Path, backend: Backend) -> Iterator[Path]:
    """The home, with its store on each backend."""
    if backend.name == "postgresql":
        backend.open().close()
        assert backend.url is not None
        _URLS[home] = backend.url
    yield home
    _URLS.pop(home, None)


def store_env(home: Path) -> dict[str, str]:
    """What a process started for `home` needs in its environment to use the home's store."""
    return {"THREADLOOM_STORE_URL": _URLS[home]} if home in _URLS else {}


def open_home_store(home: Path) -> Store:
    return open_selected(_URLS.get(home), home / "threadloom.db", busy_timeout_ms=2000, write_attempts=5)
