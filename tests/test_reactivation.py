"""Recalls are counted off the read's path: queued, written in batches, never moving the search generation."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest
from mcp import Client

from tests.fakes import HashingEmbedder
from tests.helpers import serve_params, structured, wait_for
from threadloom.errors import StoreBusy
from threadloom.identity import Provenance
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
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    s = open_store(tmp_path / "m.db", busy_timeout_ms=20, write_attempts=1)
    yield s
    s.close()


def setup(store: SqliteStore, flush_after: int = 1_000) -> tuple[MemoryRecall, list[str]]:
    engine = SearchEngine(store, HashingEmbedder())
    config = ScoringConfig()
    service = MemoryService(store, engine, config)
    texts = ("The build uses uv", "Deploys on Fridays", "The team car is blue")
    ids = [service.store(NewMemory(content=text), PROV).memory.id for text in texts]
    engine.embed_pending()
    return MemoryRecall(store, engine, config, Reactivations(store, config, flush_after=flush_after)), ids


def recorded(store: SqliteStore, memory_id: str) -> int:
    sql = "SELECT reactivation_count FROM memories WHERE id = :id"
    return int(store.read(lambda r: r.scalar(sql, {"id": memory_id})))


def events(store: SqliteStore) -> int:
    return int(store.read(lambda r: r.scalar("SELECT count(*) FROM events WHERE kind = 'memory.recalled'")))


def generation(store: SqliteStore) -> int:
    return int(store.read(documents.generation))


def test_a_default_recall_writes_nothing_and_shows_its_own_count_until_the_batch_is_written(
    store: SqliteStore,
) -> None:
    recall, (build, *_) = setup(store)
    before = generation(store)
    first = recall.recall("which build tool", PROV)["memories"]
    again = recall.recall("which build tool", PROV)["memories"]
    assert first[0]["id"] == build == again[0]["id"]
    assert first[0]["reactivation_count"] == 1 and again[0]["reactivation_count"] == 2  # its own recalls
    assert recorded(store, build) == 0 and events(store) == 0  # nothing written on the read's path
    assert recall.reactivations.flush() == 2
    assert recorded(store, build) == 2 and events(store) == 2  # one transaction: both recalls, both events
    assert recall.recall("which build tool", PROV, read_only=True)["memories"][0]["reactivation_count"] == 2
    assert generation(store) == before  # the kept candidates stay valid


def test_enough_waiting_recalls_are_written_in_the_background(store: SqliteStore) -> None:
    recall, (build, *_) = setup(store, flush_after=3)
    for _ in range(3):
        recall.recall("which build tool", PROV)
    wait_for(lambda: recorded(store, build) == 3, timeout=10, what="the batch to be written")
    assert recall.reactivations.waiting() == 0


def test_a_batch_the_store_refuses_waits_for_the_next_flush(store: SqliteStore, tmp_path: Path) -> None:
    recall, (build, *_) = setup(store)
    recall.recall("which build tool", PROV)
    blocker = apsw.Connection(str(tmp_path / "m.db"))
    blocker.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreBusy):
            recall.reactivations.flush()
        assert recall.reactivations.waiting() == 1 and recall.reactivations.failing
        answer = recall.recall("which build tool", PROV)  # the reply never waits on the store's writer
        assert answer["memories"][0]["reactivation_count"] == 2
        assert any("not being recorded" in c for c in answer["caveats"])
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert recall.reactivations.flush() == 2
    assert recorded(store, build) == 2 and recall.reactivations.failing is None


def test_a_clean_close_writes_what_waits(store: SqliteStore) -> None:
    recall, ids = setup(store)
    returned = [m["id"] for q in ("which build tool", "deploys Fridays") for m in recall.recall(q, PROV)["memories"]]
    assert all(recorded(store, memory_id) == 0 for memory_id in ids)
    recall.reactivations.close()
    assert {memory_id: recorded(store, memory_id) for memory_id in ids} == {i: returned.count(i) for i in ids}


def test_only_what_searches_read_moves_the_search_generation(store: SqliteStore) -> None:
    _, (build, deploys, _) = setup(store)
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
    recall, (*_, car) = setup(store)
    since = int(store.read(lambda r: r.scalar("SELECT max(last_reactivated_at) FROM memories"))) + 1
    active = RecallFilters(active_since=since)
    assert recall.recall("vehicle", PROV, read_only=True, filters=active)["memories"] == []
    assert recall.recall("vehicle", PROV)["memories"][0]["id"] == car
    recall.reactivations.flush()
    found = recall.recall("vehicle", PROV, read_only=True, filters=active)["memories"]
    assert found[0]["id"] == car


@pytest.mark.anyio
async def test_a_served_recall_is_counted_in_the_background_and_at_the_end(home: Path) -> None:
    params = serve_params(home, "--in-process", THREADLOOM_ROOT=str(home), THREADLOOM_TOOLSET="full")
    async with Client(params, mode="legacy") as client:
        stored = structured(await client.call_tool("memory_store", {"content": "The build uses uv, not pip"}))
        db = SqliteStore(home / "threadloom.db")
        try:
            before = generation(db)
            recalled = structured(await client.call_tool("memory_recall", {"query": "build tool"}))
            assert recalled["memories"][0]["reactivation_count"] == 1
            wait_for(lambda: recorded(db, stored["id"]) == 1, timeout=15, what="the background flush")
            assert generation(db) == before
            await client.call_tool("memory_recall", {"query": "build tool"})  # left for the end of the session
        finally:
            db.close()
    db = SqliteStore(home / "threadloom.db")
    try:
        assert recorded(db, stored["id"]) == 2
    finally:
        db.close()
