"""A row inserted with its own integer id (an import, a copy, a restore) leaves the next plain insert a free id,
on both backends: PostgreSQL's identity sequences are moved past it (store/postgres.py), never back."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import Backend
from threadloom.identity import Provenance
from threadloom.sessions import record_event
from threadloom.store.base import Store, Writer

PROV = Provenance(session_id="s-1", vendor="claude", project="p", user="u")


@pytest.fixture
def store(backend: Backend) -> Iterator[Store]:
    opened = backend.open()
    yield opened
    opened.close()


def explicit(w: Writer, event_id: int) -> None:
    w.execute(
        "INSERT INTO events (id, at, kind, session_id, vendor, project, origin, detail) "
        "VALUES (:id, 1, 'imported', 's-0', 'claude', 'p', 'import', '{}')",
        {"id": event_id},
    )


def plain(store: Store) -> int:
    return store.write(lambda w: record_event(w, PROV, "memory.stored", {}, bookkeeping=True))


def test_a_plain_insert_after_explicit_ids_gets_a_fresh_id(store: Store) -> None:
    first = plain(store)
    store.write(lambda w: explicit(w, first + 1))  # the id the sequence would hand out next
    assert plain(store) == first + 2
    store.write(lambda w: (explicit(w, 1000), explicit(w, 1001)))
    assert plain(store) == 1002
    store.write(lambda w: explicit(w, 500))  # a lower one moves nothing back
    assert plain(store) == 1003

    def both(w: Writer) -> int:  # an explicit and a plain insert in one transaction
        explicit(w, 2000)
        return record_event(w, PROV, "memory.stored", {}, bookkeeping=True)

    assert store.write(both) == 2001
    assert plain(store) == 2002


def test_a_table_keyed_by_text_takes_explicit_ids_as_before(store: Store) -> None:
    store.write(
        lambda w: w.execute(
            "INSERT INTO accounts (name, created_at) VALUES ('alice', 1)"  # no `id`: nothing to advance
        )
    )
    store.write(
        lambda w: w.execute(
            "INSERT INTO account_tokens (id, account, label, digest, created_at) VALUES ('t1', 'alice', '', 'd', 1)"
        )
    )
    assert store.read(lambda r: r.scalar("SELECT count(*) FROM account_tokens")) == 1
