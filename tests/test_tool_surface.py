"""The tool surface changes only on purpose: a snapshot of tools/list and a size budget."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.helpers import serve_params

pytestmark = pytest.mark.anyio
SNAPSHOT = Path(__file__).parent / "snapshots" / "tools_list.json"
# Bytes of tools/list JSON an agent pays for in every session (about 4 bytes a token): status, four
# memory tools and six thread tools cost 19.6 KB, most of it the argument documentation a small model
# needs (retry keys on every write, ISO or epoch times, kinds to recall and argument limits added 2.4 KB).
# The session-start issue (16) brings the default set under 3,000 tokens; until then this only stops growth.
DEFAULT_BUDGET_BYTES = 20_000
FULL_BUDGET_BYTES = 48_000


async def tools_list(home: Path, toolset: str) -> list[dict[str, Any]]:
    async with Client(serve_params(home, "--in-process", THREADLOOM_TOOLSET=toolset), mode="legacy") as client:
        listed = await client.list_tools()
    return [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in listed.tools]


async def test_every_tool_has_a_title_and_all_three_hints(home: Path) -> None:
    for tool in await tools_list(home, "full"):
        hints = tool.get("annotations", {})
        assert tool.get("title") or hints.get("title"), tool["name"]
        for hint in ("readOnlyHint", "destructiveHint", "idempotentHint"):
            assert isinstance(hints.get(hint), bool), (tool["name"], hint)
        assert tool.get("description"), tool["name"]
        for name, prop in tool["inputSchema"].get("properties", {}).items():
            assert prop.get("description"), f"{tool['name']}.{name} is undocumented"


async def test_tools_list_matches_the_snapshot(home: Path) -> None:
    current = await tools_list(home, "full")
    if os.environ.get("UPDATE_SNAPSHOTS"):
        SNAPSHOT.write_text(json.dumps(current, indent=2, sort_keys=True) + "\n")
    assert current == json.loads(SNAPSHOT.read_text()), "tools/list changed; rerun with UPDATE_SNAPSHOTS=1 if meant"


async def test_the_tool_surface_stays_within_its_size_budget(home: Path) -> None:
    default = await tools_list(home, "default")
    full = await tools_list(home, "full")
    assert len(json.dumps(default)) <= DEFAULT_BUDGET_BYTES
    assert len(json.dumps(full)) <= FULL_BUDGET_BYTES
    assert len(default) <= 15


async def test_a_toolset_limits_what_is_listed_and_what_may_be_called(home: Path) -> None:
    default = {t["name"] for t in await tools_list(home, "default")}
    assert {"status", "memory_store", "memory_recall"} <= default and "memory_traverse" not in default
    async with Client(serve_params(home, "--in-process"), mode="legacy") as client:
        refused = await client.call_tool("memory_stats", {})
    assert refused.is_error and "not in this session's toolset" in refused.structured_content["error"]
    graph = {t["name"] for t in await tools_list(home, "core,memory_graph")}
    assert "memory_traverse" in graph and "memory_store" not in graph
