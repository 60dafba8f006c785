"""LoCoMo retrieval benchmark: evidence recall of threadloom's search engine against baselines.

One memory per turn ("speaker: text", a shared image as its caption, the session as its thread, its date as
when it happened); each conversation ingested from empty into its own store; every question
of categories 1-4 asked. Reports evidence recall@5/10/20 and hit@10 per category and over
1-4, for the dev split (26 30 41 42 43; the only one to tune on) and the test split (44 47 48
49 50), with ingest time and recall latency. BM25-only and dense-only baselines run in the
same invocation, over the same stores.

    python bench/locomo.py [--embedder none|local] [--data ../shared/data/locomo10]

The data set is CC BY-NC 4.0, used for evaluation only and never shipped.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from threadloom.config import LOCAL_EMBEDDER_THREADS
from threadloom.memory.model import Edge
from threadloom.memory.similarity import link_floor
from threadloom.search.embedder import Embedder
from threadloom.search.engine import SearchEngine, SearchTuning
from threadloom.search.fusion import FusionWeights
from threadloom.search.model import Document
from threadloom.store import memories
from threadloom.store.base import Writer
from threadloom.store.sqlite import SqliteStore, open_store

DEV = ("26", "30", "41", "42", "43")
TEST = ("44", "47", "48", "49", "50")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (5, 10, 20)


@dataclass
class Tally:
    recall: dict[int, list[float]]
    hit10: list[float]
    latencies: list[float]


def parse_when(text: str) -> datetime:
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def turns(conv: dict[str, object]) -> list[Document]:
    docs = []
    n = 1
    while f"session_{n}_date_time" in conv:
        when = parse_when(str(conv[f"session_{n}_date_time"]))
        for turn in conv.get(f"session_{n}", []) or []:  # type: ignore[union-attr]
            body = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                body += f" [shares {turn['blip_caption']}]"
            docs.append(
                Document(
                    kind="memory",
                    ref=turn["dia_id"],
                    body=body,
                    source=turn["speaker"],
                    thread=f"session-{n}",
                    occurred_at=int(when.timestamp() * 1000),
                )
            )
        n += 1
    return docs


def clean_evidence(raw: list[str], known: set[str]) -> set[str]:
    """The data's evidence ids, repaired where it has typos ("D8:6; D9:17", "D:11:26"); unknown ids dropped."""
    ids = set()
    for item in raw:
        for part in str(item).replace(",", ";").split(";"):
            part = part.strip().replace("D:", "D")
            if part in known:
                ids.add(part)
    return ids


def last_session_time(conv: dict[str, object]) -> datetime:
    n = 1
    last = None
    while f"session_{n}_date_time" in conv:
        if conv.get(f"session_{n}"):
            last = parse_when(str(conv[f"session_{n}_date_time"]))
        n += 1
    assert last is not None
    return last


class CachedEmbedder:
    """Remembers document vectors by text across runs (tuning reruns the same texts); misses, and every
    question, go to the real model."""

    def __init__(self, inner: Embedder, folder: Path) -> None:
        import numpy as np

        self._np = np
        self.inner = inner
        folder.mkdir(parents=True, exist_ok=True)
        safe = "".join(c if c.isalnum() else "_" for c in inner.fingerprint)
        self._path = folder / f"{safe}.npz"
        self._cache: dict[str, object] = dict(np.load(self._path)) if self._path.exists() else {}
        self.hits = self.misses = 0
        self.model_seconds = 0.0

    @property
    def fingerprint(self) -> str:
        return self.inner.fingerprint

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    @property
    def uses_every_core(self) -> bool:
        return self.inner.uses_every_core

    @property
    def dense_floor(self) -> float:
        return self.inner.dense_floor

    def _key(self, kind: str, text: str) -> str:
        import hashlib

        return kind + hashlib.blake2b(text.encode(), digest_size=12).hexdigest()

    def embed_documents(self, texts: Sequence[str]) -> object:
        keys = [self._key("p", t) for t in texts]
        missing = [i for i, k in enumerate(keys) if k not in self._cache]
        if missing:
            started = time.perf_counter()
            fresh = self.inner.embed_documents([texts[i] for i in missing])
            self.model_seconds += time.perf_counter() - started
            for i, vec in zip(missing, fresh, strict=True):
                self._cache[keys[i]] = vec
        self.hits += len(keys) - len(missing)
        self.misses += len(missing)
        return self._np.stack([self._cache[k] for k in keys])

    def embed_query(self, text: str) -> object:
        """Always the real model: recall latency includes embedding the question."""
        started = time.perf_counter()
        vector = self.inner.embed_query(text)
        self.model_seconds += time.perf_counter() - started
        self.misses += 1
        return vector

    def save(self) -> None:
        self._np.savez(self._path, **self._cache)  # type: ignore[arg-type]


