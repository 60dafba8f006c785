"""The search engine: full-text always, vectors when an embedder is configured, fused.

Filters go into every retriever's query, so ranking only ever sees documents that pass
them. Blocking work (the model, the store) happens in the caller's worker thread.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING

from threadloom.clock import now_ms
from threadloom.errors import InvalidInput
from threadloom.search import temporal
from threadloom.search.embedder import Embedder
from threadloom.search.fusion import FusionWeights, bm25_ceiling, dense_scale, fuse, lexical_scale
from threadloom.search.model import MAX_LIMIT, Document, Filters, Hit, SearchResult
from threadloom.search.query import MAX_QUERY_CHARS, analyse, name_forms, without_names
from threadloom.search.vector_index import DenseIndex, Prefetched
from threadloom.store import document_batch, document_vectors, documents, postgres_search
from threadloom.store import terms as term_stats
from threadloom.store.base import Reader, Store, Writer

if TYPE_CHECKING:
    from threadloom.search.embedder import Matrix

EMBED_BATCH = 32
_EMBEDDING = ThreadPoolExecutor(max_workers=2, thread_name_prefix="threadloom-embed-query")


@dataclass(frozen=True)
class SearchTuning:
    weights: FusionWeights = field(default_factory=FusionWeights)
    candidates: int = 300  # how deep each retriever looks before fusion (tuned on the LoCoMo dev split)
    # A hit lends this share of its score to the items just before and after it in its thread: the answer
    # to a question is often the next turn, not the one that repeats the question's words (+6 R@10, LoCoMo dev).
    # 0.3 when it came; since contextual embedding and the thread prior carry part of that, 0.2 is best
    # (dev R@10 with the int8 engine: 0.1 81.9, 0.15 82.1, 0.2 82.3, 0.25 81.9, 0.3 81.5, 0.4 80.5).
    context_spread: float = 0.2
    context_pool: int = 50  # how many of the best hits lend
    # Every candidate gains this share of the best score in its thread (R@10 78.4 -> 79.5, LoCoMo dev split);
    # 0.5 then, 0.4 since scores are calibrated (fusion.py; dev R@10 0.3 82.2, 0.35 82.4, 0.4 82.4, 0.5 82.2).
    thread_prior: float = 0.4
    graph_seeds: int = 10  # the best hits that spread activation along memory-graph edges
    graph_depth: int = 2  # hops; activation halves with each
    dense_floor: float | None = None  # cosine under which a dense match is noise; None: the embedder's own


class SearchEngine:
    def __init__(self, store: Store, embedder: Embedder | None = None, tuning: SearchTuning | None = None) -> None:
        self._store = store
        self.embedder = embedder
        self.tuning = tuning or SearchTuning()
        self._dense_index = DenseIndex()
        self.fallback: str | None = None  # why searches go without a model they had (the daemon's memory guard)

    def attach_embedder(self, embedder: Embedder) -> None:
        """Start using a model that finished loading in the background."""
        self.embedder = embedder

    # writing: called inside the caller's own transaction, so a document and its source row commit together

    @staticmethod
    def index(w: Writer, doc: Document) -> int:
        return documents.upsert(w, doc, now_ms())

    @staticmethod
    def index_many(
        w: Writer, docs: Sequence[Document], ahead: Sequence[document_batch.Ahead] | None = None
    ) -> list[int]:
        """`index` for a batch (transcript ingest): term frequencies counted once per distinct stem; `ahead`
        is each document's `document_batch.Ahead.of` its title and body, worked out before the transaction."""
        now = now_ms()
        with term_stats.batched(w):
            return documents.upsert_many(w, docs, now, ahead)

    @staticmethod
    def remove(w: Writer, kind: str, ref: str) -> bool:
        return documents.remove(w, kind, ref)

    # reading

    def search(
        self,
        text: str,
        filters: Filters | None = None,
        limit: int = 10,
        now: datetime | None = None,
        vector: Matrix | None = None,
        max_terms: int | None = None,
    ) -> SearchResult:
        """The best `limit` documents for `text` that pass `filters`. `vector` stands in for the query's
        embedding (e.g. a new memory's own, when looking for its neighbours); `max_terms` scores only
        the rarest few terms (a whole document used as a query)."""
        if not 1 <= limit <= MAX_LIMIT:
            raise InvalidInput(f"limit must be between 1 and {MAX_LIMIT}")
        filters = filters or Filters()
        query = analyse(text)
        caveats = []
        if query.truncated:
            caveats.append(f"the query was cut to its first {MAX_QUERY_CHARS:,} characters or 48 terms")
        if not query.terms:
            return self._recent(filters, limit, [*caveats, "no search terms: listing the most recent items"])
        windows = temporal.windows(query.text, now or datetime.now(UTC))
        embedder = self.embedder
        tuning = self.tuning
        if embedder is None and self.fallback:
            caveats.append(self.fallback)
        named: set[str] = set()
        if tuning.weights.source_boost:
            named = self._store.read(partial(documents.sources_named, terms=name_forms(query.terms)))
        full_text = partial(
            _full_text,
            terms=query.terms,
            filters=filters,
            limit=tuning.candidates,
            max_terms=max_terms,
        )
        pending: Future[Matrix] | None = None
        lexical: Future[list[tuple[int, float]]] | None = None
        if vector is None and embedder is not None and tuning.weights.dense > 0:
            # The model (it releases the GIL) embeds the question while full-text search runs, unless it keeps
            # every core busy already. Names of sources are left to the source signal: in a small model they
            # outweigh what is asked about (dense R@10 +6.2 on the LoCoMo dev split without them).
            question = without_names(query.text, named)
            if embedder.uses_every_core:
                pending = Future()
                pending.set_result(embedder.embed_query(question))
                if tuning.weights.lexical > 0:  # the cores are free again: full-text beside the dense search
                    lexical = _EMBEDDING.submit(self._store.read, full_text)
            else:
                pending = _EMBEDDING.submit(embedder.embed_query, question)

        def read(r: Reader) -> SearchResult:
            scored: dict[str, Sequence[tuple[int, float]]] = {}
            signals = []
            facts: dict[int, tuple[int, str | None, str | None]] = {}
            prefetched = None
            if pending is not None and embedder is not None and _keepable(filters) and r.dialect == "sqlite":
                prefetched = self._dense_index.prefetch(r, embedder.fingerprint, filters)
                if prefetched is not None:  # a small store: every candidate's vector and facts
                    facts = dict(prefetched.facts)
            if tuning.weights.lexical > 0:
                signals.append("lexical")
                if lexical is None:
                    scored["lexical"] = full_text(r)
                    if pending is not None:
                        facts |= documents.facts(r, [i for i, _ in scored["lexical"] if i not in facts])
            query_vector = pending.result() if pending is not None else vector
            if query_vector is not None and embedder is not None and tuning.weights.dense > 0:
                scored["dense"] = self._dense(r, embedder.fingerprint, query_vector, filters, prefetched)
                signals.append("dense")
            if lexical is not None:  # its own snapshot, begun as this one was
                scored = {"lexical": lexical.result(), **scored}
            weights = {"lexical": tuning.weights.lexical, "dense": tuning.weights.dense}
            scores, why = fuse(scored, weights)
            graphed = not filters.kinds or "memory" in filters.kinds  # edges join memories alone
            if tuning.weights.graph > 0 and graphed and scores and _activate_graph(r, scores, why, tuning, filters):
                signals.append("graph")
            facts |= documents.facts(r, [i for i in scores if i not in facts])
            if windows or named:
                signals += ["temporal"] * bool(windows) + ["source"] * bool(named)
                for doc_id in list(scores):
                    at, source, _ = facts[doc_id]
                    if any(w.start <= at < w.end for w in windows):
                        scores[doc_id] += tuning.weights.temporal_boost
                        why[doc_id]["temporal"] = 1
                    if source is not None and source.lower() in named:
                        scores[doc_id] += tuning.weights.source_boost
                        why[doc_id]["source"] = 1
            if tuning.context_spread and scores and _spread_context(r, scores, why, tuning, filters):
                signals.append("context")
            if tuning.thread_prior and scores:
                facts |= documents.facts(r, [i for i in scores if i not in facts])
                if _lift_by_thread(scores, why, facts, tuning.thread_prior):
                    signals.append("thread")
            top = _best(scores, limit)
            hits = _hits(r, top, scores, why)
            if not hits:
                caveats.append("nothing matched; try other words, fewer filters, or a wider time range")
            return SearchResult(hits=hits, caveats=caveats, signals=tuple(signals))

        return self._store.read(read)

    def _dense(
        self,
        r: Reader,
        fingerprint: str,
        query_vector: object,
        filters: Filters,
        prefetched: Prefetched | None = None,
    ) -> list[tuple[int, float]]:
        """The nearest documents at or above the floor, their cosine put on the calibrated scale."""
        floor = self.tuning.dense_floor
        if floor is None:
            floor = self.embedder.dense_floor if self.embedder is not None else 0.0
        if r.dialect == "postgresql":  # pgvector's HNSW index in the database (store/postgres_search.py)
            where, params = documents.filter_sql(filters)
            found = postgres_search.dense(r, fingerprint, query_vector, where, params, self.tuning.candidates, floor)
        else:
            found = self._dense_index.search(
                r, fingerprint, query_vector, filters, self.tuning.candidates, floor, prefetched
            )
        scaled = ((doc_id, dense_scale(cosine, floor)) for doc_id, cosine in found)
        return [(doc_id, value) for doc_id, value in scaled if value > 0]  # at the floor: noise

    def _recent(self, filters: Filters, limit: int, caveats: list[str]) -> SearchResult:
        def read(r: Reader) -> SearchResult:
            ids = documents.recent(r, filters, limit)
            scores = {doc_id: 1.0 / rank for rank, doc_id in enumerate(ids, start=1)}
            return SearchResult(_hits(r, ids, scores, {}), caveats, ("recent",))

        return self._store.read(read)

    # vectors

    def embed_pending(self, on_progress: Callable[[int, int], None] | None = None, changed_since: int = 0) -> int:
        """Give every document without a current vector one; resumable, one transaction per batch.

        With `changed_since` (epoch ms), only documents written since then are looked at.
        """
        embedder = self.embedder
        if embedder is None:
            return 0
        fp = embedder.fingerprint
        done, total = self._store.read(lambda r: document_vectors.vector_coverage(r, fp)) if on_progress else (0, 0)
        embedded, after = 0, 0
        while True:
            batch = self._store.read(
                partial(
                    document_vectors.unembedded,
                    fingerprint=fp,
                    limit=EMBED_BATCH,
                    after_id=after,
                    changed_since=changed_since,
                )
            )
            if not batch:
                return embedded
            texts = [_embed_text(row["title"], row["body"], row["context"]) for row in batch]
            vectors = embedder.embed_documents(texts)

            def write(w: Writer, rows: list[dict[str, object]] = batch, vecs: object = vectors) -> None:
                current = document_vectors.content_hashes(w, [int(str(row["id"])) for row in rows])
                items = [
                    (int(str(row["id"])), str(row["content_hash"]), vec.astype("float32").tobytes())
                    for row, vec in zip(rows, vecs, strict=True)  # type: ignore[call-overload]
                    if current.get(int(str(row["id"]))) == row["content_hash"]  # not one changed or gone meanwhile
                ]
                document_vectors.put_vectors(w, fp, items)

            self._store.write(write)
            embedded += len(batch)
            after = int(batch[-1]["id"])
            if on_progress is not None:
                on_progress(done + embedded, total)

    def coverage(self) -> tuple[int, int] | None:
        if self.embedder is None:
            return None
        fp = self.embedder.fingerprint
        return self._store.read(lambda r: document_vectors.vector_coverage(r, fp))


