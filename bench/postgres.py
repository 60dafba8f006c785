"""PostgreSQL beside SQLite in one run: LoCoMo evidence recall, and recall latency at 100k memories.

  locomo  LoCoMo's test split (44 47 48 49 50) through path (a) of bench/locomo.py (each turn stored by
          `MemoryService.store`, each question asked through `MemoryRecall.recall`), every conversation
          into a fresh store of each backend: evidence recall@5/10/20 over categories 1-4 and latency.
  scale   N memories of bench/memory_data.py (bulk-loaded by the store's batch writes as bench/memory.py does
          above 20k, then embedded when a model is on; the last 1,000 through the service), then questions
          recalled through the service as memory_recall does and read-only: memories/s, p50/p95 on each backend.

The PostgreSQL server is `--url` (databases are made and dropped in it), else a throwaway pgserver cluster
(PostgreSQL 16 with pgvector) in a temporary folder, started here and timed.

    python bench/postgres.py locomo [--embedder none|local] [--cache DIR]
    python bench/postgres.py scale [--n 100000] [--queries 200] [--embedder none|local] [--cache DIR]
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import tempfile
import time
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
import locomo
import memory as memory_bench
from measure import pct
from memory_data import memories, queries

from threadloom.memory.reactivation import Reactivations
from threadloom.memory.recall import MemoryRecall
from threadloom.memory.scoring import ScoringConfig
from threadloom.memory.service import MemoryService
from threadloom.search.embedder import Embedder
from threadloom.search.engine import SearchEngine, SearchTuning
from threadloom.store.base import Store
from threadloom.store.postgres import open_postgres
from threadloom.store.sqlite import open_store

_names = itertools.count()


@contextmanager
def server(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver
    with tempfile.TemporaryDirectory(prefix="tlpg") as tmp:
        started = time.perf_counter()
        srv = pgserver.get_server(Path(tmp) / "data", cleanup_mode="stop")
        up = time.perf_counter() - started
        admin = srv.get_uri()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        print(f"pgserver: a new cluster up with pgvector in {time.perf_counter() - started:.2f} s (server {up:.2f} s)")
        try:
            yield admin
        finally:
            srv.cleanup()


@contextmanager
def opened(backend: str, admin: str) -> Iterator[Store]:
    """A fresh store of `backend`: a new SQLite file, or a new PostgreSQL database (dropped after)."""
    if backend == "sqlite":
        with tempfile.TemporaryDirectory(prefix="tlbench") as tmp:
            store = open_store(Path(tmp) / "bench.db")
            try:
                yield store
            finally:
                store.close()
        return
    name = f"bench_{os.getpid()}_{next(_names)}"  # apart from another run on the same server
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}".encode())
    head, _, query = admin.partition("?")
    url = head.rsplit("/", 1)[0] + f"/{name}" + (f"?{query}" if query else "")
    store = open_postgres(url)
    try:
        yield store
    finally:
        store.close()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {name} WITH (FORCE)".encode())


BACKENDS = ("sqlite", "postgresql")


def run_locomo(args: argparse.Namespace, admin: str) -> None:
    embedder = locomo.make_embedder(args.embedder, args.cache, args.threads)
    tuned = SearchTuning()
    results: dict[str, locomo.Results] = {b: defaultdict(locomo.Tally) for b in BACKENDS}
    ingest: dict[str, float] = defaultdict(float)
    for conv_id in locomo.TEST:
        conv = locomo.json.loads((args.data / f"{conv_id}.json").read_text())
        for backend in BACKENDS:
            with opened(backend, admin) as store:
                engine = SearchEngine(store, embedder, tuned)
                ingest[backend] += locomo.run_path("a", conv_id, conv, store, engine, results[backend])
        print(f"conversation {conv_id} done", flush=True)
    if isinstance(embedder, locomo.CachedEmbedder):
        embedder.save()
    print(f"\nLoCoMo test split, path (a), embedder {embedder.fingerprint if embedder else 'none'}")
    print(f"{'backend':12}{'config':16}{'R@5 1-4':>9}{'R@10 1-4':>10}{'R@20 1-4':>10}{'p50 ms':>9}{'p95 ms':>9}")
    for backend in BACKENDS:
        for name, tally in results[backend].items():
            cells = []
            for k in locomo.KS:
                values = [v for c in locomo.CATEGORIES for v in tally.recall[k * 10 + c]]
                cells.append(f"{100 * statistics.fmean(values):9.1f}" if values else f"{'-':>9}")
            lat = sorted(tally.latencies)
            p50, p95 = statistics.median(lat) * 1000, pct(lat, 0.95) * 1000
            print(f"{backend:12}{name:16}" + " ".join(cells) + f"{p50:9.2f}{p95:9.2f}")
    for backend, seconds in ingest.items():
        print(f"ingest {backend}: {seconds:.1f} s")


def run_scale(args: argparse.Namespace, admin: str) -> None:
    rows = list(memories(args.n))
    asked = list(queries(args.queries))
    embedder = locomo.make_embedder(args.embedder, args.cache, args.threads)
    name = embedder.fingerprint if embedder else "none"
    print(f"scale: n={args.n:,} (the last {args.measured:,} through the service), {args.queries} questions, "
          f"embedder {name}, load {load()}", flush=True)  # fmt: skip
    for backend in BACKENDS:
        with opened(backend, admin) as store, tempfile.TemporaryDirectory(prefix="tlproj") as project:
            r = scale_one(store, Path(project), rows, asked, args, embedder)
        vectors = f", vectors {r['vectors_s']:.1f} s" if embedder else ""
        print(
            f"{backend:11} bulk {r['bulk']:,} in {r['bulk_s']:.1f} s ({r['bulk'] / max(r['bulk_s'], 1e-9):,.0f} "
            f"memories/s{vectors}); service store p50 {ms(r['store'], 0.5)} p95 {ms(r['store'], 0.95)} ms "
            f"({len(r['store']) / sum(r['store']):.1f}/s); memory_recall k=10 p50 {ms(r['recall'], 0.5)} "
            f"p95 {ms(r['recall'], 0.95)} ms, read-only p50 {ms(r['read_only'], 0.5)} p95 {ms(r['read_only'], 0.95)} "
            f"ms; load {r['load']}",
            flush=True,
        )
    if isinstance(embedder, locomo.CachedEmbedder):
        embedder.save()
    print("bulk: memories, entities and documents by the store's batch writes, 5,000 a transaction; service store:")
    print("MemoryService.store, durable, one at a time; memory_recall: MemoryRecall.recall as the tool calls it")
    print("(reactivation queued and written in the background), and read-only, interleaved; the query's embedding")
    print("is inside the time when a model is on. load: the 1-minute load average before -> after, on 2 cores.")


def load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def ms(times: list[float], q: float) -> str:
    return f"{pct(times, q) * 1000:.1f}"


def scale_one(
    store: Store,
    project: Path,
    rows: list[dict[str, object]],
    asked: list[str],
    args: argparse.Namespace,
    embedder: Embedder | None,
) -> dict[str, Any]:
    before = load()
    prov = replace(memory_bench.PROV, project=str(project.resolve()))
    engine = SearchEngine(store, embedder)
    config = ScoringConfig()
    service = MemoryService(store, engine, config)
    recall = MemoryRecall(store, engine, config, Reactivations(store))
    bulk = max(0, args.n - args.measured)
    started = time.perf_counter()
    for start in range(0, bulk, 5_000):
        part = rows[start : min(start + 5_000, bulk)]
        store.write(lambda w, part=part: memory_bench.bulk_insert(w, part, prov))
    bulk_s = time.perf_counter() - started
    started = time.perf_counter()
    engine.embed_pending()  # the bulk rows' vectors, as the background job gives them
    vectors_s = time.perf_counter() - started

    def store_one(row: dict[str, object]) -> object:
        entities = tuple(str(e) for e in row["entities"])  # type: ignore[attr-defined]
        new = memory_bench.NewMemory(content=str(row["content"]), category=str(row["category"]), entities=entities)
        return service.store(new, prov)

    store_times = timed(store_one, rows[bulk:])  # type: ignore[arg-type]
    recall_times: list[float] = []
    read_only_times: list[float] = []
    for i, q in enumerate(asked):
        for read_only in (False, True) if i % 2 else (True, False):
            started = time.perf_counter()
            recall.recall(q, prov, k=10, read_only=read_only)
            (read_only_times if read_only else recall_times).append(time.perf_counter() - started)
    recall.reactivations.close()
    return {
        "bulk": bulk,
        "bulk_s": bulk_s,
        "vectors_s": vectors_s,
        "store": store_times,
        "recall": recall_times,
        "read_only": read_only_times,
        "load": f"{before} -> {load()}",
    }


def timed(fn: Callable[[object], object], items: list[object]) -> list[float]:
    times = []
    for item in items:
        started = time.perf_counter()
        fn(item)
        times.append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["locomo", "scale"])
    parser.add_argument("--url", default=None, help="a PostgreSQL server's admin URL (default: a pgserver cluster)")
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data/locomo10")
    parser.add_argument("--embedder", choices=["none", "local"], default="none")
    parser.add_argument("--threads", type=int, default=locomo.LOCAL_EMBEDDER_THREADS)
    parser.add_argument("--cache", type=Path, default=None, help="reuse document vectors from this folder")
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--measured", type=int, default=1_000, help="memories stored through the service")
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    with server(args.url) as admin:
        (run_locomo if args.what == "locomo" else run_scale)(args, admin)


if __name__ == "__main__":
    main()
