"""A process keeps running while a newer threadloom migrates its store (one node of several upgraded first, or
a newer CLI beside an older daemon): its next write is refused, clearly and not retryably, and writes nothing,
since its code does not know the new schema's columns and rules. Reads go on. Both backends."""

from __future__ import annotations

import pytest

from tests.conftest import Backend
from threadloom.errors import StoreError
from threadloom.store.migrations import MIGRATIONS, Migration
from threadloom.store.postgres import PostgresStore
from threadloom.store.postgres_schema import PG_MIGRATIONS
from threadloom.store.sqlite import SqliteStore

FUTURE = Migration("m999_future", "CREATE TABLE future_things (x INTEGER)")
EVENTS = "SELECT count(*) FROM events"


def _event(w: object) -> int:
    return w.execute(  # type: ignore[attr-defined, no-any-return]
        "INSERT INTO events (at, kind, origin) VALUES (1, 'test.write', 'foreground')"
    )


def test_a_write_after_a_newer_threadloom_migrated_the_store_is_refused_and_writes_nothing(backend: Backend) -> None:
    running = backend.open()
    newer = backend.open()
    try:
        running.write(_event)  # writes while the schema is the one it knows
        before = running.read(lambda r: r.scalar(EVENTS))
        if isinstance(newer, SqliteStore):
            newer.migrate([*MIGRATIONS, FUTURE])
        else:
            assert isinstance(newer, PostgresStore)
            newer.migrate([*PG_MIGRATIONS, FUTURE])
        with pytest.raises(StoreError, match="upgraded by a newer threadloom while this process ran") as refused:
            running.write(_event)
        assert not getattr(refused.value, "retryable", False)
        assert running.read(lambda r: r.scalar(EVENTS)) == before  # nothing written; reads still work
        newer.write(_event)  # the newer one writes on
        assert running.read(lambda r: r.scalar(EVENTS)) == before + 1
    finally:
        running.close()
        newer.close()
