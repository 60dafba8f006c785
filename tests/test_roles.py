"""What an organisation member's role lets them change (store/roles.py), on both backends: a member writes the
organisation's shared memories, a reader reads them and writes only private ones, a non-member writes none;
a personal store (no organisation holds its project) has no roles."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Backend
from threadloom.accounts.service import Accounts
from threadloom.errors import InvalidInput, NotPermitted
from threadloom.identity import Provenance
from threadloom.memory.model import NewMemory
from threadloom.memory.service import MemoryService
from threadloom.portable.export import export_to
from threadloom.portable.importer import import_from
from threadloom.scrub import SCRUB
from threadloom.search.engine import SearchEngine
from threadloom.store.base import Store


@pytest.fixture
def store(backend: Backend) -> Iterator[Store]:
    opened = backend.open()
    accounts = Accounts(opened)
    for user in ("alice", "bob", "rita", "carol"):
        accounts.add_user(user)
    accounts.add_org("acme", "alice")
    accounts.add_org("globex", "carol")
    accounts.set_member("acme", "bob", "member")
    accounts.set_member("acme", "rita", "reader")
    accounts.assign_project("shop", "acme")
    yield opened
    opened.close()


def who(user: str, project: str = "shop", org: str = "acme") -> Provenance:
    return Provenance(session_id=f"{user}-session", vendor="claude", project=project, user=user, org=org)


def test_a_reader_reads_shared_memories_and_writes_only_private_ones(store: Store) -> None:
    memories = MemoryService(store, SearchEngine(store))
    bob, rita = who("bob"), who("rita")
    shared = memories.store(NewMemory("acme ships on fridays", visibility="project"), bob).memory
    org_wide = memories.store(NewMemory("acme's style guide is tabs", visibility="org"), bob).memory
    assert memories.get(shared.id, rita).content == "acme ships on fridays"
    assert memories.get(org_wide.id, rita).visibility == "org"

    own = memories.store(NewMemory("rita prefers dark mode"), rita).memory
    assert own.visibility == "private" and own.owner == "rita"
    for visibility in ("project", "org"):
        with pytest.raises(NotPermitted, match="you are a reader of organisation 'acme'") as refused:
            memories.store(NewMemory(f"rita's {visibility} note", visibility=visibility), rita)  # type: ignore[arg-type]
        assert not refused.value.retryable
    with pytest.raises(NotPermitted, match=r"not change them \(memory.promoted\)"):
        memories.promote(own.id, "project", rita)
    with pytest.raises(NotPermitted, match=r"not change them \(link\)"):
        memories.link(own.id, shared.id, "refines", rita)
    assert memories.get(own.id, rita).visibility == "private"  # the refused promotion wrote nothing
    assert memories.pin(own.id, True, rita).pinned


def test_a_member_demoted_to_reader_can_no_longer_change_what_they_shared(store: Store) -> None:
    memories = MemoryService(store, SearchEngine(store))
    bob = who("bob")
    mine = memories.store(NewMemory("deploys need two approvals", visibility="project"), bob).memory
    private = memories.store(NewMemory("bob's scratch note"), bob).memory
    memories.link(private.id, mine.id, "refines", bob)  # a member may
    newer = memories.store(NewMemory("deploys need three approvals", visibility="project"), who("alice")).memory
    Accounts(store).set_member("acme", "bob", "reader")
    for action, call in (
        ("amend", lambda: memories.amend(mine.id, bob, by=newer.id)),
        ("store", lambda: memories.amend(mine.id, bob, content="deploys need three approvals")),  # its correction
        ("memory.pinned", lambda: memories.pin(mine.id, True, bob)),
        ("delete", lambda: memories.delete(mine.id, bob)),
        ("store", lambda: memories.store(NewMemory("another shared fact", visibility="project"), bob)),
    ):
        with pytest.raises(NotPermitted, match=rf"not change them \({action}\)"):
            call()
    assert memories.get(mine.id, bob).superseded_by is None and not memories.get(mine.id, bob).pinned
    Accounts(store).set_member("acme", "bob", "admin")
    assert memories.delete(mine.id, bob)["deleted"] == mine.id


def test_no_member_writes_nothing_shared_and_a_personal_project_has_no_roles(store: Store) -> None:
    memories = MemoryService(store, SearchEngine(store))
    carol_in_shop = who("carol", "shop", "globex")  # never in acme
    with pytest.raises(NotPermitted, match="you are not a member of organisation 'acme'"):
        memories.store(NewMemory("carol's note in acme's project", visibility="project"), carol_in_shop)
    with pytest.raises(NotPermitted, match="not a member of organisation 'acme'"):
        memories.store(NewMemory("carol's org note under acme", visibility="org"), who("carol", "garden", "acme"))
    personal = who("rita", "/home/rita/repo", "rita")  # no organisation holds it, no organisation named rita
    assert memories.store(NewMemory("a personal project fact", visibility="org"), personal).created
    assert memories.store(NewMemory("a personal shared fact", visibility="project"), personal).created


def test_the_reader_role_is_accepted_and_listed(store: Store) -> None:
    accounts = Accounts(store)
    assert {m.account: m.role for m in accounts.orgs()[0].members} == {"alice": "owner", "bob": "member",
                                                                       "rita": "reader"}  # fmt: skip
    with pytest.raises(InvalidInput, match="owner, admin, member, reader"):
        accounts.set_member("acme", "bob", "viewer")


def test_a_reader_cannot_import_shared_memories_and_nothing_is_written(store: Store, tmp_path: Path) -> None:
    memories = MemoryService(store, SearchEngine(store))
    memories.store(NewMemory("acme's deploy window is 9-11", visibility="project"), who("bob"))
    memories.store(NewMemory("bob's own shortcut list"), who("bob"))
    export_to(store, "bob", tmp_path / "bob")
    Accounts(store).set_member("acme", "bob", "reader")
    count = "SELECT count(*) FROM memories"
    before = store.read(lambda r: r.scalar(count))
    with pytest.raises(NotPermitted, match=r"reader of organisation 'acme'.*\(import\)"):
        import_from(store, "rita", "acme", SCRUB, tmp_path / "bob")
    assert store.read(lambda r: r.scalar(count)) == before
    Accounts(store).set_member("acme", "rita", "member")
    assert import_from(store, "rita", "acme", SCRUB, tmp_path / "bob").counts["memories_added"] == 2
