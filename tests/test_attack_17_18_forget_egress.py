"""Attack from outside (issues 17 and 18): `forget`'s dry run is a model path too. A Codex session under
THREADLOOM_EGRESS=same-vendor (or anyone under none) listing what would be forgotten must not read the text
of claims or style habits recorded in a Claude Code session; it gets their ids, counts and the one withheld
line. Through the real server (bridge and daemon) and the real MCP client."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.helpers import serve_params, structured

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
MARKERS = {"claude": {"CLAUDECODE": "1"}, "codex": {"CODEX_HOME": "/nonexistent-codex-home"}}


def params(home: Path, vendor: str, policy: str) -> Any:
    return serve_params(
        home,
        THREADLOOM_USER="ana",
        THREADLOOM_TOOLSET="default,user_model,erasure",
        THREADLOOM_ROOT=str(home),
        THREADLOOM_EGRESS=policy,
        **MARKERS[vendor],
    )


async def seed(home: Path, policy: str) -> None:
    async with Client(params(home, "claude", policy), mode="legacy") as claude:
        made = await claude.call_tool("user_claim", {"text": "Zanzibar prefers tabs", "statement": "tabs, Zanzibar"})
        assert not made.is_error, made
        hint = await claude.call_tool("style_hint", {"hints": [{"kind": "catchphrase", "text": "zanzibar vale"}]})
        assert not hint.is_error, hint


CASES = [
    ("same-vendor", "codex", False),
    ("none", "claude", False),
    ("same-vendor", "claude", True),
    ("all", "codex", True),
]


@pytest.mark.parametrize(("policy", "reader", "shown"), CASES)
async def test_forget_dry_run_shows_personal_text_only_where_egress_allows(
    home: Path, policy: str, reader: str, shown: bool
) -> None:
    await seed(home, policy)
    async with Client(params(home, reader, policy), mode="legacy") as client:
        listed = structured(
            await client.call_tool("forget", {"text": "zanzibar", "kinds": ["claims", "style"], "dry_run": True})
        )
    found = listed["would_erase"]
    assert found["claims"]["count"] == 1 and found["style"]["count"] == 1, listed
    assert all(row["id"] for kind in ("claims", "style") for row in found[kind]["sample"])
    text = json.dumps(listed).lower()
    assert ("zanzibar prefers tabs" in text and "zanzibar vale" in text) is shown, listed
    assert ("zanzibar" in text) is shown, listed
    assert ("withheld" in listed) is not shown, listed
    if not shown:
        assert listed["withheld"].startswith(f"egress policy={policy}: personal memory withheld")
