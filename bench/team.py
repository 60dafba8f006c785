"""Team server benchmark: 20 concurrent MCP clients over streamable HTTP, a mixed workload (memory_store,
memory_recall, thread_context, signal_send + signal_inbox), on SQLite with one node (the baseline, same
run), PostgreSQL with one node, and PostgreSQL with two nodes (clients split between them). Prints each
operation's throughput and p50/p95, then the signal wake-up latency across two nodes (a session waiting in
signal_inbox on node b, a send through node a: time from the send's start to the waiter's reply), on
PostgreSQL (LISTEN/NOTIFY) beside two nodes on one SQLite file (its 50 ms poll). And the load average.

PostgreSQL comes from tests/postgres_server.py (THREADLOOM_TEST_POSTGRES_URL, else a pgserver cluster).

    python bench/team.py [--clients 20] [--seconds 20] [--wakeups 20]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import pct  # noqa: E402

from tests.http_server import Served, accepting, client, free_port  # noqa: E402
from tests.postgres_server import cluster, scratch_database  # noqa: E402

TOKEN = "team-bench-token-0123456789abcdef"
OPS = ("memory_store", "memory_recall", "thread_context", "signal_send", "signal_inbox")


@contextmanager
def node(home: Path, repo: Path, url: str | None) -> Iterator[Served]:
    home.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("THREADLOOM_")}
    env |= {"THREADLOOM_HOME": str(home), "THREADLOOM_EMBEDDER": "none", "THREADLOOM_INGEST": "false",
            "THREADLOOM_HTTP_TOKEN": TOKEN, "THREADLOOM_USER": "bench"}  # fmt: skip
    if url:
        env["THREADLOOM_STORE_URL"] = url
    log = home / f"node-{port}.log"
    with log.open("wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "threadloom", "serve", "--http", f"127.0.0.1:{port}"],
            env=env, cwd=repo, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while not accepting(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"node did not start: {log.read_text()[-2000:]}")
            time.sleep(0.1)
        yield Served(port, home, log, TOKEN)
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def headers(sid: str, repo: Path) -> dict[str, str]:
    return {"X-Threadloom-Session-Id": sid, "X-Threadloom-Root": str(repo), "X-Threadloom-Toolset": "full"}


async def workload(nodes: list[Served], repo: Path, clients: int, seconds: float) -> tuple[dict[str, list[float]], int]:
    """Each client loops store, recall, thread_context, send (to the next client), inbox; latencies in ms."""
    times: dict[str, list[float]] = defaultdict(list)
    errors = 0
    async with client(nodes[0], headers("bench-setup", repo)) as setup:
        await setup.call_tool("thread_project", {"action": "create", "title": "Bench"})
    connected, go = 0, anyio.Event()
    deadline = 0.0

    async def one(n: int) -> None:
        nonlocal errors, connected, deadline
        async with client(nodes[n % len(nodes)], headers(f"bench-{n}", repo)) as c:
            await c.call_tool("peers", {})
            connected += 1
            if connected == clients:  # measured from when every client is connected
                deadline = time.monotonic() + seconds
                go.set()
            await go.wait()
            i = 0
            while time.monotonic() < deadline:
                calls: list[tuple[str, dict[str, Any]]] = [
                    ("memory_store", {"content": f"client {n} fact {i}: service {n}-{i} listens on {9000 + i}"}),
                    ("memory_recall", {"query": f"which port does service {n} listen on", "limit": 5}),
                    ("thread_context", {}),
                    ("signal_send", {"to": f"bench-{(n + 1) % clients}", "text": f"step {i} done"}),
                    ("signal_inbox", {}),
                ]
                for name, args in calls:
                    started = time.perf_counter()
                    result = await c.call_tool(name, args)
                    times[name].append((time.perf_counter() - started) * 1000)
                    errors += bool(result.is_error)
                i += 1

    async with anyio.create_task_group() as tg:
        for n in range(clients):
            tg.start_soon(one, n)
    return times, errors


async def wakeups(a: Served, b: Served, repo: Path, count: int) -> tuple[list[float], list[float]]:
    """ms from the start of a send on node a to the reply of an inbox waiting on node b; and the send's own
    call time (its HTTP round trip and write: the floor the wake-up includes)."""
    found: list[float] = []
    sends: list[float] = []
    async with client(a, headers("wake-sender", repo)) as sender, client(b, headers("wake-waiter", repo)) as waiter:
        await sender.call_tool("peers", {})
        await waiter.call_tool("signal_inbox", {})
        for i in range(count):
            sent_at: list[float] = []

            async def wait(sent_at: list[float] = sent_at) -> None:
                await waiter.call_tool("signal_inbox", {"wait_s": 10})
                found.append((time.perf_counter() - sent_at[0]) * 1000)

            async with anyio.create_task_group() as tg:
                tg.start_soon(wait)
                await anyio.sleep(0.3)  # the waiter is waiting
                sent_at.append(time.perf_counter())
                await sender.call_tool("signal_send", {"to": "wake-waiter", "text": f"wake {i}"})
                sends.append((time.perf_counter() - sent_at[0]) * 1000)
    return found, sends


def table(label: str, times: dict[str, list[float]], errors: int, seconds: float) -> list[str]:
    total = sum(len(v) for v in times.values())
    lines = [f"{label:<22} {total / seconds:8.1f} calls/s  errors {errors}"]
    for op in OPS:
        v = times.get(op, [])
        if v:
            lines.append(f"  {op:<18} {len(v) / seconds:8.1f}/s  p50 {pct(v, 0.5):7.1f} ms  p95 {pct(v, 0.95):7.1f} ms")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--wakeups", type=int, default=20)
    args = parser.parse_args()
    lines: list[str] = []
    wake: dict[str, tuple[list[float], list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="team-bench-") as tmp, ExitStack() as stack:
        base = Path(tmp)
        admin = stack.enter_context(_cluster())
        for label, backend, count in (("sqlite, 1 node", None, 1), ("postgres, 1 node", "pg", 1),
                                      ("postgres, 2 nodes", "pg", 2)):  # fmt: skip
            repo = base / label.replace(", ", "-").replace(" ", "") / "repo"
            repo.mkdir(parents=True)
            subprocess.run(["git", "init", "-q", str(repo)], check=True)
            url = stack.enter_context(_database(admin)) if backend else None
            with ExitStack() as nodes_stack:
                home = repo.parent / "home"  # SQLite: one home (one file) for both nodes
                nodes = [nodes_stack.enter_context(node(home if not url else repo.parent / f"home{i}", repo, url))
                         for i in range(count)]  # fmt: skip
                times, errors = anyio.run(workload, nodes, repo, args.clients, args.seconds)
                lines += table(label, times, errors, args.seconds)
                if count == 2:
                    wake["postgres (LISTEN/NOTIFY)"] = anyio.run(wakeups, nodes[0], nodes[1], repo, args.wakeups)
                elif backend is None:  # the baseline: a second node on the same SQLite file
                    second = nodes_stack.enter_context(node(home, repo, None))
                    wake["sqlite (50 ms poll)"] = anyio.run(wakeups, nodes[0], second, repo, args.wakeups)
    print(f"\n{args.clients} clients, {args.seconds:.0f} s each, mixed workload (calls/s, per-call latency)")
    print("\n".join(lines))
    print(f"\nsignal wake-up across two nodes ({args.wakeups} sends): send start -> waiter's reply")
    for label, (v, sends) in wake.items():
        print(f"  {label:<26} p50 {pct(v, 0.5):6.1f} ms  p95 {pct(v, 0.95):6.1f} ms  max {max(v):6.1f} ms"
              f"   (the send call alone: p50 {pct(sends, 0.5):6.1f} ms)")  # fmt: skip
    print(f"\nload average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)")


@contextmanager
def _cluster() -> Iterator[str]:
    yield from cluster()


@contextmanager
def _database(admin: str) -> Iterator[str]:
    yield from scratch_database(admin)


if __name__ == "__main__":
    main()
