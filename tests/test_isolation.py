"""Users see only what they may: one visibility rule, applied inside the queries, on every read path.

Three users share a store: ana and ben work in /repo, cy in /elsewhere. Each test fails if a
path shows, changes or reveals the existence of what is not the caller's.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes import HashingEmbedder
from tests.sqlite_template import fresh_store
from threadloom.clock import now_ms
from threadloom.coordination.presence import PresenceService
from threadloom.coordination.signals import SignalService
from threadloom.errors import InvalidInput, NotFound
from threadloom.identity import Provenance
from threadloom.memory.core import CoreMemory
from threadloom.memory.maintenance import Maintenance
from threadloom.memory.model import Link, NewMemory
from threadloom.memory.recall import MemoryRecall, RecallFilters
from threadloom.memory.scoring import DAY_MS, ScoringConfig
from threadloom.memory.service import MemoryService
from threadloom.search.engine import SearchEngine
from threadloom.sessions import SessionInfo, SessionService
from threadloom.store.sqlite import SqliteStore, open_store

ANA = Provenance("ana-1", "claude", "/repo", user="ana")
BEN = Provenance("ben-1", "codex", "/repo", user="ben")
CY = Provenance("cy-1", "gemini", "/elsewhere", user="cy")
SECRET = "ana's private roadmap: acquire the zeppelin company"


class World:
    def __init__(self, store: SqliteStore) -> None:
        self.store = store
        engine = SearchEngine(store, HashingEmbedder())
        config = ScoringConfig()
        self.memory = MemoryService(store, engine, config)
        self.recall = MemoryRecall(store, engine, config)
        self.core = CoreMemory(store, self.memory)
        self.maintenance = Maintenance(store, config)
        sessions = SessionService(store)
        for p in (ANA, BEN, CY):
            assert p.session_id is not None
            sessions.open(SessionInfo(p.session_id, p.vendor, "stdio", p.project, p.project, 1, user=p.user))

    def put(self, prov: Provenance, content: str, **kw: object) -> str:
        return self.memory.store(NewMemory(content=content, **kw), prov).memory.id  # type: ignore[arg-type]


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    store = open_store(fresh_store(tmp_path / "w.db"))
    yield World(store)
    store.close()


def test_another_users_identical_text_or_key_neither_blocks_nor_reveals(world: World) -> None:
    mine = world.memory.store(NewMemory(content=SECRET, idempotency_key="plan-1"), ANA).memory.id
    theirs = world.memory.store(NewMemory(content=SECRET), BEN)
    assert theirs.created and theirs.memory.id != mine and theirs.duplicate_of is None
    keyed = world.memory.store(NewMemory(content="ben's own words", idempotency_key="plan-1"), BEN)
    assert keyed.created and not keyed.replayed and keyed.memory.id != mine
    again = world.memory.store(NewMemory(content="anything", idempotency_key="plan-1"), ANA)
    assert again.replayed and again.memory.id == mine


def test_a_core_key_is_per_user_and_an_error_never_names_anothers_memory(world: World) -> None:
    anas = world.core.set_core("deploy.window", "ana deploys on Tuesdays", ANA)
    bens = world.core.set_core("deploy.window", "ben deploys on Fridays", BEN)
    assert anas.id != bens.id and bens.owner == "ben"
    listing = world.recall.core_list(BEN)["core"]
    assert [c["id"] for c in listing] == [bens.id]
    other = world.put(BEN, "another of ben's facts")
    with pytest.raises(InvalidInput) as refused:
        world.core.make_core(other, "deploy.window", 50, BEN)
    assert anas.id not in str(refused.value)


def test_reads_by_id_treat_anothers_private_memory_as_absent(world: World) -> None:
    private = world.put(ANA, SECRET)
    missing = "m_00000000000000aa"
    for prov in (BEN, CY):
        for call in (
            lambda i, p=prov: world.recall.explain(i, p),
            lambda i, p=prov: world.recall.traverse(i, p),
            lambda i, p=prov: world.memory.get(i, p),
            lambda i, p=prov: world.memory.amend(i, p, content="rewritten"),
            lambda i, p=prov: world.memory.delete(i, p),
            lambda i, p=prov: world.memory.pin(i, True, p),
            lambda i, p=prov: world.memory.link(world.put(p, f"{p.user} links"), i, "related_to", p),
            lambda i, p=prov: world.core.make_core(i, "stolen.key", 50, p),
        ):
            with pytest.raises(NotFound) as hidden:
                call(private)
            with pytest.raises(NotFound) as absent:
                call(missing)
            assert str(hidden.value).replace(private, "ID") == str(absent.value).replace(missing, "ID")
    assert world.recall.explain(private, ANA)["id"] == private


def test_traverse_and_explain_neither_walk_through_nor_count_a_hidden_memory(world: World) -> None:
    shared = world.put(ANA, "the gateway retries three times", visibility="project")
    hidden = world.put(ANA, SECRET, related=(Link(shared, "refines"),))
    beyond = world.put(
        ANA, "retries back off exponentially", visibility="project", related=(Link(hidden, "depends_on"),)
    )
    seen = world.recall.traverse(shared, BEN, depth=3)
    assert {n["id"] for n in seen["nodes"]} == {shared}
    assert seen["edges"] == []
    assert world.recall.explain(shared, BEN)["edges_by_type"] == {}
    assert {n["id"] for n in world.recall.traverse(shared, ANA, depth=3)["nodes"]} == {shared, hidden, beyond}


def test_stats_count_only_what_the_caller_may_see(world: World) -> None:
    world.put(ANA, SECRET)
    world.put(ANA, "a second private note", pinned=True)
    world.put(ANA, "shared with the repo", visibility="project")
    assert world.recall.stats(ANA)["memories"] == 3
    ben = world.recall.stats(BEN)
    assert ben["memories"] == 1 and ben["pinned"] == 0 and ben["edges"] == 0
    assert world.recall.stats(CY)["memories"] == 0


def test_maintenance_reports_and_restores_only_the_callers_own(world: World) -> None:
    anas = world.put(ANA, SECRET)
    bens = world.put(BEN, "ben's passing remark")
    later = now_ms() + 200 * DAY_MS
    dry = world.maintenance.run(dry_run=True, now=later, viewer=BEN.viewer())
    assert dry.pruned == [bens] and dry.scored == 1
    applied = world.maintenance.run(now=later, viewer=BEN.viewer())
    assert applied.pruned == [bens] and anas not in str(applied.as_dict())
    assert world.recall.stats(ANA)["archived"] == 0  # ben's pass changed nothing of hers
    assert world.maintenance.run(now=later, viewer=ANA.viewer()).pruned == [anas]
    with pytest.raises(NotFound):
        world.maintenance.restore(anas, BEN)
    assert world.maintenance.restore(anas, ANA).id == anas
    assert world.recall.stats(BEN)["archived"] == 1 and world.recall.stats(ANA)["archived"] == 0


def test_a_users_pass_leaves_the_others_memories_and_the_stores_pass_due(world: World) -> None:
    from threadloom.store import jobs

    anas = world.put(ANA, "the staging cluster restarts at noon")
    later = now_ms() + 200 * DAY_MS
    assert world.maintenance.run(now=later, viewer=BEN.viewer()).scored == 0
    assert world.memory.get(anas, ANA).status != "pruned"
    assert world.store.read(lambda r: jobs.last_run(r, "memory.maintenance")) is None
    assert world.store.read(lambda r: jobs.last_run(r, "memory.maintenance:ben")) is not None
    assert world.maintenance.run(now=later).pruned == [anas]  # the store's own pass takes it


def test_only_the_owner_changes_a_shared_memory(world: World) -> None:
    shared = world.put(ANA, "the team database is postgres 15", visibility="project")
    for change in (
        lambda: world.memory.amend(shared, BEN, content="the team database is postgres 16"),
        lambda: world.memory.delete(shared, BEN),
        lambda: world.memory.pin(shared, True, BEN),
        lambda: world.memory.promote(shared, "org", BEN),
        lambda: world.memory.link(shared, world.put(BEN, "ben's view"), "related_to", BEN),
    ):
        with pytest.raises(InvalidInput, match="only the owner"):
            change()
    private = world.put(BEN, "we might move to postgres 16", related=(Link(shared, "refines"),))
    assert world.recall.explain(shared, ANA)["edges_by_type"] == {}  # ben's private memory, and its edge, stay his
    correction = world.put(BEN, "we moved to postgres 16", visibility="project", related=(Link(shared, "contradicts"),))
    assert world.recall.explain(shared, ANA)["edges_by_type"] == {"contradicts": 1}
    assert private not in str(world.recall.traverse(shared, ANA))
    assert world.memory.get(correction, ANA).owner == "ben"


def test_org_memories_follow_their_owner_and_org_across_projects(world: World) -> None:
    elsewhere = Provenance("ana-2", "claude", "/other-repo", user="ana")
    pref = world.put(ANA, "ana prefers tabs over spaces", visibility="org")
    proj = world.put(ANA, "this repo pins python 3.11", visibility="project")
    found = {m["id"] for m in world.recall.recall("tabs spaces python", elsewhere, read_only=True)["memories"]}
    assert pref in found and proj not in found
    assert world.recall.recall("tabs spaces", CY, read_only=True)["memories"] == []
    teammate = Provenance("cy-2", "gemini", "/elsewhere", user="cy", org="ana")
    assert [m["id"] for m in world.recall.recall("tabs spaces", teammate, read_only=True)["memories"]] == [pref]


def test_all_projects_widens_to_ones_own_and_org_memories_only(world: World) -> None:
    world.put(ANA, "ana's private note about the zeppelin", visibility="private")
    world.put(ANA, "the zeppelin hangar is in /repo", visibility="project")
    wide = world.recall.search("zeppelin", CY, RecallFilters(all_projects=True))
    assert wide["memories"] == []


def test_sessions_of_other_users_elsewhere_are_neither_listed_nor_signalled(world: World) -> None:
    presence, signals = PresenceService(world.store), SignalService(world.store)
    assert {p["id"] for p in presence.peers(BEN)} == {"ana-1", "ben-1"}
    assert {p["id"] for p in presence.peers(CY)} == {"cy-1"}
    for to in ("ana-1", "ana-"):
        with pytest.raises(NotFound):
            signals.whisper(CY, to, "hello")
    assert signals.broadcast(CY, "anyone?", everywhere=True).recipients == ()
    assert signals.whisper(BEN, "ana-1", "lunch?").recipients == ("ana-1",)


def test_catch_up_shows_anothers_memory_events_only_for_shared_memories(world: World) -> None:
    presence = PresenceService(world.store)
    presence.catch_up(BEN)
    private = world.put(ANA, SECRET)
    shared = world.put(ANA, "the api is versioned by date", visibility="project")
    events = presence.catch_up(BEN)["events"]
    ids = [e["detail"].get("id") for e in events]
    assert shared in ids and private not in ids


def test_a_session_id_of_another_user_cannot_be_taken_over(world: World) -> None:
    with pytest.raises(InvalidInput, match="belongs to another user"):
        SessionService(world.store).open(SessionInfo("ana-1", "codex", "stdio", "/repo", "/repo", 2, user="ben"))


def test_a_session_cannot_claim_another_users_session_as_its_parent(world: World) -> None:
    child = SessionInfo("ben-2", "codex", "stdio", "/repo", "/repo", 2, user="ben", parent_id="ana-1")
    with pytest.raises(InvalidInput, match="not a session of this user"):
        SessionService(world.store).open(child)
