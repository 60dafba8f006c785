"""Health from outside: the `health` tool through a real MCP client (opt-in, per user), `threadloom stats`,
`threadloom top` piped, `threadloom doctor --probe`, and the daemon's scheduled self-test."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import sqlite3
import sys
import time
from pathlib import Path

import pytest
from mcp import Client

from tests.helpers import cli, env_for, serve_params, structured, wait_for

pytestmark = pytest.mark.anyio


def params(home: Path, user: str, *args: str, **env: str) -> object:
    extra = {"THREADLOOM_USER": user, "THREADLOOM_ROOT": str(home), "THREADLOOM_TOOLSET": "default,ops"}
    return serve_params(home, *args, **(extra | env))


async def test_the_health_tool_counts_only_the_callers_own_items_and_calls(home: Path) -> None:
    async with Client(params(home, "alice", "--in-process"), mode="legacy") as alice:
        for n in range(2):
            await alice.call_tool("memory_store", {"content": f"alice's fact {n} about the deploy"})
        await alice.call_tool("memory_store", {"content": ""})  # an error, journaled as one
        mine = structured(await alice.call_tool("health", {}))
    async with Client(params(home, "bob", "--in-process"), mode="legacy") as bob:
        theirs = structured(await bob.call_tool("health", {"window_days": 1}))
    assert mine["counts"]["memories"]["total"] == 2 and mine["user"] == "alice"
    store_calls = mine["tool_calls"]["tools"]["memory_store"]
    assert store_calls["calls"] == 3 and store_calls["errors"] == 1 and "non-empty" in store_calls["last_error"]
    assert theirs["counts"]["memories"]["total"] == 0 and theirs["user"] == "bob"
    assert "memory_store" not in theirs["tool_calls"]["tools"] and "alice" not in json.dumps(theirs)
    assert theirs["store"]["path"] == mine["store"]["path"]  # the store's size is anyone's to see
    assert isinstance(mine["at"], str)  # times as ISO 8601, as every tool gives them


async def test_health_is_opt_in_and_rejects_a_window_out_of_range(home: Path) -> None:
    async with Client(serve_params(home, "--in-process"), mode="legacy") as client:
        names = {t.name for t in (await client.list_tools()).tools}
        refused = await client.call_tool("health", {})
    assert "health" not in names and refused.is_error and "THREADLOOM_TOOLSET" in str(refused.structured_content)
    async with Client(params(home, "alice", "--in-process"), mode="legacy") as client:
        for bad in ({"window_days": 0}, {"window_days": 31}, {"window_days": "week"}, {"window_days": 2**70}):
            result = await client.call_tool("health", bad)
            assert result.is_error and result.structured_content is not None
            assert result.structured_content["retryable"] is False


def test_stats_and_piped_top_print_the_report_once(home: Path) -> None:
    done = cli(home, "stats", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["counts"]["memories"]["total"] == 0 and report["probes"]["last_run"] is None
    text = cli(home, "stats")
    assert text.returncode == 0 and "yours, and new in the last 1/7/30 days" in text.stdout
    piped = cli(home, "top", "--interval", "0.2", timeout=30)  # stdout is a pipe: one report, then exit
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout.count("threadloom health for") == 1 and "\x1b[" not in piped.stdout
    assert "self-test (threadloom doctor --probe): never run" in piped.stdout


def test_doctor_probe_runs_the_self_test_and_records_it(home: Path) -> None:
    done = cli(home, "doctor", "--probe", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    for category in ("memory.recall", "memory.amend", "signal.delivery", "thread.context"):
        assert f"probe {category}" in done.stdout
    report = json.loads(cli(home, "stats", "--json").stdout)
    recall = report["probes"]["categories"]["memory.recall"]
    assert recall["runs"]["1d"] == 1 and recall["passed"]["1d"] == 1 and recall["pass_rate_30d"] == 1.0
    assert report["counts"]["memories"]["total"] == 0  # the probe's memories stayed in its scratch store
    assert "self-test (threadloom doctor --probe): last run" in cli(home, "top").stdout


async def test_the_daemon_runs_the_self_test_on_its_schedule(home: Path) -> None:
    def recorded() -> int:
        db = home / "threadloom.db"
        if not db.exists():
            return 0
        with sqlite3.connect(db) as conn:
            try:
                return int(conn.execute("SELECT COUNT(*) FROM probe_results WHERE trigger = 'daemon'").fetchone()[0])
            except sqlite3.OperationalError:
                return 0

    async with Client(params(home, "alice", THREADLOOM_PROBE_INTERVAL="1"), mode="legacy") as client:
        await client.call_tool("status", {})
        wait_for(lambda: recorded() >= 4, timeout=60, what="a scheduled self-test run recorded")
        report = structured(await client.call_tool("health", {}))
    assert report["probes"]["categories"]["signal.delivery"]["passed"]["1d"] >= 1
    assert report["counts"]["memories"]["total"] == 0


def test_top_on_a_terminal_redraws_until_interrupted_and_restores_the_screen(home: Path) -> None:
    env = env_for(home, COLUMNS="150", LINES="60")
    pid, fd = pty.fork()
    if pid == 0:  # the child: threadloom top on a terminal
        # A shell's background job starts with SIGINT ignored, and exec keeps that: Ctrl-C must reach top.
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.execve(sys.executable, [sys.executable, "-m", "threadloom", "top", "--interval", "0.2"], env)
    seen = b""
    deadline = time.monotonic() + 60
    try:
        while seen.count(b"threadloom health for") < 3 and time.monotonic() < deadline:
            if select.select([fd], [], [], 0.2)[0]:
                seen += os.read(fd, 65536)
        os.kill(pid, signal.SIGINT)
        leaving = time.monotonic() + 15
        while time.monotonic() < leaving:  # what it writes on its way out (leaving the alternate screen)
            if not select.select([fd], [], [], 5)[0]:
                break
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # the terminal closed with the process
                break
            if not chunk:
                break
            seen += chunk
    finally:
        ended, status = os.waitpid(pid, os.WNOHANG)
        if ended == 0:  # still running: Ctrl-C did not end it
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
        os.close(fd)
    assert seen.count(b"threadloom health for") >= 3  # redrawn, not printed once
    assert os.waitstatus_to_exitcode(status) == 0
    assert b"\x1b[?1049h" in seen and b"\x1b[?1049l" in seen  # the alternate screen, left again
