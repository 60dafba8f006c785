"""`threadloom user mine` and `user status` as a user runs them, and the daemon's job: off by default (no
pass, nothing recorded), on it mines and records its run."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client

from tests.helpers import cli, serve_params, structured
from tests.test_ingest import PROJECT, line
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


@pytest.mark.anyio
async def test_the_daemon_mines_what_it_ingests(home: Path, tmp_path: Path) -> None:
    """End to end: an agent CLI's transcript on disk, the daemon's ingest poll, its user-model pass, the claim
    read back over MCP by the owner (and not by another user)."""
    user = tmp_path / "u"
    session = user / ".claude" / "projects" / PROJECT / "9d0c6a1e-2b3f-4c5d-8e9f-0a1b2c3d4e5f.jsonl"
    session.parent.mkdir(parents=True)
    session.write_text(line(1, "Please don't add emojis to commit messages.", session="9d0c6a1e")
                       + line(2, "Sure, I always avoid them.", session="9d0c6a1e"))  # fmt: skip
    (home / ".env").write_text("THREADLOOM_USER=ada\n")
    env = {"HOME": str(user), "THREADLOOM_INGEST": "true", "THREADLOOM_INGEST_INTERVAL": "0.2",
           "THREADLOOM_USERMODEL_MINE": "true", "THREADLOOM_USERMODEL_INTERVAL": "0.5",
           "THREADLOOM_TOOLSET": "default,user_model"}  # fmt: skip
    async with Client(serve_params(home, **env), mode="legacy") as ada:
        deadline = anyio.current_time() + 60
        while True:
            listed = structured(await ada.call_tool("user_review", {}))["claims"]
            if listed or anyio.current_time() > deadline:
                break
            await anyio.sleep(0.3)
        assert [c["text"] for c in listed] == ["Does not want: add emojis to commit messages"]
        assert listed[0]["tier"] == "hypothesis"  # the assistant's "I always avoid them" was not the user's
        async with Client(serve_params(home, **(env | {"THREADLOOM_USER": "bob"})), mode="legacy") as bob:
            assert structured(await bob.call_tool("user_review", {}))["claims"] == []
    status = cli(home, "user", "status")
    assert "observation: off" in status.stdout  # the CLI's own settings: the daemon's came from its env
    assert ("miner: last ran" in status.stdout and "1 proposed" in status.stdout) or "0 proposed" in status.stdout
