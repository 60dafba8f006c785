"""The memory tools through the real server: the bridge and daemon, driven by the real MCP client."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from tests.helpers import count_rows, serve_params, structured

pytestmark = pytest.mark.anyio


async def test_an_agent_stores_recalls_amends_and_walks_its_memories(home: Path) -> None:
    params = serve_params(home, THREADLOOM_TOOLSET="full", THREADLOOM_ROOT=str(home), THREADLOOM_SESSION_ID="agent-1")
    async with Client(params, mode="legacy") as client:
        cause = structured(await client.call_tool("memory_store", {"content": "CI runs out of disk on big PRs"}))
        fix = structured(
            await client.call_tool(
                "memory_store",
                {
                    "content": "We cache wheels in CI to keep the disk under 10 GB",
                    "category": "ci",
                    "related": [{"id": cause["id"], "type": "caused_by"}],
                    "idempotency_key": "fix-1",
                },
            )
        )
        assert fix["created"] and fix["edges"][0]["type"] == "caused_by"
        again = structured(await client.call_tool("memory_store", {"content": "x", "idempotency_key": "fix-1"}))
        assert again == again | {"id": fix["id"], "replayed": True, "created": False}

        recalled = structured(await client.call_tool("memory_recall", {"query": "CI disk wheels cache"}))
        top = recalled["memories"][0]
        assert top["id"] == fix["id"] and top["why"][0]["id"] == cause["id"]
        assert top["provenance"]["session"] == "agent-1"

        amended = structured(
            await client.call_tool(
                "memory_amend",
                {
                    "memory_id": fix["id"],
                    "content": "We cache wheels in CI to keep the disk under 20 GB",
                    "reason": "grew",
                },
            )
        )
        assert amended["old"]["superseded_by"] == amended["new"]["id"]
        walked = structured(await client.call_tool("memory_traverse", {"memory_id": cause["id"], "depth": 2}))
        assert {n["id"] for n in walked["nodes"]} == {cause["id"], fix["id"], amended["new"]["id"]}
        explained = structured(await client.call_tool("memory_explain", {"memory_id": fix["id"]}))
        assert explained["superseded_by"] == amended["new"]["id"] and not explained["would_be_forgotten_now"]
        core = structured(
            await client.call_tool(
                "memory_core", {"key": "ci.disk", "content": "CI disk budget: 20 GB", "priority": 80}
            )
        )
        assert core["core"][0]["key"] == "ci.disk"
        stats = structured(await client.call_tool("memory_stats", {}))
    assert stats["memories"] == 4 and stats["superseded"] == 1 and stats["core"] == 1
    explicit = {t: n for t, n in stats["edges_by_type"].items() if t != "related_to"}  # auto-links may add some
    assert explicit == {"caused_by": 1, "supersedes": 1}


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"content": "x", "related": [{"id": "m_00000000000000aa", "type": "causes"}]}, "related"),
        ({"content": "x", "related": [{"id": "m_00000000000000aa", "type": "caused_by"}]}, "no memory"),
        ({"content": "x", "related": [{"id": "../etc", "type": "caused_by"}]}, "not a memory id"),
        ({"content": ""}, "non-empty"),
        ({"content": "x" * 20_001}, "20,000"),
        ({"content": 5}, "valid string"),
        ({"content": "x", "kind": "rumour"}, "kind"),
    ],
)
async def test_bad_input_is_a_structured_error_and_writes_nothing(
    home: Path, arguments: dict[str, object], message: str
) -> None:
    async with Client(serve_params(home, "--in-process"), mode="legacy") as client:
        result = await client.call_tool("memory_store", arguments)
    assert result.is_error and result.structured_content is not None
    assert message in result.structured_content["error"] and result.structured_content["retryable"] is False
    assert count_rows(home, "memories") == 0 and count_rows(home, "memory_edges") == 0
