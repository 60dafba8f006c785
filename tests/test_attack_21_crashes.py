"""Team nodes, their PostgreSQL store and `serve --remote` as a crashing machine, tried from outside (issue 21).

Real processes: `serve --http` nodes (team servers, and one person's for the thread tools) on a scratch database
of the test cluster, killed -9 in the middle of a call (held there by a lock the test takes in the database)
and started again on the same port; a team server stopped (SIGSTOP) under a laptop's bridge.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, AbstractContextManager, asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.backend_home import _URLS
from tests.helpers import structured
from tests.http_server import Served, client, git_repo, start_http
from tests.postgres_server import lock_waiter
from tests.spawning import FAKE
from tests.team_server import Team, call, make_team, team_client
from tests.test_multinode import TOKEN, session
from tests.test_remote import remote

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture
def team_home(home: Path, postgres_url: str) -> Iterator[Path]:
    """A home whose store is the test's PostgreSQL database, with the team's accounts in it."""
    _URLS[home] = postgres_url
    try:
        yield home
    finally:
        _URLS.pop(home, None)


@contextmanager
def locked(url: str, statement: str, *params: object) -> Iterator[None]:
    """A lock `statement` takes (a row's, a table's), held by the test in a transaction of its own for the block."""
    with psycopg.connect(url) as blocker:
        blocker.execute(statement, params or None)
        yield
        blocker.rollback()


@contextmanager
def gated(url: str, event: str, table: str, when: str = "") -> Iterator[None]:
    """For the block, a trigger BEFORE `event` ON `table` (`when`: its condition) waits on an advisory lock the test
    holds: it stops a write that no table lock stops without stopping the writes before it."""
    condition = f"WHEN ({when}) " if when else ""
    with psycopg.connect(url, autocommit=True) as blocker:
        blocker.execute(
            "CREATE FUNCTION gate() RETURNS trigger AS $$ BEGIN PERFORM pg_advisory_xact_lock(4242); "
            "RETURN NEW; END $$ LANGUAGE plpgsql"
        )
        blocker.execute(
            f"CREATE TRIGGER gate BEFORE {event} ON {table} FOR EACH ROW {condition}EXECUTE FUNCTION gate()"
        )
        blocker.execute("SELECT pg_advisory_lock(4242)")
        yield
        blocker.execute(f"DROP TRIGGER gate ON {table}")
        blocker.execute("SELECT pg_advisory_unlock(4242)")


@dataclass
class Crashing:
    """A node on the test's database, killed -9 in the middle of a call and started again on the port it had.

    `start(port)` starts it (on a free port for None); `connect(served)` opens the test's session on it."""

    url: str
    start: Callable[[int | None], AbstractContextManager[tuple[Served, subprocess.Popen[bytes]]]]
    connect: Callable[[Served], AbstractAsyncContextManager[Client]]
    port: int | None = None
    proc: subprocess.Popen[bytes] | None = None

    @asynccontextmanager
    async def up(self) -> AsyncIterator[Client]:
        """The node started (again: on its first port) and the session on it."""
        with self.start(self.port) as (served, proc):
            self.port, self.proc = served.port, proc
            async with self.connect(served) as c:
                yield c

    async def killed_during(
        self, c: Client, tool: str, args: dict[str, Any], hold: AbstractContextManager[None], waits_on: str = ""
    ) -> None:
        """Calls `tool` on `c` while `hold` holds its write, and kills the node once a backend waits for the lock
        running a statement that starts with `waits_on`."""
        assert self.proc is not None
        with hold:
            async with anyio.create_task_group() as tg:

                async def calling() -> None:
                    with pytest.raises(MCPError):  # the node dies: the stream ends with no answer
                        await c.call_tool(tool, args)

                tg.start_soon(calling)
                await lock_waiter(self.url, waits_on)
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def team_node(home: Path, repo: Path, url: str, tokens: dict[str, str], **headers: str) -> Crashing:
    """A team server (`--accounts`) on the database; alice's session in project shop."""

    def start(port: int | None) -> AbstractContextManager[tuple[Served, subprocess.Popen[bytes]]]:
        return start_http(home, repo, accounts=True, port=port, THREADLOOM_STORE_URL=url)

    def connect(served: Served) -> AbstractAsyncContextManager[Client]:
        return team_client(Team(served.port, home, served.log, tokens), "alice", "shop", **headers)

    return Crashing(url, start, connect)


