"""Coordination reads on a team store respect organisation visibility (issue 21): catch_up, peers, inbox and
whoami show nothing from a project of an organisation the caller left or never belonged to, on both backends.

alice owns acme (project shop), carol owns globex (project garden), bob is a member of both.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import Backend
from threadloom.accounts.service import Accounts
from threadloom.coordination.presence import PresenceService
from threadloom.coordination.signals import SignalService
from threadloom.errors import NotFound
from threadloom.identity import Provenance
from threadloom.memory.model import NewMemory
from threadloom.memory.service import MemoryService
from threadloom.search.engine import SearchEngine
from threadloom.sessions import SessionInfo, SessionService, record_event
from threadloom.store.base import Store


@pytest.fixture
def store(backend: Backend) -> Iterator[Store]:
    opened = backend.open()
    accounts = Accounts(opened)
    for user in ("alice", "bob", "carol"):
        accounts.add_user(user)
    accounts.add_org("acme", "alice")
    accounts.add_org("globex", "carol")
    accounts.set_member("acme", "bob", "member")
    accounts.set_member("globex", "bob", "member")
    accounts.assign_project("shop", "acme")
    accounts.assign_project("garden", "globex")
    yield opened
    opened.close()


def join(store: Store, sid: str, user: str, project: str, org: str) -> Provenance:
    info = SessionInfo(sid, "claude", "http", project, None, None, user=user, author=user, org=org)
    SessionService(store).open(info)
    return info.provenance()


def event_ids(result: dict[str, object]) -> list[str]:
    return [f"{e['kind']}@{e['project']}" for e in result["events"]]  # type: ignore[attr-defined]


def test_a_member_taken_out_of_an_organisation_sees_none_of_its_coordination(store: Store) -> None:
    presence, signals = PresenceService(store), SignalService(store)
    memories = MemoryService(store, SearchEngine(store))
    bob_garden = join(store, "bob-garden-01", "bob", "garden", "globex")
    bob_shop = join(store, "bob-shop-0001", "bob", "shop", "acme")
    alice = join(store, "alice-shop-01", "alice", "shop", "acme")
    carol = join(store, "carol-gard-01", "carol", "garden", "globex")
    shared = memories.store(NewMemory(content="acme ships on fridays", visibility="project"), alice).memory
    store.write(lambda w: record_event(w, bob_shop, "thread.updated", {"thread": "acme-roadmap"}))
    store.write(lambda w: record_event(w, bob_shop, "memory.linked", {"id": shared.id}))
    store.write(lambda w: record_event(w, carol, "thread.updated", {"thread": "garden-beds"}))
    signals.whisper(alice, "bob-shop-0001", "acme's launch code is tabs")
    asked = signals.ask(alice, "bob-shop-0001", "ready?")

    # While bob is in acme: his shop session's work shows from garden, and shop's signals reach him.
    seen = event_ids(presence.catch_up(bob_garden, peek=True))
    assert "thread.updated@shop" in seen and "memory.linked@shop" in seen and "thread.updated@garden" in seen
    assert "bob-shop-0001" in {p["id"] for p in presence.peers(bob_garden)}
    assert len(signals.inbox(bob_shop)["unread"]) == 2 and presence.whoami(bob_shop)["unread_signals"] == 2

    Accounts(store).remove_member("acme", "bob")

    after = presence.catch_up(bob_garden, peek=True)
    assert event_ids(after) == ["thread.updated@garden"], after
    assert shared.id not in str(after)
    assert {p["id"] for p in presence.peers(bob_garden)} == {"bob-garden-01", "carol-gard-01"}
    # His old shop session (resumed by its id) reads nothing that was sent in acme's project.
    box = signals.inbox(bob_shop, include_read=True)
    assert box == {"unread": [], "read": [], "unread_left": 0}
    assert presence.whoami(bob_shop)["unread_signals"] == 0 and signals.unread_count(bob_shop) == 0
    assert signals.answer_for(alice, int(asked.id or 0)) is None
    with pytest.raises(NotFound):
        signals.respond(bob_shop, int(asked.id or 0), "yes")
    with pytest.raises(NotFound):
        signals.whisper(bob_garden, "alice-shop-01", "still there?")
    assert "thread.updated@shop" not in event_ids(presence.catch_up(bob_shop, peek=True))


def test_no_one_outside_an_organisation_sees_its_projects_events_or_sessions(store: Store) -> None:
    presence = PresenceService(store)
    carol = join(store, "carol-gard-01", "carol", "garden", "globex")
    alice = join(store, "alice-shop-01", "alice", "shop", "acme")
    # alice's own session that strayed into globex's project (she never belonged there)
    stray = join(store, "alice-gard-01", "alice", "garden", "globex")
    store.write(lambda w: record_event(w, alice, "thread.updated", {"thread": "acme-roadmap"}))
    store.write(lambda w: record_event(w, carol, "thread.updated", {"thread": "garden-beds"}))
    store.write(lambda w: record_event(w, stray, "thread.updated", {"thread": "alice-in-garden"}))
    assert event_ids(presence.catch_up(carol, peek=True)) == []  # alice is nobody carol may see
    assert "alice-gard-01" not in {p["id"] for p in presence.peers(carol)}
    mine = presence.catch_up(alice, peek=True)
    assert event_ids(mine) == [], mine  # not carol's, nor her own in garden
    assert {p["id"] for p in presence.peers(alice)} == {"alice-shop-01"}
