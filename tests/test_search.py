from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Backend
from tests.fakes import HashingEmbedder
from threadloom.errors import InvalidInput
from threadloom.search.engine import SearchEngine, SearchTuning
from threadloom.search.fusion import FusionWeights
from threadloom.search.model import Document, Filters
from threadloom.search.query import name_forms, without_names
from threadloom.store import document_vectors, terms
from threadloom.store.sqlite import SqliteStore, open_store


@pytest.fixture
def store(backend: Backend) -> Iterator[SqliteStore]:
    s = backend.open()  # SQLite and PostgreSQL (tests/conftest.py)
    yield s
    s.close()


WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]


def add(engine: SearchEngine, store: SqliteStore, *docs: Document) -> list[int]:
    return store.write(lambda w: [engine.index(w, d) for d in docs])


def ms(y: int, m: int, d: int) -> int:
    return int(datetime(y, m, d, tzinfo=UTC).timestamp() * 1000)


def test_full_text_finds_stemmed_words(store: SqliteStore) -> None:
    engine = SearchEngine(store)
    add(engine, store, Document("note", "1", "We decided to migrate the database"), Document("note", "2", "lunch"))
    result = engine.search("migrating databases")
    assert [h.ref for h in result.hits] == ["1"]
    assert result.signals == ("lexical",)


def test_filters_apply_before_ranking(store: SqliteStore) -> None:
    engine = SearchEngine(store, tuning=SearchTuning(candidates=20))
    strong = [Document("note", f"a{i}", "deploy deploy deploy the service", project="A") for i in range(150)]
    add(engine, store, *strong, Document("note", "b", "a long story that mentions deploy once", project="B"))
    result = engine.search("deploy", Filters(project="B"))
    assert [h.ref for h in result.hits] == ["b"]


def test_kind_status_thread_source_and_time_filters(store: SqliteStore) -> None:
    engine = SearchEngine(store)
    add(
        engine,
        store,
        Document("note", "1", "cache layer", thread="t1", source="alice", occurred_at=ms(2024, 1, 5)),
        Document("memory", "2", "cache layer", thread="t2", source="bob", status="dormant", occurred_at=ms(2024, 3, 5)),
        Document("quote", "3", "cache layer", thread="t1", source="bob", occurred_at=ms(2024, 6, 5)),
    )

    def refs(f: Filters) -> set[str]:
        return {h.ref for h in engine.search("cache", f).hits}

    assert refs(Filters(kinds=("note", "quote"))) == {"1", "3"}
    assert refs(Filters(thread="t1")) == {"1", "3"}
    assert refs(Filters(sources=("bob",))) == {"2", "3"}
    assert refs(Filters(statuses=("dormant",))) == {"2"}
    assert refs(Filters(since=ms(2024, 2, 1), until=ms(2024, 4, 1))) == {"2"}


@pytest.mark.parametrize(
    "query",
    ['"unbalanced', "NEAR(cache layer)", "cach*", "-cache", "^cache", "cache AND OR NOT", "col:cache", "{a b}", "'"],
)
def test_fts_syntax_in_a_query_is_just_text(store: SqliteStore, query: str) -> None:
    engine = SearchEngine(store)
    add(engine, store, Document("note", "1", "the cache layer and its near misses"))
    result = engine.search(query)
    assert isinstance(result.hits, list)


def test_a_huge_query_is_cut_quickly_with_a_caveat(store: SqliteStore) -> None:
    engine = SearchEngine(store)
    add(engine, store, Document("note", "1", "alpha beta"))
    started = time.perf_counter()
    result = engine.search("alpha " + "x" * 1_000_000)
    elapsed = time.perf_counter() - started
    assert [h.ref for h in result.hits] == ["1"]
    assert any("cut" in c for c in result.caveats)
    assert elapsed < 30  # a bound against runaway work, not a speed target


def test_an_empty_query_lists_by_recency(store: SqliteStore) -> None:
    engine = SearchEngine(store)
    add(engine, store, *(Document("note", str(i), f"item {i}", occurred_at=ms(2024, 1, i + 1)) for i in range(5)))
    result = engine.search("  ", limit=3)
    assert [h.ref for h in result.hits] == ["4", "3", "2"]
    assert result.signals == ("recent",)
    assert result.caveats


