from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import Backend
from tests.fakes import HashingEmbedder
from threadloom.clock import now_ms
from threadloom.errors import InvalidInput, NotFound
from threadloom.identity import Provenance
from threadloom.memory.core import CoreMemory
from threadloom.memory.maintenance import Maintenance
from threadloom.memory.model import MAX_CONTENT_CHARS, Link, NewMemory
from threadloom.memory.recall import MemoryRecall, RecallFilters
from threadloom.memory.scoring import DAY_MS, ScoringConfig
from threadloom.memory.service import MemoryService
from threadloom.search.engine import SearchEngine
from threadloom.store import documents, jobs
from threadloom.store.sqlite import SqliteStore, open_store

PROV = Provenance(session_id="s1", vendor="claude", project="/repo", user="ana")
BEN = Provenance(session_id="s2", vendor="codex", project="/repo", user="ben")


@dataclass
class Graph:
    store: SqliteStore
    engine: SearchEngine
    memory: MemoryService
    recall: MemoryRecall
    core: CoreMemory

    def put(self, content: str, **kw: object) -> str:
        return self.memory.store(NewMemory(content=content, **kw), PROV).memory.id  # type: ignore[arg-type]

    def count(self, table: str) -> int:
        return int(self.store.read(lambda r: r.scalar(f"SELECT count(*) FROM {table}")))


def make_graph(store: SqliteStore, embedder: HashingEmbedder | None = None) -> Graph:
    engine = SearchEngine(store, embedder)
    config = ScoringConfig()
    memory = MemoryService(store, engine, config)
    return Graph(store, engine, memory, MemoryRecall(store, engine, config), CoreMemory(store, memory))


@pytest.fixture
def store(backend: Backend) -> Iterator[SqliteStore]:
    s = backend.open()  # SQLite and PostgreSQL (tests/conftest.py)
    yield s
    s.close()


@pytest.fixture
def g(store: SqliteStore) -> Graph:
    return make_graph(store)


def test_storing_returns_an_active_memory_that_recall_finds(g: Graph) -> None:
    stored = g.memory.store(NewMemory(content="The build uses uv, not pip", category="tooling"), PROV)
    assert stored.created and stored.memory.status == "active" and stored.memory.owner == "ana"
    hits = g.recall.recall("which build tool", PROV)["memories"]
    assert [h["id"] for h in hits] == [stored.memory.id]
    assert hits[0]["provenance"] == {"session": "s1", "vendor": "claude", "origin": "foreground"}


def test_exact_duplicates_and_replayed_keys_return_the_first_memory(g: Graph) -> None:
    first = g.memory.store(NewMemory(content="Deploys go out on Tuesdays", idempotency_key="k1"), PROV)
    again = g.memory.store(NewMemory(content="Deploys  go out on Tuesdays"), PROV)
    assert not again.created and again.duplicate_of == first.memory.id
    replay = g.memory.store(NewMemory(content="something else entirely", idempotency_key="k1"), PROV)
    assert replay.replayed and replay.memory.id == first.memory.id
    assert g.count("memories") == 1


