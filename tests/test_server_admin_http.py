"""A team server's server administrator (m033, `threadloom admin user grant-server-admin`): over real HTTP with
each user's token, on both backends (tests/backend_home.py), status, threadloom://status and health give them the
whole store's figures, an ordinary member (an organisation's owner too) their own alone, and a grant or revoke
counts from the very next call of an open session. Still nothing of another user's private memories."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.backend_home import home, store_env
from tests.helpers import cli
from tests.team_server import call, make_team, team_client, team_server

__all__ = ["home"]
pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(600)]
ENV = {"THREADLOOM_MAINTENANCE_INTERVAL": "0", "THREADLOOM_PROBE_INTERVAL": "0"}
HEADERS = {"X-Threadloom-Toolset": "full"}
CANARY = "zephyrcanary"


def admin(home: Path, *args: str) -> str:
    done = cli(home, "admin", *args, **store_env(home))
    assert done.returncode == 0, (args, done.stderr)
    return done.stdout.strip()


async def figures(client: Client) -> dict[str, Any]:
    status = await call(client, "status", {"recent_events": 100})
    health = await call(client, "health", {"window_days": 30})
    read = await client.read_resource("threadloom://status")
    return {"status": status, "health": health, "resource": json.loads(read.contents[0].text)}  # type: ignore[union-attr]


def store_wide(seen: dict[str, Any]) -> bool:
    """Whether one round showed the store's figures; each part must agree with the others."""
    status, health, resource = seen["status"], seen["health"], seen["resource"]
    parts = {
        "status": status["store"]["scope"] == "store"
        and status["store"]["path"] is not None
        and "connections" in status["server"]
        and "vectors" in status["search"],
        "resource": resource["store"]["scope"] == "store" and "connections" in resource["server"],
        "health": health["scope"] == "store" and "index" in health and "store" in health,
    }
    assert len(set(parts.values())) == 1, parts
    if not parts["status"]:
        assert status["store"]["scope"] == resource["store"]["scope"] == health["scope"] == "yours", seen
        assert status["store"]["path"] is None and "connections" not in status["server"], status
        assert "vectors" not in status["search"] and "index" not in health and "store" not in health
    return parts["status"]


async def test_a_server_admin_sees_the_store_a_member_their_own_and_revoking_counts_next_call(
    home: Path, tmp_path: Path
) -> None:
    tokens = make_team(home)
    admin(home, "user", "grant-server-admin", "carol")
    listed = admin(home, "user", "list")
    assert [line.endswith("server admin") for line in listed.splitlines()] == [False, False, True], listed
    as_json = {u["name"]: u for u in json.loads(admin(home, "user", "list", "--json"))}
    assert as_json["carol"]["server_admin_since"] > 0 and as_json["alice"]["server_admin_since"] is None

    with team_server(home, tmp_path, **ENV) as server:
        server.tokens = tokens
        async with (
            team_client(server, "alice", "shop", **HEADERS) as alice,
            team_client(server, "bob", "shop", **HEADERS) as bob,
            team_client(server, "carol", "garden", **HEADERS) as carol,
        ):
            for n in range(3):
                await call(alice, "memory_store", {"content": f"alice's private {CANARY} plan number {n}"})
            owner, member, chief = await figures(alice), await figures(bob), await figures(carol)

            hers = await call(carol, "memory_recall", {"query": CANARY})
            searched = await call(carol, "memory_search", {"query": CANARY})

            admin(home, "user", "revoke-server-admin", "carol")
            revoked = await figures(carol)  # the same open session, its very next calls
            admin(home, "user", "grant-server-admin", "carol")
            regranted = await figures(carol)

    assert not store_wide(owner) and not store_wide(member)  # an organisation's owner is no server admin
    assert store_wide(chief)
    # the store's counts: every user's sessions, where an account's own count is its one session
    assert chief["status"]["store"]["counts"]["sessions"] >= 3 and member["status"]["store"]["counts"]["sessions"] == 1
    assert chief["status"]["server"]["connections"] >= 3
    # never another user's memories: recall, search, status and health of the server admin carry none of alice's
    assert CANARY not in json.dumps(hers) and CANARY not in json.dumps(searched)
    assert CANARY not in json.dumps(chief) and chief["health"]["counts"]["memories"]["total"] == 0
    assert all(e["session_id"] != owner["status"]["session"]["id"] for e in chief["status"].get("events", []))
    assert not store_wide(revoked) and store_wide(regranted)
