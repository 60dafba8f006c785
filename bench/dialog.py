"""Dialog search latency at 100k and 1M transcript messages (targets: p95 <= 50 ms and <= 250 ms, the
query's embedding included), beside a plain FTS5 query on the same store in the same run.

The store is built with the ingest service's own write functions (`store.transcripts.upsert_message` and
the batch's search documents through `SearchEngine.index_many`, 5,000 per transaction): synthetic
sessions of 200 turns across 4 agent CLIs, 20 projects and a year, text drawn from a Zipf vocabulary.
Vectors: the local model embeds `--embedded` distinct messages; every other message carries one of those
vectors plus Gaussian noise (renormalised), so the dense index holds one vector per message as a fully
embedded store does, while the model runs for minutes instead of hours. Each query is embedded live.

Measured per size, 60 queries (2-4 words; a third filtered by vendor, a third by a 30-day range):
  dialog_search   `DialogSearch.search` (limit 10, window 1), the model loaded (the served path)
  no model        the same without the embedder (THREADLOOM_EMBEDDER=none)
  fts5            SELECT rowid FROM documents_fts WHERE MATCH (the query's words OR-ed) ORDER BY rank LIMIT 10

    python bench/dialog.py [--sizes 100000,1000000] [--embedded 2000] [--embedder local|none]
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import pct, peak_rss_mb

from threadloom.config import LOCAL_EMBEDDER_THREADS
from threadloom.dialog.model import DialogFilters
from threadloom.dialog.search import DialogSearch
from threadloom.identity import Provenance
from threadloom.search.engine import SearchEngine
from threadloom.search.model import Document
from threadloom.store import document_vectors, documents
from threadloom.store import transcripts as tables
from threadloom.store.base import Store, Writer
from threadloom.store.sqlite import open_store
from threadloom.store.transcripts import StoredMessage

VENDORS = ("claude-code", "codex", "gemini", "copilot")
USER = "bench"
START = 1_767_225_600_000  # 2026-01-01
YEAR_MS = 365 * 24 * 3600 * 1000
BATCH = 5_000
SYLLABLES = [a + b for a in "bcdfghklmnprstvz" for b in ("a", "e", "i", "o", "u", "ai", "ou")]


def vocabulary(rng: random.Random, size: int = 6_000) -> tuple[list[str], list[float]]:
    words = sorted({"".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))) for _ in range(size * 2)})[:size]
    rng.shuffle(words)
    weights = list(itertools.accumulate(1 / (rank + 1) for rank in range(len(words))))
    return words, weights


def text(rng: random.Random, words: list[str], weights: list[float]) -> str:
    return " ".join(rng.choices(words, cum_weights=weights, k=rng.randint(8, 60)))


def build(store: Store, n: int, rng: random.Random, words: list[str], weights: list[float]) -> float:
    started = time.perf_counter()
    for first in range(0, n, BATCH):

        def write(w: Writer, first: int = first) -> None:
            docs = []
            for i in range(first, min(n, first + BATCH)):
                session = i // 200
                at = START + (session * 7919 % 5000) * (YEAR_MS // 5000) + (i % 200) * 20_000
                project = f"/src/project{session % 20}"
                m = StoredMessage(
                    VENDORS[session % 4], f"s{session}", f"k{i}", ("user", "assistant")[i % 2],
                    text(rng, words, weights), "[]", at, project, project, None, "bench", "/b", i,
                )  # fmt: skip
                row_id, _ = tables.upsert_message(w, USER, m, False, at) or (0, False)
                docs.append(Document("transcript", str(row_id), m.text, project, m.session_id, m.role, occurred_at=at))
            SearchEngine.index_many(w, docs)  # as the ingest service writes a batch

        store.write(write)
    return time.perf_counter() - started


def add_vectors(store: Store, embedder: Any, embedded: int, rng: np.random.Generator) -> tuple[float, int]:
    """The model embeds the first `embedded` documents; every other gets one of those vectors plus noise."""
    started = time.perf_counter()
    fp = embedder.fingerprint
    rows = store.read(lambda r: r.tuples("SELECT id, body FROM documents ORDER BY id LIMIT :n", {"n": embedded}))
    real = np.asarray(embedder.embed_documents([body for _, body in rows]), dtype=np.float32)
    model_s = time.perf_counter() - started
    total = int(store.read(lambda r: r.scalar("SELECT MAX(id) FROM documents")))
    for first in range(0, total, BATCH):

        def write(w: Writer, first: int = first) -> None:
            for doc_id, title, body in w.tuples(
                "SELECT id, title, body FROM documents WHERE id > :a AND id <= :b", {"a": first, "b": first + BATCH}
            ):
                base = real[doc_id % len(real)] + rng.normal(0, 0.02, real.shape[1]).astype(np.float32)
                base /= np.linalg.norm(base)
                digest = documents.content_hash(Document("transcript", "x", body, title=title))
                document_vectors.put_vector(w, int(doc_id), fp, digest, base.astype(np.float32).tobytes())

        store.write(write)
    return model_s, total


def queries(rng: random.Random, words: list[str]) -> list[tuple[str, DialogFilters]]:
    out = []
    for i in range(60):
        q = " ".join(rng.choice(words[20:2000]) for _ in range(rng.randint(2, 4)))
        if i % 3 == 1:
            f = DialogFilters(vendors=(VENDORS[i % 4],))
        elif i % 3 == 2:
            since = START + rng.randrange(YEAR_MS - 30 * 24 * 3600 * 1000)
            f = DialogFilters(since=since, until=since + 30 * 24 * 3600 * 1000)
        else:
            f = DialogFilters()
        out.append((q, f))
    return out


def timed(fn: Any, items: list[Any]) -> list[float]:
    out = []
    for item in items:
        started = time.perf_counter()
        fn(item)
        out.append((time.perf_counter() - started) * 1000)
    return out


def measure(size: int, args: argparse.Namespace, embedder: Any) -> None:
    rng = random.Random(size)
    words, weights = vocabulary(rng)
    with tempfile.TemporaryDirectory(prefix="tldialog", dir=args.dir) as tmp:
        store = open_store(Path(tmp) / "dialog.db")
        build_s = build(store, size, rng, words, weights)
        line = f"\n== {size:,} messages: built in {build_s:.0f} s ({size / build_s:,.0f}/s)"
        if embedder is not None:
            model_s, total = add_vectors(store, embedder, args.embedded, np.random.default_rng(size))
            line += f"; model embedded {args.embedded:,} in {model_s:.0f} s, {total:,} vectors in all"
        print(line, flush=True)
        db_mb = sum(f.stat().st_size for f in Path(tmp).iterdir()) / 2**20
        engine = SearchEngine(store, embedder)
        search = DialogSearch(store, engine)
        who = Provenance(session_id="bench-asker", vendor="other", project=None, user=USER)
        asked = queries(rng, words)
        started = time.perf_counter()
        search.search(asked[0][0], who, asked[0][1])  # the first builds the dense index's codes
        first_ms = (time.perf_counter() - started) * 1000

        def fts(q: tuple[str, DialogFilters]) -> None:
            match = " OR ".join(f'"{w}"' for w in q[0].split())
            store.read(
                lambda r: r.tuples(
                    "SELECT rowid FROM documents_fts WHERE documents_fts MATCH :m ORDER BY rank LIMIT 10", {"m": match}
                )
            )

        rows = {"dialog_search": timed(lambda q: search.search(q[0], who, q[1]), asked)}
        engine.embedder = None
        rows["no model"] = timed(lambda q: search.search(q[0], who, q[1]), asked)
        rows["fts5"] = timed(fts, asked)
        for name, values in rows.items():
            p50, p95 = pct(values, 0.5), pct(values, 0.95)
            print(f"{name:14} p50 {p50:8.1f} ms   p95 {p95:8.1f} ms   max {max(values):8.1f} ms")
        print(f"first dialog_search (builds the index) {first_ms:.0f} ms; store {db_mb:,.0f} MB", end="")
        print(f"; peak RSS {peak_rss_mb():,.0f} MB")
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--embedded", type=int, default=2_000, help="messages the model embeds itself")
    parser.add_argument("--embedder", choices=["local", "none"], default="local")
    parser.add_argument("--dir", default=None, help="where the temporary stores go")
    args = parser.parse_args()
    embedder = None
    if args.embedder == "local":
        from threadloom.search.embedders import local_embedder

        embedder = local_embedder(LOCAL_EMBEDDER_THREADS)
        print(f"model {embedder.fingerprint}, {LOCAL_EMBEDDER_THREADS} threads on {os.cpu_count()} cores")
    for size in (int(s) for s in args.sizes.split(",")):
        measure(size, args, embedder)


if __name__ == "__main__":
    main()
