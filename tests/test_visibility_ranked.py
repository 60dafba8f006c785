"""Visibility inside the ranking: another user's private memory never reaches a recall, however well it matches.

On PostgreSQL the full-text ranking checks who may see a candidate in score order, best first (store/
postgres_search.py); these fail if that check were dropped or if the hidden best matches left the answer short.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import Backend
from threadloom.identity import Provenance
from threadloom.memory.model import NewMemory
from threadloom.memory.recall import MemoryRecall
from threadloom.memory.scoring import ScoringConfig
from threadloom.memory.service import MemoryService
from threadloom.search.engine import SearchEngine
from threadloom.search.model import Filters, MemoryScope
from threadloom.store.base import Store

ANA = Provenance("ana-1", "claude", "/repo", user="ana")
BEN = Provenance("ben-1", "codex", "/repo", user="ben")
QUERY = "zeppelin hangar lease"


@pytest.fixture
def store(backend: Backend) -> Iterator[Store]:
    opened = backend.open()
    yield opened
    opened.close()


def test_another_users_private_best_match_is_not_recalled(store: Store) -> None:
    engine = SearchEngine(store)  # BM25 alone: the private memory is the best full-text match by far
    service = MemoryService(store, engine, ScoringConfig())
    recall = MemoryRecall(store, engine, ScoringConfig())
    private = service.store(NewMemory(content="zeppelin hangar lease: zeppelin hangar lease terms"), ANA).memory.id
    mine = service.store(NewMemory(content="the hangar roof needs repair"), BEN).memory.id
    assert recall.recall(QUERY, ANA, read_only=True)["memories"][0]["id"] == private
    seen = [m["id"] for m in recall.recall(QUERY, BEN, read_only=True)["memories"]]
    assert seen == [mine]
    scope = MemoryScope(viewer=BEN.viewer(), project=BEN.project)  # recall's search: the hits themselves
    hits = engine.search(QUERY, Filters(kinds=("memory", "note", "quote", "thread"), memory=scope), 30).hits
    assert [hit.ref for hit in hits] == [mine]


def test_hidden_better_matches_do_not_leave_the_answer_short(store: Store) -> None:
    engine = SearchEngine(store)
    service = MemoryService(store, engine, ScoringConfig())
    for n in range(12):  # more than the search's limit below, each a better match than any of ben's
        service.store(NewMemory(content=f"zeppelin hangar lease {n}: zeppelin hangar lease renewal {n}"), ANA)
    bens = {service.store(NewMemory(content=f"a hangar for plan {n}"), BEN).memory.id for n in range(3)}
    scope = MemoryScope(viewer=BEN.viewer(), project=BEN.project)
    found = engine.search(QUERY, Filters(kinds=("memory",), memory=scope), limit=5).hits
    assert {hit.ref for hit in found} == bens
    everyone = engine.search(QUERY, Filters(kinds=("memory",)), limit=5).hits  # a job's search: no viewer
    assert not {hit.ref for hit in everyone} & bens
