"""Transcript ingest throughput end to end: generated Claude Code sessions read by `Ingester.run` into a
real store (messages, their search documents with full-text and term counts, cursors; secrets scrubbed;
embedding deferred to the background job), in messages per second of wall and CPU time.

Baseline in the same run, on the same files: the parse alone (`Source.parse` to the end of every file, as
ingest calls it), which ingest cannot beat. Also measured: ingest with scrubbing off, and the daemon's idle
poll (a pass over the same files when nothing changed: one `stat` each). The target is >= 5,000 messages/s
on a 2-core machine.

    python bench/ingest.py [--messages 100000] [--files 50]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from transcripts import claude_lines

from threadloom.ingest import IngestConfig, Ingester
from threadloom.ingest.service import BATCH_BYTES
from threadloom.store.sqlite import open_store
from threadloom.transcripts import ClaudeCode


def generate(home: Path, messages: int, files: int) -> int:
    """`files` sessions of Claude Code, 4 messages a turn; the bytes written."""
    turns = max(1, messages // 4 // files)
    written = 0
    for f in range(files):
        path = home / ".claude" / "projects" / f"-home-ada-src-p{f % 7}" / f"session-{f:04d}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = []
        for record in claude_lines(turns):
            record = record | {"uuid": f"f{f}-{record['uuid']}", "sessionId": f"session-{f:04d}"}
            lines.append(json.dumps(record))
        data = "\n".join(lines) + "\n"
        path.write_text(data)
        written += len(data)
    return written


def timed(fn: Callable[[], int]) -> tuple[int, float, float]:
    """`fn()`, its wall time and this process's CPU time (every thread's)."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def parse_only(home: Path) -> int:
    source, count = ClaudeCode(), 0
    for path in source.discover(home):
        cursor = None
        while True:
            result = source.parse(path, cursor, budget=BATCH_BYTES)
            count += len(result.messages)
            if result.cursor is None or not result.more:
                break
            cursor = result.cursor
    return count


def ingest(home: Path, db: Path, scrub: bool) -> int:
    store = open_store(db)
    try:
        report = Ingester(store, IngestConfig("ada", home, {}, scrub=scrub)).run()
        return report.added
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--files", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tl-ingest-") as tmp:
        home = Path(tmp) / "u"
        size = generate(home, args.messages, args.files)
        print(f"{args.files} Claude Code sessions, {size / 2**20:.1f} MiB; load average {os.getloadavg()[0]:.1f}")
        runs = {
            "parse only (baseline)": lambda: parse_only(home),
            "ingest, secrets scrubbed (default)": lambda: ingest(home, Path(tmp) / "a.db", scrub=True),
            "ingest, scrubbing off": lambda: ingest(home, Path(tmp) / "b.db", scrub=False),
        }
        for name, run in runs.items():
            n, w, c = timed(run)
            print(f"{name:36} {n:>8,} messages {w:6.2f} s wall {n / w:>7,.0f}/s {c:6.2f} s CPU {n / c:>7,.0f}/s")
        store = open_store(Path(tmp) / "a.db")
        try:
            ingester = Ingester(store, IngestConfig("ada", home, {}))
            polls = []
            for _ in range(5):
                added, w, _ = timed(lambda: ingester.run().added)
                assert added == 0
                polls.append(w)
        finally:
            store.close()
        polls.sort()
        median, worst = polls[2] * 1000, polls[-1] * 1000
        print(f"idle poll over {args.files} unchanged files: median {median:.1f} ms, max {worst:.1f} ms")


if __name__ == "__main__":
    main()
