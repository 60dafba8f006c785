"""The daemon guards itself, with real processes: its resident memory held to a cap (the model unloaded and said
so, then a clean restart that its sessions ride through), a client that never reads dropped while others are
served, a job killed with -9 taken up again at once from its cursor, its log rotated; and a bystander process
that looks like a threadloom daemon survives all of it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import PY, RawSession, cli, count_rows, daemon_pid, env_for, wait_for
from tests.test_ingest import PROJECT, claude_file, line
from threadloom.clock import now_ms
from threadloom.coordination import processes
from threadloom.daemon import control, protocol
from threadloom.store.sqlite import SqliteStore

# Three restarts of a whole daemon, a model loaded twice: minutes on a loaded machine, not seconds.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
BYSTANDER = "import sys, time; hold = bytearray(64 << 20); print('up', flush=True); time.sleep(600)"


def status(home: Path) -> dict[str, Any] | None:
    return control.request(home / "daemon.sock", "status")


def guard_of(home: Path) -> dict[str, Any] | None:
    reply = status(home)
    return reply["guard"] if reply else None


def log_text(home: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in sorted(home.glob("daemon.log*")))


def tool(raw: RawSession, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    reply = raw.request("tools/call", {"name": name, "arguments": arguments})
    result = reply["result"]
    assert result["isError"] is False, reply
    return dict(result["structuredContent"])


def start_bystander(home: Path) -> tuple[subprocess.Popen[bytes], int]:
    """A process of the test's, not threadloom's, that looks like a daemon of this home to anything that would
    go by name, environment or memory: `threadloom daemon run` in its command line, THREADLOOM_HOME set, 64 MB."""
    env = env_for(home)
    proc = subprocess.Popen([PY, "-c", BYSTANDER, "-m", "threadloom", "daemon", "run"], env=env, stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"up\n"
    start = processes.start_time(proc.pid)
    assert start is not None
    return proc, start


def test_over_a_tiny_cap_the_model_goes_then_the_daemon_restarts_and_sessions_go_on(home: Path) -> None:
    bystander, started = start_bystander(home)
    raw = RawSession(home, THREADLOOM_DAEMON_MEMORY_MB="32", THREADLOOM_TOOLSET="full")
    try:
        raw.initialize()
        first = tool(raw, "status", {})
        session = first["session"]["id"]
        # Over 32 MB from its first breath: model kept out, then restarts (exec, same pid), at most 3 in 10 min.
        guard = wait_for(
            lambda: (g := guard_of(home)) and g["state"] == "over the cap, restarts used up" and g,
            timeout=180,
            what="the guard to use up its restarts",
        )
        assert guard["cap_mb"] == 32 and guard["resident_mb"] > 32
        assert guard["restarts_recent"] == 3 and guard["last_restart"]["cap_mb"] == 32
        assert "memory guard keeps the embedding model out" in guard["model_unloaded"]  # none was loaded
        text = log_text(home)
        assert text.count("restarting the daemon") == 3
        assert text.count("a fresh daemon takes over") == 3
        assert "not restarting again (raise THREADLOOM_DAEMON_MEMORY_MB)" in text
        shown = cli(home, "daemon", "status").stdout
        assert "(peak" in shown and "cap 32 MB): over the cap, restarts used up" in shown
        assert "memory guard keeps the embedding model out" in shown
        # The same session, reconnected by its bridge, sees it all: status, search, health.
        after = tool(raw, "status", {})
        assert after["session"]["id"] == session
        assert after["server"]["guard"]["state"] == "over the cap, restarts used up"
        assert after["search"]["mode"] == "full-text" and "memory guard" in after["search"]["why"]
        tool(raw, "memory_store", {"content": "The release checklist lives in docs/RELEASE.md"})
        recalled = tool(raw, "memory_recall", {"query": "release checklist"})
        assert recalled["memories"]
        assert any("memory guard keeps the embedding model out" in c for c in recalled["caveats"])
        health = tool(raw, "health", {})
        assert health["daemon_guard"]["model_unloaded"]
    finally:
        raw.close()
        alive = processes.running(bystander.pid, started)
        bystander.kill()
        bystander.wait()
        assert bystander.stdout is not None
        bystander.stdout.close()
    assert alive, "the guard touched a process it did not start"


def test_the_model_is_unloaded_over_the_cap_and_searches_say_so(home: Path) -> None:
    env = {"THREADLOOM_EMBEDDER": "local"}
    query = {"query": "anything at all", "env": {}, "cwd": "/", "k": 3}

    def recall_with_model() -> dict[str, Any]:
        reply = control.request(home / "daemon.sock", "recall", timeout=120, **query)
        assert reply is not None and reply["ok"], (reply, log_text(home)[-3000:])
        return reply

    raw = RawSession(home, **env)
    try:
        raw.initialize()
        assert recall_with_model()["search"]["mode"] == "hybrid"
        loaded = guard_of(home)
        assert loaded is not None and loaded["cap_mb"] == 1024 and loaded["model_unloaded"] is None
    finally:
        raw.close()
    control.stop(home / "daemon.sock")
    # A cap between what the daemon holds with the model and what it holds without: the model goes, no restart.
    cap = loaded["resident_mb"] - 60  # unloading gave back about 120 MB where it was measured (bench/guard.py)
    raw = RawSession(home, THREADLOOM_DAEMON_MEMORY_MB=str(cap), **env)
    try:
        raw.initialize()
        pid = daemon_pid(home)
        recall_with_model()
        guard = wait_for(lambda: (g := guard_of(home)) and g["model_unloaded"] and g, what="the model to be unloaded")
        assert guard["state"] == "degraded" and guard["restarts_recent"] == 0 and daemon_pid(home) == pid
        searched = tool(raw, "status", {})["search"]
        assert searched["mode"] == "full-text" and "memory guard unloaded the embedding model" in searched["why"]
        again = recall_with_model()  # never loaded again by this daemon
        assert again["search"]["mode"] == "full-text"
        assert "unloaded the embedding model;" in log_text(home)
    finally:
        raw.close()


def flood_without_reading(home: Path, requests: int) -> socket.socket:
    """A raw daemon session that sends `requests` tools/list calls and reads nothing."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(str(home / "daemon.sock"))
    hello = {"kind": protocol.HELLO, "version": "0", "pid": os.getpid(), "cwd": "/", "env": {}}
    sock.sendall(protocol.encode(hello))
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "mute", "version": "1"}}
    lines = [json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}).encode() + b"\n"]
    lines += [
        json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/list"}).encode() + b"\n" for n in range(1, requests)
    ]

    def send() -> None:
        with contextlib.suppress(OSError):  # dropped while it was still sending
            sock.sendall(b"".join(lines))

    threading.Thread(target=send, daemon=True).start()
    return sock


