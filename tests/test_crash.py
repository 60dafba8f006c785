"""Issue 14's crash test: 8 agent sessions storing, signalling and holding claims through the daemon, and
the daemon killed -9 twice under them. Nothing acknowledged is lost, sessions resume with their ids, the
claims of a session that died with it are released, and a child's deadline holds without its spawner.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.helpers import daemon_pid, processes_using, serve_params, structured, wait_for
from threadloom.clock import now_ms
from threadloom.coordination.presence import LIVENESS_MS

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
SESSIONS = 8
ROUNDS = 12
FAKE_CHILD = "sleep 120"


def git_repo(folder: Path) -> Path:
    folder.mkdir()
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    return folder


async def call(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """A call as a careful agent makes it: retried (same arguments, same idempotency key) while the server
    says the failure is retryable, as it does for a call cut short by a daemon restart."""
    for _ in range(40):
        result = await client.call_tool(tool, args)
        body = structured(result)
        if not result.is_error:
            return body
        assert body.get("retryable"), (tool, body)
        await anyio.sleep(0.25)
    raise AssertionError(f"{tool} never succeeded")


def rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


async def test_two_kill9s_lose_nothing_acknowledged_and_sessions_resume(home: Path, tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    db = home / "threadloom.db"
    names = [f"agent-{n}" for n in range(SESSIONS)]

    def params(sid: str) -> Any:
        return serve_params(
            home, THREADLOOM_SESSION_ID=sid, THREADLOOM_ROOT=str(repo), THREADLOOM_TOOLSET="full,coordination,agents",
            THREADLOOM_SPAWN_COMMAND=FAKE_CHILD,
        )  # fmt: skip

    stored: dict[str, set[str]] = {n: set() for n in names}
    sent: dict[str, set[int]] = {n: set() for n in names}
    async with Client(params(names[0]), mode="legacy") as first:
        await call(first, "thread_project", {"action": "create", "title": "Crash"})
        for n in range(SESSIONS):
            await call(first, "thread_create", {"title": f"Topic {n}", "idempotency_key": f"topic-{n}"})
    clients = [Client(params(n), mode="legacy") for n in names]
    async with clients[0], clients[1], clients[2], clients[3], clients[4], clients[5], clients[6], clients[7]:
        for n, client in enumerate(clients):
            await call(client, "thread_claim", {"action": "claim", "thread_id": f"topic-{n}"})
        child = await call(clients[0], "spawn", {"prompt": "work", "timeout_s": 3})
        assert child["status"] in ("starting", "running")

        async def work(n: int) -> None:
            me, peer = names[n], names[(n + 1) % SESSIONS]
            for r in range(ROUNDS):
                memory = await call(
                    clients[n], "memory_store", {"content": f"{me} fact {r}", "idempotency_key": f"{me}-m{r}"}
                )
                stored[me].add(memory["id"])
                signal_ = await call(
                    clients[n], "signal_send", {"to": peer, "text": f"{me} says {r}", "idempotency_key": f"{me}-s{r}"}
                )
                if "id" in signal_:  # else a replay of a send that landed just before a kill: its reply was lost
                    sent[me].add(int(signal_["id"]))
                else:
                    assert signal_["replayed"], signal_
                await anyio.sleep(0.05)

        async def crash_twice() -> None:
            for _ in range(2):
                await anyio.sleep(1.5)
                old = wait_for(lambda: daemon_pid(home), what="a daemon")
                os.kill(old, signal.SIGKILL)
                wait_for(lambda old=old: daemon_pid(home) not in (None, old), timeout=30, what="a new daemon")

        started = time.monotonic()
        async with anyio.create_task_group() as tg:
            for n in range(SESSIONS):
                tg.start_soon(work, n)
            tg.start_soon(crash_twice)
        for n, client in enumerate(clients):
            me = structured(await client.call_tool("status", {}))["session"]["id"]
            assert me == names[n], "a session came back under another id"
        # the child's deadline held although the daemon that spawned it was killed
        wait_for(lambda: not _children(home), timeout=30, what="the child to be stopped at its deadline")
        assert time.monotonic() - started < 60
        # every acknowledged write is there, once
        kept = {r[0] for r in rows(db, "SELECT id FROM memories")}
        for me, ids in stored.items():
            assert ids <= kept, f"{me} lost {ids - kept}"
        assert len(kept) == SESSIONS * ROUNDS
        delivered = {r[0] for r in rows(db, "SELECT signal_id FROM signal_deliveries")}
        assert set().union(*sent.values()) <= delivered
        assert rows(db, "SELECT count(*) FROM signals")[0][0] == SESSIONS * ROUNDS
    # a session that died with the daemon (its agent gone too) loses its claims once it is past the bound
    aged = now_ms() - LIVENESS_MS - 1_000
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE sessions SET last_seen_at = ?, ended_at = NULL WHERE id = 'agent-7'", (aged,))
    conn.close()
    async with Client(params(names[0]), mode="legacy") as watcher:
        claims = await call(watcher, "thread_claim", {"action": "list"})
        assert "agent-7" not in {c["session_id"] for c in claims["claims"] if c["live"]}

        def released() -> bool:
            return not rows(db, "SELECT 1 FROM thread_claims WHERE session_id = 'agent-7'")

        wait_for(released, timeout=40, what="the sweep to release the dead session's claim")


def _children(home: Path) -> list[int]:
    """Live spawned children (the fake agent is `sleep`) of this home."""
    found = []
    for pid in processes_using(home):
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"sleep"):
                found.append(pid)
        except OSError:
            continue
    return found
