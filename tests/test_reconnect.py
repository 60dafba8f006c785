"""Agents ride through a daemon crash: the bridge reconnects, resumes the session and answers what was in flight."""

from __future__ import annotations

import json
import os
import signal
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
    serve_params,
    structured,
    wait_for,
)
from tests.unix_queues import unread_bytes
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


def stopped(pid: int) -> bool:
    """Every thread of `pid` stopped (SIGSTOP takes effect when each is next scheduled, not at kill())."""
    try:
        return all((task / "stat").read_text().rsplit(")", 1)[1].split()[0] == "T" for task in tasks(pid))
    except FileNotFoundError:
        return False


def tasks(pid: int) -> list[Path]:
    return list(Path(f"/proc/{pid}/task").iterdir())


def handed_to_stopped_daemon(home: Path, raw: RawSession, message: dict[str, Any]) -> int:
    """Stop the daemon (SIGSTOP) and send `message` through the bridge; return once the bridge has handed it
    over, its bytes waiting unread in the daemon's socket: in flight, as the bridge sees it. Under load a
    fixed pause was not enough, and a request still in the bridge went to the next daemon instead."""
    pid = daemon_pid(home)
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    try:
        wait_for(lambda: stopped(pid), what="the daemon to stop")
        before = unread_bytes(pid)
        line = json.dumps(message).encode()
        raw.send_line(line)
        wait_for(lambda: unread_bytes(pid) >= before + len(line) + 1, what="the request to reach the daemon")
    except BaseException:
        os.kill(pid, signal.SIGKILL)
        raise
    return pid


def in_flight_when_killed(home: Path, raw: RawSession, message: dict[str, Any]) -> dict[str, Any]:
    """Send `message` to a daemon that cannot answer it (stopped), kill the daemon, and read the answer."""
    os.kill(handed_to_stopped_daemon(home, raw, message), signal.SIGKILL)
    return raw.read()


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


# A bridge that starts a daemon only while the file named by its argument exists.
GATED = (
    "import sys; from pathlib import Path; from threadloom.daemon import bridge, launch; gate = Path(sys.argv[1]); "
    "bridge._start_daemon = lambda layout: launch.start_daemon(layout) if gate.exists() else None; "
    "sys.exit(bridge.main())"
)


def test_a_write_in_flight_when_the_daemon_dies_gets_a_retryable_error(home: Path, tmp_path: Path) -> None:
    gate = tmp_path / "may-start-a-daemon"
    gate.touch()
    raw = RawSession(home, command=[PY, "-c", GATED, str(gate)])
    try:
        raw.initialize()
        raw.request("tools/list")
        before = status(raw)
        store = {"name": "memory_store", "arguments": {"content": "the build uses make"}}
        gate.unlink()  # answered at once, not after the restart: none can happen before the answer is read
        reply = in_flight_when_killed(home, raw, {"jsonrpc": "2.0", "id": 50, "method": "tools/call", "params": store})
        gate.touch()
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
    raw = RawSession(home, command=[PY, "-c", code])
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
        pid = handed_to_stopped_daemon(home, raw, {"jsonrpc": "2.0", "id": 95, "method": "tools/call", "params": wait})
        os.kill(pid, signal.SIGCONT)
        wait_for(lambda: unread_bytes(pid) == 0, what="the daemon to read the call")  # the call is in the daemon
        started = time.monotonic()
        assert cli(home, "daemon", "stop").returncode == 0
        reply = raw.read()
        assert time.monotonic() - started < 15
        assert reply["id"] == 95
        assert reply["result"]["structuredContent"]["retryable"] is True
        assert status(raw)["session"]["id"]  # and the session goes on with a new daemon
    finally:
        raw.close()
