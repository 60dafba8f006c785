"""Scale benchmark: recall latency, memory, build time and disk size at 10k, 100k and 1M documents.

Documents are synthetic but realistically shaped: 8-60 words drawn from a Zipf distribution
over a 30,000-word vocabulary, 100 projects, times spread over two years; queries are four
content words from the same distribution. Vectors are
clustered unit vectors (1,000 clusters, 384 dimensions), since embedding a million texts
with the real model is out of reach here; the real model's query-embedding time is
measured separately. Every dense figure is compared, in the same run, with an exact
brute-force baseline over an in-memory float32 matrix (its latency, and the recall@20 of
threadloom's coded index against it).

    python bench/scale.py [--sizes 10000,100000,1000000] [--queries 100]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from threadloom.search.embedder import fingerprint
from threadloom.search.engine import SearchEngine, SearchTuning
from threadloom.search.fusion import FusionWeights
from threadloom.search.model import Document, Filters
from threadloom.store import document_vectors, vector_facets
from threadloom.store.sqlite import open_store

DIM = 384
FP = fingerprint("bench", "clustered", DIM, "1")
VOCAB = 30_000
DAY_MS = 86_400_000
START_MS = 1_672_531_200_000  # 2023-01-01


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class FixedQueries:
    """Stands in for the model at query time: returns the next prepared query vector."""

    def __init__(self, vectors: np.ndarray) -> None:
        self._vectors = vectors
        self.next = 0

    @property
    def fingerprint(self) -> str:
        return FP

    @property
    def dimension(self) -> int:
        return DIM

    @property
    def uses_every_core(self) -> bool:
        return False

    @property
    def dense_floor(self) -> float:
        return 0.0

    def embed_documents(self, texts: Any) -> np.ndarray:
        raise NotImplementedError("the scale bench writes its vectors directly")

    def embed_query(self, text: str) -> np.ndarray:
        return self._vectors[self.next % len(self._vectors)]


def words(rng: np.random.Generator) -> list[str]:
    ranks = rng.zipf(1.2, size=2_000_000)
    return [f"w{r % VOCAB}" for r in ranks]


def build(path: Path, n: int, rng: np.random.Generator, centres: np.ndarray) -> dict[str, float]:
    store = open_store(path)
    pool = words(rng)
    lengths = rng.integers(8, 60, size=n)
    starts = rng.integers(0, len(pool) - 60, size=n)
    started = time.perf_counter()
    batch = 20_000
    for first in range(0, n, batch):
        docs = [
            Document(
                kind="memory",
                ref=str(i),
                body=" ".join(pool[starts[i] : starts[i] + lengths[i]]),
                project=f"p{i % 100}",
                occurred_at=START_MS + int(i / n * 730) * DAY_MS,
            )
            for i in range(first, min(n, first + batch))
        ]
        store.write(lambda w, docs=docs: [SearchEngine.index(w, d) for d in docs])
    text_s = time.perf_counter() - started
    started = time.perf_counter()
    for first in range(0, n, batch):
        count = min(batch, n - first)
        vecs = centres[rng.integers(0, len(centres), size=count)] + rng.normal(0, 0.06, size=(count, DIM))
        vecs = (vecs / np.linalg.norm(vecs, axis=1, keepdims=True)).astype(np.float32)

        def write(w: Any, first: int = first, vecs: np.ndarray = vecs) -> None:
            hashes = {
                int(row["id"]): row["content_hash"]
                for row in w.rows(
                    "SELECT id, content_hash FROM documents WHERE id > :a AND id <= :b",
                    {"a": first, "b": first + len(vecs)},
                )
            }
            for offset, vec in enumerate(vecs):
                doc_id = first + offset + 1
                document_vectors.put_vector(w, doc_id, FP, hashes[doc_id], vec.tobytes())

        store.write(write)
    vector_s = time.perf_counter() - started
    store.close()
    import apsw

    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # so that the size on disk is the database's own
    conn.close()
    size = sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
    return {"text_s": text_s, "vector_s": vector_s, "disk_mb": size / 2**20}


def percentiles(values: list[float]) -> tuple[float, float]:
    values = sorted(values)
    return statistics.median(values) * 1000, values[int(0.95 * (len(values) - 1))] * 1000


def measure(path: Path, n: int, queries: int, rng: np.random.Generator, centres: np.ndarray) -> dict[str, Any]:
    store = open_store(path)
    qvecs = centres[rng.integers(0, len(centres), size=queries)] + rng.normal(0, 0.06, size=(queries, DIM))
    qvecs = (qvecs / np.linalg.norm(qvecs, axis=1, keepdims=True)).astype(np.float32)
    fixed = FixedQueries(qvecs)
    # Queries mix content words as people type them: four Zipf draws, minus the top 100 ranks, which play the
    # part of the stopwords that query analysis removes from real questions.
    draws = rng.zipf(1.2, size=queries * 40)
    content = [int(d) for d in draws if 100 < d < VOCAB]
    texts = [" ".join(f"w{w}" for w in content[4 * q : 4 * q + 4]) for q in range(queries)]
    out: dict[str, Any] = {}
    rss_before = rss_mb()
    started = time.perf_counter()
    engine = SearchEngine(store, fixed)
    engine.search("warm up", limit=20)  # builds the in-memory codes
    out["codes_build_s"] = time.perf_counter() - started
    out["rss_codes_mb"] = rss_mb() - rss_before
    modes = {
        "full-text": SearchTuning(weights=FusionWeights(lexical=1.0, dense=0.0, temporal_boost=0.0)),
        "dense": SearchTuning(weights=FusionWeights(lexical=0.0, dense=1.0, temporal_boost=0.0)),
        "hybrid": SearchTuning(),
    }
    for name, tuning in modes.items():
        engine.tuning = tuning
        engine.embedder = None if name == "full-text" else fixed
        for label, filters in (("", Filters()), (" +1% filter", Filters(project="p7"))):
            times, recalls = [], []
            for q in range(queries):
                fixed.next = q
                t = time.perf_counter()
                result = engine.search(texts[q], filters, limit=20)
                times.append(time.perf_counter() - t)
                if name == "dense" and not label:
                    recalls.append([int(h.doc_id) for h in result.hits])
            out[name + label] = percentiles(times)
            if recalls:
                out["dense_ids"] = recalls
    # the baseline: exact brute force over every float vector held in memory
    started = time.perf_counter()
    rows: list[tuple[int, bytes]] = []
    after = 0
    while batch := store.read(lambda r, a=after: vector_facets.vector_batch(r, FP, a, 50_000)):
        rows.extend(batch)
        after = batch[-1][0]
    ids = np.asarray([i for i, _ in rows])
    matrix = np.frombuffer(b"".join(v for _, v in rows), dtype=np.float32).reshape(len(rows), -1)
    out["baseline_load_s"] = time.perf_counter() - started
    out["baseline_rss_mb"] = matrix.nbytes / 2**20
    times, hits = [], []
    for q in range(queries):
        t = time.perf_counter()
        sims = matrix @ qvecs[q]
        top = np.argpartition(-sims, 19)[:20]
        times.append(time.perf_counter() - t)
        hits.append(set(ids[top].tolist()))
    out["baseline"] = percentiles(times)
    out["recall@20"] = statistics.fmean(len(set(a) & b) / 20 for a, b in zip(out.pop("dense_ids"), hits, strict=True))
    store.close()
    return out


def query_embedding_ms(queries: int) -> tuple[float, float] | None:
    try:
        from threadloom.search.embedders import local_embedder

        model = local_embedder()
    except Exception:  # noqa: BLE001 - the model is optional here
        return None
    model.embed_query("warm up")
    times = []
    for i in range(queries):
        t = time.perf_counter()
        model.embed_query(f"what did we decide about the cache layer in sprint {i}?")
        times.append(time.perf_counter() - t)
    return percentiles(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()
    rng = np.random.default_rng(7)
    centres = rng.normal(size=(1000, DIM))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    print(f"machine: {os.cpu_count()} cpus; {args.queries} queries per cell; times in ms (p50 / p95)")
    for n in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory(prefix="tlscale", dir="/tmp") as tmp:
            path = Path(tmp) / "scale.db"
            built = build(path, n, rng, centres)
            m = measure(path, n, args.queries, rng, centres)
        print(
            f"\n== {n:,} documents: text index {built['text_s']:.1f} s, vectors {built['vector_s']:.1f} s, "
            f"{built['disk_mb']:.0f} MB on disk; codes built in {m['codes_build_s']:.1f} s, "
            f"+{m['rss_codes_mb']:.0f} MB resident"
        )
        for key in ("full-text", "full-text +1% filter", "dense", "dense +1% filter", "hybrid", "hybrid +1% filter"):
            p50, p95 = m[key]
            print(f"  {key:22} {p50:8.2f} / {p95:8.2f}")
        b50, b95 = m["baseline"]
        print(
            f"  {'baseline: exact f32':22} {b50:8.2f} / {b95:8.2f}   (matmul only; {m['baseline_rss_mb']:.0f} MB "
            f"in memory, {m['baseline_load_s']:.1f} s to load)"
        )
        print(f"  dense recall@20 of the coded index against exact: {m['recall@20']:.3f}")
    embed = query_embedding_ms(args.queries)
    if embed:
        print(f"\nquery embedding with the local model (not included above): {embed[0]:.1f} / {embed[1]:.1f} ms")


if __name__ == "__main__":
    main()
