"""LoCoMo retrieval benchmark: evidence recall of threadloom's public memory paths, beside BM25.

Each conversation is ingested from empty into its own store, through what an agent can call:

  (a) `MemoryService.store` (the service behind `memory_store`), as an agent makes memories: one agent
      session per LoCoMo session, each turn one memory "Speaker: text" (a shared image as its caption),
      the speaker as its entity, the session's date as `valid_from`;
  (b) the same with no session grouping and no entities: each turn stored by a one-off session of its own
      (the worst case);
  (c) the conversation as a transcript (a Claude-Code-shaped file read by the real ingest), searched with
      `dialog_search` and with `memory_recall(kinds=["transcript"])`, and mixed with path (a)'s memories in
      one store to see where curated hits land (bench/locomo_dialog.py).

Every question of categories 1-4 is asked through `MemoryRecall.recall` (the service behind
`memory_recall`) by another session of the same user: read-only for the figures, and again as the default
call (which reactivates what it returns) for its latency. Beside each path, in the same run and on the same
stores: no model (as with THREADLOOM_EMBEDDER=none: full-text with every other signal) and plain BM25.
`--reference` adds the engine fed the bench's own documents (thread and source set by hand), as a label.
Reports evidence recall@5/10/20 per category and over 1-4, for the dev split (26 30 41 42 43; the only one
to tune on) and the test split (44 47 48 49 50), with ingest time and recall latency.

    python bench/locomo.py [--embedder none|local] [--cache DIR] [--split dev|test|both] [--paths a,b]

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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from threadloom.config import LOCAL_EMBEDDER_THREADS
from threadloom.identity import Provenance
from threadloom.memory import recall as recall_module
from threadloom.memory.model import NewMemory
from threadloom.memory.reactivation import Reactivations
from threadloom.memory.recall import MemoryRecall
from threadloom.memory.scoring import ScoringConfig
from threadloom.memory.service import MemoryService
from threadloom.search.embedder import Embedder
from threadloom.search.engine import SearchEngine, SearchTuning
from threadloom.search.fusion import FusionWeights
from threadloom.search.model import Document
from threadloom.store.base import Store
from threadloom.store.sqlite import open_store

sys.path.insert(0, str(Path(__file__).resolve().parent))
from locomo_dialog import Placement, report_placement, run_dialog

DEV = ("26", "30", "41", "42", "43")
TEST = ("44", "47", "48", "49", "50")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (5, 10, 20)
PATHS = {"a": "(a) agent sessions", "b": "(b) one-off stores", "c": "(c) transcripts"}
USER = "bench"
PROJECT = "locomo"


@dataclass
class Tally:
    recall: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    latencies: list[float] = field(default_factory=list)


Results = dict[str, Tally]  # per "path config"


@dataclass(frozen=True)
class Turn:
    session: int
    dia_id: str
    speaker: str
    text: str  # "Speaker: text", with a shared image's caption
    at: int  # the session's date, epoch ms


def parse_when(text: str) -> datetime:
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def conversation(conv: dict[str, object]) -> list[Turn]:
    out = []
    n = 1
    while f"session_{n}_date_time" in conv:
        at = int(parse_when(str(conv[f"session_{n}_date_time"])).timestamp() * 1000)
        for turn in conv.get(f"session_{n}", []) or []:  # type: ignore[union-attr]
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [shares {turn['blip_caption']}]"
            out.append(Turn(n, turn["dia_id"], turn["speaker"], text, at))
        n += 1
    return out


def clean_evidence(raw: list[str], known: set[str]) -> set[str]:
    """The data's evidence ids, repaired where it has typos ("D8:6; D9:17", "D:11:26"); unknown ids dropped."""
    ids = set()
    for item in raw:
        for part in str(item).replace(",", ";").split(";"):
            part = part.strip().replace("D:", "D")
            if part in known:
                ids.add(part)
    return ids


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
        self.fingerprint = inner.fingerprint
        self.dimension = inner.dimension
        self.uses_every_core = inner.uses_every_core
        self.dense_floor = inner.dense_floor

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
    return CachedEmbedder(inner, cache) if cache else inner  # type: ignore[return-value]


def bm25_only() -> SearchTuning:
    plain = FusionWeights(lexical=1.0, dense=0.0, graph=0.0, temporal_boost=0.0, source_boost=0.0)
    return SearchTuning(weights=plain, context_spread=0.0, thread_prior=0.0)


def prov(session: str) -> Provenance:
    return Provenance(session_id=session, vendor="other", project=PROJECT, user=USER)


