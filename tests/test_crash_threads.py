"""Thread files and tournaments under kill -9: a node killed between a repository file and the transaction that
indexes it, or between two roles' admissions, and the call retried with its idempotency key.

Real processes: `serve --http` nodes on a scratch database of the test cluster, held between the two writes by a
lock the test takes in the database, killed -9 there and started again on the same port; real git repositories.
PostgreSQL, because a lock on one table holds the second write while the first commits; the code is the same
on SQLite (one writer lock for the whole database could not hold one and not the other).
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.helpers import structured
from tests.http_server import Served, client, git_repo, start_http
from tests.spawning import FAKE
from tests.test_multinode import TOKEN, session

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(300)]
THREADS = ".threadloom/threads/repo"
Node = AbstractContextManager[tuple[Served, subprocess.Popen[bytes]]]


def plain_node(home: Path, repo: Path, url: str, port: int | None = None, **env: str) -> Node:
    """One person's `serve --http` node on the database."""
    return start_http(home, repo, port=port, store_url=url, THREADLOOM_HTTP_TOKEN=TOKEN, THREADLOOM_USER="ana", **env)


async def lock_waiter(url: str, statement: str) -> None:
    """Until one of the database's backends waits for a lock running a statement that starts with `statement`."""
    query = (
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' "
        "AND query LIKE %s"
    )
    with psycopg.connect(url, autocommit=True) as admin:
        with anyio.fail_after(60):
            while not (admin.execute(query, (statement + "%",)).fetchone() or (0,))[0]:
                await anyio.sleep(0.02)


async def killed_waiting(c: Client, proc: subprocess.Popen[bytes], url: str, tool: str, args: dict[str, Any]) -> None:
    """Calls `tool` while the test holds a lock on `documents` (a thread's index waits on it; the record of its
    files does not), and kills the node -9 once the call's index waits: the call gets no answer."""
    with psycopg.connect(url) as blocker:
        blocker.execute("LOCK TABLE documents IN SHARE MODE")
        await unanswered(c, tool, args, partial(kill_at, proc, url, ("INSERT INTO documents", "UPDATE documents")))
        blocker.rollback()


async def kill_at(proc: subprocess.Popen[bytes], url: str, statements: tuple[str, ...]) -> None:
    """Kills the node -9 once one of its statements waits for a lock."""
    async with anyio.create_task_group() as tg:
        for statement in statements:  # the first to wait ends the others

            async def waiting(statement: str = statement) -> None:
                await lock_waiter(url, statement)
                tg.cancel_scope.cancel()

            tg.start_soon(waiting)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


async def unanswered(c: Client, tool: str, args: dict[str, Any], until: Callable[[], Awaitable[None]]) -> None:
    """Calls `tool` and runs `until` (which kills the node) beside it: the call gets no answer."""
    async with anyio.create_task_group() as tg:

        async def calling() -> None:
            with pytest.raises(MCPError):
                await c.call_tool(tool, args)

        tg.start_soon(calling)
        await until()


def files_of(repo: Path) -> list[str]:
    return sorted(p.name for p in (repo / THREADS).glob("*.md"))


