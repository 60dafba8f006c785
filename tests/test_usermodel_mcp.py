"""The user-model tools through the real server (bridge and daemon) and the real MCP client: a claim earns
its way into the brief, another user sees and changes nothing, and bad input is a clear error that
stores nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.helpers import count_rows, serve_params, structured

pytestmark = pytest.mark.anyio
TABLES = ("user_claims", "user_evidence", "user_claim_tiers")


def params(home: Path, user: str) -> Any:
    return serve_params(home, THREADLOOM_USER=user, THREADLOOM_TOOLSET="default,user_model", THREADLOOM_ROOT=str(home))


def counts(home: Path) -> tuple[int, ...]:
    return tuple(count_rows(home, t) for t in TABLES)


async def error_of(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    result = await client.call_tool(tool, arguments)
    content = result.structured_content or {}
    assert result.is_error and content.get("retryable") is False, result
    return str(content["error"])


async def test_a_claim_is_validated_by_evidence_shown_in_the_brief_and_kept_from_another_user(home: Path) -> None:
    async with Client(params(home, "ana"), mode="legacy") as ana:
        made = structured(
            await ana.call_tool(
                "user_claim",
                {"text": "Wants a plan before any code", "domain": "workflow", "statement": "plan first, please"},
            )
        )
        cid = made["claim"]["id"]
        for i in range(3):
            added = structured(await ana.call_tool("user_evidence", {"claim_id": cid, "ref": f"plan first ({i})"}))
        assert added["claim"]["tier"] == "validated" and added["transitions"][0]["to"] == "validated"
        hypothesis = structured(await ana.call_tool("user_claim", {"text": "Maybe prefers terse replies"}))
        synthesis = structured(await ana.call_tool("user_synthesis", {}))
        assert [c["id"] for c in synthesis["domains"]["workflow"]] == [cid] and synthesis["left_out"] == 1
        review = structured(await ana.call_tool("user_review", {"claim_id": cid, "as_of": "2001-01-01"}))
        assert review["held_then"] is False and review["history"] == []
        brief = structured(await ana.call_tool("brief", {}))["text"]
        assert "Wants a plan before any code" in brief and "terse" not in brief
    stored = counts(home)

    async with Client(params(home, "ben"), mode="legacy") as ben:
        unknown = await error_of(ben, "user_review", {"claim_id": "uc_0000000000000000"})
        assert unknown == "no claim uc_0000000000000000 of yours"
        assert await error_of(ben, "user_review", {"claim_id": cid}) == f"no claim {cid} of yours"
        assert await error_of(ben, "user_evidence", {"claim_id": cid, "ref": "no", "kind": "contradict"}) == (
            f"no claim {cid} of yours"
        )
        assert "of yours" in await error_of(ben, "user_claim", {"supersedes": cid, "text": "Codes first"})
        assert structured(await ben.call_tool("user_synthesis", {}))["domains"] == {}
        assert structured(await ben.call_tool("user_review", {}))["claims"] == []
        assert "Wants a plan" not in structured(await ben.call_tool("brief", {}))["text"]
    assert counts(home) == stored
    assert hypothesis["claim"]["tier"] == "hypothesis"


BAD_INPUT: list[tuple[str, dict[str, Any], str]] = [
    ("user_claim", {}, "empty"),
    ("user_claim", {"text": "   "}, "empty"),
    ("user_claim", {"text": "x" * 1_000_000}, "at most 500"),
    ("user_claim", {"text": 42}, "valid string"),
    ("user_claim", {"text": "ok", "domain": ["style"]}, "valid string"),
    ("user_claim", {"text": "ok", "valid_from": "last week"}, "ISO 8601"),
    ("user_claim", {"text": "ok", "by": "uc_0000000000000000"}, "give supersedes too"),
    ("user_claim", {"text": "ok", "supersedes": "uc_0000000000000000"}, "no claim"),
    ("user_evidence", {"claim_id": "uc_0000000000000000", "ref": "x"}, "no claim"),
    ("user_evidence", {"claim_id": "uc_0000000000000000", "ref": "x", "weight": "heavy"}, "valid number"),
    ("user_evidence", {"claim_id": "uc_0000000000000000", "ref": "x", "kind": "maybe"}, "support"),
    ("user_review", {"claim_id": "'; DROP TABLE user_claims; --"}, "not a claim id"),
]


async def test_bad_input_is_a_clear_error_and_stores_nothing(home: Path) -> None:
    async with Client(serve_params(home, "--in-process", THREADLOOM_TOOLSET="user_model"), mode="legacy") as client:
        for tool, arguments, message in BAD_INPUT:
            assert message in await error_of(client, tool, arguments), (tool, arguments)
    assert counts(home) == (0, 0, 0)


async def test_a_supersede_cycle_is_refused_through_the_tools(home: Path) -> None:
    async with Client(serve_params(home, "--in-process", THREADLOOM_TOOLSET="user_model"), mode="legacy") as client:
        old = structured(await client.call_tool("user_claim", {"text": "Uses tabs", "domain": "technical"}))
        new = structured(
            await client.call_tool("user_claim", {"text": "Uses spaces", "supersedes": old["claim"]["id"]})
        )
        assert new["superseded"] == old["claim"]["id"] and new["claim"]["domain"] == "technical"
        stored = counts(home)
        cycle = {"supersedes": new["claim"]["id"], "by": old["claim"]["id"]}
        assert "cycle" in await error_of(client, "user_claim", cycle)
        listed = structured(await client.call_tool("user_review", {}))["claims"]
        assert [c["text"] for c in listed] == ["Uses spaces"]
    assert counts(home) == stored
