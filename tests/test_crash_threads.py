"""Thread files and tournaments under kill -9: a node killed between a repository file and the transaction that
indexes it, or between two roles' admissions, and the call retried with its idempotency key.

Real processes: `serve --http` nodes, killed -9 while the second write is held and started again on the same
port, on real git repositories. On PostgreSQL the second write waits on a lock the test takes; on SQLite (one
writer lock for the whole database: a lock would hold the first write too) a trigger the test adds makes the
index's statement spin through a large cross join, and the node is killed once the files its call recorded
are on disk as recorded.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
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
from tests.postgres_server import lock_waiter
from tests.spawning import FAKE
from tests.test_multinode import TOKEN, session
from threadloom.threads.pending import digest

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(300)]
THREADS = ".threadloom/threads/repo"
Node = AbstractContextManager[tuple[Served, subprocess.Popen[bytes]]]


def plain_node(home: Path, repo: Path, url: str, port: int | None = None, **env: str) -> Node:
    """One person's `serve --http` node on the database at `url` (SQLite in the home when empty)."""
    return start_http(home, repo, port=port, store_url=url, THREADLOOM_HTTP_TOKEN=TOKEN, THREADLOOM_USER="ana", **env)


class Db:
    """The node's store, read by the test: the PostgreSQL database at `url`, else the home's SQLite file."""

    def __init__(self, home: Path, url: str) -> None:
        self.home, self.url = home, url

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        if self.url:
            with psycopg.connect(self.url) as conn:
                return [tuple(r) for r in conn.execute(sql.replace("?", "%s"))]
        conn = sqlite3.connect(self.home / "threadloom.db")
        try:
            return conn.execute(sql).fetchall()
        finally:
            conn.close()


@pytest.fixture(params=["sqlite", pytest.param("postgresql")])
def db(request: pytest.FixtureRequest, home: Path) -> Db:
    return Db(home, request.getfixturevalue("postgres_url") if request.param == "postgresql" else "")


async def killed_waiting(
    c: Client, proc: subprocess.Popen[bytes], db: Db, tool: str, args: dict[str, Any], last: str
) -> None:
    """Calls `tool` with a thread's index held (see the module's docstring) and kills the node -9 there, once the
    files the call recorded, `last` among them, are written as recorded: the call gets no answer."""
    if db.url:
        with psycopg.connect(db.url) as blocker:
            blocker.execute("LOCK TABLE documents IN SHARE MODE")  # the index waits; the record of the files not
            until = partial(kill_at, proc, db.url, ("INSERT INTO documents", "UPDATE documents"))
            await unanswered(c, tool, args, until)
            blocker.rollback()
        return
    conn = sqlite3.connect(db.home / "threadloom.db", isolation_level=None)
    try:
        conn.execute("CREATE TABLE spin (x INTEGER)")
        conn.executemany("INSERT INTO spin VALUES (?)", [(n,) for n in range(2000)])
        for event in ("INSERT", "UPDATE"):  # 8e9 rows: minutes, the node killed long before
            conn.execute(
                f"CREATE TRIGGER spin_{event} BEFORE {event} ON documents WHEN NEW.kind = 'thread' "
                "BEGIN SELECT count(*) FROM spin a, spin b, spin c; END"
            )
        await unanswered(c, tool, args, partial(kill_written, proc, db, last))
        conn.executescript("DROP TRIGGER spin_INSERT; DROP TRIGGER spin_UPDATE; DROP TABLE spin")
    finally:
        conn.close()


async def kill_written(proc: subprocess.Popen[bytes], db: Db, last: str) -> None:
    """Kills the node -9 once every file its call recorded, `last` among them, holds the text recorded."""

    def written() -> bool:
        for (kept,) in db.rows("SELECT result FROM tool_requests WHERE tool LIKE '%#files'"):
            files: dict[str, str] = json.loads(kept)
            if any(Path(f).name == last for f in files):  # this call's (an earlier killed call's may be there)
                return all(Path(f).is_file() and digest(Path(f).read_text()) == sha for f, sha in files.items())
        return False

    with anyio.fail_after(60):
        while not written():
            await anyio.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


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


def indexed(db: Db) -> list[str]:
    return sorted(str(r[0]) for r in db.rows("SELECT ref FROM documents WHERE kind = 'thread'"))