def test_nothing_found_says_where_else_to_look(store: SqliteStore) -> None:
    result = SearchEngine(store).search("nonexistent words")
    assert result.hits == []
    assert "nothing matched" in result.caveats[0]


@pytest.mark.parametrize(
    "bad",
    [lambda: Filters(kinds=("bogus",)), lambda: Filters(statuses=("x",)), lambda: Filters(since=5, until=1)],
)
def test_unknown_filters_are_clear_errors(bad: object) -> None:
    with pytest.raises(InvalidInput):
        bad()  # type: ignore[operator]


def test_bad_documents_and_limits_are_refused(store: SqliteStore) -> None:
    with pytest.raises(InvalidInput):
        Document("note", "1", "   ")
    with pytest.raises(InvalidInput):
        Document("note", "1", "x" * 100_001)
    with pytest.raises(InvalidInput):
        SearchEngine(store).search("x", limit=0)


def test_a_date_in_the_question_boosts_what_happened_then(store: SqliteStore) -> None:
    engine = SearchEngine(store)
    add(
        engine,
        store,
        Document("note", "march", "went hiking in the hills", occurred_at=ms(2023, 3, 10)),
        Document("note", "may", "went hiking with the dog", occurred_at=ms(2023, 5, 12)),
    )
    top = engine.search("hiking in May 2023").hits[0]
    assert top.ref == "may"
    assert top.why.get("temporal") == 1
    relative = engine.search("what hiking did we do last May?", now=datetime(2024, 1, 10, tzinfo=UTC))
    assert relative.hits[0].ref == "may"


def test_dense_search_finds_what_full_text_misses(store: SqliteStore) -> None:
    engine = SearchEngine(store, HashingEmbedder())
    add(engine, store, Document("note", "car", "bought an automobile"), Document("note", "x", "ate soup"))
    assert engine.embed_pending() == 2
    result = engine.search("vehicle")
    assert result.hits[0].ref == "car"
    assert result.hits[0].why == {"dense": pytest.approx(3**-0.5, abs=1e-4)}  # its cosine: the fake's floor is 0
    assert "dense" in result.signals


def test_vectors_read_while_the_question_is_embedded_rank_as_a_read_after_it_does(store: SqliteStore) -> None:
    embedder = HashingEmbedder()
    engine = SearchEngine(store, embedder)
    words = WORDS[:6]
    docs = [
        Document("note", f"d{i}", f"{words[i % 6]} {words[(i // 6) % 6]}", project="P" if i % 3 else "Q")
        for i in range(60)
    ]
    add(engine, store, *docs)
    engine.embed_pending()
    store.write(lambda w: engine.remove(w, "note", "d8"))
    for filters in (Filters(), Filters(project="P")):
        prefetched = engine.search("bravo charlie", filters, limit=20)  # the model embeds while vectors are read
        after = engine.search("bravo charlie", filters, limit=20, vector=embedder.embed_query("bravo charlie"))
        assert [(h.ref, h.score) for h in prefetched.hits] == [(h.ref, h.score) for h in after.hits]
        assert "d8" not in {h.ref for h in prefetched.hits}
        assert all(h.project == "P" for h in prefetched.hits) or filters == Filters()
    assert "dense" in prefetched.signals


