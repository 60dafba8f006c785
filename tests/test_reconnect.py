"""Agents ride through a daemon crash: the bridge reconnects, resumes the session and answers what was in flight."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.helpers import (
    PY,
    RawSession,
    cli,
    daemon_pid,
    env_for,
    serve_params,
    structured,
    wait_for,
)
from threadloom.daemon import control
from threadloom.store.sqlite import SqliteStore

pytestmark = pytest.mark.anyio
STATUS = {"name": "status", "arguments": {}}


def status(raw: RawSession) -> dict[str, Any]:
    reply = raw.request("tools/call", STATUS)
    assert reply["result"]["isError"] is False, reply
    return dict(reply["result"]["structuredContent"])


def gone(pid: int) -> bool:
    """Dead with all its threads, so its sockets are closed (a zombie leader can outlive its last thread)."""
    try:
        return not control.pid_alive(pid) and len(os.listdir(f"/proc/{pid}/task")) <= 1
    except FileNotFoundError:
        return True


def kill_daemon(home: Path) -> int:
    pid = daemon_pid(home)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: gone(pid), what="the daemon to die")
    return pid


def in_flight_when_killed(home: Path, raw: RawSession, message: dict[str, Any]) -> dict[str, Any]:
    """Send `message` to a daemon that cannot answer it (stopped), kill the daemon, and read the answer."""
    pid = daemon_pid(home)
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    try:
        raw.send_line(json.dumps(message).encode())
        time.sleep(0.3)  # let the bridge hand the request to the stopped daemon (nothing can answer it)
    finally:
        os.kill(pid, signal.SIGKILL)
        killed_at[0] = time.monotonic()
    return raw.read()


killed_at = [0.0]


def session_events(home: Path, session_id: str) -> list[str]:
    store = SqliteStore(home / "threadloom.db")
    try:
        rows = store.read(
            lambda r: r.rows(
                "SELECT kind FROM events WHERE session_id = :s AND kind LIKE 'session.%' ORDER BY id", {"s": session_id}
            )
        )
    finally:
        store.close()
    return [row["kind"] for row in rows]


def test_an_idle_session_resumes_with_its_id_after_the_daemon_is_killed(home: Path) -> None:
    raw = RawSession(home)
    try:
        raw.initialize()
        first = status(raw)
        killed = kill_daemon(home)
        started = time.monotonic()
        second = status(raw)  # the client does not initialize again
        took = time.monotonic() - started
    finally:
        assert raw.close() == 0
    assert second["server"]["pid"] != killed
    assert second["session"]["id"] == first["session"]["id"]
    assert second["session"]["client"] == "raw-test"  # the replayed handshake carried the client's own
    assert session_events(home, first["session"]["id"]) == ["session.started", "session.resumed", "session.ended"]
    assert took < 15


@pytest.mark.slow
def test_the_replayed_handshake_is_not_shown_to_the_client(home: Path) -> None:
    raw = RawSession(home)
    try:
        raw.initialize()
        status(raw)
        kill_daemon(home)
        raw.send_line(json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": STATUS}).encode())
        reply = raw.read()  # the very next line the client sees
    finally:
        raw.close()
    assert reply["id"] == 7
    assert "structuredContent" in reply["result"]


def test_a_write_in_flight_when_the_daemon_dies_gets_a_retryable_error(home: Path) -> None:
    raw = RawSession(home)
    try:
        raw.initialize()
        raw.request("tools/list")
        before = status(raw)
        store = {"name": "memory_store", "arguments": {"content": "the build uses make"}}
        reply = in_flight_when_killed(home, raw, {"jsonrpc": "2.0", "id": 50, "method": "tools/call", "params": store})
        assert time.monotonic() - killed_at[0] < 1.5  # answered at once, not after the restart
        assert reply["id"] == 50
        assert reply["result"]["isError"] is True
        body = reply["result"]["structuredContent"]
        assert body["retryable"] is True
        assert "the threadloom daemon restarted during this call; retry it" in body["error"]
        again = raw.request("tools/call", store)
        assert again["result"]["isError"] is False
        assert status(raw)["session"]["id"] == before["session"]["id"]
    finally:
        raw.close()


@pytest.mark.slow
def test_a_read_only_call_in_flight_is_retried_without_the_client_noticing(home: Path) -> None:
    raw = RawSession(home)
    try:
        raw.initialize()
        raw.request("tools/list")  # the bridge learns which tools are read-only or idempotent
        killed = daemon_pid(home)
        reply = in_flight_when_killed(home, raw, {"jsonrpc": "2.0", "id": 60, "method": "tools/call", "params": STATUS})
    finally:
        raw.close()
    assert reply["id"] == 60
    assert reply["result"]["isError"] is False
    assert reply["result"]["structuredContent"]["server"]["pid"] != killed


@pytest.mark.slow
def test_another_request_in_flight_gets_a_json_rpc_error_or_is_retried_when_read_only(home: Path) -> None:
    raw = RawSession(home)
    try:
        raw.initialize()
        listed = in_flight_when_killed(home, raw, {"jsonrpc": "2.0", "id": 70, "method": "tools/list"})
        assert [t["name"] for t in listed["result"]["tools"]][:1] == ["status"]
        unknown = in_flight_when_killed(home, raw, {"jsonrpc": "2.0", "id": 71, "method": "threadloom/unknown"})
        assert unknown["id"] == 71
        assert "restarted" in unknown["error"]["message"]
    finally:
        raw.close()


@pytest.mark.slow
async def test_the_sdk_client_keeps_its_session_across_a_kill(home: Path) -> None:
    async with Client(serve_params(home), mode="legacy") as client:
        first = structured(await client.call_tool("status", {}))
        kill_daemon(home)
        second = structured(await client.call_tool("status", {}))
        third = structured(await client.call_tool("status", {}))
    assert second["session"]["id"] == first["session"]["id"] == third["session"]["id"]
    assert second["server"]["pid"] != first["server"]["pid"]


@pytest.mark.slow
def test_a_stopped_daemon_is_not_restarted_until_the_session_needs_it(home: Path) -> None:
    raw = RawSession(home)
    try:
        raw.initialize()
        first = status(raw)
        assert cli(home, "daemon", "stop").returncode == 0
        deadline = time.monotonic() + 1
        while time.monotonic() < deadline:  # the bridge stays, and starts no daemon on its own
            assert daemon_pid(home) is None and raw.proc.poll() is None
            time.sleep(0.05)
        second = status(raw)
    finally:
        raw.close()
    assert second["session"]["id"] == first["session"]["id"]
    assert second["server"]["pid"] != first["server"]["pid"]


def test_a_bridge_that_cannot_reconnect_answers_what_is_in_flight_and_says_why(home: Path) -> None:
    # A bridge whose reconnecting gives up after 2 s (20 s in earnest) and that can start no daemon.
    code = (
        "import sys; from threadloom.daemon import bridge, relay; relay.RECONNECT_TIMEOUT_S = 2; "
        "bridge._start_daemon = lambda layout: None; sys.exit(bridge.main())"
    )
    keeper = RawSession(home)  # a daemon to start with, which the bridge below could not start
    keeper.initialize()
    raw = RawSession.__new__(RawSession)
    raw._next_id = 0
    raw.proc = subprocess.Popen(
        [PY, "-c", code], env=env_for(home), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    raw.initialize()
    assert keeper.close() == 0
    raw.request("tools/list")
    store = {"name": "memory_store", "arguments": {"content": "x"}}
    started = time.monotonic()
    reply = in_flight_when_killed(home, raw, {"jsonrpc": "2.0", "id": 90, "method": "tools/call", "params": store})
    # The agent keeps its stdin open: a bridge whose agent has closed it has nobody to reconnect for, and
    # ends with 0 (closing here raced the bridge's giving up).
    raw.proc.wait(timeout=30)
    _, err = raw.proc.communicate(timeout=30)
    assert time.monotonic() - started < 10
    assert reply["id"] == 90
    assert reply["result"]["isError"] is True
    assert reply["result"]["structuredContent"]["retryable"] is True
    assert raw.proc.returncode == 1
    assert err.decode().strip().splitlines()[-1].startswith("threadloom: lost the daemon and could not reconnect")


@pytest.mark.slow
def test_eight_sessions_keep_their_ids_through_two_kills(home: Path) -> None:
    sessions = [RawSession(home, THREADLOOM_SESSION_ID=f"agent-{n}") if n % 2 else RawSession(home) for n in range(8)]
    try:
        for raw in sessions:
            raw.initialize()
            raw.request("tools/list")
        ids = [status(raw)["session"]["id"] for raw in sessions]
        took = []
        for _ in range(2):
            killed = kill_daemon(home)
            started = time.monotonic()
            after = [status(raw) for raw in sessions]
            took.append(time.monotonic() - started)
            assert [s["session"]["id"] for s in after] == ids
            assert {s["server"]["pid"] for s in after} != {killed}
            assert len({s["server"]["pid"] for s in after}) == 1
    finally:
        for raw in sessions:
            raw.close()
    print(f"all 8 sessions served again {', '.join(f'{t:.2f}' for t in took)} s after each kill")


def test_a_call_in_flight_when_the_daemon_is_stopped_is_answered_at_once(home: Path) -> None:
    raw = RawSession(home, THREADLOOM_TOOLSET="default,coordination")
    try:
        raw.initialize()
        raw.request("tools/list")
        wait = {"name": "signal_inbox", "arguments": {"wait_s": 60}}
        raw.send_line(json.dumps({"jsonrpc": "2.0", "id": 95, "method": "tools/call", "params": wait}).encode())
        time.sleep(0.5)  # the call is waiting in the daemon
        started = time.monotonic()
        assert cli(home, "daemon", "stop").returncode == 0
        reply = raw.read()
        assert time.monotonic() - started < 15
        assert reply["id"] == 95
        assert reply["result"]["structuredContent"]["retryable"] is True
        assert status(raw)["session"]["id"]  # and the session goes on with a new daemon
    finally:
        raw.close()
