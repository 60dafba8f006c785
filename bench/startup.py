"""Start-up benchmark: how fast a new agent session gets its tools, and what it costs in memory.

Run as `python bench/startup.py [--runs N]` with the python of the environment threadloom is
installed in. Every figure is compared with a minimal MCP server on the same SDK, measured in the
same run by the same hand-written JSON-RPC client over raw pipes (so no client import is counted).
It uses a fresh temporary THREADLOOM_HOME (holding a private bytecode cache, so that
PYTHONDONTWRITEBYTECODE in the caller's environment does not make every start compile its imports)
and stops its daemon at the end. It always exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

PROTOCOL_VERSION = "2025-11-25"
SESSION_TIMEOUT_S = 60.0
MINIMAL_SERVER = """\
from mcp.server.mcpserver import MCPServer

s = MCPServer("min")


@s.tool()
def ping() -> str:
    return "pong"


s.run()
"""

_spawned: list[subprocess.Popen[bytes]] = []


class Session:
    """One MCP session over stdio: `initialize`, `notifications/initialized`, `tools/list`; held open until exit."""

    def __init__(self, cmd: list[str], env: dict[str, str]) -> None:
        self.cmd, self.env = cmd, env
        self.elapsed = 0.0
        self.tools: list[str] = []
        self._proc: subprocess.Popen[bytes] | None = None
        self._watchdog: threading.Timer | None = None

    @property
    def pid(self) -> int:
        assert self._proc is not None
        return self._proc.pid

    def __enter__(self) -> Session:
        try:
            start = time.perf_counter()
            proc = subprocess.Popen(self.cmd, env=self.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            self._proc = proc
            _spawned.append(proc)
            self._watchdog = threading.Timer(SESSION_TIMEOUT_S, proc.kill)
            self._watchdog.start()
            client = {"name": "startup-bench", "version": "0"}
            params = {"protocolVersion": PROTOCOL_VERSION, "capabilities": {}, "clientInfo": client}
            self._send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
            self._reply(1)
            self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            self._send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
            listed = self._reply(2)
            self.elapsed = time.perf_counter() - start
            self.tools = [t["name"] for t in listed.get("tools", [])]
            if not self.tools:
                raise RuntimeError(f"{self.cmd}: tools/list returned no tools")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _send(self, message: dict[str, Any]) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        self._proc.stdin.write(json.dumps(message).encode() + b"\n")
        self._proc.stdin.flush()

    def _reply(self, msg_id: int) -> dict[str, Any]:
        assert self._proc is not None and self._proc.stdout is not None
        while line := self._proc.stdout.readline():
            message = json.loads(line)
            if message.get("id") == msg_id:
                if "result" not in message:
                    raise RuntimeError(f"{self.cmd}: request {msg_id} failed: {message.get('error')}")
                result: dict[str, Any] = message["result"]
                return result
        timed_out = self._watchdog is not None and self._watchdog.finished.is_set()
        why = f"was killed after {SESSION_TIMEOUT_S:.0f}s" if timed_out else f"exited with {self._proc.wait(10)}"
        raise RuntimeError(f"{self.cmd}: the server {why} before answering request {msg_id}")

    def close(self) -> None:
        proc = self._proc
        if proc is None:
            return
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        if self._watchdog is not None:
            self._watchdog.cancel()


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def timed(cmd: list[str], env: dict[str, str]) -> float:
    with Session(cmd, env) as session:
        return session.elapsed


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[18]


class Bench:
    def __init__(self, runs: int, cold_runs: int) -> None:
        self.runs, self.cold_runs = runs, cold_runs
        self.home = Path(tempfile.mkdtemp(prefix="tlb", dir="/tmp"))
        drop = ("THREADLOOM_", "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")
        env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
        # Every server gets bytecode caching, as an installed package has, in a private cache that the
        # warm-up fills. The idle timeout only matters if this script dies before stopping its daemon.
        extra = {"PYTHONPYCACHEPREFIX": str(self.home / "pycache"), "THREADLOOM_DAEMON_IDLE_TIMEOUT": "300"}
        self.env = dict(env, THREADLOOM_HOME=str(self.home), **extra)
        exe = shutil.which("threadloom", path=str(Path(sys.executable).parent))
        if exe is None:
            raise SystemExit(f"no threadloom console script next to {sys.executable}")
        self.tl = exe
        self.bridge = [exe, "serve"]
        self.in_process = [exe, "serve", "--in-process"]
        script = self.home / "minimal_server.py"
        script.write_text(MINIMAL_SERVER)
        self.minimal = [sys.executable, str(script)]

    def stop_daemon(self) -> None:
        subprocess.run(
            [self.tl, "daemon", "stop"], env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30
        )

    def daemon_pid(self) -> int:
        return int(json.loads((self.home / "daemon.json").read_text())["pid"])

    def measure(self) -> dict[str, float]:
        r: dict[str, float] = {}
        for cmd in (self.bridge, self.in_process, self.minimal):  # warm the daemon and the .pyc caches
            timed(cmd, self.env)
        warm: list[float] = []
        base: list[float] = []
        inproc: list[float] = []
        for _ in range(self.runs):  # interleaved, so that drift in the machine's load hits all alike
            warm.append(timed(self.bridge, self.env))
            base.append(timed(self.minimal, self.env))
            inproc.append(timed(self.in_process, self.env))
        cold: list[float] = []
        cold_base: list[float] = []
        for _ in range(self.cold_runs):
            self.stop_daemon()
            cold.append(timed(self.bridge, self.env))
            cold_base.append(timed(self.minimal, self.env))
        r.update(warm_med=statistics.median(warm), warm_p95=p95(warm), base_med=statistics.median(base))
        r.update(base_p95=p95(base), cold_med=statistics.median(cold), inproc_med=statistics.median(inproc))
        r.update(cold_base_med=statistics.median(cold_base))
        with Session(self.bridge, self.env) as s:
            r["bridge_rss"] = rss_mb(s.pid)
        with Session(self.minimal, self.env) as s:
            r["base_rss"] = rss_mb(s.pid)
        with Session(self.in_process, self.env) as s:
            r["inproc_rss"] = rss_mb(s.pid)
        with contextlib.ExitStack() as stack:
            for _ in range(10):
                stack.enter_context(Session(self.bridge, self.env))
            r["daemon_rss"] = rss_mb(self.daemon_pid())
        r["daemon_idle_rss"] = rss_mb(self.daemon_pid())
        bridges = [p for p in _spawned if p.args == self.bridge]
        r["bridges"], r["bridges_failed"] = len(bridges), sum(p.returncode != 0 for p in bridges)
        return r

    def cleanup(self) -> None:
        with contextlib.suppress(Exception):
            self.stop_daemon()
        for proc in _spawned:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        # The daemon runs in its own session; anything still carrying our home in its environment is ours.
        marker = f"THREADLOOM_HOME={self.home}".encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            with contextlib.suppress(OSError):
                if marker in (entry / "environ").read_bytes().split(b"\0"):
                    os.kill(int(entry.name), signal.SIGKILL)
        shutil.rmtree(self.home, ignore_errors=True)


def verdict(value: float, limit: float) -> str:
    return "PASS" if value <= limit else "MISS"


def report(r: dict[str, float], runs: int, cold_runs: int) -> None:
    rows: list[tuple[str, str, str, str, str, str]] = []

    def row(name: str, ours: float, base: float, unit: str, target: str, result: str) -> None:
        fmt = "{:.3f} s" if unit == "s" else "{:.1f} MB"
        rows.append((name, fmt.format(ours), fmt.format(base), f"{ours / base:.2f}x", target, result))

    warm, warm_p95 = r["warm_med"], r["warm_p95"]
    row(f"warm session, median of {runs}", warm, r["base_med"], "s", "<= 0.150 s", verdict(warm, 0.15))
    row(f"warm session, p95 of {runs}", warm_p95, r["base_p95"], "s", "<= 0.150 s", verdict(warm_p95, 0.15))
    cold, cold_base = r["cold_med"], r["cold_base_med"]
    row(f"cold first session, median of {cold_runs}", cold, cold_base, "s", "<= 1.25x", verdict(cold / cold_base, 1.25))
    row(f"serve --in-process, median of {runs}", r["inproc_med"], r["base_med"], "s", "-", "info")
    row("bridge RSS, session open", r["bridge_rss"], r["base_rss"], "MB", "<= 25 MB", verdict(r["bridge_rss"], 25))
    row("daemon RSS, 10 sessions open", r["daemon_rss"], r["base_rss"], "MB", "-", "info")
    row("daemon RSS, sessions closed", r["daemon_idle_rss"], r["base_rss"], "MB", "-", "info")
    row("serve --in-process RSS", r["inproc_rss"], r["base_rss"], "MB", "-", "info")
    header = ("measure", "threadloom", "baseline", "ratio", "target", "result")
    widths = [max(len(line[i]) for line in (header, *rows)) for i in range(len(header))]
    for line in (header, tuple("-" * w for w in widths), *rows):
        first, *rest = line
        print("  ".join([first.ljust(widths[0]), *(c.rjust(w) for c, w in zip(rest, widths[1:], strict=True))]))
    print()
    print("baseline: a minimal MCPServer with one tool, run by the same python; timed spawn -> tools/list reply")
    print(f"  (each baseline run interleaved with the threadloom run it is compared with; cold: {cold_runs} runs)")
    failed, bridges = int(r["bridges_failed"]), int(r["bridges"])
    print(f"bridge sessions that exited non-zero after the client closed stdin: {failed} of {bridges}")
    cpus = os.cpu_count()
    print(
        f"machine: nproc={len(os.sched_getaffinity(0))} (cpu_count={cpus}), python {platform.python_version()}, "
        f"mcp {version('mcp')}, threadloom {version('threadloom')}, {platform.platform()}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=15, help="warm runs per server (at least 10; default 15)")
    parser.add_argument("--cold-runs", type=int, default=5, help="cold-daemon runs (at least 5; default 5)")
    args = parser.parse_args()
    runs, cold_runs = max(args.runs, 10), max(args.cold_runs, 5)
    bench = Bench(runs, cold_runs)
    try:
        results = bench.measure()
    except Exception as exc:  # noqa: BLE001 - a benchmark reports its failure and still exits 0
        print(f"benchmark failed: {exc!r}", file=sys.stderr)
        with contextlib.suppress(OSError):
            tail = (bench.home / "daemon.log").read_text().splitlines()[-20:]
            print("daemon.log (last lines):", *tail, sep="\n  ", file=sys.stderr)
        return 0
    finally:
        bench.cleanup()
    report(results, runs, cold_runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