def read_to_end(sock: socket.socket) -> int:
    """Everything the daemon had sent, until it closed the connection; the byte count."""
    sock.settimeout(120)
    total = 0
    try:
        while chunk := sock.recv(1 << 20):
            total += len(chunk)
    except ConnectionResetError:
        pass
    sock.close()
    return total


def test_a_client_that_never_reads_is_dropped_and_others_are_served(home: Path) -> None:
    raw = RawSession(home, THREADLOOM_DAEMON_CLIENT_STALL_S="2")
    try:
        raw.initialize()
        pid = daemon_pid(home)
        assert pid is not None
        peaks = []
        for round_ in range(1, 4):
            mute = flood_without_reading(home, 5000)
            assert tool(raw, "status", {})["server"]["pid"] == pid  # served while the other one stalls
            wait_for(lambda r=round_: log_text(home).count("dropped session") >= r, timeout=120, what="the drop")
            assert read_to_end(mute) > 0  # it got what fit in the socket, then the daemon closed it
            peaks.append(guard_of(home)["peak_mb"])  # type: ignore[index]
        guard = guard_of(home)
        assert guard is not None and guard["dropped_clients"] == 3
        # Three floods of 5,000 unread calls each leave the daemon no bigger than the first did (bar noise).
        assert peaks[2] <= peaks[0] + 32, peaks
        assert tool(raw, "status", {})["server"]["pid"] == pid
        assert "it read none of its answers for 2 s" in log_text(home)
    finally:
        raw.close()


