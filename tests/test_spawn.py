"""Spawning real child processes through a fake agent CLI (tests/fake_agent.py): no mock of the
process layer, no paid model."""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import wait_for
from tests.spawning import FAKE, parent, spawner
from threadloom.coordination.spawn import AdmissionRefused, SpawnConfig, SpawnService
from threadloom.errors import InvalidInput
from threadloom.identity import Provenance
from threadloom.store.sqlite import SqliteStore, open_store

pytestmark = pytest.mark.slow  # real child processes with deadlines of seconds


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    s = open_store(tmp_path / "threadloom.db")
    yield s
    s.close()


def finished(service: SpawnService, task_id: str) -> dict[str, object] | None:
    task = service.status(task_id)
    return task if task["status"] not in ("starting", "running") else None


def test_a_child_gets_its_prompt_on_stdin_and_the_parents_lineage(store: SqliteStore, tmp_path: Path) -> None:
    service = spawner(store, tmp_path)
    big = "x" * 300_000 + "\n"  # over the 128 KiB a single argument may be
    prov = parent(store, tmp_path)
    task = service.spawn(prov, big + "sleep 0.1", role="tester")
    done = wait_for(lambda: finished(service, task["id"]), what="the child to finish")
    assert done["status"] == "done" and done["exit_code"] == 0
    log = service.log_tail(task["id"], prov)
    assert f"parent=parent-1 task={task['id']} toolset=default,coordination chars=300010" in log
    assert "finished" in log
    assert [t["id"] for t in service.tasks(parent(store, tmp_path))] == [task["id"]]


def test_the_watchdog_terms_then_kills_and_reports_124(store: SqliteStore, tmp_path: Path) -> None:
    service = spawner(store, tmp_path)
    task = service.spawn(parent(store, tmp_path), "stubborn\nsleep 30", timeout_s=1)
    done = wait_for(lambda: finished(service, task["id"]), timeout=30, what="the watchdog")
    assert done["status"] == "timeout" and done["exit_code"] == 124
    failed = service.spawn(parent(store, tmp_path), "fail")
    assert wait_for(lambda: finished(service, failed["id"]))["exit_code"] == 3


def test_a_timed_out_task_gets_one_continuation(store: SqliteStore, tmp_path: Path) -> None:
    service = spawner(store, tmp_path)
    prov = parent(store, tmp_path)
    task = service.spawn(prov, "sleep 30", timeout_s=1, retries=1)
    done = wait_for(lambda: finished(service, task["id"]), timeout=40, what="both attempts")
    assert done["status"] == "timeout" and done["attempt"] == 2
    assert "continued=True" in service.log_tail(task["id"], prov)