def indexed(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        return sorted(str(r[0]) for r in conn.execute("SELECT ref FROM documents WHERE kind = 'thread'"))


async def test_a_thread_create_killed_before_its_index_is_finished_by_the_retry_in_the_same_file(
    home: Path, tmp_path: Path, postgres_url: str
) -> None:
    """thread_create writes the thread's file and then indexes it (claiming the call's key). Killed between, the
    node left the file, and the retry with the same key created the thread again under the next name
    (flaky-test-2.md), the first file left unindexed in the repository for good. Now the call records the file
    (path and digest, in the store under its key) before writing it, and the retry indexes that file."""
    repo = git_repo(tmp_path / "repo")
    headers = session("creator", repo)
    create = {"title": "Flaky test", "idempotency_key": "create-1"}
    with plain_node(home, repo, postgres_url) as (served, proc):
        async with client(served, headers) as c:
            await c.call_tool("thread_project", {"action": "create", "title": "Repo"})
            await killed_waiting(c, proc, postgres_url, "thread_create", create)
    assert files_of(repo) == ["flaky-test.md", "main.md"]  # the kill came between the file and its index
    assert indexed(postgres_url) == ["repo/main"]
    with plain_node(home, repo, postgres_url, port=served.port) as (served, _):
        async with client(served, headers) as c:
            again = structured(await c.call_tool("thread_create", create))
            replay = structured(await c.call_tool("thread_create", create))
    assert "replayed" not in again and again["id"] == "flaky-test", again
    assert replay["replayed"] is True and replay["id"] == "flaky-test", replay
    assert files_of(repo) == ["flaky-test.md", "main.md"]
    assert indexed(postgres_url) == ["repo/flaky-test", "repo/main"]
    with psycopg.connect(postgres_url) as conn:
        assert [r[0] for r in conn.execute("SELECT thread FROM thread_cursors WHERE session_id = 'creator'")] == [
            "flaky-test"
        ]
        assert not conn.execute("SELECT 1 FROM tool_requests WHERE tool LIKE '%#files'").fetchall()


async def test_a_file_changed_or_linked_out_after_the_kill_is_not_taken_for_the_calls_own(
    home: Path, tmp_path: Path, postgres_url: str
) -> None:
    """The retry takes over only a file that holds exactly what the killed call recorded. One edited by hand
    since, or replaced by a link (here to a copy of the same text outside the repository), is left as it is: the
    thread is made under the next name, and nothing is written outside the repository."""
    repo = git_repo(tmp_path / "repo")
    outside = tmp_path / "outside.md"
    headers = session("creator", repo)
    creates = [{"title": "Edited", "idempotency_key": "edit-1"}, {"title": "Linked", "idempotency_key": "link-1"}]
    with plain_node(home, repo, postgres_url) as (served, proc):
        async with client(served, headers) as c:
            await c.call_tool("thread_project", {"action": "create", "title": "Repo"})
    for create in creates:
        with plain_node(home, repo, postgres_url, port=served.port) as (served, proc):
            async with client(served, headers) as c:
                await killed_waiting(c, proc, postgres_url, "thread_create", create)
    edited, linked = repo / THREADS / "edited.md", repo / THREADS / "linked.md"
    edited.write_text(edited.read_text() + "\n## State\n- typed by hand\n")
    outside.write_text(linked.read_text())
    linked.unlink()
    linked.symlink_to(outside)
    hand, kept = edited.read_text(), outside.read_text()
    with plain_node(home, repo, postgres_url, port=served.port) as (served, _):
        async with client(served, headers) as c:
            made = [structured(await c.call_tool("thread_create", create)) for create in creates]
    assert [m["id"] for m in made] == ["edited-2", "linked-2"], made
    assert edited.read_text() == hand and outside.read_text() == kept and linked.is_symlink()
    assert indexed(postgres_url) == ["repo/edited-2", "repo/linked-2", "repo/main"]


async def test_a_summary_killed_before_its_index_is_not_added_twice_by_the_retry(
    home: Path, tmp_path: Path, postgres_url: str
) -> None:
    """thread_summary adding to a section writes the file, then indexes it (claiming the key). Killed between,
    the retry added the same text to the section a second time. Now it finds its change in the file and only
    indexes it."""
    repo = git_repo(tmp_path / "repo")
    headers = session("summariser", repo)
    add = {"text": "- the clock is faked in tests", "section": "Decisions", "idempotency_key": "summary-1"}
    with plain_node(home, repo, postgres_url) as (served, proc):
        async with client(served, headers) as c:
            await c.call_tool("thread_project", {"action": "create", "title": "Repo"})
            await c.call_tool("thread_create", {"title": "Flaky test"})
            await killed_waiting(c, proc, postgres_url, "thread_summary", add)
    file = repo / THREADS / "flaky-test.md"
    assert file.read_text().count(add["text"]) == 1
    with psycopg.connect(postgres_url) as conn:
        [(body,)] = conn.execute("SELECT body FROM documents WHERE ref = 'repo/flaky-test'").fetchall()
    assert add["text"] not in body  # not indexed before the kill
    with plain_node(home, repo, postgres_url, port=served.port) as (served, _):
        async with client(served, headers) as c:
            again = structured(await c.call_tool("thread_summary", add))
    assert "replayed" not in again and again["id"] == "flaky-test", again
    assert file.read_text().count(add["text"]) == 1
    with psycopg.connect(postgres_url) as conn:
        [(body,)] = conn.execute("SELECT body FROM documents WHERE ref = 'repo/flaky-test'").fetchall()
    assert body.count(add["text"]) == 1


async def test_a_project_create_killed_before_its_root_is_indexed_is_finished_by_the_retry(
    home: Path, tmp_path: Path, postgres_url: str
) -> None:
    """thread_project create writes the project's file, then its root thread's file, then indexes the root
    (claiming the key). Killed before the index, the retry made a second project (repo-2) beside the first. Now
    it takes over both files and indexes the root."""
    repo = git_repo(tmp_path / "repo")
    headers = session("founder", repo)
    create = {"action": "create", "title": "Repo", "idempotency_key": "project-1"}
    with plain_node(home, repo, postgres_url) as (served, proc):
        async with client(served, headers) as c:
            await c.call_tool("tasks", {})  # the schema is there
            await killed_waiting(c, proc, postgres_url, "thread_project", create)
    assert sorted(p.name for p in (repo / ".threadloom/projects").iterdir()) == ["repo.yaml"]
    assert files_of(repo) == ["main.md"] and indexed(postgres_url) == []
    with plain_node(home, repo, postgres_url, port=served.port) as (served, _):
        async with client(served, headers) as c:
            again = structured(await c.call_tool("thread_project", create))
    assert [p["id"] for p in again["projects"]] == ["repo"], again
    assert sorted(p.name for p in (repo / ".threadloom/projects").iterdir()) == ["repo.yaml"]
    assert indexed(postgres_url) == ["repo/main"]


async def test_a_tournament_killed_after_its_first_admission_starts_only_the_missing_roles_on_retry(
    home: Path, tmp_path: Path, postgres_url: str
) -> None:
    """A tournament admits its roles one by one. Killed after the first, its retry with the same key answered
    the one admitted role and started none of the others. Now the retry starts the roles with no task (and only
    those), under the same tournament, and answers every role as it is; a retry asking something else with the
    key starts nothing."""
    repo = git_repo(tmp_path / "repo")
    headers = session("organiser", repo)
    tour = {"prompt": "sleep 0", "roles": ["critic", "builder", "tester"], "wait_s": 60, "idempotency_key": "t-1"}
    with plain_node(home, repo, postgres_url, THREADLOOM_SPAWN_COMMAND=FAKE) as (served, proc):
        async with client(served, headers) as c:
            await c.call_tool("tasks", {})  # the schema is there
            with psycopg.connect(postgres_url, autocommit=True) as blocker:
                blocker.execute(
                    "CREATE FUNCTION gate() RETURNS trigger AS $$ BEGIN PERFORM pg_advisory_xact_lock(4242); "
                    "RETURN NEW; END $$ LANGUAGE plpgsql"
                )
                blocker.execute("CREATE TRIGGER gate BEFORE UPDATE ON tasks FOR EACH ROW EXECUTE FUNCTION gate()")
                blocker.execute("SELECT pg_advisory_lock(4242)")

                await unanswered(c, "tournament", tour, partial(kill_at, proc, postgres_url, ("UPDATE tasks SET pid",)))
                blocker.execute("DROP TRIGGER gate ON tasks")
                blocker.execute("SELECT pg_advisory_unlock(4242)")
    with psycopg.connect(postgres_url) as conn:
        [(first, tour_id, role)] = conn.execute("SELECT id, tournament, role FROM tasks").fetchall()
    assert role == "critic"
    with anyio.fail_after(60):  # its supervisor outlived the node and records how the child ended
        while not (home / "tasks" / f"{first}.1.exit").exists():
            await anyio.sleep(0.05)
    with plain_node(home, repo, postgres_url, port=served.port, THREADLOOM_SPAWN_COMMAND=FAKE) as (served, _):
        async with client(served, headers) as c:
            other = await c.call_tool("tournament", {**tour, "prompt": "sleep 1"})
            again = structured(await c.call_tool("tournament", tour))
            once_more = structured(await c.call_tool("tournament", tour))
    assert other.is_error and "asked for another prompt" in structured(other)["error"], structured(other)
    assert again["replayed"] is True and again["tournament"] == tour_id, again
    assert sorted(e["role"] for e in again["entries"]) == ["builder", "critic", "tester"], again
    assert [e["task"] for e in again["entries"] if e["role"] == "critic"] == [first]
    assert again["finished"] is True and {e["status"] for e in again["entries"]} == {"done"}, again
    with psycopg.connect(postgres_url) as conn:
        rows = conn.execute("SELECT role FROM tasks WHERE tournament = %s ORDER BY role", (tour_id,)).fetchall()
    assert [r[0] for r in rows] == ["builder", "critic", "tester"]  # each role once, after two retries
    assert once_more["tournament"] == tour_id and len(once_more["entries"]) == 3, once_more
