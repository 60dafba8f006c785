"""Roles and coordination visibility through a real team server (`serve --http --accounts`) and MCP clients:
a reader's shared write is a clear `{error, retryable: false}`, and catch_up from another organisation's
project shows nothing of one the caller was taken out of (issue 21)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.team_server import admin, call, make_team, team_client, team_server

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(300)]
ENV = {"THREADLOOM_MAINTENANCE_INTERVAL": "0", "THREADLOOM_TOOLSET": "full"}


async def test_a_reader_is_refused_shared_writes_and_a_leaver_catches_up_on_nothing(home: Path, tmp_path: Path) -> None:
    tokens = make_team(home)
    admin(home, "org", "member", "add", "globex", "bob")
    admin(home, "org", "member", "add", "acme", "bob", "--role", "reader")
    with team_server(home, tmp_path, **ENV) as team:
        team.tokens = tokens
        async with team_client(team, "bob", "shop") as shop, team_client(team, "bob", "garden") as garden:
            await call(garden, "catch_up", {})  # his garden cursor starts here
            refused = await shop.call_tool(
                "memory_store", {"content": "acme's launch is monday", "visibility": "project"}
            )
            assert refused.is_error and refused.structured_content is not None
            assert refused.structured_content["retryable"] is False
            assert "you are a reader of organisation 'acme'" in refused.structured_content["error"]
            private = await call(shop, "memory_store", {"content": "bob reads acme's notes on mondays"})
            assert private["id"]

            admin(home, "org", "member", "add", "acme", "bob", "--role", "member")
            shared = await call(shop, "memory_store", {"content": "acme's launch moved", "visibility": "project"})
            seen = await call(garden, "catch_up", {"peek": True})
            assert shared["id"] in str(seen["events"]), seen  # his own shop work shows while he is in acme

            admin(home, "org", "member", "remove", "acme", "bob")
            after = await call(garden, "catch_up", {"peek": True})
            peers = await call(garden, "peers", {})
    assert after["events"] == [], after
    assert all(p["project"] == "garden" for p in peers["peers"]), peers
