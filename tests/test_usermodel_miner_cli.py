"""`threadloom user mine` and `user status` as a user runs them, and the daemon's job: off by default (no
pass, nothing recorded), on it mines and records its run."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.helpers import cli
from tests.test_usermodel_miner import add_messages, claims
from threadloom.config import Settings
from threadloom.daemon.usermodel_job import UserModelJob
from threadloom.home import HomeLayout
from threadloom.runtime import open_runtime
from threadloom.store.sqlite import open_store
from threadloom.usermodel.miner import last_run

pytestmark = pytest.mark.slow


def test_cli_mine_dry_run_then_for_real_then_status(home: Path) -> None:
    store = open_store(HomeLayout(home).database)
    try:
        add_messages(store, "ana", [("user", "Prefiero respuestas cortas."), ("user", "我喜欢简洁的回答。")])
    finally:
        store.close()
    before = cli(home, "user", "status", THREADLOOM_USER="ana")
    assert before.returncode == 0 and "observation: off" in before.stdout and "miner: never ran" in before.stdout
    dry = cli(home, "user", "mine", "--dry-run", THREADLOOM_USER="ana")
    assert dry.returncode == 0, dry.stderr
    assert "2 would propose" in dry.stdout and "Prefiere: respuestas cortas" in dry.stdout
    real = cli(home, "user", "mine", THREADLOOM_USER="ana")
    assert real.returncode == 0 and "2 proposed" in real.stdout
    again = cli(home, "user", "mine", THREADLOOM_USER="ana")
    assert "0 message(s)" in again.stdout and "0 proposed" in again.stdout
    status = cli(home, "user", "status", THREADLOOM_USER="ana")
    assert "miner: last ran" in status.stdout and "0 proposed" in status.stdout  # the last pass: nothing new
    other = cli(home, "user", "status", THREADLOOM_USER="ben")  # another user sees nothing of ana's runs
    assert "miner: never ran" in other.stdout
    store = open_store(HomeLayout(home).database)
    try:
        assert set(claims(store)) == {"Prefiere: respuestas cortas", "偏好：简洁的回答"}
    finally:
        store.close()


def test_daemon_job_off_by_default(tmp_path: Path) -> None:
    runtime = open_runtime(Settings(home=tmp_path / "home", embedder="none", user="ana"), "cli")
    try:
        add_messages(runtime.store, "ana", [("user", "I prefer tabs over spaces.")])  # type: ignore[arg-type]
        job = UserModelJob(runtime)
        assert not job.enabled and job.validator is None

        async def bounded() -> None:
            with anyio.fail_after(5):
                await job.run()  # returns at once: off

        anyio.run(bounded)
        assert last_run(runtime.store, "ana") is None and claims(runtime.store) == {}  # type: ignore[arg-type]
    finally:
        runtime.close()


def test_daemon_job_pass_when_on(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home", embedder="none", user="ana", usermodel_mine=True)
    runtime = open_runtime(settings, "cli")
    try:
        add_messages(runtime.store, "ana", [("user", "I prefer tabs over spaces.")])  # type: ignore[arg-type]
        job = UserModelJob(runtime)
        anyio.run(job.one_pass)
        assert job.last is not None and job.last.proposed == 1
        run = last_run(runtime.store, "ana")
        assert run is not None and run["outcome"]["proposed"] == 1
    finally:
        runtime.close()