def ingest(memory: MemoryService, conv_id: str, path: str, turns: list[Turn]) -> dict[str, set[str]]:
    """Store every turn as path `path` does; which dialog ids each memory holds (a repeated turn is one)."""
    held: dict[str, set[str]] = defaultdict(set)
    for turn in turns:
        if path == "a":  # one agent session per LoCoMo session, naming who spoke
            new = NewMemory(content=turn.text, entities=(turn.speaker,), valid_from=turn.at)
            who = prov(f"locomo-{conv_id}-s{turn.session}")
        else:  # a session of its own for every turn, naming no one
            new = NewMemory(content=turn.text, valid_from=turn.at)
            who = prov(f"locomo-{conv_id}-{turn.dia_id.replace(':', '-')}")
        held[memory.store(new, who).memory.id].add(turn.dia_id)
    return held


def questions(conv: dict[str, object], known: set[str]) -> Iterator[tuple[int, str, set[str]]]:
    for qa in conv["qa"]:  # type: ignore[attr-defined]
        category = int(qa["category"])
        evidence = clean_evidence(qa["evidence"], known)
        if category in CATEGORIES and evidence:
            yield category, str(qa["question"]), evidence


def score(tally: Tally, category: int, evidence: set[str], found: list[set[str]], ks: Sequence[int]) -> None:
    for k in ks:
        seen = set().union(*found[:k])
        tally.recall[k * 10 + category].append(len(evidence & seen) / len(evidence))


def run_path(
    path: str, conv_id: str, conv: dict[str, object], store: Store, engine: SearchEngine, out: Results
) -> float:
    """Ingest one conversation by `path` and ask its questions in every configuration; the ingest seconds."""
    embedder = engine.embedder
    memory = MemoryService(store, engine)
    recall = MemoryRecall(store, engine, ScoringConfig(), Reactivations(store))  # deferred, as served
    turns = conversation(conv)
    started = time.perf_counter()
    held = ingest(memory, conv_id, path, turns)
    ingest_s = time.perf_counter() - started
    asker = prov(f"locomo-{conv_id}-asker")
    tuned = engine.tuning
    configs = {"recall": (tuned, embedder), "no model": (tuned, None), "bm25": (bm25_only(), None)}
    for name, (tuning, model) in configs.items():
        if name == "recall" and model is None:
            continue
        engine.tuning, engine.embedder = tuning, model
        for category, question, evidence in questions(conv, {t.dia_id for t in turns}):
            started = time.perf_counter()
            got = recall.recall(question, asker, k=max(KS), verbosity="concise", read_only=True)
            out[f"({path}) {name}"].latencies.append(time.perf_counter() - started)
            score(out[f"({path}) {name}"], category, evidence, [held[m["id"]] for m in got["memories"]], KS)
            if name != "recall":
                continue
            started = time.perf_counter()  # the default call: k=10, full, reactivating what it returns
            got = recall.recall(question, asker)
            out[f"({path}) default call"].latencies.append(time.perf_counter() - started)
            score(out[f"({path}) default call"], category, evidence, [held[m["id"]] for m in got["memories"]], (5, 10))
    engine.tuning, engine.embedder = tuned, embedder
    recall.reactivations.close()
    return ingest_s


def run_reference(conv: dict[str, object], store: Store, engine: SearchEngine, out: Results) -> float:
    """The engine fed the bench's own documents (each LoCoMo session a thread, the speaker a source)."""
    turns = conversation(conv)
    docs = [
        Document(kind="memory", ref=t.dia_id, body=t.text, source=t.speaker, thread=f"s{t.session}", occurred_at=t.at)
        for t in turns
    ]
    started = time.perf_counter()
    store.write(lambda w: [engine.index(w, d) for d in docs])
    engine.embed_pending()
    ingest_s = time.perf_counter() - started
    now = datetime.fromtimestamp(turns[-1].at / 1000, UTC)
    for category, question, evidence in questions(conv, {t.dia_id for t in turns}):
        started = time.perf_counter()
        hits = engine.search(question, limit=max(KS), now=now).hits
        out["engine reference"].latencies.append(time.perf_counter() - started)
        score(out["engine reference"], category, evidence, [{h.ref} for h in hits], KS)
    return ingest_s


def run(args: argparse.Namespace, tuned: SearchTuning) -> dict[str, Results]:
    embedder = make_embedder(args.embedder, args.cache, args.threads)
    results: dict[str, Results] = defaultdict(lambda: defaultdict(Tally))
    ingest: dict[str, float] = defaultdict(float)
    n_turns = 0
    splits = ("dev", "test") if args.split == "both" else (args.split,)
    paths = [p for p in args.paths.split(",") if p in ("a", "b", "c")] + ["reference"] * args.reference
    recall_module.TRANSCRIPT_WEIGHT = args.transcript_weight
    for conv_id in (DEV if "dev" in splits else ()) + (TEST if "test" in splits else ()):
        split = "dev" if conv_id in DEV else "test"
        conv = json.loads((args.data / f"{conv_id}.json").read_text())
        n_turns += len(conversation(conv))
        for path in paths:
            with tempfile.TemporaryDirectory(prefix="tlloc") as tmp:
                store = open_store(Path(tmp) / "locomo.db")
                engine = SearchEngine(store, embedder, tuned)
                if path == "reference":
                    ingest[path] += run_reference(conv, store, engine, results[split])
                elif path == "c":
                    ingest[path] += run_dialog(
                        conv_id, conv, store, engine, Path(tmp), results[split], HELPERS, PLACEMENT[split]
                    )
                else:
                    ingest[path] += run_path(path, conv_id, conv, store, engine, results[split])
                store.close()
    print(f"{n_turns} turns ({embedder.fingerprint if embedder else 'no embedder'})")
    for path, seconds in ingest.items():
        print(f"ingest {PATHS.get(path, path)}: {seconds / n_turns * 1000:.2f} ms/turn")
    if isinstance(embedder, CachedEmbedder):
        embedder.save()
        print(
            f"embedding cache: {embedder.hits} hits, {embedder.misses} misses, {embedder.model_seconds:.1f} s in "
            "the model (questions are always embedded live, so recall latency includes it)"
        )
    return results


