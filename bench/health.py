"""What the health report and the self-test cost.

A store is filled through the public paths: memories through `MemoryService.store`, tool calls journaled
with `record_event` as the server journals them (a transaction per 1,000), job runs with `jobs.record_run`.
Then, in the same run:
- `HealthService.report` (what `threadloom stats` and the `health` tool run), p50/p95 over repeats, beside
  `StatusService.store_status` (what `status` runs) on the same store as the baseline;
- a probe run (`run_probe`), beside opening and closing a runtime on a fresh scratch home alone (the part of
  a probe that is not the tool calls).

    .venv/bin/python bench/health.py [--memories 2000] [--calls 100000] [--repeats 15]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).parent))
from measure import pct

from threadloom.clock import now_ms
from threadloom.config import Settings
from threadloom.health.stats import HealthService
from threadloom.memory.model import NewMemory
from threadloom.runtime import open_runtime
from threadloom.server.probe_driver import run_probe
from threadloom.sessions import SessionInfo, record_event
from threadloom.store import jobs
from threadloom.store.base import Writer

TOOLS = ("memory_recall", "memory_store", "thread_context", "signal_inbox", "brief", "status")


def timed(fn: object, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()  # type: ignore[operator]
        out.append((time.perf_counter() - started) * 1000)
    return out


def line(name: str, ms: list[float]) -> str:
    return f"{name:<42} p50 {pct(ms, 0.5):8.1f} ms   p95 {pct(ms, 0.95):8.1f} ms   (n={len(ms)})"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--probes", type=int, default=3)
    args = parser.parse_args()
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(home=Path(tmp) / "home", embedder="none", ingest=False, user="alice")
        rt = open_runtime(settings, "cli")
        try:
            info = SessionInfo(id="bench", vendor="claude", transport="stdio", project=tmp, cwd=tmp, pid=None)
            info = SessionInfo(**{**info.__dict__, "user": "alice", "author": "alice", "org": "alice"})
            rt.sessions.open(info)
            prov = info.provenance()
            started = time.perf_counter()
            for n in range(args.memories):
                rt.memory.store(NewMemory(content=f"fact {n} about {rng.choice(TOOLS)} and item {rng.random()}"), prov)
            filled_memories = time.perf_counter() - started

            def journal(w: Writer, count: int) -> None:
                for _ in range(count):
                    detail = {"tool": rng.choice(TOOLS), "ok": rng.random() > 0.02, "ms": rng.expovariate(1 / 15)}
                    record_event(w, prov, "tool.call", detail, bookkeeping=True)

            for done in range(0, args.calls, 1000):
                batch = min(1000, args.calls - done)
                rt.store.write(lambda w, c=batch: journal(w, c))
            now = now_ms()
            rt.store.write(
                lambda w: [
                    jobs.record_run(
                        w, "memory.maintenance", now - i * 600_000, now - i * 600_000 + 40, False, {"scored": 5}
                    )
                    for i in range(4320)
                ]
            )
            print(
                f"store: {args.memories:,} memories ({filled_memories:.1f} s), {args.calls:,} journaled calls, "
                f"4,320 job runs (30 days at 10 min)"
            )
            health = HealthService(rt.store)
            status = rt.status.store_status
            report = lambda: health.report("alice")  # noqa: E731
            for _ in range(2):
                report(), status()  # warm the page cache for both
            base, measured = [], []
            for _ in range(args.repeats):  # interleaved, so load on this machine hits both alike
                base += timed(status, 1)
                measured += timed(report, 1)
            print(line("baseline: status (StatusService.store_status)", base))
            print(line("health report (stats / health tool)", measured))
        finally:
            rt.close()
        opened, probed = [], []
        for n in range(args.probes):
            home = Path(tmp) / f"scratch{n}"
            started = time.perf_counter()
            open_runtime(Settings(home=home, embedder="none", ingest=False), "cli").close()
            opened.append((time.perf_counter() - started) * 1000)
            run = anyio.run(run_probe, settings)
            assert run.ok, run.as_dict()
            probed.append(run.seconds * 1000)
        print(line("baseline: open + close a fresh runtime", opened))
        print(line("probe run (4 categories, 2 sessions)", probed))


if __name__ == "__main__":
    main()