async def test_a_thread_create_killed_before_its_index_is_finished_by_the_retry_in_the_same_file(
    home: Path, tmp_path: Path, db: Db
) -> None:
    """thread_create writes the thread's file and then indexes it (claiming the call's key). Killed between, the
    node left the file, and the retry with the same key created the thread again under the next name
    (flaky-test-2.md), the first file left unindexed in the repository for good. Now the call records the file
    (path and digest, in the store under its key) before writing it, and the retry indexes that file."""
    repo = git_repo(tmp_path / "repo")
    headers = session("creator", repo)
    create = {"title": "Flaky test", "idempotency_key": "create-1"}
    with plain_node(home, repo, db.url) as (served, proc):
        async with client(served, headers) as c:
            await c.call_tool("thread_project", {"action": "create", "title": "Repo"})
            await killed_waiting(c, proc, db, "thread_create", create, "flaky-test.md")
    assert files_of(repo) == ["flaky-test.md", "main.md"]  # the kill came between the file and its index
    assert indexed(db) == ["repo/main"]
    with plain_node(home, repo, db.url, port=served.port) as (served, _):
        async with client(served, headers) as c:
            again = structured(await c.call_tool("thread_create", create))
            replay = structured(await c.call_tool("thread_create", create))
    assert "replayed" not in again and again["id"] == "flaky-test", again
    assert replay["replayed"] is True and replay["id"] == "flaky-test", replay
    assert files_of(repo) == ["flaky-test.md", "main.md"]
    assert indexed(db) == ["repo/flaky-test", "repo/main"]
    assert db.rows("SELECT thread FROM thread_cursors WHERE session_id = 'creator'") == [("flaky-test",)]
    assert db.rows("SELECT tool FROM tool_requests WHERE tool LIKE '%#files'") == []


async def test_a_file_changed_or_linked_out_after_the_kill_is_not_taken_for_the_calls_own(
    home: Path, tmp_path: Path, db: Db
) -> None:
    """The retry takes over only a file that holds exactly what the killed call recorded. One edited by hand
    since, or replaced by a link (here to a copy of the same text outside the repository), is left as it is: the
    thread is made under the next name, and nothing is written outside the repository."""
    repo = git_repo(tmp_path / "repo")
    outside = tmp_path / "outside.md"
    headers = session("creator", repo)
    creates = [{"title": "Edited", "idempotency_key": "edit-1"}, {"title": "Linked", "idempotency_key": "link-1"}]
    with plain_node(home, repo, db.url) as (served, proc):
        async with client(served, headers) as c:
            await c.call_tool("thread_project", {"action": "create", "title": "Repo"})
    for create in creates:
        with plain_node(home, repo, db.url, port=served.port) as (served, proc):
            async with client(served, headers) as c:
                await killed_waiting(c, proc, db, "thread_create", create, f"{create['title'].lower()}.md")
    edited, linked = repo / THREADS / "edited.md", repo / THREADS / "linked.md"
    edited.write_text(edited.read_text() + "\n## State\n- typed by hand\n")
    outside.write_text(linked.read_text())
    linked.unlink()
    linked.symlink_to(outside)
    hand, kept = edited.read_text(), outside.read_text()
    with plain_node(home, repo, db.url, port=served.port) as (served, _):
        async with client(served, headers) as c:
            made = [structured(await c.call_tool("thread_create", create)) for create in creates]
    assert [m["id"] for m in made] == ["edited-2", "linked-2"], made
    assert edited.read_text() == hand and outside.read_text() == kept and linked.is_symlink()
    assert indexed(db) == ["repo/edited-2", "repo/linked-2", "repo/main"]


