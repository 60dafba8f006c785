"""Memory graph benchmark: durable store throughput, recall latency, memory, disk and cold start.

For each size, memories from bench/memory_data.py are stored one by one through the real
service (duplicate and idempotency checks, similarity search for auto-links and conflict
hints, one durable transaction each), then questions are recalled (hybrid search, graph
activation), each twice: as memory_recall's default call, whose reactivation is queued and written
in batches off the reply's path as a serving process does, and read-only. Baselines in the same
run: a bare SQLite insert of the same rows (the floor of a durable write) and BM25 alone over the
same store. With --papez-python
(a venv made by bench/setup_papez.sh), Papez 0.6.2 runs on the same data for a side-by-side.

    python bench/memory.py --sizes 10000,100000 [--embedder none|local] [--papez-python /tmp/papez-venv/bin/python]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import pct, peak_rss_mb, rss_mb
from memory_data import memories, queries

from threadloom.clock import now_ms
from threadloom.config import LOCAL_EMBEDDER_THREADS
from threadloom.identity import Provenance
from threadloom.memory.model import NewMemory, content_digest, memory_document, new_memory_id
from threadloom.memory.reactivation import Reactivations
from threadloom.memory.recall import MemoryRecall
from threadloom.memory.scoring import ScoringConfig
from threadloom.memory.service import MemoryService
from threadloom.search.engine import SearchEngine
from threadloom.search.model import Filters
from threadloom.search.query import analyse
from threadloom.store import documents
from threadloom.store import memories as mem_store
from threadloom.store.base import Writer
from threadloom.store.sqlite import open_store

PROV = Provenance(session_id="bench", vendor="other", project=None, user="bench")  # project: a folder per run
ROOT = Path(__file__).resolve().parents[1]
BULK_ABOVE = 20_000  # larger sizes are bulk-loaded, then the last `--measured-stores` go through the service


def disk_mb(db: Path) -> float:
    return sum(p.stat().st_size for p in db.parent.glob(db.name + "*")) / 1e6


def bare_inserts(folder: Path, rows: list[dict[str, object]]) -> list[float]:
    """The floor: the same content inserted into a plain SQLite table, one durable transaction each."""
    import apsw

    conn = apsw.Connection(str(folder / "bare.db"))
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("CREATE TABLE m (id INTEGER PRIMARY KEY, content TEXT, category TEXT, entities TEXT)")
    times = []
    for row in rows:
        started = time.perf_counter()
        with conn:
            conn.execute(
                "INSERT INTO m (content, category, entities) VALUES (?, ?, ?)",
                (row["content"], row["category"], json.dumps(row["entities"])),
            )
        times.append(time.perf_counter() - started)
    conn.close()
    return times


def cold_start(home: Path, query: str, prov: Provenance) -> float:
    """Seconds for a fresh `threadloom memory recall` process, from spawn to answer, as the user who stored
    the memories, in their project's folder (a root that does not exist is refused)."""
    assert prov.project is not None and Path(prov.project).is_dir()
    env = os.environ | {
        "THREADLOOM_HOME": str(home),
        "THREADLOOM_EMBEDDER": "none",
        "THREADLOOM_ROOT": prov.project,
        "THREADLOOM_USER": prov.user,
    }
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "threadloom", "memory", "recall", query, "--read-only", "-k", "10"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"cold start failed: {done.stderr}")
    return elapsed


def bulk_insert(w: Writer, rows: list[dict[str, object]], prov: Provenance) -> None:
    """Rows straight into the tables, without the service's similarity search: only to reach a size. Through
    the store's batch writes (memories, their entities, their documents: a statement per table per batch)."""
    now = now_ms()
    batch = []
    for row in rows:
        new = NewMemory(content=str(row["content"]), category=str(row["category"]), entities=tuple(row["entities"]))  # type: ignore[arg-type]
        batch.append({
            "id": new_memory_id(), "content": new.content, "summary": None, "category": new.category, "kind": "fact",
            "entities": json.dumps(list(new.entities)), "project": prov.project, "visibility": "private",
            "owner": "bench", "org": "bench", "status": "active", "pinned": 0, "core_key": None, "core_priority": None,
            "session_id": prov.session_id, "vendor": prov.vendor, "origin": prov.origin,
            "content_hash": content_digest(new.content), "idempotency_key": None, "created_at": now,
            "valid_from": now, "decay_score": 0.15,
        })  # fmt: skip
    mem_store.insert_many(w, batch)
    stored = mem_store.get_many(w, [values["id"] for values in batch])
    documents.upsert_many(w, [memory_document(stored[values["id"]]) for values in batch], now)