def _keepable(filters: Filters) -> bool:
    """Whether candidates under `filters` may be kept until the search generation moves: reactivation does
    not move it (migration m018), so a filter on recent activity is read afresh every time."""
    return filters.memory is None or filters.memory.active_since is None


def _full_text(
    r: Reader, terms: Sequence[str], filters: Filters, limit: int, max_terms: int | None
) -> list[tuple[int, float]]:
    """BM25 hits, each as its share of the query's BM25 ceiling on the calibrated scale (fusion.py)."""
    scored, total, frequency = term_stats.choose(r, terms, documents.POSTINGS_BUDGET, max_terms)  # bm25()'s terms
    found = documents.lexical(r, terms, filters, limit, max_terms, scored)
    if not found:
        return found
    ceiling = bm25_ceiling(total, [frequency[t] for t in scored])
    return [(doc_id, lexical_scale(raw, ceiling)) for doc_id, raw in found]


def _best(scores: dict[int, float], count: int) -> list[int]:
    """The `count` best-scored ids, best first, ties by id."""
    return heapq.nsmallest(count, scores, key=lambda i: (-scores[i], i))


def _activate_graph(
    r: Reader, scores: dict[int, float], why: dict[int, dict[str, float]], tuning: SearchTuning, filters: Filters
) -> bool:
    """Spreading activation: the best hits pass their score along memory edges, halving per hop;
    what arrives is added with the graph weight. Whether anything arrived."""
    seeds = _best(scores, tuning.graph_seeds)
    top = scores[seeds[0]] or 1.0
    frontier = {i: scores[i] / top for i in seeds}
    activation: dict[int, float] = {}
    for _ in range(tuning.graph_depth):
        reached: dict[int, float] = {}
        for source, target, weight in documents.graph_neighbours(r, list(frontier), filters):
            value = frontier[source] * min(weight, 1.0) * 0.5
            if value > max(reached.get(target, 0.0), activation.get(target, 0.0)):
                reached[target] = value
        activation.update(reached)
        frontier = reached
        if not frontier:
            break
    for doc_id, value in activation.items():
        scores[doc_id] = scores.get(doc_id, 0.0) + tuning.weights.graph * value
        why.setdefault(doc_id, {})["graph"] = value
    return bool(activation)


