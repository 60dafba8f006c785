"""Consolidation benchmark: a pass over N memories, the dry run (planning) and the apply, with the baselines
measured in the same run: the plain scan (reading every memory, the floor of any pass) and the naive
all-pairs comparison (every pair judged by word overlap, timed on a sample and extrapolated to N).

The memories come from bench/memory_data.py (coding-agent facts from ten templates: many share most of their
words, the hard case for word-based candidates), half of them without their ticket number, so that most
blocks of equal literal values are large; 2% get a restatement (the duplicates to find: a word changed in
form only, an inflection or punctuation), 1% a near-miss (a name or a number changed). Rows go in through the
store's own SQL in batches, as bench/memory.py's bulk path does: no vectors are stored, the model embeds only the texts
that reach a judgement. Prints precision and recall on the planted duplicates, and the load average.

    python bench/consolidate.py [--n 100000] [--embedder local|none] [--sample 3000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import peak_rss_mb
from memory_data import PEOPLE, memories

from threadloom.clock import now_ms
from threadloom.consolidate.service import Consolidator, Options
from threadloom.consolidate.similar import MEMORY_FLOORS, word_sets
from threadloom.coordination.presence import PresenceService
from threadloom.coordination.spawn import SpawnService
from threadloom.memory.model import content_digest, memory_document, new_memory_id
from threadloom.memory.scoring import ScoringConfig
from threadloom.search.engine import SearchEngine
from threadloom.store import consolidation, documents
from threadloom.store import memories as mem_store
from threadloom.store.base import Writer
from threadloom.store.sqlite import open_store
from threadloom.threads.hygiene import ThreadHygiene
from threadloom.threads.service import ThreadService

BATCH = 2_000
# Restatements keep the content words (consolidation never merges texts whose content words differ):
# punctuation, a word's inflection, the order of clauses.
REWORD = (
    ("decided", "decide"), ("fixed", "fixes"), ("owns", "own"), ("reads", "read"), ("talks", "talk"),
    ("caused", "causes"), ("prefers", "prefer"), ("; ", ", and "), (" and ", ", and "), ("paged", "pages"),
)  # fmt: skip


def corpus(n: int, seed: int = 3) -> tuple[list[str], dict[int, int]]:
    """N texts and, for each planted restatement, the index of the text it restates."""
    rng = random.Random(seed)
    base = [str(m["content"]) for m in memories(int(n / 1.03))]
    texts: list[str] = []
    seen: set[str] = set()
    for i, t in enumerate(base):
        text = t.rsplit(" (ticket", 1)[0] + "." if i % 2 else t
        if content_digest(text) not in seen:
            seen.add(content_digest(text))
            texts.append(text)
    planted: dict[int, int] = {}
    base = list(texts)
    while len(texts) < n:
        i = rng.randrange(len(base))
        text = texts[i]
        if rng.random() < 2 / 3:  # a restatement: a few words changed, nothing of substance
            changed = text
            for old, new in rng.sample(REWORD, len(REWORD)):
                if old in changed:
                    changed = changed.replace(old, new, 1)
                    break
            changed = changed.replace(".", ", noted again.", 1) if changed == text else changed
            if content_digest(changed) not in seen:
                seen.add(content_digest(changed))
                planted[len(texts)] = i
                texts.append(changed)
        else:  # a near-miss: another person, or another number
            who = next((p for p in PEOPLE if p in text), None)
            other = text.replace(who, rng.choice([p for p in PEOPLE if p != who])) if who else text + " Twice."
            if content_digest(other) not in seen:
                seen.add(content_digest(other))
                texts.append(other)
    return texts, planted


def fill(w: Writer, texts: list[str], start: int) -> list[str]:
    now, ids = now_ms(), []
    for i, text in enumerate(texts):
        memory_id = new_memory_id()
        values = {
            "id": memory_id, "content": text, "summary": None, "category": None, "kind": "fact", "entities": "[]",
            "project": None, "visibility": "private", "owner": "bench", "org": "bench", "status": "active",
            "pinned": 0, "core_key": None, "core_priority": None, "session_id": f"s{(start + i) // 50}",
            "vendor": "other", "origin": "foreground", "content_hash": content_digest(text), "idempotency_key": None,
            "created_at": now + start + i, "valid_from": now + start + i, "decay_score": 0.15,
        }  # fmt: skip
        mem_store.insert(w, values)
        memory = mem_store.get(w, memory_id)
        assert memory is not None
        documents.upsert(w, memory_document(memory), now)
        ids.append(memory_id)
    return ids


def all_pairs_s(texts: list[str], sample: int) -> float:
    """Seconds the naive pass would take: every pair of a sample judged by word overlap, scaled by pairs."""
    some = texts[:sample]
    sets = word_sets(some)
    started = time.perf_counter()
    for i in range(len(sets)):
        a = sets[i]
        for j in range(i + 1, len(sets)):
            b = sets[j]
            _ = len(a & b) / len(a | b) >= MEMORY_FLOORS.words
    took = time.perf_counter() - started
    return took * (len(texts) * (len(texts) - 1)) / (len(some) * (len(some) - 1))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--embedder", choices=("local", "none"), default="local")
    parser.add_argument("--sample", type=int, default=3_000)
    args = parser.parse_args()
    texts, planted = corpus(args.n)
    embedder = None
    if args.embedder == "local":
        from threadloom.search.embedders import local_embedder

        embedder = local_embedder()
    with tempfile.TemporaryDirectory(prefix="tlcons") as tmp:
        store = open_store(Path(tmp) / "c.db")
        ids: list[str] = []
        started = time.perf_counter()
        for start in range(0, len(texts), BATCH):
            ids += store.write(lambda w, s=start: fill(w, texts[s : s + BATCH], s))
        fill_s = time.perf_counter() - started
        threads = ThreadService(store, SearchEngine(store))
        consolidator = Consolidator(store, lambda: embedder, ScoringConfig(), ThreadHygiene(store, threads),
                                    PresenceService(store), SpawnService(store, Path(tmp)))  # fmt: skip
        started = time.perf_counter()
        scanned = len(store.read(lambda r: consolidation.current_memories(r, None)))
        scan_s = time.perf_counter() - started
        started = time.perf_counter()
        dry = consolidator.run(Options(release=False))
        dry_s = time.perf_counter() - started
        started = time.perf_counter()
        done = consolidator.run(Options(apply=True, release=False))
        apply_s = time.perf_counter() - started
        truth = {frozenset((ids[d], ids[o])) for d, o in planted.items()}
        clusters: dict[str, set[str]] = {}
        for m in done["merges"]:
            clusters.setdefault(m["survivor"], {m["survivor"]}).add(m["merged"])
        together = {frozenset((a, b)) for c in clusters.values() for a in c for b in c if a < b}
        hit = len(together & truth)
        naive_s = all_pairs_s(texts, args.sample)
        store.close()
    result: dict[str, Any] = {
        "n": len(texts),
        "embedder": args.embedder,
        "planted_duplicates": len(truth),
        "fill_s": round(fill_s, 1),
        "dry_run_s": round(dry_s, 2),
        "dry_run_stats": dry["stats"],
        "apply_s": round(apply_s, 2),
        "merged": done["merged"]["memory"],
        "skipped": len(done["skipped"]),
        "precision": round(hit / len(together), 4) if together else None,
        "recall": round(hit / len(truth), 4) if truth else None,
        "baseline_plain_scan_s": round(scan_s, 2),
        "baseline_naive_all_pairs_s": round(naive_s, 1),
        "baseline_sample": args.sample,
        "scanned": scanned,
        "peak_rss_mb": peak_rss_mb(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