def run_size(n: int, n_queries: int, embedder_name: str, measured: int, force_bulk: bool = False) -> dict[str, Any]:
    rows = list(memories(n))
    asked = list(queries(n_queries))
    with tempfile.TemporaryDirectory(prefix="tlmem") as tmp:
        home = Path(tmp)
        project = home / "project"
        project.mkdir()
        prov = replace(PROV, project=str(project.resolve()))
        db = home / "threadloom.db"
        store = open_store(db)
        embedder = None
        if embedder_name == "local":
            from threadloom.search.embedders import local_embedder

            embedder = local_embedder()
        engine = SearchEngine(store, embedder)
        config = ScoringConfig()
        service = MemoryService(store, engine, config)
        recall = MemoryRecall(store, engine, config, Reactivations(store))  # deferred, as served
        bulk = max(0, n - measured) if n > BULK_ABOVE or force_bulk else 0
        started_bulk = time.perf_counter()
        for start in range(0, bulk, 5_000):
            part = rows[start : min(start + 5_000, bulk)]
            store.write(lambda w, part=part: bulk_insert(w, part, prov))
        if bulk and embedder is not None:
            engine.embed_pending()  # the bulk rows get their vectors as the background job would give them
        bulk_s = time.perf_counter() - started_bulk
        store_times = []
        started_fill = time.perf_counter()
        for row in rows[bulk:]:
            new = NewMemory(content=str(row["content"]), category=str(row["category"]), entities=tuple(row["entities"]))  # type: ignore[arg-type]
            started = time.perf_counter()
            service.store(new, prov)
            store_times.append(time.perf_counter() - started)
        fill_s = time.perf_counter() - started_fill
        bare = bare_inserts(home, rows[: min(n, 5_000)])
        recall_times, read_only_times, bm25_times = [], [], []
        for i, q in enumerate(asked):
            for read_only in (False, True) if i % 2 else (True, False):
                started = time.perf_counter()
                recall.recall(q, prov, k=10, read_only=read_only)
                (read_only_times if read_only else recall_times).append(time.perf_counter() - started)
            terms = analyse(q).terms
            started = time.perf_counter()
            store.read(lambda r, t=terms: documents.lexical(r, t, Filters(kinds=("memory",)), 10))
            bm25_times.append(time.perf_counter() - started)
        recall.reactivations.close()
        edges = store.read(lambda r: r.scalar("SELECT count(*) FROM memory_edges"))
        resident = rss_mb()
        peak = peak_rss_mb()
        store.close()  # the last connection out checkpoints the WAL into the file
        size = disk_mb(db)
        cold = [cold_start(home, asked[i], prov) for i in range(3)]
    return {
        "n": n,
        "store_ms_p50": statistics.median(store_times) * 1000,
        "store_ms_p95": pct(store_times, 0.95) * 1000,
        "stores_per_s": (n - bulk) / fill_s,
        "bulk_loaded": bulk,
        "bulk_s": bulk_s,
        "bare_insert_ms_p50": statistics.median(bare) * 1000,
        "recall_ms_p50": statistics.median(recall_times) * 1000,
        "recall_ms_p95": pct(recall_times, 0.95) * 1000,
        "read_only_ms_p50": statistics.median(read_only_times) * 1000,
        "read_only_ms_p95": pct(read_only_times, 0.95) * 1000,
        "bm25_ms_p50": statistics.median(bm25_times) * 1000,
        "bm25_ms_p95": pct(bm25_times, 0.95) * 1000,
        "auto_edges": edges,
        "rss_mb": resident,
        "peak_rss_mb": peak,
        "disk_mb": size,
        "cold_recall_s": statistics.median(cold),
    }


