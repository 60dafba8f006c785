"""The daemon's memory guard: what one look costs, and the daemon's resident memory over a busy run, with and
without the embedding model, and after the guard unloads it.

    .venv/bin/python bench/guard.py [--calls 300]

Each side is a real daemon in a fresh home, driven through a real bridge (`threadloom serve`) with
memory_store and memory_recall calls; resident memory is the guard's own reading (`daemon status`). The
baseline for a look's cost is the same loop calling a function that does nothing, in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from measure import pct

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from threadloom.daemon import control  # noqa: E402


class Bridge:
    """One agent session: `threadloom serve` spoken to in JSON lines."""

    def __init__(self, home: Path, **env: str) -> None:
        full = {k: v for k, v in os.environ.items() if not k.startswith("THREADLOOM_")}
        full |= {"THREADLOOM_HOME": str(home), "THREADLOOM_INGEST": "false", **env}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "threadloom", "serve"], env=full, stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        self.next = 0
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}
        self.request("initialize", init)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next += 1
        self.send({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params})
        assert self.proc.stdout is not None
        while True:
            reply = json.loads(self.proc.stdout.readline())
            if reply.get("id") == self.next:
                return dict(reply)

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return self.request("tools/call", {"name": name, "arguments": arguments})["result"]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def guard(home: Path) -> dict[str, Any]:
    reply = control.request(home / "daemon.sock", "status")
    assert reply is not None, "no daemon answered"
    return dict(reply["guard"])


def busy_run(home: Path, calls: int, **env: str) -> dict[str, Any]:
    """Calls through one session; the daemon's resident memory idle, then sampled every 25 calls."""
    bridge = Bridge(home, **env)
    try:
        idle = guard(home)["resident_mb"]
        samples, started = [], time.perf_counter()
        for n in range(calls):
            bridge.call("memory_store", {"content": f"Decision {n}: the release checklist moved to docs/r{n}.md"})
            bridge.call("memory_recall", {"query": f"where is release checklist {n % 17}"})
            if n % 25 == 0:
                samples.append(guard(home)["resident_mb"])
        seconds = time.perf_counter() - started
        if env.get("THREADLOOM_EMBEDDER") == "local":  # the model loads on the first call: wait until it serves
            deadline = time.monotonic() + 120
            while bridge.call("status", {})["structuredContent"]["search"]["mode"] != "hybrid":
                if guard(home)["model_unloaded"]:
                    break
                if time.monotonic() > deadline:
                    raise SystemExit("the model never loaded")
                time.sleep(0.5)
            for n in range(25):
                bridge.call("memory_recall", {"query": f"where is release checklist {n}"})
        report = guard(home)
        return {
            "idle": idle,
            "samples": samples,
            "end": report["resident_mb"],
            "peak": report["peak_mb"],
            "seconds": seconds,
            "report": report,
        }
    finally:
        bridge.close()
        control.stop(home / "daemon.sock")


def tick_cost(rounds: int) -> tuple[float, float]:
    """One guard look (VmRSS read, log size check, cap compared) against an empty call, microseconds p50."""
    from threadloom.daemon import logs
    from threadloom.search.embedders import resident_mb

    def look() -> None:
        logs.rotate_if_due(Path("/nonexistent/daemon.log"), 1 << 30, 3)
        resident_mb()

    def nothing() -> None:
        return None

    timings: dict[str, list[float]] = {"look": [], "nothing": []}
    for _ in range(rounds):
        for name, fn in (("look", look), ("nothing", nothing)):
            t = time.perf_counter()
            fn()
            timings[name].append((time.perf_counter() - t) * 1e6)
    return pct(timings["look"], 0.5), pct(timings["nothing"], 0.5)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    look, nothing = tick_cost(2000)
    print(
        f"one guard look: p50 {look:.1f} us (an empty call: {nothing:.2f} us); every 2 s that is "
        f"{look / 2e6 * 100:.4f}% of one core"
    )
    with tempfile.TemporaryDirectory(prefix="tlbench") as tmp:
        runs = {}
        for name, env in (
            ("no model (THREADLOOM_EMBEDDER=none)", {"THREADLOOM_EMBEDDER": "none"}),
            ("model loaded (local e5-small)", {"THREADLOOM_EMBEDDER": "local"}),
            (
                "guard off, no model (cap 0: baseline)",
                {"THREADLOOM_EMBEDDER": "none", "THREADLOOM_DAEMON_MEMORY_MB": "0"},
            ),
        ):
            home = Path(tmp) / str(len(runs))
            runs[name] = busy_run(home, args.calls, **env)
        loaded = runs["model loaded (local e5-small)"]
        cap = loaded["end"] - 60
        home = Path(tmp) / "capped"
        runs[f"model, cap {cap} MB (guard unloads it)"] = busy_run(
            home, args.calls, THREADLOOM_EMBEDDER="local", THREADLOOM_DAEMON_MEMORY_MB=str(cap)
        )
        capped = runs[f"model, cap {cap} MB (guard unloads it)"]["report"]
    print(f"\ndaemon resident memory over {args.calls} store+recall pairs (MB; sampled every 25 pairs):")
    print(f"  {'run':<42}{'idle':>6}{'median':>8}{'end':>6}{'peak':>6}{'pairs/s':>9}")
    for name, r in runs.items():
        median = sorted(r["samples"])[len(r["samples"]) // 2]
        print(f"  {name:<42}{r['idle']:>6}{median:>8}{r['end']:>6}{r['peak']:>6}{args.calls / r['seconds']:>9.1f}")
    print(
        f"\nguard over the capped run: state {capped['state']}, restarts {capped['restarts_recent']}, "
        f"unloaded: {bool(capped['model_unloaded'])}"
    )


if __name__ == "__main__":
    main()
