"""Spawned children on a team server: several nodes on one PostgreSQL database. A node judges only its own
tasks by their process ids; another node's task holds its slot while that node's lease lives, and is
recorded lost once the lease has expired, never killed or settled before. Admission counts every node's
tasks and is single-flight across nodes. Real PostgreSQL (tests/postgres_server.py), real children
(tests/fake_agent.py)."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests import test_multinode as multinode
from tests.helpers import structured
from tests.http_server import client, git_repo
from tests.spawning import FAKE, parent
from threadloom.clock import now_ms
from threadloom.coordination import processes
from threadloom.coordination.spawn import AdmissionRefused, SpawnConfig, SpawnService
from threadloom.identity import Provenance
from threadloom.store import jobs
from threadloom.store.base import Store
from threadloom.store.postgres import open_postgres

pytestmark = pytest.mark.slow

Node = Callable[..., SpawnService]


@pytest.fixture
def node(postgres_url: str, tmp_path: Path) -> Iterator[Node]:
    """A node of the team: its own store (connection pool) on the one database, its own home, its name."""
    stores: list[Store] = []
    supervisors: list[int] = []

    def make(name: str, **config: Any) -> SpawnService:
        store = open_postgres(postgres_url)
        stores.append(store)
        home = tmp_path / name
        home.mkdir()
        return SpawnService(store, home, SpawnConfig(command=FAKE, grace_s=1.0, node=name, **config))

    yield make
    for store in stores[:1]:  # the children still running: their supervisors stop them, their watchers record it
        rows = store.read(lambda r: r.rows("SELECT pid FROM tasks WHERE pid IS NOT NULL"))
        supervisors += [int(row["pid"]) for row in rows]
    for pid in supervisors:  # a supervisor stops its child on SIGTERM
        if processes.running(pid, None):
            os.kill(pid, signal.SIGTERM)
    for watcher in threading.enumerate():
        if watcher.name.startswith("threadloom-watch-"):
            watcher.join(30)
    for store in stores:
        store.close()


def status(service: SpawnService, task_id: str) -> str:
    return str(service.status(task_id)["status"])


def lease_of(service: SpawnService) -> int:
    return int(
        service._store.read(
            lambda r: r.scalar("SELECT expires_at FROM job_leases WHERE name = :n", {"n": "node:" + service.node})
        )
    )


def expire_lease(service: SpawnService) -> None:
    """What 90 s without the node's beat leaves: its lease expired."""
    service._store.write(
        lambda w: w.execute(
            "UPDATE job_leases SET expires_at = :now WHERE name = :n", {"now": now_ms(), "n": "node:" + service.node}
        )
    )


def free_pid() -> int:
    """A pid no process of this machine has: what another machine's supervisor pid looks like from here."""
    return next(pid for pid in range(4_000_000, 3_000_000, -1) if processes.read(pid) is None)


def test_another_nodes_live_task_is_not_settled_and_holds_its_slot(node: Node, tmp_path: Path) -> None:
    a, b = node("a", max_children=3), node("b", max_children=3)
    assert a.node != b.node and a.node.startswith("a@")
    prov = parent(a._store, tmp_path)
    task = a.spawn(prov, "sleep 60", timeout_s=120)
    supervisor = int(task["pid"])
    # A task of a node on another machine: its supervisor's pid names no process here, its node is alive.
    far = "far@0badf00d"
    a._store.write(lambda w: jobs.beat(w, far, now_ms()))
    insert_task(a._store, "t_far", far, free_pid())
    assert b.unsettled() == 0 and b.settle() == 0
    assert status(b, task["id"]) == "running" and status(b, "t_far") == "running"
    assert b.log_tail("t_far", prov) == "[its log is on node far@0badf00d, which ran it]"
    assert processes.running(supervisor, None)
    # B's admission counts both: a third child is the last one under the cap, a fourth is refused
    third = b.spawn(prov, "sleep 60", timeout_s=120)
    with pytest.raises(AdmissionRefused, match="3 children are running, 2 of them on other nodes"):
        b.spawn(prov, "sleep 0")
    # while A has a task, its sweep (settle) keeps its lease alive
    expire_lease(a)
    before = now_ms()
    a.settle()
    assert lease_of(a) > before
    assert {status(b, t) for t in (task["id"], "t_far", third["id"])} == {"running"}


