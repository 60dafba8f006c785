from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import Backend
from threadloom.coordination.presence import PresenceService
from threadloom.coordination.signals import SignalService
from threadloom.errors import InvalidInput, NotFound
from threadloom.identity import Provenance
from threadloom.memory.model import NewMemory
from threadloom.memory.service import MemoryService
from threadloom.search.engine import SearchEngine
from threadloom.sessions import SessionInfo, SessionService
from threadloom.store.sqlite import SqliteStore


@pytest.fixture
def store(backend: Backend) -> Iterator[SqliteStore]:
    s = backend.open()  # SQLite and PostgreSQL (tests/conftest.py)
    yield s
    s.close()


def join(store: SqliteStore, sid: str, project: str = "/repo") -> Provenance:
    info = SessionInfo(id=sid, vendor="claude", transport="stdio", project=project, cwd=project, pid=1, user="u")
    SessionService(store).open(info)
    return info.provenance()


def test_whispers_arrive_once_in_order_and_a_prefix_names_the_session(store: SqliteStore) -> None:
    signals = SignalService(store)
    alice, bob = join(store, "alice-0001"), join(store, "bob-0002")
    for n in range(3):
        signals.whisper(alice, "bob-", f"hello {n}")
    assert signals.whisper(alice, "alice-0001", "to myself").id is None
    box = signals.inbox(bob)
    assert [s["body"] for s in box["unread"]] == ["hello 0", "hello 1", "hello 2"] and box["unread_left"] == 0
    assert signals.inbox(bob)["unread"] == box["unread"]  # shown, not acknowledged: shown again
    first = box["unread"][0]["id"]
    assert [s["body"] for s in signals.inbox(bob, ack=[first])["unread"]] == ["hello 1", "hello 2"]
    assert signals.inbox(bob, ack_upto=box["unread"][-1]["id"])["unread"] == []
    assert [s["body"] for s in signals.inbox(bob, include_read=True)["read"]] == ["hello 0", "hello 1", "hello 2"]
    assert signals.inbox(alice)["unread"] == []


def test_an_ambiguous_or_unknown_name_is_a_clear_error(store: SqliteStore) -> None:
    signals = SignalService(store)
    me = join(store, "me-0000")
    join(store, "twin-0001")
    join(store, "twin-0002")
    with pytest.raises(InvalidInput, match="several sessions"):
        signals.whisper(me, "twin", "hi")
    with pytest.raises(NotFound):
        signals.whisper(me, "nobody-here", "hi")
    with pytest.raises(InvalidInput, match="1-20,000"):
        signals.whisper(me, "twin-0001", "")


def test_broadcasts_reach_the_projects_live_sessions_only(store: SqliteStore) -> None:
    signals = SignalService(store)
    a, b = join(store, "a-000"), join(store, "b-000")
    join(store, "c-000", project="/other")
    gone = join(store, "d-000")
    SessionService(store).close(SessionInfo("d-000", "claude", "stdio", "/repo", None, None))
    sent = signals.broadcast(a, "deploy freeze at 5pm")
    assert sent.recipients == ("b-000",) and gone.session_id not in sent.recipients
    assert set(signals.broadcast(a, "all hands", everywhere=True).recipients) == {"b-000", "c-000"}
    assert [s["body"] for s in signals.inbox(b)["unread"]] == ["deploy freeze at 5pm", "all hands"]


def test_ask_and_respond(store: SqliteStore) -> None:
    signals = SignalService(store)
    lead, dev, other = join(store, "lead-1"), join(store, "dev-1"), join(store, "other-1")
    asked = signals.ask(lead, "dev-1", "is the migration done?")
    assert asked.id is not None and signals.answer_for(lead, asked.id) is None
    question = signals.inbox(dev)["unread"][0]
    assert question["kind"] == "ask"
    with pytest.raises(InvalidInput, match=r"no question \d+ was asked of this session"):
        signals.respond(other, asked.id, "yes")
    signals.respond(dev, asked.id, "yes, at 14:02")
    answer = signals.answer_for(lead, asked.id)
    assert answer is not None and answer["body"] == "yes, at 14:02" and answer["sender"] == "dev-1"


def test_peers_and_catching_up_on_what_others_wrote(store: SqliteStore) -> None:
    presence = PresenceService(store)
    a, b = join(store, "a-1"), join(store, "b-1")
    assert {p["id"]: p["self"] for p in presence.peers(a)} == {"a-1": True, "b-1": False}
    memory = MemoryService(store, SearchEngine(store))
    memory.store(NewMemory(content="the cache is redis"), b)
    memory.store(NewMemory(content="my own note"), a)
    peeked = presence.catch_up(a, peek=True)
    assert [e["kind"] for e in peeked["events"]] == ["memory.stored"] and peeked["events"][0]["session_id"] == "b-1"
    assert presence.catch_up(a)["events"] == peeked["events"]
    assert presence.catch_up(a)["events"] == []
    assert presence.whoami(a)["session"]["id"] == "a-1"
