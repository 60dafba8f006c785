"""One account opening MCP sessions in a loop fills its own quota on a team server node, never the node's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.team_server import make_team, team_server


def test_an_account_past_its_sessions_is_refused_and_the_others_are_not(home: Path, tmp_path: Path) -> None:
    tokens = make_team(home)
    with team_server(home, tmp_path, THREADLOOM_HTTP_ACCOUNT_SESSIONS="3") as team:
        team.tokens = tokens
        alice = team.headers("alice", "shop")
        opened = []
        for _ in range(3):
            status, headers, _ = team.post(alice)
            assert status == 200
            opened.append(headers["mcp-session-id"])
        status, headers, body = team.post(alice)
        assert status == 429, body
        refused = json.loads(body)
        assert refused["retryable"] is True and "THREADLOOM_HTTP_ACCOUNT_SESSIONS" in refused["error"]
        assert headers["retry-after"] == "60"
        assert team.post(team.headers("bob", "shop"))[0] == 200  # the quota is alice's, not the node's
        assert team.post(team.headers("carol", "garden"))[0] == 200

        import urllib.request

        ended = urllib.request.Request(team.url, method="DELETE", headers={**alice, "Mcp-Session-Id": opened[0]})
        with urllib.request.urlopen(ended, timeout=20) as resp:
            assert resp.status < 300
        assert team.post(alice)[0] == 200  # a session she ended makes room
        assert team.post(alice)[0] == 429


@pytest.mark.parametrize("value", ["0", "10001", "many"])
def test_a_wrong_quota_is_refused_at_start(home: Path, tmp_path: Path, value: str) -> None:
    from tests.http_server import run_http

    done = run_http(home, tmp_path, "--accounts", THREADLOOM_HTTP_ACCOUNT_SESSIONS=value)
    assert done.returncode != 0
    assert "THREADLOOM_HTTP_ACCOUNT_SESSIONS" in done.stderr or "http_account_sessions" in done.stderr, done.stderr


@pytest.mark.anyio
async def test_serve_remote_holds_one_session_of_its_account(home: Path, tmp_path: Path, laptop: Path) -> None:
    """Its first request, which only checks the token and project, ends the session it opened."""
    from mcp import Client

    from tests.http_server import git_repo
    from tests.team_server import call
    from tests.test_remote import remote

    tokens = make_team(home)
    repo = git_repo(tmp_path / "shop")
    env = {"THREADLOOM_REMOTE_TOKEN": tokens["bob"], "THREADLOOM_USER": "bob"}
    with team_server(home, tmp_path, THREADLOOM_HTTP_ACCOUNT_SESSIONS="1") as team:
        async with Client(remote(laptop, repo, team.url, **env), mode="legacy") as c:
            stored = await call(c, "memory_store", {"content": "the quota counts the bridge's session alone"})
            found = await call(c, "memory_recall", {"query": "what does the quota count", "read_only": True})
    assert [m["id"] for m in found["memories"]] == [stored["id"]]
