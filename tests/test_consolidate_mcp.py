"""Consolidation through the real surfaces: memory_maintain(consolidate=true) over MCP (bridge and daemon,
the real client), as two users; `threadloom consolidate` in a terminal; the `health` tool's report of the
pass."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from tests.helpers import cli, serve_params, structured

pytestmark = pytest.mark.anyio
FACT = "The login page times out after 15 minutes of inactivity."
SAME = "After 15 minutes of inactivity, the login page times out."


async def test_an_agent_previews_and_applies_a_consolidation_of_its_own_memories(home: Path) -> None:
    ben = serve_params(home, THREADLOOM_TOOLSET="full", THREADLOOM_ROOT=str(home), THREADLOOM_USER="ben",
                       THREADLOOM_SESSION_ID="ben-1", THREADLOOM_EMBEDDER="none")  # fmt: skip
    async with Client(ben, mode="legacy") as client:
        bens = [structured(await client.call_tool("memory_store", {"content": t}))["id"] for t in (FACT, SAME)]
    ana = serve_params(home, THREADLOOM_TOOLSET="full", THREADLOOM_ROOT=str(home), THREADLOOM_USER="ana",
                       THREADLOOM_SESSION_ID="ana-1", THREADLOOM_EMBEDDER="none")  # fmt: skip
    async with Client(ana, mode="legacy") as client:
        mine = [structured(await client.call_tool("memory_store", {"content": t}))["id"] for t in (FACT, SAME)]
        preview = structured(await client.call_tool("memory_maintain", {"consolidate": True}))
        assert preview["dry_run"] and preview["would_merge"]["memory"] == 1
        assert {preview["merges"][0]["survivor"], preview["merges"][0]["merged"]} == set(mine)  # ana's alone
        done = structured(await client.call_tool("memory_maintain", {"consolidate": True, "dry_run": False}))
        merged = done["merges"][0]["merged"]
        assert done["merged"]["memory"] == 1
        explained = structured(await client.call_tool("memory_explain", {"memory_id": merged}))
        assert explained["superseded_by"] == done["merges"][0]["survivor"]
        recalled = structured(await client.call_tool("memory_recall", {"query": "login page inactivity timeout"}))
        assert [m["id"] for m in recalled["memories"]] == [done["merges"][0]["survivor"]]
        health = structured(await client.call_tool("health", {}))
        assert health["jobs"]["consolidate:ana"]["last"]["changed"]["merged"] == 1
        assert "consolidate:ben" not in health["jobs"]  # another user's pass is theirs to see
        bad = await client.call_tool("memory_maintain", {"consolidate": "yes please"})
        assert bad.is_error
    async with Client(ben, mode="legacy") as client:  # ben's pair was never touched by ana's pass
        for memory_id in bens:
            got = structured(await client.call_tool("memory_explain", {"memory_id": memory_id}))
            assert got["superseded_by"] is None


@pytest.mark.timeout(600)  # five commands, each a whole start-up on a loaded machine
def test_the_cli_reports_a_dry_run_and_applies_when_asked(home: Path) -> None:
    env = {"THREADLOOM_USER": "ana", "THREADLOOM_EMBEDDER": "none"}
    for text in (FACT, SAME):
        assert cli(home, "memory", "store", text, timeout=240, **env).returncode == 0
    dry = cli(home, "consolidate", timeout=240, **env)
    assert dry.returncode == 0, dry.stderr
    assert "DRY RUN: would merge 1 (1 memory" in dry.stdout and "nothing was changed" in dry.stdout
    done = cli(home, "consolidate", "--apply", timeout=240, **env)
    assert done.returncode == 0 and "merged 1 (1 memory" in done.stdout
    bad = cli(home, "consolidate", "--kind", "memories", timeout=240, **env)
    assert bad.returncode == 2 and "kinds are one or more of memory, note, quote" in bad.stderr