async def test_a_summary_killed_before_its_index_is_not_added_twice_by_the_retry(
    home: Path, tmp_path: Path, db: Db
) -> None:
    """thread_summary adding to a section writes the file, then indexes it (claiming the key). Killed between,
    the retry added the same text to the section a second time. Now it finds its change in the file and only
    indexes it."""
    repo = git_repo(tmp_path / "repo")
    headers = session("summariser", repo)
    add = {"text": "- the clock is faked in tests", "section": "Decisions", "idempotency_key": "summary-1"}
    with plain_node(home, repo, db.url) as (served, proc):
        async with client(served, headers) as c:
            await c.call_tool("thread_project", {"action": "create", "title": "Repo"})
            await c.call_tool("thread_create", {"title": "Flaky test"})
            await killed_waiting(c, proc, db, "thread_summary", add, "flaky-test.md")
    file = repo / THREADS / "flaky-test.md"
    assert file.read_text().count(add["text"]) == 1
    [(body,)] = db.rows("SELECT body FROM documents WHERE ref = 'repo/flaky-test'")
    assert add["text"] not in body  # not indexed before the kill
    with plain_node(home, repo, db.url, port=served.port) as (served, _):
        async with client(served, headers) as c:
            again = structured(await c.call_tool("thread_summary", add))
    assert "replayed" not in again and again["id"] == "flaky-test", again
    assert file.read_text().count(add["text"]) == 1
    [(body,)] = db.rows("SELECT body FROM documents WHERE ref = 'repo/flaky-test'")
    assert body.count(add["text"]) == 1


async def test_a_project_create_killed_before_its_root_is_indexed_is_finished_by_the_retry(
    home: Path, tmp_path: Path, db: Db
) -> None:
    """thread_project create writes the project's file, then its root thread's file, then indexes the root
    (claiming the key). Killed before the index, the retry made a second project (repo-2) beside the first. Now
    it takes over both files and indexes the root."""
    repo = git_repo(tmp_path / "repo")
    headers = session("founder", repo)
    create = {"action": "create", "title": "Repo", "idempotency_key": "project-1"}
    with plain_node(home, repo, db.url) as (served, proc):
        async with client(served, headers) as c:
            await c.call_tool("tasks", {})  # the schema is there
            await killed_waiting(c, proc, db, "thread_project", create, "main.md")
    assert sorted(p.name for p in (repo / ".threadloom/projects").iterdir()) == ["repo.yaml"]
    assert files_of(repo) == ["main.md"] and indexed(db) == []
    with plain_node(home, repo, db.url, port=served.port) as (served, _):
        async with client(served, headers) as c:
            again = structured(await c.call_tool("thread_project", create))
    assert [p["id"] for p in again["projects"]] == ["repo"], again
    assert sorted(p.name for p in (repo / ".threadloom/projects").iterdir()) == ["repo.yaml"]
    assert indexed(db) == ["repo/main"]


async def killed_recording_a_child(
    c: Client, proc: subprocess.Popen[bytes], db: Db, home: Path, args: dict[str, Any]
) -> None:
    """Calls `tournament` and kills the node -9 once the first role's child has started, while the write that
    records it is held (on PostgreSQL by a row trigger waiting on a lock the test holds, on SQLite by a trigger that
    spins): the call gets no answer, and no other role was admitted."""
    if db.url:
        with psycopg.connect(db.url, autocommit=True) as blocker:
            blocker.execute(
                "CREATE FUNCTION gate() RETURNS trigger AS $$ BEGIN PERFORM pg_advisory_xact_lock(4242); "
                "RETURN NEW; END $$ LANGUAGE plpgsql"
            )
            blocker.execute("CREATE TRIGGER gate BEFORE UPDATE ON tasks FOR EACH ROW EXECUTE FUNCTION gate()")
            blocker.execute("SELECT pg_advisory_lock(4242)")
            await unanswered(c, "tournament", args, partial(kill_at, proc, db.url, ("UPDATE tasks SET pid",)))
            blocker.execute("DROP TRIGGER gate ON tasks")
            blocker.execute("SELECT pg_advisory_unlock(4242)")
        return
    conn = sqlite3.connect(db.home / "threadloom.db", isolation_level=None)
    try:
        conn.execute("CREATE TABLE spin (x INTEGER)")
        conn.executemany("INSERT INTO spin VALUES (?)", [(n,) for n in range(2000)])
        conn.execute(
            "CREATE TRIGGER spin BEFORE UPDATE ON tasks WHEN NEW.pid IS NOT NULL "
            "BEGIN SELECT count(*) FROM spin a, spin b, spin c; END"
        )

        async def started() -> None:  # its supervisor's pid, written just before the held write
            with anyio.fail_after(60):
                while not any(supervisor_of(run) for run in (home / "tasks").glob("*.run")):
                    await anyio.sleep(0.02)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()

        await unanswered(c, "tournament", args, started)
        conn.executescript("DROP TRIGGER spin; DROP TABLE spin")
    finally:
        conn.close()


