"""A spawned child's deadline, leftovers and memory, with real processes (tests/fake_agent.py) and no mock:
the deadline holds when the spawning process is killed, a recycled pid is never taken for a child,
grandchildren are ended, and the memory budget counts whole trees and reserves for new children."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import wait_for
from tests.spawning import FAKE, parent, spawner
from threadloom.coordination import processes, supervision
from threadloom.coordination.spawn import AdmissionRefused, SpawnService
from threadloom.identity import Provenance
from threadloom.store.sqlite import SqliteStore, open_store

pytestmark = pytest.mark.slow  # real child processes with deadlines of seconds
# A process that spawns one child and prints its task id, to be killed -9 while the child runs.
SPAWNING = """
import sys
from pathlib import Path
from threadloom.coordination.spawn import SpawnConfig, SpawnService
from threadloom.identity import Provenance
from threadloom.store.sqlite import open_store
db, home, fake = sys.argv[1:]
service = SpawnService(open_store(Path(db)), Path(home), SpawnConfig(command=fake, grace_s=1.0))
prov = Provenance(session_id="parent-1", vendor="claude", project=home, user="ana")
print(service.spawn(prov, "sleep 60", timeout_s=2)["id"], flush=True)
sys.stdin.read()
"""


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    s = open_store(tmp_path / "threadloom.db")
    yield s
    s.close()


def logged(service: SpawnService, task_id: str, prov: Provenance, key: str) -> int | None:
    """A pid the fake agent printed as `key=PID`."""
    found = re.search(rf"\b{key}=(\d+)", service.log_tail(task_id, prov, 100))
    return int(found.group(1)) if found else None


def gone(pid: int) -> bool:
    return not processes.running(pid, None)


def finished(service: SpawnService, task_id: str) -> dict[str, object] | None:
    task = service.status(task_id)
    return task if task["status"] not in ("starting", "running") else None


def test_a_childs_deadline_holds_when_the_process_that_spawned_it_is_killed(store: SqliteStore, tmp_path: Path) -> None:
    prov = parent(store, tmp_path)
    spawning = subprocess.Popen(
        [sys.executable, "-c", SPAWNING, str(tmp_path / "threadloom.db"), str(tmp_path), FAKE],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert spawning.stdout is not None and spawning.stdin is not None
    task_id = spawning.stdout.readline().strip()
    service = spawner(store, tmp_path)
    child = wait_for(lambda: logged(service, task_id, prov, "pid"), what="the child to start")
    os.kill(spawning.pid, signal.SIGKILL)  # its watchdog, if it had one, dies with it
    spawning.wait()
    spawning.stdin.close()
    spawning.stdout.close()
    wait_for(lambda: gone(child), timeout=15, what="the child to be stopped at its 2 s deadline")
    # any process records what the supervisor saw (a background job does), the spawner being gone
    assert wait_for(service.settle, timeout=10, what="the supervisor's record") == 1
    task = service.status(task_id)
    assert (task["status"], task["exit_code"]) == ("timeout", 124)
    assert "time limit reached" in service.log_tail(task_id, prov)


def test_a_recycled_pid_is_never_taken_for_a_running_child(store: SqliteStore, tmp_path: Path) -> None:
    prov = parent(store, tmp_path)
    service = spawner(store, tmp_path, max_children=1)
    task = service.spawn(prov, "sleep 0")
    wait_for(lambda: finished(service, task["id"]), what="the child")
    # as if its supervisor had been killed before recording anything, and its pid reused by a stranger
    stranger = subprocess.Popen(["sleep", "30"])
    try:
        records = tmp_path / "tasks"
        (records / f"{task['id']}.1.exit").unlink()
        run = json.loads((records / f"{task['id']}.1.run").read_text())
        (records / f"{task['id']}.1.run").write_text(json.dumps(run | {"pid": stranger.pid}))
        store.write(
            lambda w: w.execute(
                "UPDATE tasks SET status = 'running', pid = :pid, finished_at = NULL WHERE id = :id",
                {"pid": stranger.pid, "id": task["id"]},
            )
        )
        assert service.spawn(prov, "sleep 0")["status"] == "running"  # the slot was free
        assert service.status(task["id"])["status"] == "lost"
        assert stranger.poll() is None  # never signalled
    finally:
        stranger.kill()
        stranger.wait()


def test_grandchildren_of_a_child_that_exits_normally_are_ended(store: SqliteStore, tmp_path: Path) -> None:
    prov = parent(store, tmp_path)
    service = spawner(store, tmp_path)
    task = service.spawn(prov, "leave 60\ndetach 60")
    done = wait_for(lambda: finished(service, task["id"]), what="the child")
    assert done["status"] == "done" and done["exit_code"] == 0
    for key in ("leave", "detach"):
        pid = logged(service, task["id"], prov, key)
        assert pid is not None
        wait_for(lambda pid=pid: gone(pid), timeout=5, what=f"the {key} grandchild to be ended")


def test_the_memory_budget_counts_whole_process_trees(store: SqliteStore, tmp_path: Path) -> None:
    prov = parent(store, tmp_path)
    service = spawner(store, tmp_path, memory_budget_mb=100, reserve_mb=0)
    task = service.spawn(prov, "hog 120\nsleep 30")
    wait_for(lambda: "hogging" in service.log_tail(task["id"], prov), timeout=30, what="the grandchild's memory")
    with pytest.raises(AdmissionRefused, match=r"hold 1[2-9]\d MB"):
        service.spawn(prov, "sleep 0")
    os.kill(int(task["pid"]), signal.SIGTERM)  # the supervisor stops its tree
    wait_for(lambda: finished(service, task["id"]), what="the tree to stop")


def test_back_to_back_spawns_reserve_memory_for_children_not_yet_measured(store: SqliteStore, tmp_path: Path) -> None:
    prov = parent(store, tmp_path)
    service = spawner(store, tmp_path, memory_budget_mb=100, reserve_mb=60)
    first = service.spawn(prov, "sleep 3")  # nothing runs: one child may start even past the budget
    with pytest.raises(AdmissionRefused, match="reserved"):
        service.spawn(prov, "sleep 3")
    wait_for(lambda: finished(service, first["id"]), what="the first child")
    assert service.spawn(prov, "sleep 0")["status"] == "running"


def test_stopping_a_supervisor_stops_its_child(store: SqliteStore, tmp_path: Path) -> None:
    prov = parent(store, tmp_path)
    service = spawner(store, tmp_path)
    task = service.spawn(prov, "stubborn\nleave 60\nsleep 60")
    child = wait_for(lambda: logged(service, task["id"], prov, "pid"), what="the child")
    os.kill(int(task["pid"]), signal.SIGTERM)
    done = wait_for(lambda: finished(service, task["id"]), timeout=15, what="the child to stop")
    assert (done["status"], done["exit_code"]) == ("failed", 143)
    assert gone(child)


def test_the_supervisor_starts_light() -> None:
    """It runs beside every child: the standard library only, and none of its slower modules."""
    code = (
        "import sys; from threadloom.coordination import supervision;"
        "ours = {'threadloom', '__main__'} | set(sys.stdlib_module_names);"
        "print(sorted({m.split('.')[0] for m in sys.modules} - ours));"
        "print(sorted({'typing', 'dataclasses', 'json', 'pathlib', 'subprocess'} & set(sys.modules)))"
    )
    argv = supervision.command("/nonexistent", 1, 1, ["true"])
    root = argv[argv.index("-c") + 1].split(";")[1]  # the sys.path.insert(...) it runs with
    done = subprocess.run([sys.executable, "-I", "-S", "-c", f"import sys;{root};{code}"], capture_output=True,
                          text=True, timeout=60, check=True)  # fmt: skip
    assert done.stdout.split("\n")[:2] == ["[]", "[]"]
