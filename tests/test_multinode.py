"""Several `serve --http` nodes on one PostgreSQL database behave as one: a signal sent through one node
wakes a session waiting on another (LISTEN/NOTIFY, not polling: on PostgreSQL nothing polls), and a node
killed -9 among 8 concurrent writers loses no acknowledged write. Real PostgreSQL (tests/postgres_server.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import psycopg
import pytest

from tests.helpers import structured
from tests.http_server import Served, client, git_repo, start_http
from threadloom.coordination.waiting import CHANNEL
from threadloom.store.postgres import open_postgres

pytestmark = [pytest.mark.slow, pytest.mark.anyio]
TOKEN = "multinode-test-token-0123456789abcdef"


@contextmanager
def node(
    home: Path, cwd: Path, url: str, name: str = "", **env: str
) -> Iterator[tuple[Served, subprocess.Popen[bytes]]]:
    """One `serve --http` node of the team on the database at `url` (`name`: its THREADLOOM_NODE; `env`: more
    settings)."""
    with start_http(
        home, cwd, node=name, store_url=url, THREADLOOM_HTTP_TOKEN=TOKEN, THREADLOOM_USER="ana", **env
    ) as started:
        yield started


def session(sid: str, repo: Path) -> dict[str, str]:
    return {"X-Threadloom-Session-Id": sid, "X-Threadloom-Root": str(repo), "X-Threadloom-Toolset": "full"}


def test_a_notification_arrives_at_commit_and_never_for_a_rolled_back_write(postgres_url: str) -> None:
    store = open_postgres(postgres_url)
    listener = store.listen(CHANNEL)
    try:
        assert listener.wait(5.0)  # the first wait connects: anything before it counts as missed
        assert not listener.wait(0.2)

        def rolled_back(w: object) -> None:
            w.notify(CHANNEL, "lost")  # type: ignore[attr-defined]
            raise RuntimeError("abandon the transaction")

        with pytest.raises(RuntimeError):
            store.write(rolled_back)
        assert not listener.wait(0.5)
        store.write(lambda w: w.notify(CHANNEL, "1"))
        assert listener.wait(5.0)
        for _ in range(5):  # a burst of commits wakes the waiters once, not five times
            store.write(lambda w: w.notify(CHANNEL, "n"))
        assert listener.wait(5.0)
        # Under load the server can hand the burst over in two reads, so one more wake is allowed; five would
        # mean one per notification.
        wakes = 1 + sum(1 for _ in range(4) if listener.wait(0.3))
        assert wakes <= 2, wakes
        assert not listener.wait(0.3)
    finally:
        listener.close()
        listener.wait(0.0)  # the closed listener lets its connection go
        store.close()


def test_a_listener_survives_its_connection_being_killed(postgres_url: str) -> None:
    store = open_postgres(postgres_url)
    listener = store.listen(CHANNEL)
    try:
        assert listener.wait(5.0)
        with psycopg.connect(postgres_url, autocommit=True) as admin:  # the server ends the listening backend
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE query LIKE 'LISTEN%%' AND datname = current_database()"
            )
        assert listener.wait(5.0)  # lost: True (look again), then a new connection, True again
        assert listener.wait(5.0)
        store.write(lambda w: w.notify(CHANNEL, "after"))
        assert listener.wait(5.0)
    finally:
        listener.close()
        listener.wait(0.0)
        store.close()


async def test_a_signal_sent_on_one_node_wakes_a_session_waiting_on_another(
    home: Path, tmp_path: Path, postgres_url: str
) -> None:
    repo = git_repo(tmp_path / "repo")
    with node(home / "a", repo, postgres_url) as (a, _), node(home / "b", repo, postgres_url) as (b, _):
        async with (
            client(a, session("sender-on-a", repo)) as sender,
            client(b, session("waiter-on-b", repo)) as waiter,
        ):
            seen = structured(await sender.call_tool("peers", {}))
            assert seen["me"]["session"]["id"] == "sender-on-a"
            await waiter.call_tool("peers", {})
            got: dict[str, object] = {}

            async def wait() -> None:
                got.update(structured(await waiter.call_tool("signal_inbox", {"wait_s": 60})))

            async with anyio.create_task_group() as tg:
                tg.start_soon(wait)
                await anyio.sleep(1.0)  # the waiter is waiting on node b
                await sender.call_tool("signal_send", {"to": "waiter-on-b", "text": "deploy frozen"})
            assert got["timed_out"] is False
            assert [s["body"] for s in got["unread"]] == ["deploy frozen"]  # type: ignore[attr-defined]
            # and back: an ask answered across nodes, the asker waiting on its own node
            async with anyio.create_task_group() as tg:
                answer: dict[str, object] = {}

                async def ask() -> None:
                    answer.update(
                        structured(
                            await sender.call_tool(
                                "signal_send",
                                {"kind": "ask", "to": "waiter-on-b", "text": "frozen until?", "wait_s": 60},
                            )
                        )
                    )

                tg.start_soon(ask)
                box = structured(await waiter.call_tool("signal_inbox", {"wait_s": 30}))
                asked = [s for s in box["unread"] if s["kind"] == "ask"]
                assert asked and asked[0]["body"] == "frozen until?"
                await waiter.call_tool("signal_send", {"kind": "answer", "reply_to": asked[0]["id"], "text": "noon"})
            assert answer["timed_out"] is False
            assert answer["answer"]["body"] == "noon"  # type: ignore[index]


async def test_a_node_killed_during_eight_concurrent_writers_loses_nothing_acknowledged(
    home: Path, tmp_path: Path, postgres_url: str
) -> None:
    repo = git_repo(tmp_path / "repo")
    acknowledged: list[str] = []
    failed: set[int] = set()
    lock = threading.Lock()
    with node(home / "a", repo, postgres_url) as (a, proc_a), node(home / "b", repo, postgres_url) as (b, _):
        killed = anyio.Event()

        async def writer(n: int, served: Served) -> None:
            try:
                async with client(served, session(f"writer-{n}", repo)) as c:
                    for i in range(400):
                        if killed.is_set() and i > 5 and served is b:
                            break
                        result = await c.call_tool(
                            "memory_store", {"content": f"writer {n} fact {i}: the queue holds {n * 1000 + i} jobs"}
                        )
                        if result.is_error:  # refused, so not acknowledged; only ever "try again"
                            assert structured(result)["retryable"] is True, structured(result)
                            continue
                        with lock:
                            acknowledged.append(str(structured(result)["id"]))
            except Exception:  # the killed node's clients lose their connection: never acknowledged
                with lock:
                    failed.add(n)

        async def killer() -> None:
            await wait_until(lambda: len(acknowledged) >= 60)
            os.kill(proc_a.pid, signal.SIGKILL)
            proc_a.wait()
            killed.set()

        async with anyio.create_task_group() as tg:
            for n in range(8):
                tg.start_soon(writer, n, a if n % 2 == 0 else b)
            tg.start_soon(killer)
        assert proc_a.returncode == -signal.SIGKILL
    assert failed == {0, 2, 4, 6}  # the killed node's clients, and only those, lost their connection
    with psycopg.connect(postgres_url) as conn:
        present = {row[0] for row in conn.execute("SELECT id FROM memories")}
    assert len(acknowledged) >= 60 and set(acknowledged) <= present


async def wait_until(condition: object, timeout: float = 60) -> None:
    with anyio.fail_after(timeout):
        while not condition():  # type: ignore[operator]
            await anyio.sleep(0.02)