def run_papez(python: str, n: int, n_queries: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="papez") as tmp:
        mem_file, q_file = Path(tmp) / "m.jsonl", Path(tmp) / "q.txt"
        mem_file.write_text("".join(json.dumps(m) + "\n" for m in memories(n)))
        q_file.write_text("\n".join(queries(n_queries)) + "\n")
        done = subprocess.run(
            [python, str(ROOT / "bench/papez_driver.py"), "--memories", str(mem_file), "--queries", str(q_file),
             "--persist", str(Path(tmp) / "papez.json"),
             "--torch-threads", str(LOCAL_EMBEDDER_THREADS)],  # as many threads as threadloom's model
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise SystemExit(f"papez driver failed:\n{done.stderr[-3000:]}")
        return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--embedder", choices=["none", "local"], default="none")
    parser.add_argument("--papez-python", default=None, help="python of a venv made by bench/setup_papez.sh")
    parser.add_argument("--papez-size", type=int, default=10_000)
    parser.add_argument("--bulk", action="store_true", help="bulk-load every size, not just the large ones")
    parser.add_argument("--measured-stores", type=int, default=2_000, help=f"service stores above {BULK_ABOVE:,}")
    args = parser.parse_args()
    print(f"threadloom memory benchmark, embedder={args.embedder}, {args.queries} questions per size")
    header = (
        f"{'n':>8} {'store p50':>10} {'p95 ms':>8} {'stores/s':>9} {'bare ins':>9} {'recall p50':>11} {'p95 ms':>8}"
        f" {'read-only p50':>14} {'p95':>6}"
        f" {'bm25 p50':>9} {'p95':>6} {'edges':>7} {'rss MB':>7} {'disk MB':>8} {'cold s':>7}"
    )
    print(header)
    results = []
    for n in (int(s) for s in args.sizes.split(",")):
        r = run_size(n, args.queries, args.embedder, args.measured_stores, args.bulk)
        results.append(r)
        print(
            f"{r['n']:>8} {r['store_ms_p50']:>10.2f} {r['store_ms_p95']:>8.2f} {r['stores_per_s']:>9.0f}"
            f" {r['bare_insert_ms_p50']:>9.3f} {r['recall_ms_p50']:>11.2f} {r['recall_ms_p95']:>8.2f}"
            f" {r['read_only_ms_p50']:>14.2f} {r['read_only_ms_p95']:>6.2f}"
            f" {r['bm25_ms_p50']:>9.2f} {r['bm25_ms_p95']:>6.2f} {r['auto_edges']:>7} {r['rss_mb']:>7.0f}"
            f" {r['disk_mb']:>8.1f} {r['cold_recall_s']:>7.2f}",
            flush=True,
        )
    print("recall: memory_recall's default call (reactivating what it returns, written in the background as a")
    print("serving process does); read-only: the same questions with read_only=true, interleaved with it;")
    print("store: the whole service path, durable (above 20,000: the last --measured-stores of them, after a bulk")
    print("load of the rest); bare ins: a plain SQLite insert of the same row (the floor);")
    print("bm25: FTS5 alone over the same store; cold s: a fresh `threadloom memory recall` process, spawn to answer")
    if args.papez_python:
        p = run_papez(args.papez_python, args.papez_size, args.queries)
        ours = next((r for r in results if r["n"] == args.papez_size), None)
        print(f"\nside by side at {args.papez_size:,} memories (Papez 0.6.2, same data, same machine, this run):")
        print(json.dumps(p, indent=1))
        if ours is not None:
            ratio_recall = p["recall_ms_p95"] / ours["recall_ms_p95"]
            ratio_store = (p.get("persisted_store_ms_p50") or p["store_ms_p50"]) / ours["store_ms_p50"]
            print(f"recall p95: Papez {p['recall_ms_p95']:.1f} ms, threadloom {ours['recall_ms_p95']:.1f} ms "
                  f"({ratio_recall:.0f}x lower)")  # fmt: skip
            print(f"durable store p50: Papez {p.get('persisted_store_ms_p50') or p['store_ms_p50']:.1f} ms, "
                  f"threadloom {ours['store_ms_p50']:.2f} ms ({ratio_store:.0f}x faster)")  # fmt: skip
            print(f"resident memory: Papez {p['rss_mb']:.0f} MB, threadloom {ours['rss_mb']:.0f} MB")


if __name__ == "__main__":
    main()