def test_admission_is_race_free_and_frees_up_when_a_child_ends(store: SqliteStore, tmp_path: Path) -> None:
    service = spawner(store, tmp_path, max_children=2)
    prov = parent(store, tmp_path)
    admitted, refused = [], []

    def try_spawn() -> None:
        try:
            admitted.append(service.spawn(prov, "sleep 3")["id"])
        except AdmissionRefused as exc:
            refused.append(exc)

    threads = [threading.Thread(target=try_spawn) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(admitted) == 2 and len(refused) == 3 and refused[0].retryable
    for task_id in admitted:
        wait_for(lambda task_id=task_id: finished(service, task_id), what="the children")
    assert service.spawn(prov, "sleep 0")["status"] == "running"
    with pytest.raises(InvalidInput, match="agent is one of"):
        service.spawn(prov, "x", agent="emacs")


def test_a_tournament_asks_each_role_and_digests_their_signals(store: SqliteStore, tmp_path: Path) -> None:
    service = SpawnService(
        store,
        tmp_path,
        SpawnConfig(command=FAKE, extra_env={"THREADLOOM_HOME": str(tmp_path), "THREADLOOM_EMBEDDER": "none"}),
    )
    prov = parent(store, tmp_path)
    # the parent's own toolset lacks `coordination`: its children get it, or they could not answer
    tournament = service.tournament(prov, "signal my answer", ["skeptic", "optimist"], timeout_s=60, toolset="default")
    digest = wait_for(
        lambda: (d := service.digest(tournament, prov))["finished"] and d, timeout=60, what="the tournament"
    )
    assert sorted(e["role"] for e in digest["entries"]) == ["optimist", "skeptic"]
    assert all(e["status"] == "done" and e["answers"] == ["my answer"] for e in digest["entries"])
    assert digest["missing"] == [] and digest["caveats"] == []


def test_a_tournament_says_which_roles_sent_no_answer(store: SqliteStore, tmp_path: Path) -> None:
    service = SpawnService(
        store,
        tmp_path,
        SpawnConfig(command=FAKE, extra_env={"THREADLOOM_HOME": str(tmp_path), "THREADLOOM_EMBEDDER": "none"}),
    )
    prov = parent(store, tmp_path)
    prompt = "as skeptic: signal too risky\nas pessimist: fail"
    tournament = service.tournament(prov, prompt, ["skeptic", "optimist", "pessimist"], timeout_s=60)
    digest = wait_for(
        lambda: (d := service.digest(tournament, prov))["finished"] and d, timeout=60, what="the tournament"
    )
    assert {e["role"]: e["answers"] for e in digest["entries"]}["skeptic"] == ["too risky"]
    assert sorted(digest["missing"]) == ["optimist", "pessimist"]
    (caveat,) = digest["caveats"]
    assert "optimist (finished without signalling an answer)" in caveat
    assert "pessimist (failed with exit code 3)" in caveat


def test_a_child_gets_its_parents_tool_groups_and_coordination(store: SqliteStore, tmp_path: Path) -> None:
    service = spawner(store, tmp_path)
    prov = parent(store, tmp_path)
    for given, expected in (("threads,agents", "threads,agents,coordination"), ("full", "full"), (None, None)):
        task = service.spawn(prov, "sleep 0", toolset=given)
        wait_for(lambda task=task: finished(service, task["id"]), what="the child")
        shown = expected or "default,coordination"
        assert f"toolset={shown} " in service.log_tail(task["id"], prov)


def test_daily_token_and_cost_ceilings_count_what_the_children_reported(store: SqliteStore, tmp_path: Path) -> None:
    prov = parent(store, tmp_path)
    tokens = spawner(store, tmp_path, daily_tokens=1_000)
    first = tokens.spawn(prov, "usage 1500 0.02")
    done = wait_for(lambda: finished(tokens, first["id"]))
    assert done["tokens"] == 1500 and done["cost_usd"] == 0.02
    with pytest.raises(AdmissionRefused, match="1,500 tokens in 24 h"):
        tokens.spawn(prov, "sleep 0")
    dollars = spawner(store, tmp_path, daily_cost_usd=0.01)
    with pytest.raises(AdmissionRefused, match=r"cost \$0.02"):
        dollars.spawn(prov, "sleep 0")
    assert spawner(store, tmp_path).spawn(prov, "sleep 0")["status"] == "running"  # no ceiling set


def _spawn_in_process(db: str, home: str, results: Any) -> None:
    store = open_store(Path(db))
    service = SpawnService(store, Path(home), SpawnConfig(command=FAKE, max_children=2))
    prov = Provenance(session_id="parent-1", vendor="claude", project=home, user="ana")
    try:
        results.put(service.spawn(prov, f"await {Path(home) / 'go'}")["id"])
    except AdmissionRefused:
        results.put("refused")
    finally:
        store.close()


def test_admission_holds_across_processes(store: SqliteStore, tmp_path: Path) -> None:
    parent(store, tmp_path)
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    procs = [
        ctx.Process(target=_spawn_in_process, args=(str(tmp_path / "threadloom.db"), str(tmp_path), results))
        for _ in range(4)
    ]
    for p in procs:
        p.start()
    try:
        outcomes = [results.get(timeout=60) for _ in procs]
    finally:
        # The admitted children hold their slots until every process has asked: with children of a fixed 3 s,
        # a process that started 3 s after another (spawn-context start-up under load) found a slot free again.
        (tmp_path / "go").touch()
    for p in procs:
        p.join(60)
    assert sorted(o == "refused" for o in outcomes) == [False, False, True, True]
    # the spawning processes are gone; once their children end, their slots free up, recorded as their
    # supervisors saw them end
    service = SpawnService(store, tmp_path, SpawnConfig(command=FAKE, max_children=2))

    def admitted() -> str | None:
        try:
            return str(service.spawn(parent(store, tmp_path), "sleep 0")["id"])
        except AdmissionRefused:
            return None

    assert wait_for(admitted, timeout=60, what="the orphaned children to end")
    statuses = {t["id"]: t["status"] for t in service.tasks(parent(store, tmp_path))}
    assert "done" in [statuses[o] for o in outcomes if o != "refused"]  # one freed the slot just taken


def _admit_and_die(db: Path, home: Path, repo: Path) -> None:
    """Spawn in a process that dies (os._exit: no cleanup, as a kill) once the task is admitted, before its child
    starts."""
    store = open_store(db)
    service = spawner(store, home)
    service._start = lambda run: os._exit(0)  # type: ignore[method-assign]
    service.spawn(parent(store, repo), "sleep 0")


def test_a_task_whose_spawning_process_died_before_starting_it_is_lost_at_once(
    store: SqliteStore, tmp_path: Path
) -> None:
    """Admitted, then its spawning process killed before the child started: the next settle records it lost (the
    process that admitted it is gone), not `starting` for a minute while it holds a slot; a retried spawn with the
    same idempotency key answers it so (tests/test_attack_21_crashes.py)."""
    died = multiprocessing.get_context("fork").Process(
        target=_admit_and_die, args=(tmp_path / "threadloom.db", tmp_path, tmp_path)
    )
    died.start()
    died.join(60)
    assert died.exitcode == 0
    service = spawner(store, tmp_path)
    [task] = service.tasks(parent(store, tmp_path))
    assert task["status"] == "starting" and task["pid"] is None
    assert service.settle() == 1
    assert service.status(task["id"])["status"] == "lost"
