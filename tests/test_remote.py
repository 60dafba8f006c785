"""`threadloom serve --remote URL`: a real stdio client -> serve --remote -> a real team server over HTTP; the
thread tools answered by the laptop's own threadloom, so thread files stay in its repository (issue 21)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from tests.helpers import PY, env_for
from tests.http_server import free_port, git_repo
from tests.team_server import call, make_team, team_server
from threadloom.store.sqlite import SqliteStore

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(300)]


def rows(db: Path, sql: str) -> list[dict[str, object]]:
    store = SqliteStore(db)
    try:
        return store.read(lambda r: r.rows(sql))
    finally:
        store.close()


def remote(laptop: Path, repo: Path, url: str, **env: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=PY, args=["-m", "threadloom", "serve", "--remote", url], env=env_for(laptop, **env), cwd=str(repo)
    )


async def test_store_and_recall_through_the_team_server_with_threads_in_the_repository(
    home: Path, tmp_path: Path, laptop: Path
) -> None:
    tokens = make_team(home)
    repo = git_repo(tmp_path / "shop")  # the folder's name is the project
    env = {"THREADLOOM_REMOTE_TOKEN": tokens["bob"], "THREADLOOM_USER": "bob"}
    with team_server(home, tmp_path) as team:
        async with Client(remote(laptop, repo, team.url, **env), mode="legacy") as c:
            names = {t.name for t in (await c.list_tools()).tools}
            stored = await call(c, "memory_store", {"content": "the payment gateway retries three times"})
            found = await call(c, "memory_recall", {"query": "how often does the gateway retry", "read_only": True})
            await call(c, "thread_project", {"action": "create", "title": "Shop"})
            made = await call(c, "thread_create", {"title": "Retry budget"})
            await call(c, "thread_note", {"text": "measured 3 retries", "thread_id": made["id"]})
            context = await c.read_resource("threadloom://context")
    assert {"memory_store", "memory_recall", "thread_create", "thread_note"} <= names
    assert [m["id"] for m in found["memories"]] == [stored["id"]]
    assert rows(home / "threadloom.db", "SELECT owner, org, project FROM memories") == [
        {"owner": "bob", "org": "acme", "project": "shop"}
    ]
    assert rows(laptop / "threadloom.db", "SELECT id FROM memories") == []  # nothing stored on the laptop
    threads = list((repo / ".threadloom").rglob("*.md"))
    assert any(made["id"] in p.name for p in threads), threads  # the thread file is in the laptop's repository
    assert not (home / "team-root" / "shop").exists()
    assert "Retry budget" in context.model_dump_json()


def test_a_wrong_token_a_foreign_project_or_no_server_end_the_bridge_with_a_clear_error(
    home: Path, tmp_path: Path
) -> None:
    tokens = make_team(home)
    laptop, repo = tmp_path / "laptop-home", git_repo(tmp_path / "shop")

    def bridge(url: str, **env: str) -> subprocess.CompletedProcess[str]:
        params = remote(laptop, repo, url, **env)
        return subprocess.run(
            [params.command, *params.args], env=params.env, cwd=repo, capture_output=True, text=True, timeout=60,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip

    with team_server(home, tmp_path) as team:
        wrong = bridge(team.url, THREADLOOM_REMOTE_TOKEN="tlk_000000000000_" + "x" * 43)
        foreign = bridge(team.url, THREADLOOM_REMOTE_TOKEN=tokens["carol"])  # carol's globex does not hold shop
        bad_name = bridge(team.url, THREADLOOM_REMOTE_TOKEN=tokens["bob"], THREADLOOM_REMOTE_PROJECT="../x")
    none = bridge("http://127.0.0.1:9/mcp")
    gone = bridge(f"http://127.0.0.1:{free_port()}/mcp", THREADLOOM_REMOTE_TOKEN=tokens["bob"])
    for done, words in (
        (wrong, "refused this bridge (401): unknown access token"),
        (foreign, "refused this bridge (403): project 'shop' is not a project of any organisation 'carol'"),
        (bad_name, "refused this bridge (400): a project name is"),
        (none, "no token for http://127.0.0.1:9/mcp: set THREADLOOM_REMOTE_TOKEN"),
        (gone, "cannot reach the team server"),
    ):
        assert done.returncode == 2 and words in done.stderr, (words, done.stderr)
        assert "Traceback" not in done.stderr
    assert not (laptop / "threadloom.db").exists()  # refused before the local side was started
