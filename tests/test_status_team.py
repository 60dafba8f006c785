"""On a team server no account learns from `status`, `threadloom://status` or `health` what other users hold.

Over real HTTP with each user's token, on both backends (tests/backend_home.py): bob (acme, like alice) and carol
(globex) read their figures in three rounds of the same calls; between the second and the third alice stores 7
memories and calls tools. Each round's own calls add the same to a caller's figures, so round 3 must differ from
round 2 exactly as round 2 differs from round 1. A personal server keeps the store's figures
(tests/test_health_mcp.py and the status tests).
"""

from __future__ import annotations

import json
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.backend_home import home
from tests.team_server import call, make_team, team_client, team_server

__all__ = ["home"]
pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(600)]
ENV = {"THREADLOOM_MAINTENANCE_INTERVAL": "0", "THREADLOOM_PROBE_INTERVAL": "0"}
HEADERS = {"X-Threadloom-Toolset": "full"}
VOLATILE = ("at", "uptime_s", "pid")  # the clock's and the process's, not the store's


async def figures(client: Client) -> dict[str, Any]:
    """One round: the status tool, the health tool and the status resource."""
    status = await call(client, "status", {"recent_events": 100})
    health = await call(client, "health", {"window_days": 30})
    read = await client.read_resource("threadloom://status")
    resource = json.loads(read.contents[0].text)  # type: ignore[union-attr]
    return {"status": status, "health": health, "resource": resource}


def flat(value: Any, path: str = "") -> dict[str, Any]:
    """Every leaf by its path; timings (`*_ms`) and the clock's fields left out."""
    if isinstance(value, dict):
        found: dict[str, Any] = {}
        for key, item in value.items():
            if key not in VOLATILE and not str(key).endswith("_ms") and key != "started_at":
                found |= flat(item, f"{path}/{key}")
        return found
    if isinstance(value, list):
        return {f"{path}#len": len(value)}  # a list of events: its length (its rows' times move)
    return {path: value}


def step(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """What changed from `a` to `b`: a number's difference, anything else's new value (None if unchanged)."""
    keys = a.keys() | b.keys()
    out: dict[str, Any] = {}
    for k in sorted(keys):
        x, y = a.get(k), b.get(k)
        numbers = isinstance(x, int | float) and isinstance(y, int | float) and not isinstance(x, bool)
        out[k] = y - x if numbers else (None if x == y else ("changed", x, y))
    return out


async def test_an_account_sees_its_own_figures_and_nothing_of_another_users(home: Path, tmp_path: Path) -> None:
    team = make_team(home)
    with team_server(home, tmp_path, **ENV) as server:
        server.tokens = team
        async with AsyncExitStack() as stack:
            alice = await stack.enter_async_context(team_client(server, "alice", "shop", **HEADERS))
            others = {
                "bob": await stack.enter_async_context(team_client(server, "bob", "shop", **HEADERS)),
                "carol": await stack.enter_async_context(team_client(server, "carol", "garden", **HEADERS)),
            }
            await call(alice, "status", {})
            rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in others}
            for name, client in others.items():
                await figures(client)  # the session opened and each tool called once before round 1
                rounds[name].append(await figures(client))
                rounds[name].append(await figures(client))
            for n in range(7):
                kept = await call(alice, "memory_store", {"content": f"alice's fact {n} about the billing cutover"})
                assert "id" in kept, kept
            hers = await figures(alice)
            for name, client in others.items():
                rounds[name].append(await figures(client))

    assert hers["health"]["counts"]["memories"]["total"] == 7  # alice's own figures say what she stored
    assert hers["status"]["store"]["scope"] == "yours"
    for name, (one, two, three) in rounds.items():
        for report in (one, two, three):
            assert report["status"]["store"]["scope"] == report["resource"]["store"]["scope"] == "yours", name
            assert report["status"]["store"]["path"] is None and "connections" not in report["status"]["server"]
            assert "vectors" not in report["status"]["search"]
            assert "index" not in report["health"] and "store" not in report["health"]
            assert report["health"]["counts"]["memories"]["total"] == 0, name
            assert report["resource"]["session"] is None
        first, second = step(flat(one), flat(two)), step(flat(two), flat(three))
        assert first == second, (name, {k: (first[k], second.get(k)) for k in first if first[k] != second.get(k)})
        # the round's own calls do show: the figures are live, not frozen
        assert second["/status/store/counts/events"] > 0 and second["/health/counts/journal_events/total"] > 0
