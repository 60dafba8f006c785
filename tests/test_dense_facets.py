"""The dense index answers a transcript search's filters from columns it keeps in memory (search/facets.py):
the same documents as an exact scan of every message that passes the filter in SQL, and never another
owner's."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.fakes import HashingEmbedder
from threadloom.identity import Provenance
from threadloom.search import vector_index
from threadloom.search.engine import SearchEngine
from threadloom.search.model import Document, Filters, MemoryScope
from threadloom.store import document_vectors, documents, transcripts
from threadloom.store.sqlite import SqliteStore, open_store
from threadloom.store.transcripts import StoredMessage

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]
DAY = 86_400_000
START = 1_780_000_000_000


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    s = open_store(tmp_path / "t.db")
    yield s
    s.close()


def seed(store: SqliteStore, engine: SearchEngine) -> None:
    def write(w: Any) -> None:
        for i in range(240):
            owner = ("ann", "bob")[i % 2]
            source = ("claude-code", "codex", "gemini")[i % 3]
            session = f"s{i % 7}"
            role = ("user", "assistant")[(i // 2) % 2]
            at = START + (i % 30) * DAY
            text = f"{WORDS[i % 10]} {WORDS[(i // 10) % 10]} {WORDS[(i // 3) % 10]}"
            m = StoredMessage(
                source, session, f"k{i}", role, text, "[]", at, f"/p{i % 4}", f"/p{i % 4}", None, "t", "", i
            )
            row = transcripts.upsert_message(w, owner, m, False, at)
            assert row is not None
            engine.index(w, Document("transcript", str(row[0]), text, f"/p{i % 4}", session, role, occurred_at=at))

    store.write(write)
    engine.embed_pending()


def exact(
    store: SqliteStore, engine: SearchEngine, query: str, filters: Filters, depth: int
) -> tuple[list[float], set[int]]:
    """Every document passing the filters in SQL, scored by brute force: the best `depth` scores, and the
    documents that pass."""
    assert engine.embedder is not None
    fp = engine.embedder.fingerprint
    vector = np.asarray(engine.embedder.embed_query(query), dtype=np.float32)
    ids = store.read(lambda r: documents.filtered_ids(r, filters, 1 << 40))
    rows = store.read(lambda r: document_vectors.vectors_of(r, fp, ids, filters))
    scored = sorted(-float(np.frombuffer(v, dtype=np.float32) @ vector) for _, v, *_ in rows)
    return [round(-s, 5) for s in scored[:depth]], {int(row[0]) for row in rows}


def test_transcript_filters_answered_in_memory_match_an_exact_scan_and_keep_owners_apart(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vector_index, "EXACT_LIMIT", 20)  # the coded path, at a test's size
    monkeypatch.setattr(vector_index, "MIN_RESCORE", 400)  # every passing document re-scored: exact
    engine = SearchEngine(store, HashingEmbedder(dimension=64))
    seed(store, engine)
    ann = Provenance(session_id="x", vendor="claude", project=None, user="ann").viewer()
    listed: list[int] = []
    real_filtered_ids = documents.filtered_ids
    monkeypatch.setattr(vector_index.documents, "filtered_ids", lambda *a: listed.append(1) or real_filtered_ids(*a))
    cases = [
        Filters(kinds=("transcript",), memory=MemoryScope(viewer=ann)),
        Filters(kinds=("transcript",), vendors=("codex",), memory=MemoryScope(viewer=ann)),
        Filters(kinds=("transcript",), since=START + 5 * DAY, until=START + 12 * DAY, memory=MemoryScope(viewer=ann)),
        Filters(kinds=("transcript",), thread="s3", sources=("user",), memory=MemoryScope(viewer=ann)),
        Filters(
            kinds=("transcript",), project="/p2", vendors=("gemini", "claude-code"), memory=MemoryScope(viewer=ann)
        ),
        Filters(kinds=("transcript",), vendors=("copilot",), memory=MemoryScope(viewer=ann)),  # none of those
    ]
    fp = HashingEmbedder(dimension=64).fingerprint
    owners = dict(store.read(lambda r: r.tuples("SELECT CAST(ref AS INTEGER), id FROM documents")))
    ann_docs = {
        owners[i] for (i,) in store.read(lambda r: r.tuples("SELECT id FROM transcript_messages WHERE owner = 'ann'"))
    }
    for filters, query in itertools.product(cases, ["alpha bravo", "golf hotel india"]):
        vector = engine.embedder.embed_query(query)  # type: ignore[union-attr]
        listed.clear()
        found = store.read(lambda r, f=filters, v=vector: engine._dense_index.search(r, fp, v, f, 30, -1.0))
        assert not listed  # nothing listed in SQL first
        scores, passing = exact(store, engine, query, filters, 30)
        assert [round(s, 5) for _, s in found] == scores, filters
        assert {i for i, _ in found} <= passing & ann_docs  # bob's messages never, whatever the filter
    assert store.read(lambda r: engine._dense_index._current(r, fp)).facets.mask(cases[0]) is not None


def test_filters_the_memory_does_not_hold_go_to_sql(store: SqliteStore) -> None:
    engine = SearchEngine(store, HashingEmbedder(dimension=64))
    seed(store, engine)
    codes = store.read(lambda r: engine._dense_index._current(r, HashingEmbedder(dimension=64).fingerprint))
    ann = Provenance(session_id="x", vendor="claude", project=None, user="ann").viewer()
    assert codes.facets.mask(Filters(kinds=("transcript", "memory"))) is None
    assert codes.facets.mask(Filters(kinds=("transcript",), statuses=("active",))) is None
    assert codes.facets.mask(Filters(kinds=("transcript",), memory=MemoryScope(viewer=ann, as_of=START))) is None
    mask = codes.facets.mask(Filters(kinds=("transcript",), memory=MemoryScope(viewer=ann)))
    assert mask is not None and int(mask.sum()) == 120
