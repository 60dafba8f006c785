"""Memories carry their context into the search index: the session that stored them as their thread, who
they are from (a speaker, else the first entity) as their source, and when they began to hold; stores
from before get it too."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.fakes import HashingEmbedder
from threadloom.identity import Provenance
from threadloom.memory.model import NewMemory, memory_document
from threadloom.memory.recall import MemoryRecall
from threadloom.memory.scoring import ScoringConfig
from threadloom.memory.service import MemoryService
from threadloom.search.engine import SearchEngine
from threadloom.store import memories
from threadloom.store.migrations import MIGRATIONS
from threadloom.store.sqlite import SqliteStore, open_store

MORNING = Provenance(session_id="morning", vendor="claude", project="/repo", user="ana")
EVENING = Provenance(session_id="evening", vendor="claude", project="/repo", user="ana")


def _service(store: SqliteStore, embedder: HashingEmbedder | None = None) -> tuple[MemoryService, MemoryRecall]:
    engine = SearchEngine(store, embedder)
    return MemoryService(store, engine), MemoryRecall(store, engine, ScoringConfig())


def _documents(store: SqliteStore) -> list[tuple[str, str | None, str | None, int | None]]:
    rows = store.read(
        lambda r: r.tuples("SELECT ref, thread, source, occurred_at FROM documents WHERE kind = 'memory' ORDER BY id")
    )
    return [(str(ref), thread, source, at) for ref, thread, source, at in rows]


def test_memories_stored_in_one_session_form_a_thread_in_storing_order(tmp_path: Path) -> None:
    store = open_store(tmp_path / "m.db")
    service, _ = _service(store)
    first = service.store(NewMemory(content="We pick NATS for the event bus", valid_from=1_000), MORNING).memory
    other = service.store(NewMemory(content="Lunch is at noon"), EVENING).memory
    second = service.store(NewMemory(content="Its consumers retry three times", entities=("Bo", "NATS")), MORNING)
    docs = _documents(store)
    store.close()
    assert docs == [
        (first.id, "session:morning", None, 1_000),
        (other.id, "session:evening", None, other.valid_from),
        (second.memory.id, "session:morning", "Bo", second.memory.valid_from),
    ]


def test_a_memory_written_as_a_line_of_dialogue_has_its_speaker_as_source(tmp_path: Path) -> None:
    store = open_store(tmp_path / "m.db")
    service, recall = _service(store)
    said = service.store(NewMemory(content="Caroline: the deploy window moved to Friday"), MORNING).memory
    other = service.store(NewMemory(content="Melanie: the deploy window moved to Monday"), EVENING).memory
    labels = service.store(NewMemory(content="TODO: ask about the deploy window"), EVENING).memory
    docs = {ref: source for ref, _, source, _ in _documents(store)}
    hits = recall.recall("what did Caroline say about the deploy window", MORNING, read_only=True)
    store.close()
    assert (docs[said.id], docs[other.id], docs[labels.id]) == ("Caroline", "Melanie", None)
    assert hits["memories"][0]["id"] == said.id


def test_a_memory_stored_after_another_in_its_session_is_embedded_after_it(tmp_path: Path) -> None:
    store = open_store(tmp_path / "m.db")
    embedder = HashingEmbedder()
    service, _ = _service(store, embedder)
    first = service.store(NewMemory(content="Did the canary deploy pass?"), MORNING).memory
    alone = service.store(NewMemory(content="yes, on the second try"), EVENING).memory
    reply = service.store(NewMemory(content="yes, on the first try", summary="canary"), MORNING).memory
    rows = store.read(
        lambda r: r.tuples(
            "SELECT d.ref, v.vector FROM documents d JOIN document_vectors v ON v.doc_id = d.id "
            "WHERE v.content_hash = d.content_hash"
        )
    )
    store.close()
    vectors = {str(ref): np.frombuffer(vector, dtype=np.float32) for ref, vector in rows}
    expected = {
        first.id: "Did the canary deploy pass?",
        alone.id: "yes, on the second try",
        reply.id: "Did the canary deploy pass?\ncanary\nyes, on the first try",
    }
    for ref, text in expected.items():
        assert np.allclose(vectors[ref], embedder.embed_documents([text])[0]), text


def test_a_question_naming_the_first_entity_of_a_memory_lifts_it(tmp_path: Path) -> None:
    store = open_store(tmp_path / "m.db")
    service, recall = _service(store)
    plain = service.store(NewMemory(content="the deploy window moved to Friday"), MORNING).memory
    named = service.store(NewMemory(content="the deploy window moved", entities=("Bo", "Ana")), EVENING).memory
    for name in ("Bo", "bo's", "BO"):
        hits = recall.recall(f"when is {name} deploy window", MORNING, read_only=True)
        assert [h["id"] for h in hits["memories"]][:2] == [named.id, plain.id], name
        assert "source" in hits["signals"]
    unnamed = recall.recall("when is the deploy window on Friday", MORNING, read_only=True)
    store.close()
    assert named.entities == ("Bo", "Ana")  # as given: the first is who it is from
    assert unnamed["memories"][0]["id"] == plain.id


def test_memories_written_before_their_documents_had_context_get_it_when_the_store_opens(tmp_path: Path) -> None:
    # Today's schema with m017 unrecorded: today's code reads tables later migrations made (m030's
    # org_projects), and m017 only rewrites rows, so running it again on open is running it for the first time.
    old = SqliteStore(tmp_path / "old.db")
    old.initialise(MIGRATIONS)
    service, _ = _service(old)
    stored = [
        service.store(NewMemory(content=text, entities=entities), MORNING).memory
        for text, entities in (
            ("Caroline: I went to the support group", ("Caroline",)),
            ("Melanie: that sounds wonderful", ("Caroline", "Melanie")),
            ("a memory of no session", ("Zoe", "Ann")),
            ("Dr. Mary O'Neil-Smith: the scan is clear", ()),
            ("Note:not a speaker: no", ()),
            ("Émile: a name the rule does not know", ()),
            ("ab: lower case", ()),
            ("X: too short", ()),
            ("NOTE: a label, not a name", ()),
        )
    ]
    old.write(lambda w: w.execute("UPDATE documents SET thread = NULL, source = NULL"))  # as they were written
    old.write(lambda w: w.execute("UPDATE memories SET session_id = NULL WHERE id = :id", {"id": stored[2].id}))
    old.write(lambda w: w.execute("DELETE FROM schema_migrations WHERE name = 'm017_memory_context'"))
    old.close()
    store = open_store(tmp_path / "old.db")
    docs = _documents(store)
    now = store.read(lambda r: memories.get_many(r, [m.id for m in stored]))
    expected = [memory_document(now[m.id]) for m in stored]
    store.close()
    assert docs == [(d.ref, d.thread, d.source, d.occurred_at) for d in expected]
    assert [d[1:3] for d in docs] == [
        ("session:morning", "Caroline"),
        ("session:morning", "Melanie"),
        (None, "Zoe"),
        ("session:morning", "Dr. Mary O'Neil-Smith"),
        *[("session:morning", None)] * 5,
    ]
