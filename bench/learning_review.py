"""Learning review benchmark: spawns, tokens and wall clock per candidate-reviewer pass (learning/evolve.py,
learning/reviewer.py), with the fake agent CLI (tests/fake_agent.py) as the reviewer: it lists the candidates
through a real threadloom server, accepts one as a lesson, and prints a usage line as Claude Code's JSON
result does (`--tokens` per child). The tokens are what the tasks table recorded from that line, summed per
pass; the budget (`--budget` tokens in 24 h per loop) is applied on the pass after it is spent.

Baseline, same run: a bare spawn of the same fake agent through the same machinery (no tool call), and the
pass's own bookkeeping without a child (the gather, lease and record of an idle pass).

    python bench/learning_review.py [--passes 4] [--candidates 40] [--tokens 12000] [--budget 30000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.spawning import FAKE
from threadloom.config import Settings
from threadloom.coordination.spawn import SpawnConfig, SpawnService
from threadloom.identity import Provenance
from threadloom.learning import candidates as queue
from threadloom.learning.evolve import WRITES, EvolveJob
from threadloom.learning.reviewer import REVIEW, candidates
from threadloom.runtime import Runtime, open_runtime
from threadloom.sessions import SessionInfo
from threadloom.store import jobs


def seed(runtime: Runtime, n: int, offset: int) -> int:
    def write(w: object) -> int:
        first = 0
        for i in range(offset, offset + n):
            text = f"Next time, always run check number {i} before pushing."
            c = queue.NewCandidate("ana", "rule", "en", text, "message", f"bench:{i}", 0, None, None, None)
            got = queue.insert(w, c, None, None, 1)  # type: ignore[arg-type]
            first = first or (got or 0)
        return first

    return int(runtime.store.write(write))


def wait(spawner: SpawnService, task: str) -> dict[str, object]:
    while True:
        row = spawner.status(task)
        if row["status"] not in ("starting", "running"):
            return row
        time.sleep(0.1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--passes", type=int, default=4)
    ap.add_argument("--candidates", type=int, default=40)
    ap.add_argument("--tokens", type=int, default=12_000)
    ap.add_argument("--budget", type=int, default=30_000)
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="tl-bench-review"))
    os.environ["THREADLOOM_HOME"] = str(home)
    runtime = open_runtime(Settings(home=home, embedder="none", ingest=False, user="ana"), "cli")
    env = {"THREADLOOM_HOME": str(home), "THREADLOOM_EMBEDDER": "none", "THREADLOOM_INGEST": "false",
           "HOME": str(home)}  # fmt: skip
    loop = replace(REVIEW, daily_tokens=args.budget)
    try:
        # Baseline: a bare spawn of the same agent, and an idle pass (nothing to review).
        bare = SpawnService(runtime.store, home, SpawnConfig(command=FAKE, grace_s=1.0, extra_env=env))
        info = SessionInfo("bench-parent", "other", "job", str(home), str(home), os.getpid(), user="ana")
        runtime.sessions.open(info)
        prov = Provenance(info.id, "other", str(home), user="ana")
        began = time.perf_counter()
        wait(bare, str(bare.spawn(prov, "finished", role="bench-bare", timeout_s=120)["id"]))
        bare_s = time.perf_counter() - began
        idle_job = EvolveJob(runtime.store, home, SpawnConfig(command=FAKE, extra_env=env), "ana",
                             replace(loop, name="bench.idle"), candidates, agent="custom")  # fmt: skip
        idle = []
        for _ in range(20):
            began = time.perf_counter()
            did = idle_job.run(force=True).did
            idle.append(time.perf_counter() - began)
            assert did == "idle", did
        print(
            f"baseline: bare spawn of the fake agent to its exit {bare_s:.2f} s; a pass's own work (gather "
            f"{args.candidates} candidates, lease, spawn call, record) median {statistics.median(idle) * 1000:.1f} ms"
        )
        print(
            f"budget: {loop.daily_spawns} children and {args.budget:,} tokens per loop and user in 24 h; "
            f"deadline {loop.deadline_s:.0f} s per child"
        )
        print("pass  did          candidates  spawns  tokens  writes  seconds")
        for n in range(args.passes):
            first = seed(runtime, args.candidates, n * args.candidates)
            script = "\n".join([
                'tool learning_candidates {"limit": 5}',
                f"tool learning_accept {json.dumps({'id': first, 'into': 'lesson'})}",
                f"usage {args.tokens} 0.05",
            ])  # fmt: skip
            config = SpawnConfig(command=FAKE, grace_s=1.0, extra_env=env | {"FAKE_AGENT_SCRIPT": script})
            job = EvolveJob(runtime.store, home, config, "ana", loop, candidates, agent="custom")
            began = time.perf_counter()
            report = job.run(force=True)
            tokens = writes = 0
            if report.task is not None:
                row = wait(job.spawner, report.task)
                tokens = int(row["tokens"] or 0)  # type: ignore[call-overload]
                writes = runtime.store.read(partial(jobs.cursor, name=WRITES + report.task))
            took = time.perf_counter() - began
            spawns = 1 if report.task else 0
            print(
                f"{n + 1:>4}  {report.did:<12} {report.items:>10}  {spawns:>6}  {tokens:>6}  {writes:>6}  {took:7.2f}"
            )
    finally:
        runtime.close()


if __name__ == "__main__":
    main()
