"""Many writers on one store: nothing lost, nothing torn, whoever dies mid-write."""

from __future__ import annotations

import os
import signal
import subprocess
import textwrap
from pathlib import Path

import anyio
import pytest
from mcp import Client

from tests.helpers import PY, cli, count_rows, daemon_pid, serve_params, structured, wait_for
from threadloom.daemon import control
from threadloom.store.sqlite import SqliteStore, open_store

pytestmark = pytest.mark.anyio
SESSIONS = 8
CALLS = 12


def count_kind(home: Path, kind: str) -> int:
    store = SqliteStore(home / "threadloom.db")
    try:
        return int(store.read(lambda r: r.scalar("SELECT COUNT(*) FROM events WHERE kind = :k", {"k": kind})))
    finally:
        store.close()


def intact(home: Path) -> bool:
    store = SqliteStore(home / "threadloom.db")
    try:
        return store.integrity_check() == []
    finally:
        store.close()


async def hammer(home: Path, *serve_args: str) -> list[int]:
    pids: list[int] = []

    async def session(n: int) -> None:
        async with Client(serve_params(home, *serve_args, THREADLOOM_SESSION_ID=f"s{n}"), mode="legacy") as client:
            for _ in range(CALLS):
                result = await client.call_tool("status", {})
                assert not result.is_error, result
                pids.append(structured(result)["server"]["pid"])

    async with anyio.create_task_group() as tg:
        for n in range(SESSIONS):
            tg.start_soon(session, n)
    return pids


@pytest.mark.parametrize("serve_args", [(), ("--in-process",)], ids=["bridge", "in-process"])
async def test_concurrent_sessions_lose_no_write(home: Path, serve_args: tuple[str, ...]) -> None:
    pids = await hammer(home, *serve_args)
    assert len(set(pids)) == (1 if not serve_args else SESSIONS)
    assert count_kind(home, "tool.call") == SESSIONS * CALLS
    assert count_rows(home, "sessions") == SESSIONS
    assert count_kind(home, "session.started") == SESSIONS
    wait_for(lambda: count_kind(home, "session.ended") == SESSIONS, what="every session to be closed")
    assert intact(home)


WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from threadloom.store.sqlite import open_store

    store = open_store(Path(sys.argv[1]))
    batch = 0

    def tx(w):
        for i in range(500):
            w.execute("INSERT INTO events (at, kind, origin) VALUES (:i, :k, 'foreground')", {"i": i, "k": f"b{batch}"})
            if i == 250:
                print(f"mid {batch}", flush=True)
                if batch == 2:
                    sys.stdin.readline()  # hold the transaction open until the parent kills us

    while True:
        store.write(tx)
        print(f"committed {batch}", flush=True)
        batch += 1
    """
)


def test_a_writer_killed_mid_transaction_leaves_the_store_intact(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    open_store(db).close()
    child = subprocess.Popen([PY, "-c", WRITER, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        for line in child.stdout:
            if line.strip() == "mid 2":
                break
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=20)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        for stream in (child.stdin, child.stdout):
            if stream is not None:
                stream.close()
    store = open_store(db)
    try:
        assert store.integrity_check() == []
        counts = {
            row["kind"]: row["n"]
            for row in store.read(lambda r: r.rows("SELECT kind, COUNT(*) AS n FROM events GROUP BY kind"))
        }
        assert counts == {"b0": 500, "b1": 500}
        store.write(lambda w: w.execute("INSERT INTO events (at, kind, origin) VALUES (1, 'after', 'foreground')"))
    finally:
        store.close()


async def test_a_daemon_killed_mid_write_leaves_the_store_intact(home: Path) -> None:
    killed = anyio.Event()
    completed = 0
    victim: list[int] = []

    async def busy_session(n: int) -> None:
        nonlocal completed
        try:
            async with Client(serve_params(home, THREADLOOM_SESSION_ID=f"k{n}"), mode="legacy") as client:
                while not killed.is_set():
                    await client.call_tool("status", {})
                    completed += 1
        except Exception:
            pass  # the daemon died under this session: its bridge may end it or ride through

    async def killer() -> None:
        while completed < 20:
            await anyio.sleep(0.01)
        pid = daemon_pid(home)
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        victim.append(pid)
        killed.set()

    with anyio.fail_after(90):
        async with anyio.create_task_group() as tg:
            for n in range(4):
                tg.start_soon(busy_session, n)
            tg.start_soon(killer)
    old_pid = victim[0]  # the bridges may already have started its successor
    wait_for(lambda: not control.pid_alive(old_pid), what="the killed daemon to be gone")
    assert intact(home)
    async with Client(serve_params(home), mode="legacy") as client:
        st = structured(await client.call_tool("status", {}))
    assert st["server"]["pid"] != old_pid
    assert cli(home, "doctor").returncode == 0


def test_racing_processes_storing_the_same_memory_make_exactly_one(home: Path) -> None:
    env = {"THREADLOOM_HOME": str(home), "THREADLOOM_EMBEDDER": "none", "THREADLOOM_ROOT": str(home)}
    procs = [
        subprocess.Popen(
            [PY, "-m", "threadloom", "memory", "store", "The release branch is cut on Mondays"],
            env=os.environ | env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    results = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0] * 6, [err for _, err in results]
    ids = {line.split('"')[3] for out, _ in results for line in out.splitlines() if '"id"' in line}
    assert len(ids) == 1
    assert count_rows(home, "memories") == 1 and count_rows(home, "documents") == 1
