"""A recall only journals what it returned (in batches, off the read's path); the maintenance pass reinforces
it once, never moving the search generation."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest
from mcp import Client

from tests.conftest import Backend
from tests.fakes import HashingEmbedder
from tests.helpers import serve_params, structured, wait_for
from threadloom.errors import StoreBusy
from threadloom.identity import Provenance
from threadloom.memory.maintenance import Maintenance
from threadloom.memory.model import NewMemory
from threadloom.memory.reactivation import Reactivations
from threadloom.memory.recall import MemoryRecall, RecallFilters
from threadloom.memory.scoring import ScoringConfig
from threadloom.memory.service import MemoryService
from threadloom.search.engine import SearchEngine
from threadloom.store import documents
from threadloom.store.sqlite import SqliteStore, open_store

PROV = Provenance(session_id="s1", vendor="claude", project="/repo", user="ana")


@pytest.fixture
def store(backend: Backend) -> Iterator[SqliteStore]:
    s = backend.open(busy_timeout_ms=20, write_attempts=1)  # SQLite and PostgreSQL (tests/conftest.py)
    yield s
    s.close()


def setup(store: SqliteStore, flush_after: int = 1_000) -> tuple[MemoryRecall, Maintenance, list[str]]:
    engine = SearchEngine(store, HashingEmbedder())
    config = ScoringConfig()
    service = MemoryService(store, engine, config)
    texts = ("The build uses uv", "Deploys on Fridays", "The team car is blue")
    ids = [service.store(NewMemory(content=text), PROV).memory.id for text in texts]
    engine.embed_pending()
    recall = MemoryRecall(store, engine, config, Reactivations(store, flush_after=flush_after))
    return recall, Maintenance(store, config), ids


def recorded(store: SqliteStore, memory_id: str) -> int:
    sql = "SELECT reactivation_count FROM memories WHERE id = :id"
    return int(store.read(lambda r: r.scalar(sql, {"id": memory_id})))


def events(store: SqliteStore) -> int:
    return int(store.read(lambda r: r.scalar("SELECT count(*) FROM events WHERE kind = 'memory.recalled'")))


def generation(store: SqliteStore) -> int:
    return int(store.read(documents.generation))


def memory_rows(store: SqliteStore) -> list[tuple[object, ...]]:
    return store.read(lambda r: r.tuples("SELECT * FROM memories ORDER BY id"))


def test_a_recall_only_journals_and_the_pass_reinforces_once(store: SqliteStore) -> None:
    recall, maintenance, (build, *_) = setup(store)
    before, rows = generation(store), memory_rows(store)
    first = recall.recall("which build tool", PROV)["memories"]
    recall.recall("which build tool", PROV)
    assert first[0]["id"] == build and first[0]["reactivation_count"] == 0
    assert events(store) == 0  # nothing written on the read's path
    assert recall.reactivations.flush() == 2
    assert events(store) == 2 and memory_rows(store) == rows  # the journal only: no memory changed
    assert maintenance.apply_recalls() == 2
    assert recorded(store, build) == 2
    assert maintenance.apply_recalls() == 0 and recorded(store, build) == 2  # the cursor moved with the rows
    maintenance.run()
    assert recorded(store, build) == 2  # a full pass does not count them again
    assert recall.recall("which build tool", PROV, read_only=True)["memories"][0]["reactivation_count"] == 2
    assert generation(store) == before  # the kept candidates stay valid


def test_the_maintenance_pass_applies_what_was_journaled_before_it_scores(store: SqliteStore) -> None:
    recall, maintenance, (build, deploys, car) = setup(store)
    recall.recall("which build tool", PROV, k=1)
    recall.reactivations.flush()
    maintenance.run()
    assert [recorded(store, i) for i in (build, deploys, car)] == [1, 0, 0]
    sql = "SELECT last_reactivated_at, decay_score FROM memories WHERE id = :id"
    at, score = store.read(lambda r: r.tuples(sql, {"id": build}))[0]
    recalled_at = store.read(lambda r: r.scalar("SELECT max(at) FROM events WHERE kind = 'memory.recalled'"))
    assert at == recalled_at and score > store.read(
        lambda r: r.scalar("SELECT decay_score FROM memories WHERE id = :id", {"id": car})
    )


def test_another_users_recall_of_a_shared_memory_counts_and_a_hidden_one_does_not(store: SqliteStore) -> None:
    recall, maintenance, (build, deploys, _) = setup(store)
    store.write(lambda w: w.execute("UPDATE memories SET visibility = 'org' WHERE id = :id", {"id": build}))
    bob = Provenance(session_id="s2", vendor="claude", project="/repo", user="bob", org="ana")
    assert [m["id"] for m in recall.recall("which build tool", bob)["memories"]] == [build]
    recall.reactivations.record([build, deploys], bob)  # as if a recall had named ana's private one too
    recall.reactivations.flush()
    maintenance.apply_recalls()
    assert recorded(store, build) == 2 and recorded(store, deploys) == 0


def test_enough_waiting_recalls_are_journaled_in_the_background(store: SqliteStore) -> None:
    recall, _, _ = setup(store, flush_after=3)
    for _ in range(3):
        recall.recall("which build tool", PROV)
    wait_for(lambda: events(store) == 3, timeout=10, what="the batch to be written")
    assert recall.reactivations.waiting() == 0


def test_a_batch_the_store_refuses_waits_for_the_next_flush(tmp_path: Path) -> None:
    store = open_store(tmp_path / "m.db", busy_timeout_ms=20, write_attempts=1)  # an SQLite lock holder below
    recall, maintenance, (build, *_) = setup(store)
    recall.recall("which build tool", PROV)
    blocker = apsw.Connection(str(tmp_path / "m.db"))
    blocker.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreBusy):
            recall.reactivations.flush()
        assert recall.reactivations.waiting() == 1 and recall.reactivations.failing
        answer = recall.recall("which build tool", PROV)  # the reply never waits on the store's writer
        assert answer["memories"][0]["id"] == build
        assert any("not being recorded" in c for c in answer["caveats"])
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert recall.reactivations.flush() == 2
    maintenance.apply_recalls()
    assert recorded(store, build) == 2 and recall.reactivations.failing is None
    store.close()


def test_a_clean_close_journals_what_waits(store: SqliteStore) -> None:
    recall, maintenance, ids = setup(store)
    returned = [m["id"] for q in ("which build tool", "deploys Fridays") for m in recall.recall(q, PROV)["memories"]]
    recall.reactivations.close()
    assert events(store) == 2 and all(recorded(store, memory_id) == 0 for memory_id in ids)
    maintenance.apply_recalls()
    assert {memory_id: recorded(store, memory_id) for memory_id in ids} == {i: returned.count(i) for i in ids}


def test_a_recall_just_made_saves_an_idle_memory_from_the_prune(store: SqliteStore) -> None:
    recall, maintenance, (build, *_) = setup(store)
    later = 10**13  # long after: every memory idle, unlinked, private, scored under the threshold
    assert build in maintenance.run(dry_run=True, now=later).pruned
    recall.recall("which build tool", PROV, k=1)
    recall.reactivations.flush()
    stale = 10**12  # the row says idle until the pass applies the recall
    store.write(lambda w: w.execute("UPDATE memories SET last_reactivated_at = :t", {"t": stale}))
    store.write(lambda w: w.execute("UPDATE events SET at = :t WHERE kind = 'memory.recalled'", {"t": later}))
    report = maintenance.run(now=later)
    assert build not in report.pruned and recorded(store, build) == 1


def test_only_what_searches_read_moves_the_search_generation(store: SqliteStore) -> None:
    _, _, (build, deploys, _) = setup(store)
    for sql in (
        "UPDATE memories SET reactivation_count = 7, last_reactivated_at = 1, decay_score = 0.5 WHERE id = :id",
        "UPDATE memories SET status = 'dormant', scored_at = 2 WHERE id = :id",
    ):
        before = generation(store)
        store.write(lambda w, sql=sql: w.execute(sql, {"id": build}))
        assert generation(store) == before, sql
    for sql in (
        "UPDATE memories SET valid_to = 5 WHERE id = :id",
        "UPDATE memories SET visibility = 'project' WHERE id = :id",
        "INSERT INTO memory_edges (source, target, type, weight, made_by, created_at) "
        "VALUES (:other, :id, 'supersedes', 1, 'explicit', 0)",
        "DELETE FROM memory_edges WHERE target = :id",
    ):
        before = generation(store)
        store.write(lambda w, sql=sql: w.execute(sql, {"id": build, "other": deploys}))
        assert generation(store) > before, sql


def test_recent_activity_is_read_afresh_although_reactivation_keeps_the_generation(store: SqliteStore) -> None:
    """Only the vectors find the car here, so a kept (stale) candidate set would miss it."""
    recall, maintenance, (*_, car) = setup(store)
    since = int(store.read(lambda r: r.scalar("SELECT max(last_reactivated_at) FROM memories"))) + 1
    active = RecallFilters(active_since=since)
    assert recall.recall("vehicle", PROV, read_only=True, filters=active)["memories"] == []
    assert recall.recall("vehicle", PROV)["memories"][0]["id"] == car
    recall.reactivations.flush()
    maintenance.apply_recalls()
    found = recall.recall("vehicle", PROV, read_only=True, filters=active)["memories"]
    assert found[0]["id"] == car


@pytest.mark.anyio
async def test_a_served_recall_is_journaled_in_the_background_and_at_the_end(home: Path) -> None:
    params = serve_params(home, "--in-process", THREADLOOM_ROOT=str(home), THREADLOOM_TOOLSET="full")
    async with Client(params, mode="legacy") as client:
        stored = structured(await client.call_tool("memory_store", {"content": "The build uses uv, not pip"}))
        db = SqliteStore(home / "threadloom.db")
        try:
            before, rows = generation(db), memory_rows(db)
            recalled = structured(await client.call_tool("memory_recall", {"query": "build tool"}))
            assert recalled["memories"][0]["id"] == stored["id"]
            wait_for(lambda: events(db) == 1, timeout=15, what="the background flush")
            assert memory_rows(db) == rows  # a recall is journaled, not applied
            await client.call_tool("memory_maintain", {"dry_run": False})
            assert recorded(db, stored["id"]) == 1 and generation(db) == before
            await client.call_tool("memory_recall", {"query": "build tool"})  # left for the end of the session
        finally:
            db.close()
    db = SqliteStore(home / "threadloom.db")
    try:
        assert events(db) == 2 and recorded(db, stored["id"]) == 1
        assert Maintenance(db, ScoringConfig()).apply_recalls() == 1 and recorded(db, stored["id"]) == 2
    finally:
        db.close()
