"""LIKE means the same on both backends (store/postgres_sql.py): case-blind for ASCII letters, `%` and `_` as
wildcards, and a backslash an ordinary character unless the statement names an escape."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import Backend
from threadloom.coordination.presence import PresenceService
from threadloom.identity import Provenance
from threadloom.sessions import SessionInfo, SessionService, record_event
from threadloom.store.base import Store


@pytest.fixture
def store(backend: Backend) -> Iterator[Store]:
    opened = backend.open()
    rows = [("Thread.Updated", '{"path": "C:\\\\Users\\\\Bob"}'), ("memory.stored", '{"path": "C:Users"}')]
    for kind, detail in rows:
        opened.write(
            lambda w, k=kind, d=detail: w.execute(
                "INSERT INTO events (at, kind, origin, detail) VALUES (1, :k, 'test', :d)", {"k": k, "d": d}
            )
        )
    yield opened
    opened.close()


def count(store: Store, where: str, **params: str) -> int:
    return int(store.read(lambda r: r.scalar(f"SELECT COUNT(*) FROM events WHERE {where}", params)))


def test_like_is_case_blind_and_takes_no_escape_unless_named(store: Store) -> None:
    assert count(store, "kind LIKE 'thread.%'") == 1
    assert count(store, "kind LIKE :p", p="THREAD._PDATED") == 1
    assert count(store, "kind NOT LIKE 'THREAD.%'") == 1
    assert count(store, "detail LIKE :p", p='%c:\\\\users\\\\bob"}') == 1  # the backslashes are plain characters
    assert count(store, "detail LIKE '%C:\\\\U%'") == 1
    assert count(store, "kind LIKE :p ESCAPE '\\'", p="thread\\_updated") == 0  # a named escape still escapes
    assert count(store, "kind LIKE :p ESCAPE '\\'", p="thread\\.updated") == 1


def test_catch_up_reads_another_users_thread_work_whatever_the_kinds_case(store: Store) -> None:
    sessions = SessionService(store)
    for sid, user in (("me-0001", "ann"), ("peer-001", "ben")):
        sessions.open(SessionInfo(sid, "claude", "stdio", "/repo", "/repo", 1, user=user))
    peer = Provenance(session_id="peer-001", vendor="claude", project="/repo", user="ben")
    store.write(lambda w: record_event(w, peer, "THREAD.renamed", {"thread": "t1"}, bookkeeping=True))
    me = Provenance(session_id="me-0001", vendor="claude", project="/repo", user="ann")
    kinds = [e["kind"] for e in PresenceService(store).catch_up(me, peek=True)["events"]]
    assert kinds == ["THREAD.renamed"]
