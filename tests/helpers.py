"""Shared test helpers: real homes, real server processes, real MCP clients."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcp.client.stdio import StdioServerParameters

from threadloom.daemon import control

PY = sys.executable
# Every home a test made; the session's end checks that no process of ours outlives the run.
HOMES: list[Path] = []

# What `THREADLOOM_TOOLSET=default` lists, in order.
DEFAULT_TOOLS = (
    "status",
    "brief",
    "memory_store",
    "memory_recall",
    "memory_amend",
    "thread_context",
    "thread_create",
    "thread_summary",
    "thread_note",
    "thread_status",
    "thread_project",
    "signal_send",
    "signal_inbox",
)


def new_home() -> Path:
    home = Path(tempfile.mkdtemp(prefix="tl", dir="/tmp"))
    HOMES.append(home)
    return home


# How a test runs the real stdio server: bridged to the daemon, or in one process.
MODES: dict[str, tuple[str, ...]] = {"bridge": (), "in-process": ("--in-process",)}


def env_for(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("THREADLOOM_")}
    env["THREADLOOM_HOME"] = str(home)
    env["COLUMNS"] = "200"  # rich wraps tables at 80 columns when not on a terminal
    env["THREADLOOM_EMBEDDER"] = "none"  # tests that want the model ask for it; the rest stay light
    env["THREADLOOM_INGEST"] = "false"  # never the machine's own transcripts; ingest tests turn it on
    env.update(extra)
    return env


def serve_params(home: Path, *args: str, **extra_env: str) -> StdioServerParameters:
    return StdioServerParameters(command=PY, args=["-m", "threadloom", "serve", *args], env=env_for(home, **extra_env))


def cli(home: Path, *args: str, timeout: float = 60, **extra_env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "threadloom", *args],
        env=env_for(home, **extra_env),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def wait_for(condition: Callable[[], Any], timeout: float = 20.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def daemon_pid(home: Path) -> int | None:
    try:
        return int(json.loads((home / "daemon.json").read_text())["pid"])
    except (FileNotFoundError, ValueError, KeyError):
        return None


def processes_using(home: Path) -> list[int]:
    """Pids of live processes whose environment names `home` as THREADLOOM_HOME."""
    needle = f"THREADLOOM_HOME={home}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0") and control.pid_alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def stop_everything(home: Path) -> None:
    control.stop(home / "daemon.sock", wait_s=5)
    for pid in processes_using(home):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def structured(result: Any) -> dict[str, Any]:
    assert result.structured_content is not None, result
    return dict(result.structured_content)


class RawSession:
    """A hand-driven JSON-RPC session over a server's stdio, for messages no SDK client would send."""

    def __init__(self, home: Path, *args: str, command: list[str] | None = None, **extra_env: str) -> None:
        self.proc = subprocess.Popen(
            command or [PY, "-m", "threadloom", "serve", *args],
            env=env_for(home, **extra_env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self._next_id = 0

    def send_line(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, "the server closed its stdout"
        return dict(json.loads(line))

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self._next_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send_line(json.dumps(message).encode())
        while True:
            reply = self.read()
            if reply.get("id") == self._next_id:
                return reply

    def initialize(self) -> dict[str, Any]:
        reply = self.request(
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw-test", "version": "1"}},
        )
        self.send_line(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        return reply

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=20)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            for stream in (self.proc.stdout, self.proc.stderr):
                if stream is not None:
                    stream.close()


def count_rows(home: Path, table: str) -> int:
    from threadloom.store.sqlite import SqliteStore

    store = SqliteStore(home / "threadloom.db")
    try:
        return int(store.read(lambda r: r.scalar(f"SELECT COUNT(*) FROM {table}")))
    finally:
        store.close()