def plain_node(home: Path, repo: Path, url: str, session_id: str, **env: str) -> Crashing:
    """One person's `serve --http` node on the database (tests/test_multinode.py's); a session of `session_id`."""

    def start(port: int | None) -> AbstractContextManager[tuple[Served, subprocess.Popen[bytes]]]:
        return start_http(
            home, repo, port=port, store_url=url, THREADLOOM_HTTP_TOKEN=TOKEN, THREADLOOM_USER="ana", **env
        )

    return Crashing(url, start, lambda served: client(served, session(session_id, repo)))


async def child_recorded(home: Path, task_id: str) -> None:
    """Until the task's supervisor, which outlived the node, records how its child ended."""
    with anyio.fail_after(60):
        while not (home / "tasks" / f"{task_id}.1.exit").exists():
            await anyio.sleep(0.05)


def current(url: str) -> list[tuple[str, str, str | None]]:
    with psycopg.connect(url) as conn:
        return [(str(a), str(b), c) for a, b, c in conn.execute("SELECT id, content, superseded_by FROM memories")]


async def test_a_node_killed_during_an_amend_leaves_it_undone_and_its_retry_finishes_it(
    team_home: Path, tmp_path: Path, postgres_url: str
) -> None:
    """An amend stored its correction in one transaction and marked the old memory superseded in a second: killed
    between them, the node left both current, and the call's idempotency key (claimed by the first) made every
    retry answer "replayed" without superseding anything. Now it is one transaction."""
    node = team_node(team_home, git_repo(tmp_path / "repo"), postgres_url, make_team(team_home))
    amend = {"content": "the deploy script lives in scripts/deploy.py", "idempotency_key": "amend-1"}
    async with node.up() as c:
        old = (await call(c, "memory_store", {"content": "the deploy script lives in bin/deploy.sh"}))["id"]
        # Holds the old memory's row: the amend waits on it.
        held = locked(postgres_url, "SELECT id FROM memories WHERE id = %s FOR UPDATE", old)
        await node.killed_during(c, "memory_amend", {"memory_id": old, **amend}, held)
    # Nothing of the unanswered call: the old memory current, no correction stored beside it.
    assert current(postgres_url) == [(old, "the deploy script lives in bin/deploy.sh", None)]
    async with node.up() as c:
        again = await call(c, "memory_amend", {"memory_id": old, **amend})
        assert "replayed" not in again, again
        found = await call(c, "memory_recall", {"query": "deploy script", "read_only": True})
    new = again["new"]["id"]
    assert sorted(current(postgres_url)) == sorted(
        [(old, "the deploy script lives in bin/deploy.sh", new), (new, amend["content"], None)]
    )
    assert found["memories"][0]["id"] == new