def test_a_dead_nodes_task_is_recorded_lost_once_its_lease_expires(node: Node, tmp_path: Path) -> None:
    a, b = node("a"), node("b")
    prov = parent(a._store, tmp_path)
    task = a.spawn(prov, "sleep 60", timeout_s=120)
    supervisor = int(task["pid"])
    assert b.settle() == 0 and status(b, task["id"]) == "running"
    # node A stops beating (it died); once its lease has expired, B records its task lost, and kills nothing
    expire_lease(a)
    assert b.unsettled() == 1
    assert b.settle() == 1
    done = b.status(task["id"])
    assert done["status"] == "lost" and done["exit_code"] is None and done["finished_at"] is not None
    assert processes.running(supervisor, None)  # B signals no process: the child on A's machine runs on
    assert b.settle() == 0  # recorded once
    # its slot is free for B
    assert b.spawn(prov, "sleep 0")["status"] == "running"


def insert_task(store: Store, task_id: str, node: str, pid: int) -> None:
    store.write(
        lambda w: w.execute(
            "INSERT INTO tasks (id, parent_session, owner, agent, cwd, command, pid, status, timeout_s, log_path, "
            "started_at, node) VALUES (:id, 'parent-1', 'ana', 'custom', '/', 'agent', :pid, 'running', 600, "
            "'/nowhere/' || :id || '.log', :now, :node)",
            {"id": task_id, "pid": pid, "now": now_ms(), "node": node},
        )
    )


def test_a_node_judges_its_own_tasks_by_their_processes_whatever_its_lease(node: Node) -> None:
    a, b = node("a"), node("b")
    gone = free_pid()
    insert_task(a._store, "t_mine", a.node, gone)  # its supervisor is no process: it died unrecorded
    insert_task(a._store, "t_theirs", b.node, gone)
    a._store.write(lambda w: jobs.beat(w, a.node, now_ms()) or jobs.beat(w, b.node, now_ms()))
    assert a.settle() == 1
    assert status(a, "t_mine") == "lost" and status(a, "t_theirs") == "running"
    assert b.settle() == 1 and status(a, "t_theirs") == "lost"