def test_kept_candidates_follow_every_write_from_another_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A small store's candidates are kept between searches; a write through another connection (as
    another process's) shows in the very next search."""
    here, there = open_store(tmp_path / "k.db"), open_store(tmp_path / "k.db")
    embedder = HashingEmbedder()
    engine = SearchEngine(here, embedder, SearchTuning(weights=FusionWeights(lexical=0.0)))
    other = SearchEngine(there, embedder)
    add(engine, here, Document("note", "a", "car wash", source="ann"), Document("note", "b", "lunch menu"))
    engine.embed_pending()
    reads: list[int] = []
    read_vectors = document_vectors.vectors_of

    def counted(*args: Any) -> Any:
        reads.append(1)
        return read_vectors(*args)

    monkeypatch.setattr(document_vectors, "vectors_of", counted)

    def refs(filters: Filters | None = None) -> list[str]:
        return [h.ref for h in engine.search("car wash bay", filters).hits]

    assert refs()[0] == "a" and refs()[0] == "a"
    assert len(reads) == 1  # the second search read no vector
    add(other, there, Document("note", "a", "car wash", source="bob"))  # the same text: its vector stays current
    assert "a" not in refs(Filters(sources=("ann",))) and refs(Filters(sources=("bob",))) == ["a"]
    add(other, there, Document("note", "c", "automobile wash bay"))  # synonyms: as the question
    other.embed_pending()
    assert refs()[0] == "c"
    there.write(lambda w: other.remove(w, "note", "c"))
    assert refs()[0] == "a"
    assert len(reads) == 5
    here.close()
    there.close()


