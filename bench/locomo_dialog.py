"""LoCoMo path (c) for bench/locomo.py: each conversation written as a Claude-Code-shaped transcript in a
temporary home (one session per conversation; the first speaker's turns as the user's, the other's as the
assistant's; each record's uuid names its dialog id, the session's date plus a second per turn as its time)
and read by the real ingest service (`threadloom.ingest.Ingester`, as the daemon runs it), then searched:

  dialog_search       `DialogSearch.search` (the service behind the tool), no filters, window 0
  recall transcript   `MemoryRecall.recall(kinds=["transcript"])` on the same store
  mixed               the turns also stored as memories (path (a)) in the same store, recalled with
                      kinds=["memory", "transcript"]: where the curated hits land beside the messages

Record shape as threadloom/transcripts/claude_code.py reads it (its format sources are cited there).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from threadloom.dialog.model import DialogFilters
from threadloom.dialog.search import DialogSearch
from threadloom.identity import Provenance
from threadloom.ingest import IngestConfig, Ingester
from threadloom.memory.recall import MemoryRecall, RecallFilters
from threadloom.memory.scoring import ScoringConfig
from threadloom.search.engine import SearchEngine, SearchTuning
from threadloom.store.base import Store

Placement = Counter[str]


def write_transcript(home: Path, conv_id: str, turns: list[Any]) -> Path:
    folder = home / ".claude" / "projects" / "-locomo"
    folder.mkdir(parents=True, exist_ok=True)
    session = f"locomo-{conv_id}"
    first = turns[0].speaker
    path = folder / f"{session}.jsonl"
    with path.open("w") as out:
        for n, turn in enumerate(turns):
            role = "user" if turn.speaker == first else "assistant"
            at = datetime.fromtimestamp(turn.at / 1000 + n, UTC).isoformat(timespec="milliseconds")
            record = {
                "type": role,
                "sessionId": session,
                "cwd": str(home / "locomo"),
                "uuid": f"{session}-{turn.dia_id}",
                "timestamp": at.replace("+00:00", "Z"),
                "message": {"role": role, "content": turn.text},
            }
            out.write(json.dumps(record) + "\n")
    return path


def ingest_transcript(
    store: Store, engine: SearchEngine, home: Path, conv_id: str, turns: list[Any], user: str
) -> dict[int, str]:
    """Ingest through the real service; transcript message id -> dialog id."""
    write_transcript(home, conv_id, turns)
    report = Ingester(store, IngestConfig(owner=user, home=home, env={})).run(only=["claude-code"])
    added = sum(s.messages_added for s in report.sources.values())
    engine.embed_pending()
    rows = store.read(lambda r: r.tuples("SELECT id, key FROM transcript_messages WHERE owner = :o", {"o": user}))
    held = {int(i): str(key).rsplit("-", 1)[-1] for i, key in rows}
    if added != len(held):
        raise SystemExit(f"ingest reported {added} messages, the store holds {len(held)}")
    return held


def run_dialog(
    conv_id: str,
    conv: dict[str, object],
    store: Store,
    engine: SearchEngine,
    home: Path,
    out: Any,
    helpers: dict[str, Callable[..., Any]],
    placement: Placement,
) -> float:
    """Path (c) on one conversation; the ingest seconds. `helpers` are locomo.py's conversation, questions,
    score, prov, ingest, bm25_only and the memory service factory."""
    turns = helpers["conversation"](conv)
    started = time.perf_counter()
    held = ingest_transcript(store, engine, home, conv_id, turns, helpers["user"])
    ingest_s = time.perf_counter() - started
    asker: Provenance = helpers["prov"](f"locomo-{conv_id}-asker")
    dialog = DialogSearch(store, engine)
    recall = MemoryRecall(store, engine, ScoringConfig())
    embedder, tuned = engine.embedder, engine.tuning
    known = {t.dia_id for t in turns}
    ks, top = helpers["ks"], max(helpers["ks"])
    configs: dict[str, tuple[SearchTuning, Any]] = {
        "dialog_search": (tuned, embedder),
        "no model": (tuned, None),
        "bm25": (helpers["bm25_only"](), None),
    }
    for name, (tuning, model) in configs.items():
        if name == "dialog_search" and model is None:
            continue
        engine.tuning, engine.embedder = tuning, model
        for category, question, evidence in helpers["questions"](conv, known):
            started = time.perf_counter()
            hits = dialog.search(question, asker, DialogFilters(), limit=top, window=0)["hits"]
            out[f"(c) {name}"].latencies.append(time.perf_counter() - started)
            helpers["score"](out[f"(c) {name}"], category, evidence, [{held[h["id"]]} for h in hits], ks)
    engine.tuning, engine.embedder = tuned, embedder
    said = RecallFilters(kinds=("transcript",), all_projects=True)
    for category, question, evidence in helpers["questions"](conv, known):
        started = time.perf_counter()
        got = recall.recall(question, asker, k=top, verbosity="concise", read_only=True, filters=said)
        out["(c) recall transcript"].latencies.append(time.perf_counter() - started)
        helpers["score"](
            out["(c) recall transcript"], category, evidence, [{held[m["id"]]} for m in got["memories"]], ks
        )
    memories = helpers["ingest"](helpers["memory"](store, engine), conv_id, "a", turns)
    mixed = RecallFilters(kinds=("memory", "transcript"), all_projects=True)
    for category, question, evidence in helpers["questions"](conv, known):
        started = time.perf_counter()
        got = recall.recall(question, asker, k=10, verbosity="concise", read_only=True, filters=mixed)["memories"]
        out["(c) mixed, both kinds"].latencies.append(time.perf_counter() - started)
        found = [memories[m["id"]] if m["kind"] == "memory" else {held[m["id"]]} for m in got]
        helpers["score"](out["(c) mixed, both kinds"], category, evidence, found, (5, 10))
        kinds = [m["kind"] for m in got]
        placement["questions"] += 1
        placement["memory first"] += bool(kinds) and kinds[0] == "memory"
        placement["memories in top 10"] += kinds.count("memory")
        placement["transcripts in top 10"] += kinds.count("transcript")
        placement["memory above every transcript"] += "transcript" not in kinds or (
            "memory" in kinds and kinds.index("memory") < kinds.index("transcript")
        )
    recall.reactivations.close()
    return ingest_s


def report_placement(placement: Placement) -> None:
    n = placement["questions"]
    if not n:
        return
    print(
        f"\n(c) mixed placement over {n} questions (memory_recall kinds=[memory, transcript], k=10): a memory first "
        f"{100 * placement['memory first'] / n:.1f}%, a memory above every transcript "
        f"{100 * placement['memory above every transcript'] / n:.1f}%, per question "
        f"{placement['memories in top 10'] / n:.1f} memories and {placement['transcripts in top 10'] / n:.1f} "
        "transcript messages in the top 10"
    )