async def test_the_bridge_answers_retryable_when_the_team_server_accepts_connections_but_never_answers(
    home: Path, tmp_path: Path, laptop: Path
) -> None:
    """A team server stopped (SIGSTOP: the kernel still accepts its connections, nothing answers), as a network
    that takes TCP and drops the rest would: the bridge waited the SDK's 300 s read timeout for each call, and
    as long again to open a new session at the next. Now it gives up after THREADLOOM_REMOTE_TIMEOUT seconds
    without a byte (the server pings every 15 s while a call runs), retryable, and serves once it answers."""
    tokens = make_team(home)
    repo = git_repo(tmp_path / "shop")
    env = {"THREADLOOM_REMOTE_TOKEN": tokens["bob"], "THREADLOOM_USER": "bob", "THREADLOOM_REMOTE_TIMEOUT": "16"}
    with start_http(home, tmp_path, accounts=True) as (served, server):
        async with Client(remote(laptop, repo, served.url, **env), mode="legacy") as c:
            await call(c, "memory_store", {"content": "stored before the stop"})
            server.send_signal(signal.SIGSTOP)
            try:
                answers = []
                for n in range(2):  # the call on the session it had, then one opening a new session
                    with anyio.fail_after(120):  # the SDK's default would be 300 s, and 310 s for the second
                        result = await c.call_tool("memory_store", {"content": f"sent while stopped {n}"})
                    answers.append(dict(result.structured_content or {}) | {"is_error": result.is_error})
                await call(c, "thread_project", {"action": "create", "title": "Shop"})  # the local side serves
            finally:
                server.send_signal(signal.SIGCONT)
            await call(c, "memory_store", {"content": "stored after it answers again"})
            found = await call(c, "memory_recall", {"query": "stored", "read_only": True})
    for answer in answers:
        assert answer["is_error"] and answer["retryable"] is True, answer
    contents = sorted(m["content"] for m in found["memories"])
    assert contents == ["stored after it answers again", "stored before the stop"]


async def test_a_forget_killed_before_its_vacuum_is_vacuumed_by_the_next(
    team_home: Path, tmp_path: Path, postgres_url: str
) -> None:
    """forget erases in one transaction, then VACUUMs the tables it changed (the erased rows' old versions stay
    in their pages and indexes until then). Killed in between, the node's retry erased nothing and so vacuumed
    nothing, whatever its error said ("the rows are erased, run again"). Now the erasure marks its tables in its
    own transaction, and the next forget vacuums them."""
    full = {"X-Threadloom-Toolset": "full"}
    node = team_node(team_home, git_repo(tmp_path / "repo"), postgres_url, make_team(team_home), **full)
    forget = {"text": "zebra", "kinds": ["memories"], "dry_run": False}
    async with node.up() as c:
        for n in range(5):
            await call(c, "memory_store", {"content": f"the launch codeword is zebra-{n}"})
        # VACUUM waits for this lock; deletes do not.
        held = locked(postgres_url, "LOCK TABLE memories IN SHARE UPDATE EXCLUSIVE MODE")
        await node.killed_during(c, "forget", forget, held, "VACUUM")
    assert not [row for row in current(postgres_url) if "zebra" in row[1]]  # erased, committed, not vacuumed
    async with node.up() as c:
        again = await call(c, "forget", forget)
    assert again["erased"]["memories"] == 0
    assert "memories" in again["compaction"]["vacuumed"] and again["compaction"]["dead_rows_removed"] >= 5, again


async def test_a_node_killed_after_reopening_a_thread_but_before_its_note_keeps_the_note_for_the_retry(
    home: Path, tmp_path: Path, postgres_url: str
) -> None:
    """A note on an idle thread reopens it (a write of its own) and then adds the note (another). The reopening
    claimed the call's idempotency key: a node killed between them left the thread reopened and no note, and the
    retry with the same key was answered "replayed" (the first call "wrote"), so the note was never written. Now
    the key goes with the note's own transaction. A plain `serve --http` node: a team server has no thread tools."""
    node = plain_node(home, git_repo(tmp_path / "repo"), postgres_url, "noter")
    note = {"text": "the flaky test is the clock, not the network", "idempotency_key": "note-1"}
    async with node.up() as c:
        await c.call_tool("thread_project", {"action": "create", "title": "Repo"})
        made = structured(await c.call_tool("thread_create", {"title": "Flaky test"}))
        assert not (await c.call_tool("thread_status", {"status": "idle", "thread_id": made["id"]})).is_error
        # The note's INSERT waits; the reopening does not.
        held = locked(postgres_url, "LOCK TABLE thread_notes IN SHARE MODE")
        await node.killed_during(c, "thread_note", {**note, "thread_id": made["id"]}, held, "INSERT INTO thread_notes")
    async with node.up() as c:
        again = structured(await c.call_tool("thread_note", {**note, "thread_id": made["id"]}))
    assert "replayed" not in again, again
    with psycopg.connect(postgres_url) as conn:
        assert [row[0] for row in conn.execute("SELECT text FROM thread_notes")] == [note["text"]]


