"""The curation tools of the `learning` group through the real server and the real MCP client: concepts gain
confidence across sessions, insights take one vote per session and are exported once past the threshold,
curate_report decides without changing anything, and another user sees and changes nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.helpers import serve_params, structured
from threadloom.config import Settings
from threadloom.learning.library import Library
from threadloom.runtime import open_runtime

pytestmark = pytest.mark.anyio
DEPLOY = "Deploy with the release script.\n\nRun `make release` from a clean tree, then tag the commit."


def params(home: Path, user: str) -> Any:
    return serve_params(
        home, THREADLOOM_USER=user, THREADLOOM_TOOLSET="default,learning", THREADLOOM_ROOT=str(home),
        THREADLOOM_LEARN_INSIGHT_VOTES="2",
    )  # fmt: skip


async def error_of(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result
    return str((result.structured_content or {}).get("error") or result.content)


async def test_concepts_and_insights_across_sessions_and_users(home: Path) -> None:
    async with Client(params(home, "alice"), mode="legacy") as a:
        first = structured(await a.call_tool("concept_note", {"text": "Flaky tests read the clock."}))
        made = structured(await a.call_tool("insight", {"action": "distill", "text": "Small commits review faster."}))
        assert "cannot vote" in await error_of(a, "insight", {"action": "vote", "id": made["id"]})
        assert "needs text" in await error_of(a, "insight", {"action": "distill"})
        assert await error_of(a, "insight", {"action": "distill", "text": "x" * 1_000_001})
    async with Client(params(home, "alice"), mode="legacy") as b:
        again = structured(await b.call_tool("concept_note", {"text": "flaky tests READ the clock"}))
        assert again["id"] == first["id"] and again["confidence"] > first["confidence"] and again["sources"] == 2
        one = structured(await b.call_tool("insight", {"action": "vote", "id": made["id"]}))
        repeat = structured(await b.call_tool("insight", {"action": "vote", "id": made["id"]}))
        assert (one["counted"], one["exported"], repeat["counted"], repeat["up"]) == (True, 0, False, 1)
    async with Client(params(home, "bob"), mode="legacy") as bob:
        assert "no insight" in await error_of(bob, "insight", {"action": "vote", "id": made["id"]})
        theirs = structured(await bob.call_tool("concept_note", {"text": "Flaky tests read the clock."}))
        assert theirs["created"] is True and theirs["id"] != first["id"]
    async with Client(params(home, "alice"), mode="legacy") as c:
        out = structured(await c.call_tool("insight", {"action": "vote", "id": made["id"]}))
        assert out["up"] == 2 and out["exported"] == 1
    lines = (home / "insights" / "alice.jsonl").read_text().splitlines()
    assert [json.loads(line)["text"] for line in lines] == ["Small commits review faster."]


async def test_curate_report_decides_and_changes_nothing(home: Path) -> None:
    rt = open_runtime(Settings(home=home, embedder="none"), "cli")
    try:
        lib = Library(rt)
        lib.write_skill("alice", "deploy", "How to deploy.", DEPLOY, "loop", "review:1")
        lib.write_skill("alice", "deploy-again", "How to deploy.", DEPLOY + "\n\nTag it.", "loop", "review:2")
    finally:
        rt.close()
    before = {p: p.read_bytes() for p in (home / "skills").rglob("*") if p.is_file() and ".lock" not in p.name}
    async with Client(params(home, "alice"), mode="legacy") as alice:
        report = structured(await alice.call_tool("curate_report", {}))
        assert report["enabled"] is False and report["last_pass"] is None
        assert [(v["name"], v["verdict"], v.get("into")) for v in report["verdicts"]] == [
            ("deploy-again", "merge", "deploy")
        ]
    async with Client(params(home, "bob"), mode="legacy") as bob:
        assert structured(await bob.call_tool("curate_report", {}))["verdicts"] == []
    after = {p: p.read_bytes() for p in (home / "skills").rglob("*") if p.is_file() and ".lock" not in p.name}
    assert after == before and not (home / "curator").exists()
