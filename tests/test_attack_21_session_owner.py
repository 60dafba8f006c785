"""An MCP session of a team server serves only the account and project that opened it (issue 21, from outside).

bob reads alice's session ids from `peers` (they are the MCP session ids). Before the fix his DELETE naming
one ended her session, and his first request on a session she had only initialised bound it to him.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from tests.team_server import Team, call, team_client

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(300)]

FULL = {"X-Threadloom-Toolset": "full"}


def request(team: Team, method: str, headers: dict[str, str], body: object = None) -> tuple[int, str]:
    req = urllib.request.Request(
        team.url,
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers},
    )
    try:
        with urllib.request.urlopen(req, timeout=20) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def opened(team: Team, user: str, project: str) -> str:
    """A session initialised by `user` and nothing else: its id."""
    status, headers, _ = team.post(team.headers(user, project) | FULL)
    assert status == 200
    return headers["mcp-session-id"]


PEERS = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "peers", "arguments": {}}}


async def test_another_account_can_neither_use_nor_end_a_session(team: Team) -> None:
    async with team_client(team, "alice", "shop", **FULL) as a:
        mine = (await call(a, "peers", {}))["me"]["session"]["id"]
        async with team_client(team, "bob", "shop", **FULL) as b:
            assert mine in {p["id"] for p in (await call(b, "peers", {}))["peers"]}  # her id is no secret
        as_bob = team.headers("bob", "shop") | FULL | {"Mcp-Session-Id": mine}
        status, body = request(team, "DELETE", as_bob)
        assert status == 403 and "belongs to another account or project" in body
        status, body = request(team, "POST", as_bob, PEERS)
        assert status == 403 and "belongs to another account or project" in body
        as_carol = team.headers("carol", "garden") | {"Mcp-Session-Id": mine}
        assert request(team, "POST", as_carol, PEERS)[0] == 403
        assert (await call(a, "peers", {}))["me"]["session"]["id"] == mine  # still hers, still open

    fresh = opened(team, "alice", "shop")  # initialised, no tool called yet: not bob's to take
    status, body = request(team, "POST", team.headers("bob", "shop") | FULL | {"Mcp-Session-Id": fresh}, PEERS)
    assert status == 403, body
    status, body = request(team, "POST", team.headers("alice", "shop") | FULL | {"Mcp-Session-Id": fresh}, PEERS)
    assert status == 200 and fresh in body, body

    unknown = team.headers("bob", "shop") | {"Mcp-Session-Id": "0" * 32}
    status, body = request(team, "POST", unknown, PEERS)
    assert status == 404 and "open a new one" in body