async def test_a_node_killed_before_moving_the_session_to_a_new_thread_leaves_the_key_for_the_retry(
    home: Path, tmp_path: Path, postgres_url: str
) -> None:
    """thread_create indexed the new thread (claiming the call's idempotency key) and then moved the session's
    cursor to it in a second write: a node killed between them left the session on its old thread, and the retry
    with the same key was answered "replayed", so the session never moved. Now the cursor moves in the
    transaction that indexes the thread and claims the key: killed before it commits, the retry does it all."""
    node = plain_node(home, git_repo(tmp_path / "repo"), postgres_url, "creator")
    create = {"title": "Flaky test", "idempotency_key": "create-1"}
    async with node.up() as c:
        await c.call_tool("thread_project", {"action": "create", "title": "Repo"})
        # The cursor's write waits; the thread's index does not.
        held = locked(postgres_url, "LOCK TABLE thread_cursors IN SHARE MODE")
        await node.killed_during(c, "thread_create", create, held, "INSERT INTO thread_cursors")
    async with node.up() as c:
        again = structured(await c.call_tool("thread_create", create))
    assert "replayed" not in again, again
    with psycopg.connect(postgres_url) as conn:
        assert [row[0] for row in conn.execute("SELECT thread FROM thread_cursors WHERE session_id = 'creator'")] == [
            again["id"]
        ]


async def test_a_spawn_killed_before_recording_its_child_is_answered_with_the_task_as_it_is_on_retry(
    home: Path, tmp_path: Path, postgres_url: str
) -> None:
    """spawn admits its task (claiming the call's idempotency key) and then records the child it started in a second
    write. A node killed between them left the retry a bare "replayed" with no task id, and the task `starting` with
    no pid though its child ran. Now the admission keeps the task's id with the key, and the retry answers the task
    as it is now: judged by its records, done. The second write is held by a trigger waiting on a lock the test
    holds (no table lock stops it and not the admission's INSERT)."""
    node = plain_node(home, git_repo(tmp_path / "repo"), postgres_url, "spawner", THREADLOOM_SPAWN_COMMAND=FAKE)
    spawn = {"prompt": "sleep 0", "idempotency_key": "spawn-1"}
    async with node.up() as c:
        await c.call_tool("tasks", {})  # the schema is there
        await node.killed_during(c, "spawn", spawn, gated(postgres_url, "UPDATE", "tasks"), "UPDATE tasks SET pid")
    with psycopg.connect(postgres_url) as conn:
        [(task_id, status)] = conn.execute("SELECT id, status FROM tasks").fetchall()
    assert status == "starting"
    await child_recorded(home, task_id)
    async with node.up() as c:
        again = structured(await c.call_tool("spawn", spawn))
    assert again["replayed"] is True and again["id"] == task_id, again
    assert again["status"] == "done" and again["exit_code"] == 0, again


async def test_a_core_memory_rewrite_killed_before_its_priority_is_set_is_finished_by_the_retry(
    home: Path, tmp_path: Path, postgres_url: str
) -> None:
    """memory_core with a new text for a key amends the memory (the core slot moves to the correction, at its old
    priority) and then sets the priority asked for, in a second write. The amend claimed the call's idempotency
    key: a node killed between them left the old priority, and the retry was answered "replayed". Now the amend
    does not claim it, and the retry finds the new text in place and sets the priority. The second write is held by
    a trigger on its event waiting on a lock the test holds."""
    node = plain_node(home, git_repo(tmp_path / "repo"), postgres_url, "corer")
    rewrite = {"key": "build.command", "content": "make test-all", "priority": 90, "idempotency_key": "core-1"}
    async with node.up() as c:
        await c.call_tool("memory_core", {"key": "build.command", "content": "make test", "priority": 10})
        held = gated(postgres_url, "INSERT", "events", when="NEW.kind = 'memory.core'")
        await node.killed_during(c, "memory_core", rewrite, held, "INSERT INTO events")
    async with node.up() as c:
        again = structured(await c.call_tool("memory_core", rewrite))
    assert "replayed" not in again, again
    with psycopg.connect(postgres_url) as conn:
        core = conn.execute("SELECT content, core_priority FROM memories WHERE core_key = 'build.command'").fetchall()
    assert core == [("make test-all", 90)]