def make_embedder(name: str, cache: Path | None, threads: int) -> Embedder | None:
    if name == "none":
        return None
    from threadloom.search.embedders import local_embedder

    inner = local_embedder(threads)
    return CachedEmbedder(inner, cache) if cache else inner


def configurations(tuned: SearchTuning, dense: bool, linked: bool) -> dict[str, SearchTuning]:
    plain = FusionWeights(temporal_boost=0.0, source_boost=0.0, lexical=1.0, dense=1.0, graph=0.0)
    configs = {"bm25": SearchTuning(weights=replace(plain, dense=0.0), context_spread=0.0, thread_prior=0.0)}
    if dense:
        configs["dense"] = SearchTuning(
            weights=replace(plain, lexical=0.0), context_spread=0.0, thread_prior=0.0, dense_floor=tuned.dense_floor
        )
    if linked:
        configs["tl-no-graph"] = replace(tuned, weights=replace(tuned.weights, graph=0.0))
    configs["threadloom"] = tuned
    return configs


def link_like_auto_link(store: SqliteStore, embedder: Embedder, docs: list[Document]) -> int:
    """Edges as the memory service's auto-linking makes them: each turn to at most 3 earlier turns whose
    cosine reaches the service's auto-link floor. Returns the number of edges."""
    import numpy as np

    by_ref = {d.ref: d for d in docs}
    rows = store.read(lambda r: r.tuples(
        "SELECT d.ref, v.vector FROM documents d JOIN document_vectors v ON v.doc_id = d.id "
        "WHERE v.fingerprint = :fp ORDER BY d.id", {"fp": embedder.fingerprint}))  # fmt: skip
    refs = [str(ref) for ref, _ in rows]
    matrix = np.stack([np.frombuffer(v, dtype=np.float32) for _, v in rows])
    floor = link_floor(embedder.dense_floor)
    edges = []
    for i in range(1, len(refs)):
        sims = matrix[:i] @ matrix[i]
        best = [j for j in np.argsort(-sims)[:3] if sims[j] >= floor]
        edges += [(refs[i], refs[j], float(sims[j])) for j in best]

    def write(w: Writer) -> None:
        for ref, doc in by_ref.items():
            memories.insert(w, {
                "id": ref, "content": doc.body, "summary": None, "category": None, "kind": "fact",
                "entities": "[]", "project": None, "visibility": "private", "owner": "bench", "status": "active",
                "pinned": 0, "core_key": None, "core_priority": None, "session_id": None, "vendor": "other",
                "origin": "foreground", "content_hash": ref, "idempotency_key": None, "created_at": 0,
                "valid_from": 0, "decay_score": 0.15})  # fmt: skip
        for source, target, sim in edges:
            memories.insert_edge(w, Edge(source, target, "related_to", round(sim, 4), "auto_link", 0), None)

    store.write(write)
    return len(edges)


def run(
    data: Path,
    embedder_name: str,
    cache: Path | None,
    tuned: SearchTuning,
    splits: tuple[str, ...],
    links: bool,
    threads: int,
) -> dict[str, dict[str, Tally]]:
    embedder = make_embedder(embedder_name, cache, threads)
    results: dict[str, dict[str, Tally]] = defaultdict(dict)
    ingest_s = embed_s = 0.0
    n_turns = n_edges = 0
    for conv_id in (DEV if "dev" in splits else ()) + (TEST if "test" in splits else ()):
        split = "dev" if conv_id in DEV else "test"
        conv = json.loads((data / f"{conv_id}.json").read_text())
        with tempfile.TemporaryDirectory(prefix="tlloc") as tmp:
            store = open_store(Path(tmp) / "locomo.db")
            engine = SearchEngine(store, embedder, tuned)
            docs = turns(conv)
            started = time.perf_counter()
            store.write(lambda w, docs=docs, engine=engine: [engine.index(w, d) for d in docs])
            ingest_s += time.perf_counter() - started
            started = time.perf_counter()
            engine.embed_pending()
            embed_s += time.perf_counter() - started
            if links and embedder is not None:
                n_edges += link_like_auto_link(store, embedder, docs)
            n_turns += len(docs)
            now = last_session_time(conv)
            known = {d.ref for d in docs}
            for name, tuning in configurations(engine.tuning, embedder is not None, links).items():
                tally = results[split].setdefault(name, Tally(defaultdict(list), [], []))
                engine.tuning = tuning
                engine.embedder = None if name == "bm25" else embedder  # BM25 alone pays no query embedding
                for qa in conv["qa"]:
                    category = int(qa["category"])
                    if category not in CATEGORIES:
                        continue
                    evidence = clean_evidence(qa["evidence"], known)
                    if not evidence:
                        continue
                    started = time.perf_counter()
                    hits = engine.search(str(qa["question"]), limit=max(KS), now=now).hits
                    tally.latencies.append(time.perf_counter() - started)
                    refs = [h.ref for h in hits]
                    for k in KS:
                        found = len(evidence & set(refs[:k])) / len(evidence)
                        tally.recall[k * 10 + category].append(found)
                    tally.hit10.append(float(bool(evidence & set(refs[:10]))))
            store.close()
    print(
        f"ingest: {n_turns} turns, {ingest_s / n_turns * 1000:.3f} ms/turn to index, "
        f"{embed_s / n_turns * 1000:.3f} ms/turn to embed ({embedder.fingerprint if embedder else 'no embedder'})"
    )
    if links:
        print(f"auto-link edges: {n_edges} ({n_edges / max(n_turns, 1):.2f} per turn)")
    if isinstance(embedder, CachedEmbedder):
        embedder.save()
        print(
            f"embedding cache: {embedder.hits} hits, {embedder.misses} misses, {embedder.model_seconds:.1f} s in "
            "the model (questions are always embedded live, so recall latency includes it; cached documents leave "
            "the model's share out of the embed time above)"
        )
    return results