async def test_a_delete_killed_before_its_files_go_leaves_them_for_the_retry_and_no_entry_behind(
    home: Path, tmp_path: Path, postgres_url: str
) -> None:
    """thread_delete deleted the files, then took the threads out of the index. Killed between, the threads were
    gone from the tree and still found by search, and a retry answered "no thread" and left the entries for good.
    Now the index goes first: killed there, the threads stay whole and the retry deletes them. PostgreSQL only:
    nothing on disk shows an SQLite test the moment the index's transaction is held."""
    repo = git_repo(tmp_path / "repo")
    headers = session("deleter", repo)
    db = Db(home, postgres_url)
    with plain_node(home, repo, db.url) as (served, proc):
        async with client(served, headers) as c:
            await c.call_tool("thread_project", {"action": "create", "title": "Repo"})
            await c.call_tool("thread_create", {"title": "Flaky test"})
            await c.call_tool("thread_create", {"title": "Clock"})
            assert indexed(db) == ["repo/clock", "repo/flaky-test", "repo/main"]
            with psycopg.connect(db.url) as blocker:
                blocker.execute("LOCK TABLE documents IN SHARE MODE")
                until = partial(kill_at, proc, db.url, ("DELETE FROM documents",))
                await unanswered(c, "thread_delete", {"thread_id": "flaky-test"}, until)
                blocker.rollback()
    assert files_of(repo) == ["clock.md", "flaky-test.md", "main.md"]
    with plain_node(home, repo, db.url, port=served.port) as (served, _):
        async with client(served, headers) as c:
            again = structured(await c.call_tool("thread_delete", {"thread_id": "flaky-test"}))
    assert again == {"deleted": ["flaky-test", "clock"]}, again
    assert files_of(repo) == ["main.md"] and indexed(db) == ["repo/main"]


def supervisor_of(run: Path) -> int | None:
    """The supervisor's pid in a task's run record (admission.Attempt), once its spawning process wrote it."""
    try:
        return json.loads(run.read_text()).get("pid")  # type: ignore[no-any-return]
    except ValueError:  # being written
        return None


async def test_a_tournament_killed_after_its_first_admission_starts_only_the_missing_roles_on_retry(
    home: Path, tmp_path: Path, db: Db
) -> None:
    """A tournament admits its roles one by one. Killed after the first, its retry with the same key answered
    the one admitted role and started none of the others. Now the retry starts the roles with no task (and only
    those), under the same tournament, and answers every role as it is; a retry asking something else with the
    key starts nothing."""
    repo = git_repo(tmp_path / "repo")
    headers = session("organiser", repo)
    tour = {"prompt": "sleep 0", "roles": ["critic", "builder", "tester"], "wait_s": 60, "idempotency_key": "t-1"}
    with plain_node(home, repo, db.url, THREADLOOM_SPAWN_COMMAND=FAKE) as (served, proc):
        async with client(served, headers) as c:
            await c.call_tool("tasks", {})  # the schema is there
            await killed_recording_a_child(c, proc, db, home, tour)
    [(first, tour_id, role)] = db.rows("SELECT id, tournament, role FROM tasks")
    assert role == "critic"
    with anyio.fail_after(60):  # its supervisor outlived the node and records how the child ended
        while not (home / "tasks" / f"{first}.1.exit").exists():
            await anyio.sleep(0.05)
    with plain_node(home, repo, db.url, port=served.port, THREADLOOM_SPAWN_COMMAND=FAKE) as (served, _):
        async with client(served, headers) as c:
            other = await c.call_tool("tournament", {**tour, "prompt": "sleep 1"})
            again = structured(await c.call_tool("tournament", tour))
            once_more = structured(await c.call_tool("tournament", tour))
    assert other.is_error and "asked for another prompt" in structured(other)["error"], structured(other)
    assert again["replayed"] is True and again["tournament"] == tour_id, again
    assert sorted(e["role"] for e in again["entries"]) == ["builder", "critic", "tester"], again
    assert [e["task"] for e in again["entries"] if e["role"] == "critic"] == [first]
    assert again["finished"] is True and {e["status"] for e in again["entries"]} == {"done"}, again
    rows = db.rows(f"SELECT role FROM tasks WHERE tournament = '{tour_id}' ORDER BY role")
    assert rows == [("builder",), ("critic",), ("tester",)]  # each role once, after two retries
    assert once_more["tournament"] == tour_id and len(once_more["entries"]) == 3, once_more