async def test_a_tournament_killed_after_its_first_admission_is_answered_with_its_digest_on_retry(
    home: Path, tmp_path: Path, postgres_url: str
) -> None:
    """A tournament's first admission claimed the call's idempotency key: a node killed before the call answered
    left the retry a bare "replayed", with no tournament id to read its answers by. Now the admission keeps the
    tournament's id with the key, and the retry answers its digest as it is now: the admitted role as it is (done)
    and the role the killed call never admitted, started by the retry under the same tournament."""
    node = plain_node(home, git_repo(tmp_path / "repo"), postgres_url, "organiser", THREADLOOM_SPAWN_COMMAND=FAKE)
    tour = {"prompt": "sleep 0", "roles": ["critic", "builder"], "wait_s": 0, "idempotency_key": "tour-1"}
    async with node.up() as c:
        await c.call_tool("tasks", {})  # the schema is there
        await node.killed_during(c, "tournament", tour, gated(postgres_url, "UPDATE", "tasks"), "UPDATE tasks SET pid")
    with psycopg.connect(postgres_url) as conn:
        [(task_id, tour_id, role)] = conn.execute("SELECT id, tournament, role FROM tasks").fetchall()
    await child_recorded(home, task_id)
    async with node.up() as c:
        again = structured(await c.call_tool("tournament", tour))
    assert again["replayed"] is True and again["tournament"] == tour_id, again
    by_role = {e["role"]: e for e in again["entries"]}
    assert sorted(by_role) == ["builder", "critic"], again
    assert (by_role[role]["task"], by_role[role]["status"]) == (task_id, "done"), again
    with psycopg.connect(postgres_url) as conn:
        tasks = conn.execute("SELECT role, tournament FROM tasks ORDER BY id").fetchall()
    assert sorted(tasks) == [("builder", tour_id), ("critic", tour_id)], tasks


async def test_a_summary_killed_before_its_session_moves_leaves_the_key_for_the_retry(
    home: Path, tmp_path: Path, postgres_url: str
) -> None:
    """thread_summary on the session's own thread (no thread_id) indexed the change (claiming the call's key) and
    then recorded the session on that thread in a second write: killed between, the retry was answered "replayed"
    and the session's cursor never written. Now both are one transaction."""
    node = plain_node(home, git_repo(tmp_path / "repo"), postgres_url, "summariser")
    summary = {"text": "## Decisions\n- the clock is faked in tests", "idempotency_key": "summary-1"}
    async with node.up() as c:
        await c.call_tool("thread_project", {"action": "create", "title": "Repo"})
        await c.call_tool("thread_create", {"title": "Flaky test"})
        with psycopg.connect(postgres_url) as conn:  # as a session that never recorded where it is
            conn.execute("DELETE FROM thread_cursors")
        # The cursor's write waits; the summary's index does not.
        held = locked(postgres_url, "LOCK TABLE thread_cursors IN SHARE MODE")
        await node.killed_during(c, "thread_summary", summary, held, "INSERT INTO thread_cursors")
    async with node.up() as c:
        again = structured(await c.call_tool("thread_summary", summary))
    assert "replayed" not in again, again
    with psycopg.connect(postgres_url) as conn:
        cursors = [row[0] for row in conn.execute("SELECT thread FROM thread_cursors WHERE session_id = 'summariser'")]
    assert cursors == [again["id"]]  # where it resolved with no cursor: the root thread
