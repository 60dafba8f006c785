"""Brief benchmark: rendering the session brief on a store of 10k memories and a project of 500 threads.

The store is filled through the real services (MemoryService.store: duplicate checks, similarity
search, one durable transaction each; ThreadService for the project; thread files written as the
service writes them), with core memories, lessons, preferences, a signal, a claim and live peers, so
every slot of the brief has something to say. Timed warm, in one process: the full brief (what the
session-start hook injects), the query-scope brief (mid-session), and the now table. Baselines in the
same run: the status tool's store report (`StatusService.store_status`) and `thread_context` alone.

    python bench/brief.py [--memories 10000] [--threads 500] [--runs 50]
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import pct
from memory_data import memories, queries

from threadloom import tokens
from threadloom.brief import render_brief, render_now
from threadloom.clock import now_ms
from threadloom.config import Settings
from threadloom.memory.model import NewMemory
from threadloom.runtime import Runtime, open_runtime
from threadloom.sessions import SessionInfo
from threadloom.threads.files import ThreadFiles
from threadloom.threads.model import Summary, Thread

SUMMARY = "## Decisions\n- {t}: kept the API\n## Constraints\n- no new services\n## State\n- {t} half done\n"


def populate(tmp: Path, n_memories: int, n_threads: int) -> tuple[Runtime, Any]:
    repo = tmp / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    runtime = open_runtime(Settings(home=tmp / "home", embedder="none"), "cli")
    provs = []
    for sid in ("bench-1", "bench-2", "bench-3"):
        info = SessionInfo(sid, "claude", "stdio", str(repo), str(repo), 1, user="ana")
        runtime.sessions.open(info)
        provs.append(info.provenance())
    me = provs[0]
    runtime.threads.create_project(me, "Bench")
    files = ThreadFiles(repo, "bench")
    rng, ids, at = random.Random(3), ["main"], now_ms()
    with files.locked():
        for i in range(1, n_threads):
            parent = ids[i - 1] if i < 5 else rng.choice(ids)
            files.write(
                Thread(f"t{i}", f"Topic {i}", parent, "active", "ana", at, at, Summary.parse(SUMMARY.format(t=i)))
            )
            ids.append(f"t{i}")
    runtime.threads.switch(me, "t4")
    kinds = ["fact"] * 8 + ["lesson", "preference"]
    started = time.perf_counter()
    for n, m in enumerate(memories(n_memories)):
        new = NewMemory(content=str(m["content"]), category=str(m["category"]), kind=kinds[n % len(kinds)],
                        entities=tuple(m["entities"]))  # type: ignore[arg-type]  # fmt: skip
        runtime.memory.store(new, me)
    print(f"stored {n_memories} memories in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    for p in provs:  # storing took minutes: say the sessions are still here (liveness)
        runtime.sessions.touch(str(p.session_id))
    for k in range(8):
        runtime.core.set_core(f"rule.{k}", f"core rule {k}: run make check before pushing service {k}", me, 50 + k)
    runtime.signals.whisper(provs[1], "bench-1", "the deploy of t4 is blocked on review")
    runtime.hygiene.claim(me)
    return runtime, me


def timed(fn: Callable[[], Any], runs: int) -> dict[str, float]:
    fn()  # warm: the tokenizer, caches, SQLite pages
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return {"p50": statistics.median(samples), "p95": pct(samples, 0.95)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--threads", type=int, default=500)
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        runtime, me = populate(Path(tmp), args.memories, args.threads)
        question = next(queries(1))
        full = render_brief(runtime, me)
        rows = {
            "brief full (2,000 tokens)": timed(lambda: render_brief(runtime, me), args.runs),
            "brief query scope": timed(lambda: render_brief(runtime, me, scope="query", query=question), args.runs),
            "now table": timed(render_now, args.runs),
            "baseline: status store report": timed(runtime.status.store_status, args.runs),
            "baseline: thread_context alone": timed(lambda: runtime.threads.context(me, 800), args.runs),
            "baseline: count the brief's tokens": timed(lambda: tokens.count(full.text), args.runs),
        }
        runtime.close()
    print(f"{args.memories} memories, {args.threads} threads; full brief {full.tokens} tokens, "
          f"dropped {[d.section for d in full.dropped]}")  # fmt: skip
    for name, row in rows.items():
        print(f"{name:38} p50 {row['p50']:7.2f} ms   p95 {row['p95']:7.2f} ms")


if __name__ == "__main__":
    main()
