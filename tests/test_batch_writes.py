"""Batched writes (`Writer.execute_many`, `insert_many`, and the store functions built on them) leave what one
statement at a time leaves, on both backends; on PostgreSQL they go as one pipeline."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conftest import Backend
from threadloom.search.engine import SearchEngine
from threadloom.search.model import Document
from threadloom.store import documents, memories, transcripts
from threadloom.store.base import Store, Writer
from threadloom.store.transcripts import ERASED_ROLE, StoredMessage


def _event(n: int) -> dict[str, Any]:
    return {"at": n, "d": f"100% sure, item {n}"}


_EVENT = "INSERT INTO events (at, kind, origin, detail) VALUES (:at, 'k', 'test', :d)"


def test_insert_many_answers_each_new_id_in_order_and_execute_many_runs_each(backend: Backend) -> None:
    store = backend.open()

    def add(w: Writer) -> tuple[list[int], list[int], int]:
        ids = w.insert_many(_EVENT, [_event(n) for n in range(5)])
        w.execute_many("UPDATE events SET detail = :d WHERE id = :id", [{"id": i, "d": f"now {i}"} for i in ids[:3]])
        return ids, w.insert_many(_EVENT, []), w.insert(_EVENT, _event(9))

    ids, none, after = store.write(add)
    assert none == [] and ids == list(range(ids[0], ids[0] + 5)) and after == ids[-1] + 1
    rows = store.read(lambda r: r.tuples("SELECT id, at, detail FROM events WHERE kind = 'k' ORDER BY id"))
    assert rows == [(i, n, f"now {i}" if n < 3 else f"100% sure, item {n}") for n, i in enumerate(ids)] + [
        (after, 9, "100% sure, item 9")
    ]
    store.close()


def test_a_failing_row_of_a_batch_fails_the_whole_write(backend: Backend) -> None:
    store = backend.open()
    store.write(lambda w: w.execute("INSERT INTO job_cursors (name, position) VALUES ('taken', 1)"))

    def batch(w: Writer) -> None:
        w.execute_many(
            "INSERT INTO job_cursors (name, position) VALUES (:n, 1)", [{"n": "a"}, {"n": "taken"}, {"n": "b"}]
        )

    with pytest.raises(Exception, match=r"(?i)unique|duplicate"):
        store.write(batch)
    assert store.read(lambda r: r.scalar("SELECT COUNT(*) FROM job_cursors WHERE name IN ('a', 'taken', 'b')")) == 1
    store.close()


DOCS = [
    Document("note", "a", "the keeper lit the lamp", thread="t"),
    Document("note", "b", "the lamp went out", thread="t"),
    Document("memory", "c", "a keeper's log", thread="t"),
]
BATCH = [
    Document("note", "b", "the lamp went out"),  # held, unchanged but its thread
    Document("note", "d", "a lighthouse keeper's lamp", thread="t"),  # new
    Document("note", "a", "the keeper relit the lamp", thread="t"),  # held, changed
    Document("note", "d", "a lighthouse keeper's logbook", thread="t"),  # new, then again in the same batch
    Document("memory", "e", "keepers keep logs"),  # new, another kind
]


def _state(store: Store) -> dict[str, Any]:
    def read(r: Any) -> dict[str, Any]:
        return {
            "rows": r.tuples("SELECT id, kind, ref, thread, body, content_hash FROM documents ORDER BY id"),
            "terms": r.tuples("SELECT term, df FROM document_terms WHERE df <> 0 ORDER BY term"),
        }

    return dict(store.read(read))


def test_a_batch_of_documents_leaves_what_one_upsert_at_a_time_leaves(backend: Backend) -> None:
    one, many = backend.open(), backend.open()  # the same database: one after the other
    engine = SearchEngine(one)
    first = one.write(lambda w: documents.upsert_many(w, DOCS, 1))
    singly = [one.write(lambda w, d=d: documents.upsert(w, d, 2)) for d in BATCH]
    expected, found = _state(one), [h.ref for h in engine.search("keeper lamp logbook").hits]
    one.write(lambda w: w.execute("DELETE FROM documents"))
    one.write(lambda w: w.execute("DELETE FROM document_terms"))
    if backend.name == "postgresql":
        one.write(lambda w: w.execute("UPDATE document_lengths SET total = 0"))

    ids = many.write(lambda w: documents.upsert_many(w, DOCS, 1))
    batched = many.write(lambda w: documents.upsert_many(w, BATCH, 2))
    shift = ids[0] - first[0]  # PostgreSQL's ids go on counting past the deleted rows
    assert [i - shift for i in batched] == singly
    state = _state(many)
    assert [(i - shift, *rest) for i, *rest in state["rows"]] == expected["rows"]
    assert state["terms"] == expected["terms"]
    assert [h.ref for h in SearchEngine(many).search("keeper lamp logbook").hits] == found
    one.close()
    many.close()


def _memory(n: int, entities: list[str]) -> dict[str, Any]:
    return {
        "id": f"mem_{n}", "content": f"memory {n}", "summary": None, "category": "fact", "kind": "fact",
        "entities": json.dumps(entities), "project": None, "visibility": "private", "owner": "u", "org": "u",
        "status": "active", "pinned": 0, "core_key": None, "core_priority": None, "session_id": "s", "vendor": "other",
        "origin": "test", "content_hash": f"h{n}", "idempotency_key": None, "created_at": n, "valid_from": n,
        "decay_score": 0.5,
    }  # fmt: skip


def test_memories_inserted_as_a_batch_keep_their_entities(backend: Backend) -> None:
    store = backend.open()
    rows = [_memory(1, ["uv", "UV", "pip"]), _memory(2, []), _memory(3, ["docker"])]
    store.write(lambda w: memories.insert_many(w, rows))
    found = store.read(lambda r: memories.get_many(r, ["mem_1", "mem_2", "mem_3"]))
    assert [found[f"mem_{n}"].entities for n in (1, 2, 3)] == [("uv", "UV", "pip"), (), ("docker",)]
    entities = store.read(lambda r: r.tuples("SELECT memory_id, entity FROM memory_entities ORDER BY memory_id"))
    assert sorted(entities) == [("mem_1", "pip"), ("mem_1", "uv"), ("mem_3", "docker")]  # one entity whatever its case
    store.close()


def _message(key: str, text: str, role: str = "user") -> StoredMessage:
    return StoredMessage("codex", "s1", key, role, text, "[]", 1, "/p", "/p", None, "t", "", 0)


def test_a_batch_of_transcript_messages_is_written_as_one_at_a_time_would_be(backend: Backend) -> None:
    """New keys, a held key unchanged, one rewritten, an erased one (kept erased unless revised), and a key
    twice in the batch: the same answers and rows either way."""
    held = [_message("a", "first"), _message("b", "second"), _message("c", "", role=ERASED_ROLE)]
    batch = [
        (_message("n1", "new"), False),
        (_message("a", "first"), False),
        (_message("b", "second, edited"), False),
        (_message("c", "back again"), False),
        (_message("n1", "new, edited"), False),
        (_message("n2", "another"), True),
        (_message("c", "revised"), True),
    ]
    store = backend.open()

    def run(owner: str, batched: bool) -> tuple[list[tuple[int, bool] | None], list[tuple[Any, ...]]]:
        store.write(lambda w: transcripts.upsert_messages(w, owner, [(m, False) for m in held], 1))
        first = store.read(lambda r: r.scalar("SELECT min(id) FROM transcript_messages WHERE owner = :o", {"o": owner}))

        def write(w: Writer) -> list[tuple[int, bool] | None]:
            if batched:
                return transcripts.upsert_messages(w, owner, batch, 2)
            return [transcripts.upsert_message(w, owner, m, revises, 2) for m, revises in batch]

        answers = [None if a is None else (a[0] - first, a[1]) for a in store.write(write)]
        sql = "SELECT key, role, text, ingested_at FROM transcript_messages WHERE owner = :o ORDER BY id"
        return answers, store.read(lambda r: r.tuples(sql, {"o": owner}))

    one, many = run("one", batched=False), run("many", batched=True)
    assert one == many
    answers = one[0]
    assert [None if a is None else a[1] for a in answers] == [True, None, False, None, False, True, False]
    assert answers[2] == (1, False) and answers[6] == (2, False) and answers[4] == (answers[0][0], False)  # type: ignore[index]
    store.close()
