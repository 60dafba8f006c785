"""Liveness comes from the heartbeat, not from a clean close: a session unheard of past the bound (its
daemon or agent was killed) is ended, its claims released, and it gets no more signals."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp import Client

from tests.helpers import RawSession, serve_params, structured
from threadloom.clock import now_ms
from threadloom.coordination.presence import LIVENESS_MS, PresenceService
from threadloom.coordination.signals import SignalService
from threadloom.errors import InvalidInput, NotFound
from threadloom.identity import Provenance
from threadloom.search.engine import SearchEngine
from threadloom.sessions import SessionInfo, SessionService
from threadloom.store.sqlite import SqliteStore, open_store
from threadloom.threads.hygiene import ThreadHygiene
from threadloom.threads.service import ThreadService


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    return path


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    s = open_store(tmp_path / "t.db")
    yield s
    s.close()


def join(store: SqliteStore, sid: str, repo: Path) -> Provenance:
    info = SessionInfo(id=sid, vendor="claude", transport="stdio", project=str(repo), cwd=str(repo), pid=1, user="u")
    SessionService(store).open(info)
    return info.provenance()


def fall_silent(db: Path | SqliteStore, sid: str, ms: int = LIVENESS_MS + 1_000) -> None:
    """What a kill -9 leaves: the session's row, last seen `ms` ago, never ended."""
    path = db if isinstance(db, Path) else Path(db.path)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE sessions SET last_seen_at = ? WHERE id = ?", (now_ms() - ms, sid))


def kinds(store: SqliteStore, sid: str) -> list[str]:
    rows = store.read(lambda r: r.rows("SELECT kind FROM events WHERE session_id = :s ORDER BY id", {"s": sid}))
    return [row["kind"] for row in rows]


def test_a_silent_session_is_absent_at_once_and_its_claim_can_be_taken(store: SqliteStore, repo: Path) -> None:
    threads = ThreadService(store, SearchEngine(store))
    hygiene, presence, signals = ThreadHygiene(store, threads), PresenceService(store), SignalService(store)
    ghost, alive = join(store, "ghost-1", repo), join(store, "alive-1", repo)
    threads.create_project(ghost, "Shop")
    threads.create(ghost, "Billing")
    hygiene.claim(ghost, "billing")
    fall_silent(store, "ghost-1")
    assert [p["id"] for p in presence.peers(alive)] == ["alive-1"]
    assert signals.broadcast(alive, "deploy at 5").recipients == ()
    with pytest.raises(NotFound, match="ghost-1 is gone"):
        signals.whisper(alive, "ghost-1", "are you there?")
    with pytest.raises(NotFound, match="gone"):
        signals.ask(alive, "ghost-1", "are you there?")
    assert [c["live"] for c in hygiene.claims(alive)] == [False]
    assert hygiene.claim(alive, "billing")["session"] == "alive-1"


def test_the_sweep_ends_silent_sessions_once_and_releases_their_claims(store: SqliteStore, repo: Path) -> None:
    threads = ThreadService(store, SearchEngine(store))
    hygiene, presence = ThreadHygiene(store, threads), PresenceService(store)
    ghost, alive = join(store, "ghost-1", repo), join(store, "alive-1", repo)
    join(store, "kept-1", repo)
    threads.create_project(ghost, "Shop")
    threads.create(ghost, "Billing")
    hygiene.claim(ghost, "billing")
    fall_silent(store, "ghost-1")
    fall_silent(store, "kept-1")  # silent in the store, but connected to the sweeping process
    assert presence.expire_absent(keep=["kept-1"]) == ["ghost-1"]
    assert presence.expire_absent(keep=["kept-1"]) == []  # idempotent
    assert hygiene.release_orphans() == 1 and hygiene.claims(alive) == []
    assert kinds(store, "ghost-1").count("session.expired") == 1
    ended = store.read(lambda r: r.scalar("SELECT ended_at FROM sessions WHERE id = 'ghost-1'"))
    assert ended is not None
    assert store.read(lambda r: r.scalar("SELECT ended_at FROM sessions WHERE id = 'alive-1'")) is None
    # the same id reconnecting (its bridge found a new daemon) is simply resumed
    join(store, "ghost-1", repo)
    assert {p["id"] for p in presence.peers(alive)} == {"alive-1", "ghost-1"}
    assert SignalService(store).whisper(alive, "ghost-1", "welcome back").recipients == ("ghost-1",)


def test_the_heartbeat_resumes_a_connected_session_expired_while_the_machine_slept(
    store: SqliteStore, repo: Path
) -> None:
    presence = PresenceService(store)
    sleeper = join(store, "sleeper-1", repo)
    join(store, "closed-1", repo)
    SessionService(store).close(SessionInfo("closed-1", "claude", "stdio", str(repo), None, None, user="u"))
    fall_silent(store, "sleeper-1")
    assert presence.expire_absent() == ["sleeper-1"]
    # the process wakes up: its heartbeat covers both (closed-1 raced its connection's end)
    assert presence.heartbeat(["sleeper-1", "closed-1"]) == ["sleeper-1"]
    assert {p["id"] for p in presence.peers(sleeper)} == {"sleeper-1"}
    assert kinds(store, "sleeper-1")[-2:] == ["session.expired", "session.resumed"]
    assert presence.heartbeat(["sleeper-1"]) == []


def test_an_answer_to_an_asker_that_is_gone_says_so(store: SqliteStore, repo: Path) -> None:
    signals = SignalService(store)
    lead, dev = join(store, "lead-1", repo), join(store, "dev-1", repo)
    asked = signals.ask(lead, "dev-1", "done?")
    assert asked.id is not None
    fall_silent(store, "lead-1")
    with pytest.raises(InvalidInput, match="lead-1 is gone"):
        signals.respond(dev, asked.id, "yes")


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_killed_servers_session_is_ended_and_its_claim_released_by_another_server(
    home: Path, repo: Path
) -> None:
    """Through real servers: `ghost` claims a thread and its server is killed -9; once it has been
    silent past the bound, a live server's background sweep ends it and releases the claim."""
    env = {"THREADLOOM_TOOLSET": "full", "THREADLOOM_ROOT": str(repo)}
    ghost = RawSession(home, "--in-process", THREADLOOM_SESSION_ID="ghost-1", **env)
    try:
        ghost.initialize()
        for name, args in (("thread_project", {"action": "create", "title": "Shop"}),
                           ("thread_create", {"title": "Billing"}),
                           ("thread_claim", {"action": "claim", "thread_id": "billing"})):  # fmt: skip
            reply = ghost.request("tools/call", {"name": name, "arguments": args})
            assert not reply["result"].get("isError"), reply
    finally:
        os.kill(ghost.proc.pid, signal.SIGKILL)  # no clean close: the session is never ended
        ghost.close()
    fall_silent(home / "threadloom.db", "ghost-1")
    params = serve_params(home, "--in-process", THREADLOOM_SESSION_ID="watcher-1", **env)
    async with Client(params, mode="legacy") as watcher:
        peers = structured(await watcher.call_tool("peers", {}))["peers"]
        assert [p["id"] for p in peers] == ["watcher-1"]
        claims: dict[str, object] = {}
        for _ in range(300):  # the sweep runs every 15 s
            claims = structured(await watcher.call_tool("thread_claim", {}))
            if not claims["claims"]:
                break
            await anyio.sleep(0.1)
        assert claims["claims"] == []
    db = open_store(home / "threadloom.db")
    try:
        assert "session.expired" in kinds(db, "ghost-1")
    finally:
        db.close()
