"""Thread context benchmark: assembling the context of a 5-deep chain in a project of 2,000 threads.

The threads are real files in a temporary git repository; the session's cursor points at the
deepest thread of the chain. Warm: repeated calls in one process. Cold: the first call in a fresh
process. Baseline in the same run: reading and parsing every thread file, which is what a context
built from the whole tree would cost.

Served (`--served-runs`, 0 to skip): the MCP calls a session makes, through a real in-process server
over stdio: `thread_context` (and the size of its reply in cl100k tokens), a thread write
(`thread_summary`) and `status` as the baseline, each measured for this checkout and, side by side,
for this checkout without the commit `--change` (default: the bounded outline and the file cache),
on the same files. The first call of each server is shown apart: it
parses every thread file once.

    python bench/threads.py [--threads 2000] [--depth 5] [--runs 200] [--served-runs 30] [--change REV]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import pct
from served import served_comparison

from threadloom.identity import Provenance
from threadloom.search.engine import SearchEngine
from threadloom.store.sqlite import open_store
from threadloom.threads.files import ThreadFiles, parse
from threadloom.threads.model import Summary, Thread
from threadloom.threads.service import ThreadService

CHANGE = "d5a1995"  # thread_context's bounded outline and the file cache, resume, the project switch
PROV = Provenance(session_id="bench", vendor="other", project=None)
SUMMARY = (
    "## Decisions\n- {t}: chose the simple path, measured first\n- keep the API stable\n"
    "## Constraints\n- no new services\n## State\n- {t} half done\n## Next steps\n- finish {t}\n"
)


def build(repo: Path, n: int, depth: int) -> str:
    """A project with `n` threads: a chain `depth` deep from the root, the rest hung at random."""
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    store = open_store(repo.parent / "bench.db")
    service = ThreadService(store, SearchEngine(store))
    prov = Provenance(session_id="bench", vendor="other", project=str(repo))
    service.create_project(prov, "Bench")
    files = ThreadFiles(repo, "bench")
    rng = random.Random(3)
    ids = ["main"]
    now = int(time.time() * 1000)
    with files.locked():
        for i in range(1, n):
            parent = ids[i - 1] if i < depth else rng.choice(ids)
            tid = f"t{i}"
            files.write(
                Thread(tid, f"Topic {i}", parent, "active", "bench", now, now, Summary.parse(SUMMARY.format(t=tid)))
            )
            ids.append(tid)
    deepest = f"t{depth - 1}"
    service.switch(prov, deepest)
    store.close()
    return deepest


def measure(repo: Path, runs: int) -> list[float]:
    store = open_store(repo.parent / "bench.db")
    service = ThreadService(store, SearchEngine(store))
    prov = Provenance(session_id="bench", vendor="other", project=str(repo))
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        context = service.context(prov)
        times.append(time.perf_counter() - started)
    assert len(context.threads) >= 5, context.threads
    store.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2000)
    parser.add_argument("--depth", type=int, default=5)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--served-runs", type=int, default=30)
    parser.add_argument(
        "--change", default=CHANGE, help="the commit to compare without (before: this checkout without it)"
    )
    parser.add_argument("--cold", type=Path, help=argparse.SUPPRESS)  # internal: one first call, in a fresh process
    args = parser.parse_args()
    if args.cold:
        print(json.dumps(measure(args.cold, 1)[0]))
        return
    with tempfile.TemporaryDirectory(prefix="tlthreads") as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        deepest = build(repo, args.threads, args.depth)
        warm = measure(repo, args.runs)
        cold = [
            float(subprocess.run([sys.executable, __file__, "--cold", str(repo)], capture_output=True, text=True,
                                 check=True).stdout)
            for _ in range(5)
        ]  # fmt: skip
        full = []
        for _ in range(5):
            started = time.perf_counter()
            texts, _ = ThreadFiles(repo, "bench").files.read_folder(".threadloom/threads/bench", ".md")
            [parse(text, name[:-3]) for name, text in texts.items()]  # what a load without the cache costs
            full.append(time.perf_counter() - started)
        table = served_comparison(repo, Path(tmp), deepest, args.change, args.served_runs) if args.served_runs else []
    print(f"context of a {args.depth}-deep chain among {args.threads:,} threads:")
    print(
        f"  warm: p50 {statistics.median(warm) * 1000:.2f} ms, p95 {pct(warm, 0.95) * 1000:.2f} ms ({args.runs} calls)"
    )
    print(
        f"  cold: p50 {statistics.median(cold) * 1000:.2f} ms, p95 {pct(cold, 0.95) * 1000:.2f} ms"
        " (the first call in each of 5 fresh processes)"
    )
    print(f"  baseline, reading and parsing every thread file: p50 {statistics.median(full) * 1000:.1f} ms")
    print("  anchor: ThreadMind's context_get, 2.2 ms median on a 3-level chain in a tiny project (issue 5)")
    print("\n".join(table))


if __name__ == "__main__":
    main()
