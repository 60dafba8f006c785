"""`serve --remote` while the team server is killed -9 and started again (issue 21, tried from outside).

The bridge held the team server's MCP session in its own task group: a request sent while the server was down
ended that group with a connection error, and the bridge with it. The agent's call never got an answer, and
every later call, the local thread tools included, got "Connection closed" until the agent CLI was restarted.
Now the call is answered {error, retryable: true}, the next one after the restart opens a new session, and a
refusal the team server marks not retryable (a 5 MB request) stays so through the bridge. A token revoked
mid-session is told in the gate's words, not retryable, at every call: opening the new session was refused
as a bare "Server returned an error response", retryable.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import anyio
import pytest
from mcp import Client

from tests.http_server import git_repo, start_http
from tests.team_server import admin, call, make_team
from tests.test_remote import remote

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(300)]


async def refused(c: Client, name: str, args: dict[str, object]) -> dict[str, object]:
    with anyio.fail_after(60):  # an answer, not a hang
        result = await c.call_tool(name, args)
    assert result.is_error, result
    return dict(result.structured_content or {})


def bobs_laptop(home: Path, tmp_path: Path) -> tuple[dict[str, str], Path, dict[str, str]]:
    """The team's tokens, bob's repository (its folder names the project) and his bridge's environment."""
    tokens = make_team(home)
    return tokens, git_repo(tmp_path / "shop"), {"THREADLOOM_REMOTE_TOKEN": tokens["bob"], "THREADLOOM_USER": "bob"}


async def test_the_bridge_answers_while_the_team_server_is_down_and_serves_again_after_its_restart(
    home: Path, tmp_path: Path, laptop: Path
) -> None:
    _, repo, env = bobs_laptop(home, tmp_path)
    with start_http(home, tmp_path, accounts=True) as (served, server):
        async with Client(remote(laptop, repo, served.url, **env), mode="legacy") as c:
            await call(c, "memory_store", {"content": "stored before the crash"})
            server.send_signal(signal.SIGKILL)
            server.wait()
            down = await refused(c, "memory_store", {"content": "sent while the server is down"})
            assert down["retryable"] is True and "team server" in str(down["error"]), down
            await call(c, "thread_project", {"action": "create", "title": "Shop"})  # the bridge is alive

            with start_http(home, tmp_path, accounts=True, port=served.port):
                await call(c, "memory_store", {"content": "stored after the restart"})
                found = await call(c, "memory_recall", {"query": "stored", "read_only": True})
                big = await refused(c, "memory_store", {"content": "x" * 5_000_000})
    assert sorted(m["content"] for m in found["memories"]) == ["stored after the restart", "stored before the crash"]
    assert big["retryable"] is False and "4 MiB" in str(big["error"]), big
    assert os.path.isdir(repo / ".threadloom")


async def test_a_token_revoked_mid_session_is_refused_in_words_not_retryable_at_every_call(
    home: Path, tmp_path: Path, laptop: Path
) -> None:
    tokens, repo, env = bobs_laptop(home, tmp_path)
    with start_http(home, tmp_path, accounts=True) as (served, _):
        async with Client(remote(laptop, repo, served.url, **env), mode="legacy") as c:
            await call(c, "memory_store", {"content": "stored before the revoke"})
            admin(home, "token", "revoke", tokens["bob"].split("_")[1])
            # The first refusal ends the session; the next calls are refused opening a new one, in the same words.
            answers = [await refused(c, "memory_recall", {"query": "stored"}) for _ in range(3)]
            await call(c, "thread_project", {"action": "create", "title": "Shop"})  # the local side still serves
    for answer in answers:
        assert "was revoked at" in str(answer["error"]) and answer["retryable"] is False, answer