def transcript(user: Path, messages: int) -> int:
    path = claude_file(user, "big.jsonl", PROJECT)
    filler = "a long turn about the release checklist and the flaky clock test " * 6
    path.write_text("".join(line(n, f"{n} {filler}") for n in range(1, messages + 1)))
    return messages


def lease(home: Path) -> dict[str, Any] | None:
    store = SqliteStore(home / "threadloom.db")
    try:
        row = store.read(lambda r: r.one("SELECT holder, expires_at FROM job_leases WHERE name = 'transcripts.ingest'"))
    finally:
        store.close()
    return dict(row) if row else None


def test_ingest_killed_mid_pass_resumes_at_once_from_its_cursor(home: Path, tmp_path: Path) -> None:
    user = tmp_path / "u"
    expected = transcript(user, 10_000)
    env = {"HOME": str(user), "THREADLOOM_INGEST": "true", "THREADLOOM_INGEST_INTERVAL": "0.5"}
    raw = RawSession(home, **env)
    raw.initialize()
    pid = daemon_pid(home)
    assert pid is not None
    wait_for(
        lambda: (h := lease(home)) and h["holder"].startswith(f"{pid}.") and count_rows(home, "transcript_messages"),
        timeout=120,
        what="the daemon's ingest to be half way",
    )
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not control.pid_alive(pid), what="the daemon to die")
    at_kill = count_rows(home, "transcript_messages")
    assert 0 < at_kill < expected
    held = lease(home)
    assert held is not None and held["holder"].startswith(f"{pid}.")  # the dead daemon's lease is still there
    raw.close()
    raw = RawSession(home, **env)
    try:
        raw.initialize()
        fresh = daemon_pid(home)
        assert fresh != pid
        taken = wait_for(
            lambda: (h := lease(home)) is None or not h["holder"].startswith(f"{pid}."), timeout=120, what="takeover"
        )
        assert taken and now_ms() < held["expires_at"]  # taken from the dead holder, not waited out
        wait_for(lambda: count_rows(home, "transcript_messages") == expected, timeout=300, what="the rest")
    finally:
        raw.close()
    assert "another ingest holds the lease" not in log_text(home)


def test_the_daemon_log_is_rotated_keeping_n_files(home: Path) -> None:
    raw = RawSession(home, THREADLOOM_DAEMON_LOG_MAX_KB="16", THREADLOOM_DAEMON_LOG_KEEP="2")
    try:
        raw.initialize()
        log_path = home / "daemon.log"
        oldest: list[int] = []

        def garbage() -> bool:
            """Connections that never greet properly: one log line each. True once the oldest kept file has
            itself been replaced (at least three rotations)."""
            for _ in range(40):
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                    sock.connect(str(home / "daemon.sock"))
                    sock.sendall(b"not a greeting " + b"x" * 100 + b"\n")
                    sock.recv(10)
            third = log_path.with_name("daemon.log.2")
            if not third.exists():
                return False
            oldest.append(third.stat().st_ino)
            return len(set(oldest)) >= 2

        wait_for(garbage, timeout=300, what="three rotations")
        names = sorted(p.name for p in home.glob("daemon.log*"))
        assert names == ["daemon.log", "daemon.log.1", "daemon.log.2"]
        assert "rotated the daemon log (2 kept)" in log_text(home)
        assert tool(raw, "status", {})["server"]["guard"]["log_rotations"] >= 3
    finally:
        raw.close()