def report(results: dict[str, dict[str, Tally]]) -> None:
    for split in results:
        print(f"\n== {split} split")
        header = "config       " + "".join(f"{'R@10 ' + CATEGORIES[c]:>22}" for c in CATEGORIES)
        print(header + "   R@5 1-4  R@10 1-4  R@20 1-4  hit@10   p50 ms   p95 ms")
        for name, tally in results[split].items():
            cells = []
            for c in CATEGORIES:
                values = tally.recall[100 + c]
                cells.append(f"{100 * statistics.fmean(values):22.1f}" if values else f"{'-':>22}")
            overall = []
            for k in KS:
                values = [v for c in CATEGORIES for v in tally.recall[k * 10 + c]]
                overall.append(100 * statistics.fmean(values))
            lat = sorted(tally.latencies)
            p50 = statistics.median(lat) * 1000
            p95 = lat[int(0.95 * (len(lat) - 1))] * 1000
            print(
                f"{name:13}" + "".join(cells) + f"{overall[0]:10.1f}{overall[1]:10.1f}{overall[2]:10.1f}"
                f"{100 * statistics.fmean(tally.hit10):8.1f}{p50:9.2f}{p95:9.2f}"
            )
    print("\nrecall = evidence recall (share of a question's evidence turns retrieved), averaged per question")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data/locomo10")
    parser.add_argument("--embedder", choices=["none", "local"], default="none")
    parser.add_argument("--threads", type=int, default=LOCAL_EMBEDDER_THREADS, help="compute threads of the model")
    parser.add_argument("--cache", type=Path, default=None, help="reuse vectors across runs from this folder")
    parser.add_argument("--split", choices=["dev", "test", "both"], default="both", help="tune on dev only")
    defaults = SearchTuning()
    parser.add_argument("--lexical", type=float, default=defaults.weights.lexical)
    parser.add_argument("--dense", type=float, default=defaults.weights.dense)
    parser.add_argument("--temporal", type=float, default=defaults.weights.temporal_boost)
    parser.add_argument("--source", type=float, default=defaults.weights.source_boost)
    parser.add_argument("--candidates", type=int, default=defaults.candidates)
    parser.add_argument("--spread", type=float, default=defaults.context_spread)
    parser.add_argument("--pool", type=int, default=defaults.context_pool)
    parser.add_argument("--thread-prior", type=float, default=defaults.thread_prior)
    parser.add_argument("--links", action="store_true", help="auto-link turns and compare with and without graph")
    parser.add_argument("--graph", type=float, default=defaults.weights.graph)
    parser.add_argument("--floor", type=float, default=defaults.dense_floor, help="default: the model's own")
    args = parser.parse_args()
    if not args.data.is_dir():
        sys.exit(f"no LoCoMo data at {args.data}")
    weights = FusionWeights(
        lexical=args.lexical, dense=args.dense, temporal_boost=args.temporal, source_boost=args.source, graph=args.graph
    )
    tuned = SearchTuning(
        weights=weights,
        candidates=args.candidates,
        context_spread=args.spread,
        context_pool=args.pool,
        thread_prior=args.thread_prior,
        dense_floor=args.floor,
    )
    splits = ("dev", "test") if args.split == "both" else (args.split,)
    print(f"threadloom tuning: {tuned}")
    if args.embedder == "local":
        print(f"model threads: {args.threads} on {os.cpu_count()} cores")
    report(run(args.data, args.embedder, args.cache, tuned, splits, args.links, args.threads))


if __name__ == "__main__":
    main()