def report(results: dict[str, Results], paths: str) -> None:
    for split in results:
        print(f"\n== {split} split")
        header = f"{'path / config':24}" + "".join(f"{'R@10 ' + CATEGORIES[c]:>19}" for c in CATEGORIES)
        print(header + "   R@5 1-4  R@10 1-4  R@20 1-4   p50 ms   p95 ms")
        for name, tally in results[split].items():
            cells = []
            for c in CATEGORIES:
                values = tally.recall[100 + c]
                cells.append(f"{100 * statistics.fmean(values):19.1f}" if values else f"{'-':>19}")
            overall = []
            for k in KS:
                values = [v for c in CATEGORIES for v in tally.recall[k * 10 + c]]
                overall.append(f"{100 * statistics.fmean(values):10.1f}" if values else f"{'-':>10}")
            lat = sorted(tally.latencies)
            p50 = statistics.median(lat) * 1000
            p95 = lat[int(0.95 * (len(lat) - 1))] * 1000
            print(f"{name:24}" + "".join(cells) + "".join(overall) + f"{p50:9.2f}{p95:9.2f}")
        report_placement(PLACEMENT[split])
    print(
        "\nrecall = evidence recall (share of a question's evidence turns retrieved), averaged per question;"
        "\n'no model' = the same stores searched without the embedder (THREADLOOM_EMBEDDER=none);"
        "\n'default call' = memory_recall's defaults (k=10, full, reactivating): its latency, R@5/10 only"
    )


HELPERS = {
    "conversation": conversation,
    "questions": questions,
    "score": score,
    "prov": prov,
    "ingest": ingest,
    "bm25_only": bm25_only,
    "memory": MemoryService,
    "user": USER,
    "ks": KS,
}
PLACEMENT: dict[str, Placement] = defaultdict(Placement)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data/locomo10")
    parser.add_argument("--embedder", choices=["none", "local"], default="none")
    parser.add_argument("--threads", type=int, default=LOCAL_EMBEDDER_THREADS, help="compute threads of the model")
    parser.add_argument("--cache", type=Path, default=None, help="reuse vectors across runs from this folder")
    parser.add_argument("--split", choices=["dev", "test", "both"], default="both", help="tune on dev only")
    parser.add_argument("--paths", default="a,b,c", help="which public paths to measure (a, b, c)")
    parser.add_argument("--reference", action="store_true", help="also the engine fed the bench's own documents")
    defaults = SearchTuning()
    parser.add_argument("--lexical", type=float, default=defaults.weights.lexical)
    parser.add_argument("--dense", type=float, default=defaults.weights.dense)
    parser.add_argument("--temporal", type=float, default=defaults.weights.temporal_boost)
    parser.add_argument("--source", type=float, default=defaults.weights.source_boost)
    parser.add_argument("--graph", type=float, default=defaults.weights.graph)
    parser.add_argument("--candidates", type=int, default=defaults.candidates)
    parser.add_argument("--spread", type=float, default=defaults.context_spread)
    parser.add_argument("--pool", type=int, default=defaults.context_pool)
    parser.add_argument("--thread-prior", type=float, default=defaults.thread_prior)
    parser.add_argument("--floor", type=float, default=defaults.dense_floor, help="default: the model's own")
    parser.add_argument("--transcript-weight", type=float, default=recall_module.TRANSCRIPT_WEIGHT)
    args = parser.parse_args()
    if not args.data.is_dir():
        sys.exit(f"no LoCoMo data at {args.data}")
    weights = FusionWeights(
        lexical=args.lexical, dense=args.dense, temporal_boost=args.temporal, source_boost=args.source, graph=args.graph
    )
    tuned = replace(
        defaults,
        weights=weights,
        candidates=args.candidates,
        context_spread=args.spread,
        context_pool=args.pool,
        thread_prior=args.thread_prior,
        dense_floor=args.floor,
    )
    print(f"threadloom tuning: {tuned}")
    if args.embedder == "local":
        print(f"model threads: {args.threads} on {os.cpu_count()} cores")
    report(run(args, tuned), args.paths)


if __name__ == "__main__":
    main()