class BusyEmbedder(HashingEmbedder):
    """As a local model on every core: records which thread embedded each question."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[str] = []

    @property
    def uses_every_core(self) -> bool:
        return True

    def embed_query(self, text: str) -> Any:
        self.threads.append(threading.current_thread().name)
        return super().embed_query(text)


def test_a_model_on_every_core_embeds_the_question_first_and_ranks_the_same(store: SqliteStore) -> None:
    beside, busy = HashingEmbedder(), BusyEmbedder()
    engine = SearchEngine(store, busy)
    words = [f"{WORDS[i % 7]} {WORDS[(i // 7) % 7]} car" for i in range(40)]
    add(engine, store, *[Document("note", f"d{i}", text, thread=f"t{i % 3}") for i, text in enumerate(words)])
    engine.embed_pending()
    for question in ("bravo charlie", "automobile delta", "echo"):
        expected = [(h.ref, h.score) for h in SearchEngine(store, beside).search(question, limit=15).hits]
        assert [(h.ref, h.score) for h in engine.search(question, limit=15).hits] == expected
    assert busy.threads == [threading.current_thread().name] * 3


def test_a_weak_dense_match_under_the_floor_is_dropped(store: SqliteStore) -> None:
    engine = SearchEngine(store, HashingEmbedder(), SearchTuning(dense_floor=0.9))
    add(engine, store, Document("note", "1", "car wash station downtown open late"))
    engine.embed_pending()
    assert engine.search("vehicle").hits == []


def test_vectors_of_another_fingerprint_are_never_compared(store: SqliteStore) -> None:
    old = SearchEngine(store, HashingEmbedder(revision="1"))
    add(old, store, Document("note", "car", "automobile"))
    old.embed_pending()
    new = SearchEngine(store, HashingEmbedder(revision="2"))
    assert new.search("vehicle").hits == []
    assert new.coverage() == (0, 1)
    assert new.embed_pending() == 1
    assert new.search("vehicle").hits[0].ref == "car"


def test_a_changed_body_drops_its_stale_vector_and_reembeds(store: SqliteStore) -> None:
    engine = SearchEngine(store, HashingEmbedder())
    add(engine, store, Document("note", "1", "automobile"))
    engine.embed_pending()
    add(engine, store, Document("note", "1", "soup recipe"))
    assert engine.coverage() == (0, 1)
    assert engine.search("vehicle").hits == []
    assert engine.embed_pending() == 1
    assert engine.search("soup").hits[0].ref == "1"


def test_deleting_a_document_deletes_its_vectors(store: SqliteStore) -> None:
    engine = SearchEngine(store, HashingEmbedder())
    add(engine, store, Document("note", "1", "automobile"))
    engine.embed_pending()
    assert store.write(lambda w: engine.remove(w, "note", "1"))
    assert store.read(lambda r: r.scalar("SELECT COUNT(*) FROM document_vectors")) == 0
    assert engine.search("automobile").hits == []
    if store.dialect == "sqlite":
        sql = "SELECT COUNT(*) FROM documents_fts WHERE documents_fts MATCH 'automobile'"
        found = store.read(lambda r: r.scalar(sql))
        assert found == 0


def test_embedding_resumes_where_it_stopped(store: SqliteStore) -> None:
    engine = SearchEngine(store, HashingEmbedder())
    add(engine, store, *(Document("note", str(i), f"text {i}") for i in range(70)))
    seen: list[tuple[int, int]] = []

    class Stop(Exception):
        pass

    def stop_after_first(done: int, total: int) -> None:
        seen.append((done, total))
        raise Stop

    with pytest.raises(Stop):
        engine.embed_pending(stop_after_first)
    assert engine.coverage() == (32, 70)
    assert engine.embed_pending() == 38
    assert engine.coverage() == (70, 70)


def test_coded_dense_search_keeps_exact_answers_filters_and_deletions(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from threadloom.search import vector_index

    monkeypatch.setattr(vector_index, "EXACT_LIMIT", 20)
    engine = SearchEngine(store, HashingEmbedder(dimension=128))
    words = WORDS
    docs = [
        Document("note", f"d{i}", f"{words[i % 10]} {words[(i // 10) % 10]} {words[(i // 100) % 10]}",
                 project="P" if i % 2 else "Q")
        for i in range(300)
    ]  # fmt: skip
    add(engine, store, *docs)
    engine.embed_pending()
    target = docs[123]
    dense_only = SearchTuning(weights=FusionWeights(lexical=0.0, dense=1.0, temporal_boost=0.0))
    engine.tuning = dense_only
    assert engine.search(target.body).hits[0].ref == target.ref
    in_p = engine.search(target.body, Filters(project="P")).hits
    assert in_p and all(h.project == "P" for h in in_p)
    assert in_p[0].ref == target.ref
    store.write(lambda w: engine.remove(w, "note", target.ref))
    assert target.ref not in {h.ref for h in engine.search(target.body, limit=50).hits}


def test_a_broad_filter_checks_only_the_nearest_codes_and_ranks_as_the_full_filter_does(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from threadloom.search import vector_index

    monkeypatch.setattr(vector_index, "EXACT_LIMIT", 20)
    monkeypatch.setattr(vector_index, "MIN_RESCORE", 10)
    words = WORDS
    engine = SearchEngine(store, HashingEmbedder(dimension=128))
    add(engine, store, *(Document("note", f"d{i}", f"{words[i % 10]} {words[(i // 10) % 10]}") for i in range(200)))
    add(engine, store, Document("thread", "t", "alpha bravo"))
    engine.embed_pending()
    engine.tuning = SearchTuning(candidates=10, weights=FusionWeights(lexical=0.0, dense=1.0, temporal_boost=0.0))
    notes = Filters(kinds=("note",))
    listed: list[int] = []
    monkeypatch.setattr(vector_index.documents, "filtered_ids", lambda *a: listed.append(1) or [])
    sampled = engine.search("alpha bravo", notes)
    assert not listed and sampled.hits[0].ref in ("d1", "d10") and all(h.kind == "note" for h in sampled.hits)
    monkeypatch.undo()
    monkeypatch.setattr(vector_index, "EXACT_LIMIT", 20)
    monkeypatch.setattr(vector_index, "MIN_RESCORE", 10)
    monkeypatch.setattr(vector_index, "_nearest_passing", lambda *a: None)
    listed_all = engine.search("alpha bravo", notes).hits
    assert [h.score for h in listed_all[:5]] == [h.score for h in sampled.hits[:5]]  # below, Hamming ties differ


def test_a_periodic_pass_looks_only_at_recent_writes(store: SqliteStore) -> None:
    engine = SearchEngine(store, HashingEmbedder())
    add(engine, store, Document("note", "old", "written long ago"))
    future = int(time.time() * 1000) + 60_000
    assert engine.embed_pending(changed_since=future) == 0
    assert engine.embed_pending(changed_since=1) == 1
    assert engine.coverage() == (1, 1)


def test_a_source_the_question_names_is_preferred(store: SqliteStore) -> None:
    engine = SearchEngine(store)
    add(
        engine,
        store,
        Document("memory", "1", "Bob: I painted a sunrise over the lake", source="Bob"),
        Document("memory", "2", "Alice: I painted a sunrise over the lake", source="Alice"),
    )
    result = engine.search("what did alice paint?")
    assert result.hits[0].ref == "2"
    assert result.hits[0].why.get("source") == 1
    assert "source" in result.signals


def test_a_hit_lends_score_to_its_neighbours_in_the_thread_within_the_filters(store: SqliteStore) -> None:
    engine = SearchEngine(store)
    add(
        engine,
        store,
        Document("memory", "before", "Sam: groceries and laundry", thread="s2"),
        Document("memory", "q", "Jo: where did you go hiking last weekend?", thread="s1"),
        Document("memory", "a", "Sam: the ridge trail above the lake", thread="s1"),
        Document("memory", "after", "Sam: a quiet week at home", thread="s2"),
    )
    result = engine.search("hiking weekend")
    assert [h.ref for h in result.hits] == ["q", "a"]  # the answer shares no word with the question
    assert "context" in result.signals and result.hits[1].why["context"] > 0  # other threads get nothing

    no_spread = SearchEngine(store, tuning=SearchTuning(context_spread=0.0)).search("hiking weekend")
    assert [h.ref for h in no_spread.hits] == ["q"]

    store.write(lambda w: engine.index(w, Document("memory", "a", "Sam: the ridge trail", thread="s1", status="idle")))
    filtered = engine.search("hiking weekend", filters=Filters(statuses=("active",)))
    assert [h.ref for h in filtered.hits] == ["q"]  # a neighbour must pass the filters too


def test_term_frequencies_follow_every_write_and_bound_the_work_of_a_query(store: SqliteStore) -> None:
    engine = SearchEngine(store)
    add(engine, store, *[Document("note", str(i), f"common words everywhere, item {i}") for i in range(30)])
    add(engine, store, Document("note", "rare", "common words and one rare zeppelin"))
    total, df = store.read(lambda r: terms.frequencies(r, ["common", "zeppelin", "missing"]))
    assert (total, df) == (31, {"common": 31, "zeppelin": 1, "missing": 0})
    store.write(lambda w: engine.index(w, Document("note", "rare", "a rare zeppelins sighting")))  # stems match
    store.write(lambda w: engine.remove(w, "note", "0"))
    total, df = store.read(lambda r: terms.frequencies(r, ["common", "zeppelin"]))
    assert (total, df) == (30, {"common": 29, "zeppelin": 1})
    # within a budget of 10 postings only the rare term is scored; the rarest is kept even over budget
    assert store.read(lambda r: terms.informative(r, ["common", "zeppelin"], 10)) == ["zeppelin"]
    assert store.read(lambda r: terms.informative(r, ["common", "words"], 10)) == ["common"]
    assert store.read(lambda r: terms.informative(r, ["common", "zeppelin"], 1_000)) == ["common", "zeppelin"]
    assert store.read(lambda r: terms.informative(r, ["common", "words", "zeppelin"], 1_000, max_terms=2)) == [
        "common",
        "zeppelin",
    ]


def test_a_selective_filter_still_finds_what_the_unfiltered_best_crowd_out(store: SqliteStore) -> None:
    engine = SearchEngine(store)
    crowd = [Document("note", f"a{i}", "deploy deploy deploy notes", project="a") for i in range(700)]
    few = [
        Document("note", f"b{i}", f"deploy notes with more words to lower the score {i}", project="b") for i in range(5)
    ]
    add(engine, store, *crowd, *few)
    found = engine.search("deploy", Filters(project="b"), limit=10).hits
    assert sorted(h.ref for h in found) == [f"b{i}" for i in range(5)]
    unfiltered = engine.search("deploy", limit=10).hits
    assert all(h.ref.startswith("a") for h in unfiltered)


def test_a_threaded_document_is_embedded_after_the_one_before_it(store: SqliteStore) -> None:
    dense_only = SearchTuning(
        weights=FusionWeights(lexical=0.0, dense=1.0), context_spread=0.0, thread_prior=0.0, dense_floor=0.2
    )
    engine = SearchEngine(store, HashingEmbedder(), dense_only)
    add(
        engine,
        store,
        Document("memory", "q", "Jo: where did you go hiking?", thread="s1"),
        Document("memory", "a", "Sam: the ridge trail above the lake", thread="s1"),
        Document("note", "other-kind", "Sam: up the ridge trail above the lake", thread="s1"),
        Document("memory", "other-thread", "Sam: up the ridge trail above the lake", thread="s2"),
        Document("memory", "no-thread", "Sam: the ridge trail above the lake again"),
    )
    engine.embed_pending()
    found = {h.ref: h.score for h in engine.search("hiking", limit=10).hits}
    assert set(found) == {"q", "a"}  # the answer carries its question; other kinds and threads do not


def test_turns_of_a_thread_that_matches_well_rise_together(store: SqliteStore) -> None:
    engine = SearchEngine(store, tuning=SearchTuning(context_spread=0.0))
    add(
        engine,
        store,
        Document("memory", "z", "the lake was warm", thread="s2"),
        Document("memory", "x", "trail lake trail lake", thread="s1"),
        Document("memory", "y", "the lake was cold", thread="s1"),
        Document("memory", "w", "the lake was blue"),
    )
    result = engine.search("trail lake")
    assert [h.ref for h in result.hits][:2] == ["x", "y"]  # y's thread holds the best match, z's does not
    assert "thread" in result.signals
    scores = {h.ref: h for h in result.hits}
    assert scores["z"].score == scores["w"].score  # a document without a thread is no worse off than one alone
    assert "thread" in scores["y"].why and "thread" not in scores["w"].why

    flat = SearchEngine(store, tuning=SearchTuning(context_spread=0.0, thread_prior=0.0)).search("trail lake")
    assert [h.ref for h in flat.hits][1] == "z"  # equal words, and the older first
    assert "thread" not in flat.signals


def test_names_of_sources_are_left_out_of_the_dense_query() -> None:
    assert without_names("What did Sam's puppy eat, Sam?", {"sam"}) == "What did puppy eat"
    assert without_names("Sam?", {"sam"}) == "Sam?"  # nothing would be left: the question stays whole
    assert name_forms(("sam's", "dog")) == ("sam's", "dog", "sam")


def test_a_question_naming_a_source_is_embedded_without_the_name(store: SqliteStore) -> None:
    dense = FusionWeights(lexical=0.0, dense=1.0, source_boost=0.3)
    tuning = SearchTuning(weights=dense, context_spread=0.0, thread_prior=0.0, dense_floor=0.1)
    engine = SearchEngine(store, HashingEmbedder(), tuning)
    add(
        engine,
        store,
        Document("memory", "sam", "Sam: Sam went out", source="Sam"),
        Document("memory", "jo", "Jo: the canine ate carrots", source="Jo"),
    )
    engine.embed_pending()
    hits = {h.ref: h.why for h in engine.search("what did Sam's puppy eat").hits}
    assert list(hits) == ["jo"] and hits["jo"]["dense"] > 0  # Sam's turn shares only the name

    names_kept = replace(tuning, weights=replace(dense, source_boost=0.0))
    kept = {h.ref: h.why for h in SearchEngine(store, HashingEmbedder(), names_kept).search("Sam's puppy").hits}
    assert "dense" in kept["sam"]


def test_close_matches_keep_close_scores_whatever_the_size_of_the_store(tmp_path: Path) -> None:
    """Scores are absolute (fusion.py): the weaker of two close matches is not 0, as min-max over the candidates
    made it, and a match scores about the same among 2 documents as among 500."""
    old, new = "The staging database host is db-old", "The staging database host moved to db-new"
    scores = []
    for fillers in (0, 498):
        store = open_store(tmp_path / f"{fillers}.db")
        engine = SearchEngine(store)
        filler = [Document("note", f"f{i}", f"lunch order {i} for the team offsite {i % 7}") for i in range(fillers)]
        add(engine, store, Document("note", "old", old), Document("note", "new", new), *filler)
        hits = {h.ref: h.why["lexical"] for h in engine.search("staging database host").hits}
        store.close()
        assert set(hits) == {"old", "new"} and min(hits.values()) > 0.8 * max(hits.values())
        scores.append(hits)
    small, large = scores
    assert all(abs(small[ref] - large[ref]) < 0.1 for ref in small)
