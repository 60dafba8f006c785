"""Issue 21's isolation matrix: three users in two organisations on one team server, over real HTTP with their
own tokens, call every tool, resource and prompt to read or change what they must not.

alice (acme's owner) plants data in acme's project shop (tests/isolation_team.py). carol (globex, project
garden) must find nothing of it; bob, acme's member, sees shop's shared memories and acme's organisation
memory from shop, only the organisation memory from globex's garden (he is in both), and nothing once taken
out of acme, in the same session. alice's rows must not change.
"""

from __future__ import annotations

import dataclasses
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests import isolation_world
from tests.isolation_battery import battery
from tests.isolation_probe import Probe, dump_rows
from tests.isolation_team import plant_team
from tests.isolation_world import PRIVATE, PROJECT, TOOLSET, Alice
from tests.team_server import admin, make_team, team_client, team_server

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(1800)]
ENV = {"THREADLOOM_MAINTENANCE_INTERVAL": "0", "THREADLOOM_TOOLSET": TOOLSET}


def needles(alice: Alice, *, project: bool, org: bool, name: bool) -> dict[str, str]:
    """alice's private canaries and ids always; shop's (`project`) and acme's organisation memory (`org`) too
    when they must not be seen; her name when the caller shares no organisation with her."""
    found = {word: f"alice's private {what}" for what, word in PRIVATE.items()}
    found |= {m: f"alice's private memory {what}" for what, m in alice.private_ids.items()}
    shared = {k: v for k, v in PROJECT.items() if k != "thread"}
    if project:
        found |= {word: f"shop's {what}" for what, word in shared.items()}
        found |= {m: f"shop's memory {what}" for what, m in alice.shared_ids.items() if what != "org"}
    if org:
        found |= {
            PROJECT["thread"]: "acme's organisation memory",
            alice.shared_ids["org"]: "acme's organisation memory id",
        }
    if name:
        found["alice"] = "alice's name"
    return found


def seeing_org(alice: Alice) -> Alice:
    """alice as bob sees her from garden while in acme: her organisation memory is not hidden from him."""
    return dataclasses.replace(alice, shared_ids={k: v for k, v in alice.shared_ids.items() if k != "org"})


async def test_no_user_of_another_organisation_or_project_sees_or_changes_alices(home: Path, tmp_path: Path) -> None:
    started = time.monotonic()
    tokens = make_team(home)
    admin(home, "org", "member", "add", "globex", "bob")  # bob works in both organisations
    alice = Alice(tmp_path / "no-such-repository")
    db = home / "threadloom.db"
    toolset = {"X-Threadloom-Toolset": TOOLSET}
    probes: list[Probe] = []
    with team_server(home, tmp_path, **ENV) as team:
        team.tokens = tokens
        async with AsyncExitStack() as stack:

            async def session(user: str, project: str, sid: str | None = None) -> Client:
                extra = toolset | ({"X-Threadloom-Session-Id": sid} if sid else {})
                return await stack.enter_async_context(team_client(team, user, project, **extra))

            a1 = await session("alice", "shop", alice.sessions[0])
            a2 = await session("alice", "shop", alice.sessions[1])
            carol = await session("carol", "garden")
            bob_shop = await session("bob", "shop")
            for c in (carol, bob_shop):
                await c.call_tool("peers", {})
            await plant_team(a1, a2, alice, db)
            if plant_learning := getattr(isolation_world, "plant_learning", None):  # her skill, lesson, candidate
                plant_learning(db, alice)
            before = dump_rows(db, "alice")

            control = Probe("control/alice", a1, needles(alice, project=True, org=True, name=False))
            await control.tool("memory_search", {"query": "", "limit": 200})
            assert any("alice's private keyed" in f for f in control.findings), "the probe sees nothing"

            bob_sent: set[str] = set()
            bob_garden: Client | None = None
            everything = needles(alice, project=True, org=True, name=True)
            in_shop = needles(alice, project=False, org=False, name=False)
            in_garden = needles(alice, project=True, org=False, name=False)
            runs = (
                ("carol@garden", carol, alice, everything, True, True, set()),
                ("bob@shop", bob_shop, alice, in_shop, False, True, bob_sent),
                ("bob@garden", None, seeing_org(alice), in_garden, True, False, bob_sent),
            )
            for label, client, view, forbidden, elsewhere, first, sent in runs:
                if client is None:  # bob moves to garden once done in shop (his own journal there is his)
                    client = bob_garden = await session("bob", "garden")
                probe = Probe(label, client, forbidden, sent=sent)
                await battery(probe, view, elsewhere, first)
                probes.append(probe)

            assert bob_garden is not None
            org_search = {"query": "tabs", "all_projects": True, "limit": 50}
            seen = await bob_garden.call_tool("memory_search", org_search)
            assert PROJECT["thread"] in seen.model_dump_json(), "bob, acme's member, sees acme's memory from garden"
            admin(home, "org", "member", "remove", "acme", "bob")  # mid-session: his garden session goes on
            gone = await bob_garden.call_tool("memory_search", org_search)
            assert not gone.is_error and PROJECT["thread"] not in gone.model_dump_json()
            removed = Probe(
                "bob@garden-out-of-acme", bob_garden, needles(alice, project=True, org=True, name=False), sent=bob_sent
            )
            await battery(removed, alice, True, False)
            probes.append(removed)
            after = dump_rows(db, "alice")

    findings = [f for p in probes for f in p.findings]
    findings += changes(before, after, edge_users(db), set(alice.shared_ids.values()))
    assert not findings, "\n".join(findings)
    counts = {p.label: (len(p.tools), len(p.resources), len(p.prompts), p.calls) for p in probes}
    print(f"\nteam isolation (tools, resources, prompts, calls): {counts} in {time.monotonic() - started:.1f}s")


def edge_users(db: Path) -> dict[int, str]:
    """Which user made each edge (by its session)."""
    from threadloom.store.sqlite import SqliteStore

    store = SqliteStore(db)
    sql = "SELECT e.id, s.user FROM memory_edges e JOIN sessions s ON s.id = e.session_id"
    try:
        return {int(row["id"]): str(row["user"]) for row in store.read(lambda r: r.rows(sql))}
    finally:
        store.close()


def changes(before: dict[str, Any], after: dict[str, Any], made_by: dict[int, str], shared: set[str]) -> list[str]:
    """What changed in alice's rows, besides what bob, acme's member, may do to what acme shares: recall its
    organisation memory (its reactivation), link his memories to shop's and acme's, signal her sessions in shop."""
    revived = {"last_reactivated_at", "reactivation_count"}

    def quiet(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in r.items() if r["visibility"] != "org" or k not in revived} for r in rows]

    found = []
    old_edges = {e["id"] for e in before["edges"]}
    found += [f"{made_by.get(e['id'])} linked to alice's {e['target']}" for e in after["edges"]
              if e["id"] not in old_edges and (made_by.get(e["id"]) != "bob" or e["target"] not in shared)]  # fmt: skip
    old_signals = {d["signal_id"] for d in before["deliveries"]}
    found += [f"a signal from {d['sender_user']} reached alice" for d in after["deliveries"]
              if d["signal_id"] not in old_signals and d["sender_user"] != "bob"]  # fmt: skip
    after = after | {
        "memories": quiet(after["memories"]),
        "edges": [e for e in after["edges"] if e["id"] in old_edges],
        "deliveries": [d for d in after["deliveries"] if d["signal_id"] in old_signals],
    }
    before = before | {"memories": quiet(before["memories"])}
    return found + [f"alice's {t} changed: {rows} -> {after[t]}" for t, rows in before.items() if after[t] != rows]