def _spread_context(
    r: Reader, scores: dict[int, float], why: dict[int, dict[str, float]], tuning: SearchTuning, filters: Filters
) -> bool:
    """Lend each top hit's share to its thread neighbours; whether any score changed."""
    pool = _best(scores, tuning.context_pool)
    base = dict(scores)
    lent_any = False
    for doc_id, near in documents.neighbours(r, pool, filters).items():
        for other in near:
            lent = tuning.context_spread * base[doc_id]
            if lent > scores.get(other, 0.0) - base.get(other, 0.0):  # the best lender counts, not their sum
                scores[other] = base.get(other, 0.0) + lent
                why.setdefault(other, {})["context"] = lent
                lent_any = True
    return lent_any


def _lift_by_thread(
    scores: dict[int, float],
    why: dict[int, dict[str, float]],
    facts: dict[int, tuple[int, str | None, str | None]],
    weight: float,
) -> bool:
    """Add `weight` x the best score in each document's thread (relative to the best overall), so the turns
    of a conversation that matches well as a whole rise together. A document without a thread is its own,
    so threaded ones gain no edge from having one. Whether any document had a thread."""
    groups = {doc_id: facts[doc_id][2] or doc_id for doc_id in scores}
    best: dict[str | int, float] = {}
    for doc_id, group in groups.items():
        best[group] = max(best.get(group, 0.0), scores[doc_id])
    scale = weight / (max(best.values(), default=0.0) or 1.0)
    threaded = False
    for doc_id, group in groups.items():
        lift = scale * best[group]
        scores[doc_id] += lift
        if group != doc_id:
            why.setdefault(doc_id, {})["thread"] = lift
            threaded = True
    return threaded


def _embed_text(title: str, body: str, context: str | None) -> str:
    """A threaded document is embedded after the end of the one before it: a reply such as "yes, last
    week" means little without the question it answers (dense R@10 +6.6 on the LoCoMo dev split)."""
    own = f"{title}\n{body}" if title else body
    return f"{context}\n{own}" if context else own


def _hits(r: Reader, ids: Sequence[int], scores: dict[int, float], why: dict[int, dict[str, float]]) -> list[Hit]:
    rows = documents.fetch(r, ids)
    return [
        Hit(
            doc_id=i,
            kind=rows[i]["kind"],
            ref=rows[i]["ref"],
            score=round(scores[i], 6),
            body=rows[i]["body"],
            project=rows[i]["project"],
            thread=rows[i]["thread"],
            source=rows[i]["source"],
            status=rows[i]["status"],
            occurred_at=rows[i]["occurred_at"],
            created_at=rows[i]["created_at"],
            why={signal: round(value, 4) for signal, value in why.get(i, {}).items()},
        )
        for i in ids
        if i in rows
    ]