def test_bad_edges_are_refused_before_anything_is_written(g: Graph) -> None:
    target = g.put("Postgres is the team database")
    with pytest.raises(InvalidInput, match="unknown edge type"):
        Link(target, "causes")
    with pytest.raises(NotFound, match="nothing was written"):
        g.memory.store(
            NewMemory(content="x", related=(Link(target, "caused_by"), Link("m_00000000000000ff", "refines"))), PROV
        )
    with pytest.raises(InvalidInput, match="twice"):
        NewMemory(content="y", related=(Link(target, "refines"), Link(target, "refines")))
    assert g.count("memories") == 1 and g.count("memory_edges") == 0 and g.count("documents") == 1


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"content": "   "}, "non-empty"),
        ({"content": "x" * (MAX_CONTENT_CHARS + 1)}, "at most 20,000"),
        ({"content": "x", "kind": "gossip"}, "unknown memory kind"),
        ({"content": "x", "visibility": "world"}, "visibility"),
        ({"content": "x", "entities": ("",)}, "entities"),
    ],
)
def test_bad_memories_are_clear_errors(kw: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        NewMemory(**kw)  # type: ignore[arg-type]


def test_a_changed_number_or_negation_comes_back_as_a_hint_not_an_edge(g: Graph) -> None:
    old = g.put("The API gateway timeout is 30 seconds")
    stored = g.memory.store(NewMemory(content="The API gateway timeout is 60 seconds"), PROV)
    hints = stored.possible_conflicts
    assert [h.id for h in hints] == [old] and "30 -> 60" in hints[0].reason
    assert g.count("memory_edges") == 0  # a hint is never an edge, and a conflicting pair is not auto-linked
    enabled = g.put("The response cache is enabled in staging")
    negated = g.memory.store(NewMemory(content="The response cache is not enabled in staging"), PROV)
    assert [(h.id, h.reason.split(":")[0]) for h in negated.possible_conflicts] == [(enabled, "a negation")]
    region = g.put("The deploy target region is frankfurt")
    moved = g.memory.store(NewMemory(content="The deploy target region is dublin"), PROV)
    assert [(h.id, h.reason) for h in moved.possible_conflicts] == [(region, "a replaced value: frankfurt -> dublin")]
    unrelated = g.memory.store(NewMemory(content="Lunch is served at noon on Fridays"), PROV)
    assert unrelated.possible_conflicts == ()


def test_similar_memories_are_auto_linked_within_bounds(g: Graph) -> None:
    base = [g.put(f"Release checklist step {n}: run the migration smoke tests on staging") for n in ("one", "two")]
    base += [g.put(f"Release checklist note {n}: run the migration smoke tests on staging") for n in ("a", "b")]
    linked = g.memory.store(
        NewMemory(
            content="Release checklist: run the migration smoke tests on staging first",
            related=(Link(base[0], "elaborates"),),
        ),
        PROV,
    )
    assert len(linked.auto_links) <= 3 and linked.auto_links
    assert all(e.made_by == "auto_link" and e.type == "related_to" for e in linked.auto_links)
    assert base[0] not in {e.target for e in linked.auto_links}  # never parallel to an explicit edge
    unrelated = g.memory.store(NewMemory(content="Lunch is at noon on Fridays"), PROV)
    assert unrelated.auto_links == ()


def test_amend_supersedes_keeps_the_old_one_for_audit_and_ranks_it_down(g: Graph) -> None:
    old = g.put("The staging database host is db-old.internal", valid_from=1_000)
    result = g.memory.amend(old, PROV, content="The staging database host is db-new.internal", reason="moved")
    new = result["new"]["id"]
    assert result["old"]["superseded_by"] == new and result["old"]["valid_to"] == result["new"]["valid_from"]
    assert result["edge"] == result["edge"] | {"source": new, "target": old, "type": "supersedes", "reason": "moved"}
    hits = g.recall.recall("staging database host", PROV)["memories"]
    assert [h["id"] for h in hits] == [new, old] and hits[1]["superseded_by"] == new
    assert g.count("memory_edges") == 1  # the supersedes edge, no auto-link beside it
    with pytest.raises(InvalidInput, match="already superseded"):
        g.memory.amend(old, PROV, content="again")


def test_confirming_a_conflict_hint_is_one_call(g: Graph) -> None:
    old = g.put("We run 3 replicas of the api service")
    stored = g.memory.store(NewMemory(content="We run 5 replicas of the api service"), PROV)
    assert stored.possible_conflicts[0].id == old
    g.memory.amend(old, PROV, by=stored.memory.id, reason="scaled up")
    assert g.recall.explain(old, PROV)["superseded_by"] == stored.memory.id


def test_as_of_answers_what_held_true_then(g: Graph) -> None:
    old = g.put("The on-call rotation is weekly", valid_from=1 * DAY_MS)
    new = g.memory.amend(old, PROV, content="The on-call rotation is fortnightly")["new"]["id"]
    now = g.recall.recall("on-call rotation", PROV, read_only=True)["memories"]
    assert now[0]["id"] == new
    stored_at = g.recall.explain(new, PROV)["score"]
    assert stored_at is not None
    valid_to = g.recall.search("", PROV)["memories"]
    old_row = next(m for m in valid_to if m["id"] == old)
    before = g.recall.recall("on-call rotation", PROV, as_of=old_row["valid_to"] - 1, read_only=True)
    assert [m["id"] for m in before["memories"]] == [old]


def test_recall_reactivates_unless_read_only_and_has_two_verbosities(g: Graph) -> None:
    mid = g.put("Use ruff for formatting", summary="formatter: ruff")
    g.recall.recall("formatting", PROV, read_only=True)
    assert g.recall.search("", PROV)["memories"][0]["reactivation_count"] == 0
    concise = g.recall.recall("formatting", PROV, verbosity="concise")["memories"][0]
    assert set(concise) == {"kind", "id", "summary", "status", "activation", "is_core", "score"}
    assert concise["summary"] == "formatter: ruff"
    full = g.recall.recall("formatting", PROV)["memories"][0]
    assert full["id"] == mid and full["reactivation_count"] == 0 and "why" in full  # journaled, not yet applied
    Maintenance(g.store, ScoringConfig()).apply_recalls()
    assert g.recall.search("", PROV)["memories"][0]["reactivation_count"] == 2


def test_full_recall_follows_the_why_chain(g: Graph) -> None:
    root = g.put("Customers reported slow page loads in March")
    cause = g.put("We profiled the checkout page", related=(Link(root, "caused_by"),))
    decision = g.put("We added a CDN in front of static assets", related=(Link(cause, "caused_by"),))
    hit = g.recall.recall("CDN static assets", PROV)["memories"][0]
    assert hit["id"] == decision
    assert [(step["depth"], step["id"]) for step in hit["why"]] == [(1, cause), (2, root)]


def test_relevant_core_memories_are_injected(g: Graph) -> None:
    for n in range(12):
        g.put(f"Deploy log {n}: deploy of service {n} finished with the usual deploy script")
    core = g.core.set_core("deploy.rule", "Never deploy on Fridays", PROV, priority=90)
    hits = g.recall.recall("deploy", PROV, k=3)["memories"]
    assert core.id in [h["id"] for h in hits]
    injected = [h for h in hits if h.get("injected")]
    assert all(h["id"] == core.id and h["injected"] == "core" for h in injected)
    listed = g.recall.core_list(PROV)["core"]
    assert listed == [
        {"key": "deploy.rule", "priority": 90, "id": core.id, "content": "Never deploy on Fridays", "category": None}
    ]


def test_core_rewrite_supersedes_and_moves_the_key(g: Graph) -> None:
    first = g.core.set_core("style", "Prefer small PRs", PROV)
    second = g.core.set_core("style", "Prefer small PRs under 300 lines", PROV, priority=70)
    assert second.id != first.id and second.core_key == "style" and second.core_priority == 70
    assert [c["id"] for c in g.recall.core_list(PROV)["core"]] == [second.id]
    with pytest.raises(InvalidInput, match="core memory"):
        g.memory.pin(second.id, False, PROV)


def test_search_filters_and_enumerates_by_recency(g: Graph) -> None:
    a = g.put("Alice owns the billing service", category="people", entities=("Alice", "billing"))
    b = g.put("Bob owns the search service", category="people", entities=("Bob",))
    g.put("The billing service is written in Go", category="tech", entities=("billing",))
    assert [m["id"] for m in g.recall.search("", PROV, RecallFilters(categories=("people",)))["memories"]] == [b, a]
    by_entity = g.recall.search("service", PROV, RecallFilters(entity="alice"))["memories"]
    assert [m["id"] for m in by_entity] == [a]
    assert g.recall.search("", PROV, RecallFilters(created_since=2**62))["memories"] == []
    g.recall.recall("Bob", PROV, k=1)  # alone: the memories stored beside it in its session come next
    Maintenance(g.store, ScoringConfig()).apply_recalls()
    listed = {m["id"]: m for m in g.recall.search("", PROV)["memories"]}
    assert listed[b]["reactivation_count"] == 1 and listed[a]["reactivation_count"] == 0
    at = listed[b]["last_reactivated_at"]
    assert b in [m["id"] for m in g.recall.search("", PROV, RecallFilters(active_since=at))["memories"]]
    assert b not in [m["id"] for m in g.recall.search("", PROV, RecallFilters(active_since=at + 1))["memories"]]
    with pytest.raises(InvalidInput, match="unknown status"):
        RecallFilters(statuses=("sleeping",))


def test_traverse_returns_reachable_memories_and_every_edge_among_them(g: Graph) -> None:
    a = g.put("alpha fact")
    b = g.put("beta fact", related=(Link(a, "caused_by"),))
    c = g.put("gamma fact", related=(Link(b, "depends_on"), Link(a, "mentions")))
    d = g.put("delta fact", related=(Link(c, "refines"),))
    out = g.recall.traverse(a, PROV, depth=1)
    assert {n["id"]: n["depth"] for n in out["nodes"]} == {a: 0, b: 1, c: 1}
    assert {(e["source"], e["target"], e["type"]) for e in out["edges"]} == {
        (b, a, "caused_by"),
        (c, b, "depends_on"),
        (c, a, "mentions"),
    }
    typed = g.recall.traverse(a, PROV, depth=3, edge_types=("caused_by", "depends_on"))
    assert {n["id"] for n in typed["nodes"]} == {a, b, c}
    assert d in {n["id"] for n in g.recall.traverse(a, PROV, depth=2)["nodes"]}
    with pytest.raises(InvalidInput, match="depth"):
        g.recall.traverse(a, PROV, depth=9)


def test_cycles_are_refused_where_they_make_no_sense(g: Graph) -> None:
    a = g.put("first")
    b = g.put("second", related=(Link(a, "caused_by"),))
    with pytest.raises(InvalidInput, match="cycle"):
        g.memory.link(a, b, "caused_by", PROV)
    g.memory.link(a, b, "related_to", PROV)  # association may go both ways
    with pytest.raises(InvalidInput, match="already exists"):
        g.memory.link(a, b, "related_to", PROV)
    with pytest.raises(InvalidInput, match="two different"):
        g.memory.link(a, a, "refines", PROV)
    assert g.count("memory_edges") == 2


def test_explain_says_why_a_memory_is_kept(g: Graph) -> None:
    a = g.put("kept by its edge")
    g.put("linked", related=(Link(a, "refines"),))
    out = g.recall.explain(a, PROV)
    assert out["score"]["connectivity"] > ScoringConfig().min_connectivity
    assert not out["would_be_forgotten_now"] and any("edge" in r for r in out["kept_because"])


def test_delete_removes_the_memory_its_edges_and_its_index_entry(g: Graph) -> None:
    a = g.put("to be deleted")
    g.put("stays", related=(Link(a, "mentions"),))
    assert g.memory.delete(a, PROV) == {"deleted": a, "edges_deleted": 1}
    assert g.count("memory_edges") == 0 and g.count("documents") == 1
    with pytest.raises(NotFound):
        g.memory.delete(a, PROV)


def test_only_the_owner_promotes_and_private_memories_stay_private(g: Graph) -> None:
    mine = g.put("ana's private note about the roadmap")
    assert g.recall.recall("roadmap", BEN)["memories"] == []
    with pytest.raises(NotFound):
        g.memory.promote(mine, "org", BEN)
    g.memory.promote(mine, "project", PROV)
    assert [m["id"] for m in g.recall.recall("roadmap", BEN)["memories"]] == [mine]
    with pytest.raises(InvalidInput, match="only the owner"):
        g.memory.promote(mine, "org", BEN)
    with pytest.raises(InvalidInput, match="only widens"):
        g.memory.promote(mine, "private", PROV)


def test_dense_auto_links_use_the_model_when_it_is_loaded(store: SqliteStore) -> None:
    g = make_graph(store, embedder=HashingEmbedder())
    first = g.put("the puppy sleeps in the kitchen basket")
    second = g.memory.store(NewMemory(content="the dog sleeps in the kitchen basket most nights"), PROV)
    assert [(e.target, e.made_by) for e in second.auto_links] == [(first, "auto_link")]
    assert second.auto_links[0].weight > 0.8
    vectors = store.read(lambda r: r.scalar("SELECT count(*) FROM document_vectors"))
    assert vectors == 2  # stored with the memory, not left for the background pass


def test_maintenance_moves_memories_along_the_lifecycle_and_prunes_only_the_unprotected(g: Graph) -> None:
    orphan = g.put("an orphaned passing remark")
    pinned = g.put("a pinned remark", pinned=True)
    shared = g.put("a shared remark", visibility="project")
    hub = g.put("a linked remark")
    g.put("points at the hub", related=(Link(hub, "mentions"),))
    maintenance = Maintenance(g.store, ScoringConfig())
    later = now_ms() + 40 * DAY_MS
    dry = maintenance.run(dry_run=True, now=later)
    assert dry.pruned == [] and dry.transitions == {"active->dormant": 5}  # idle 40 days, none forgettable yet
    assert g.recall.explain(orphan, PROV)["status"]["stored"] == "active"  # a dry run changes nothing

    much_later = now_ms() + 200 * DAY_MS
    dry = maintenance.run(dry_run=True, now=much_later)
    assert dry.pruned == [orphan]
    report = maintenance.run(now=much_later)
    assert report.pruned == [orphan] and report.ran
    assert g.count("memories") == 4 and g.count("memory_archive") == 1
    assert orphan not in [m["id"] for m in g.recall.search("orphaned remark", PROV)["memories"]]
    for kept in (pinned, shared, hub):
        assert g.recall.explain(kept, PROV)["status"]["stored"] == "fading"
    assert g.recall.stats(PROV)["last_maintenance"]["at"] >= now_ms() - 60_000

    restored = maintenance.restore(orphan, PROV)
    assert restored.status == "active" and g.count("memory_archive") == 0
    assert g.recall.recall("orphaned remark", PROV)["memories"][0]["id"] == orphan
    with pytest.raises(NotFound, match="archive"):
        maintenance.restore(orphan, PROV)


def test_the_archive_keeps_pruned_memories_for_thirty_days(g: Graph) -> None:
    gone = g.put("soon pruned")
    maintenance = Maintenance(g.store, ScoringConfig())
    maintenance.run(now=now_ms() + 200 * DAY_MS)
    assert g.count("memory_archive") == 1
    maintenance.run(now=now_ms() + 231 * DAY_MS)
    assert g.count("memory_archive") == 0
    with pytest.raises(NotFound):
        maintenance.restore(gone, PROV)


def test_only_one_process_runs_maintenance_at_a_time(g: Graph) -> None:
    g.put("anything")
    other = Maintenance(g.store, ScoringConfig())
    other.holder = "elsewhere:1"
    g.store.write(lambda w: jobs.acquire(w, "memory.maintenance", other.holder, now_ms(), 60_000))
    skipped = Maintenance(g.store, ScoringConfig()).run()
    assert not skipped.ran and "another process" in (skipped.skipped_reason or "")
    g.store.write(lambda w: jobs.release(w, "memory.maintenance", other.holder))
    assert Maintenance(g.store, ScoringConfig()).run().ran


def test_auto_core_categories_are_promoted_and_approval_ones_offered(g: Graph) -> None:
    auto = g.put("Always run the linter before committing", category="workflow")
    offered = g.put("The user prefers terse answers", category="style")
    for _ in range(20):
        g.recall.recall("linter committing terse answers", PROV)
    g.core.set_preferences(PROV, auto=["workflow"], approval=["style"], excluded=["chatter"])
    with pytest.raises(InvalidInput, match="both"):
        g.core.set_preferences(PROV, auto=["x"], approval=["x"], excluded=[])
    report = Maintenance(g.store, ScoringConfig()).run()
    assert report.promoted == [auto]
    core = g.recall.core_list(PROV)
    assert [c["id"] for c in core["core"]] == [auto]
    assert [m["id"] for m in core["awaiting_approval"]] == [offered]
    assert core["preferences"] == {"auto": ["workflow"], "approval": ["style"], "excluded": ["chatter"]}


def test_every_write_a_search_depends_on_changes_the_search_generation(g: Graph) -> None:
    def generation() -> int:
        return int(g.store.read(documents.generation))

    before = generation()
    memory_id = g.put("The build uses uv", entities=("uv",))
    assert generation() > before
    for sql in (
        "UPDATE memories SET pinned = 1 WHERE id = :id",
        "DELETE FROM memory_entities WHERE memory_id = :id",
        "UPDATE documents SET source = 'someone' WHERE ref = :id",
        "DELETE FROM memories WHERE id = :id",
        "DELETE FROM documents WHERE ref = :id",
    ):
        before = generation()
        g.store.write(lambda w, sql=sql: w.execute(sql, {"id": memory_id}))
        assert generation() > before, sql


def test_a_memory_made_anothers_by_another_process_leaves_the_next_recall(tmp_path: Path) -> None:
    store = open_store(tmp_path / "m.db")
    graph = make_graph(store, embedder=HashingEmbedder())
    memory_id = graph.put("The build uses uv, not pip")
    graph.engine.embed_pending()
    assert [h["id"] for h in graph.recall.recall("which build tool", PROV)["memories"]] == [memory_id]
    other = open_store(tmp_path / "m.db")
    other.write(lambda w: w.execute("UPDATE memories SET owner = 'ben' WHERE id = :id", {"id": memory_id}))
    assert graph.recall.recall("which build tool", PROV)["memories"] == []
    other.close()
    store.close()