def _race(url: str, home: str, name: str, start: Any, results: Any) -> None:
    """One node: three spawns at once, once every thread of every node is ready."""
    store = open_postgres(url)
    service = SpawnService(store, Path(home), SpawnConfig(command=FAKE, max_children=2, node=name))
    prov = Provenance(session_id="parent-1", vendor="claude", project=home, user="ana")

    def one() -> None:
        start.wait(60)
        try:
            results.put(service.spawn(prov, "sleep 5")["id"])
        except AdmissionRefused:
            results.put("refused")

    threads = [threading.Thread(target=one) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    store.close()


def test_nodes_racing_for_the_last_slots_admit_exactly_the_cap(postgres_url: str, tmp_path: Path) -> None:
    store = open_postgres(postgres_url)
    try:
        parent(store, tmp_path)
        ctx = multiprocessing.get_context("spawn")
        start, results = ctx.Barrier(6), ctx.Queue()
        procs = [ctx.Process(target=_race, args=(postgres_url, str(tmp_path), name, start, results)) for name in "ab"]
        for p in procs:
            p.start()
        outcomes = [results.get(timeout=120) for _ in range(6)]
        for p in procs:
            p.join(60)
        admitted = [o for o in outcomes if o != "refused"]
        assert len(admitted) == 2, outcomes
        rows = store.read(lambda r: r.rows("SELECT node, status FROM tasks"))
        assert len(rows) == 2 and all(row["status"] in ("starting", "running", "done") for row in rows)
    finally:
        store.close()


def _task(url: str, task_id: str) -> dict[str, Any]:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT status, pid, node FROM tasks WHERE id = %s", (task_id,)).fetchone()
    assert row is not None
    return {"status": row[0], "pid": row[1], "node": row[2]}


def _lease(url: str, node_id: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT expires_at FROM job_leases WHERE name = %s", ("node:" + node_id,)).fetchone()
    return int(row[0]) if row else 0


@pytest.mark.anyio
async def test_two_serving_nodes_count_each_others_children_and_a_killed_nodes_child_is_lost_after_its_lease(
    tmp_path: Path, postgres_url: str
) -> None:
    repo = git_repo(tmp_path / "repo")
    settings = {"THREADLOOM_SPAWN_COMMAND": FAKE, "THREADLOOM_SPAWN_MAX_CHILDREN": "2", "THREADLOOM_SPAWN_GRACE_S": "1"}
    supervisors: list[int] = []
    try:
        with (
            multinode.node(tmp_path / "a", repo, postgres_url, "a", **settings) as (a, proc_a),
            multinode.node(tmp_path / "b", repo, postgres_url, "b", **settings) as (b, _),
        ):
            async with (
                client(a, multinode.session("parent-on-a", repo)) as on_a,
                client(b, multinode.session("parent-on-b", repo)) as on_b,
            ):
                mine = structured(await on_a.call_tool("spawn", {"prompt": "sleep 300", "timeout_s": 600}))
                theirs = structured(await on_b.call_tool("spawn", {"prompt": "sleep 300", "timeout_s": 600}))
                supervisors += [int(mine["pid"]), int(theirs["pid"])]
                assert mine["node"].startswith("a@") and theirs["node"].startswith("b@")
                refused = await on_b.call_tool("spawn", {"prompt": "sleep 0"})
                assert refused.is_error and structured(refused)["retryable"] is True
                assert "2 children are running, 1 of them on other nodes" in structured(refused)["error"]
                # a liveness sweep of B's (it beats B's lease, which has a task) finds A's child running
                beaten = _lease(postgres_url, theirs["node"])
                await multinode.wait_until(lambda: _lease(postgres_url, theirs["node"]) > beaten)
                assert _task(postgres_url, mine["id"])["status"] == "running"
            os.kill(proc_a.pid, signal.SIGKILL)  # node A dies: nobody beats its lease again
            proc_a.wait()
            with psycopg.connect(postgres_url) as conn:  # what 90 s of silence leaves
                conn.execute(
                    "UPDATE job_leases SET expires_at = %s WHERE name = %s", (now_ms(), "node:" + mine["node"])
                )
            await multinode.wait_until(lambda: _task(postgres_url, mine["id"])["status"] == "lost")
            assert processes.running(int(mine["pid"]), None)  # B killed nothing: A's child runs on
            assert _task(postgres_url, theirs["id"])["status"] == "running"
    finally:
        for pid in supervisors:
            if processes.running(pid, None):
                os.kill(pid, signal.SIGTERM)


@pytest.mark.anyio
async def test_a_killed_nodes_child_stays_running_until_its_short_lease_lapses_then_is_lost(
    tmp_path: Path, postgres_url: str
) -> None:
    """The real expiry, no hand-edited lease: nodes with a 10 s lease (beaten every 1.7 s), A killed -9."""
    repo = git_repo(tmp_path / "repo")
    settings = {"THREADLOOM_SPAWN_COMMAND": FAKE, "THREADLOOM_NODE_LEASE_SECONDS": "10"}
    supervisor = 0
    try:
        with (
            multinode.node(tmp_path / "a", repo, postgres_url, "a", **settings) as (a, proc_a),
            multinode.node(tmp_path / "b", repo, postgres_url, "b", **settings) as _,
        ):
            async with client(a, multinode.session("parent-on-a", repo)) as on_a:
                task = structured(await on_a.call_tool("spawn", {"prompt": "sleep 300", "timeout_s": 600}))
                supervisor = int(task["pid"])
                # A's sweep beats its lease: each beat reaches at most 10 s ahead (the default would be 90 s)
                beaten = _lease(postgres_url, task["node"])
                await multinode.wait_until(lambda: _lease(postgres_url, task["node"]) > beaten)
            os.kill(proc_a.pid, signal.SIGKILL)
            proc_a.wait()
            lapses = _lease(postgres_url, task["node"])  # nobody beats it again
            assert lapses - now_ms() <= 10_000
            assert _task(postgres_url, task["id"])["status"] == "running"  # A is dead, but its lease lives
            seen: list[tuple[int, str]] = []

            def lost() -> bool:
                seen.append((now_ms(), _task(postgres_url, task["id"])["status"]))
                return seen[-1][1] == "lost"

            await multinode.wait_until(lost, timeout=120)  # B's sweep (every 1.7 s) records it
            assert all(status == "running" for at, status in seen if at < lapses), seen
            with psycopg.connect(postgres_url) as conn:
                row = conn.execute("SELECT finished_at, exit_code FROM tasks WHERE id = %s", (task["id"],)).fetchone()
            assert row is not None and row[0] >= lapses and row[1] is None
            assert processes.running(supervisor, None)  # B killed nothing: A's child runs on
    finally:
        if supervisor and processes.running(supervisor, None):
            os.kill(supervisor, signal.SIGTERM)
