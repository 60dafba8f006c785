"""Attack from outside (issue 18): an idempotency replay is a model path too. A Codex session of the same
user that reused the key of a Claude session's user_claim got the first call's remembered result, claim
text included, although THREADLOOM_EGRESS=same-vendor keeps it from OpenAI (user_review withheld it). A key
is scoped to the vendor of the session that sent it: a retry from the same CLI still replays. Through the
real server (bridge and daemon) and the real MCP client."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.helpers import count_rows, serve_params, structured

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
MARKERS = {"claude": {"CLAUDECODE": "1"}, "codex": {"CODEX_HOME": "/nonexistent-codex-home"}}


def params(home: Path, vendor: str) -> Any:
    return serve_params(home, THREADLOOM_TOOLSET="user_model", THREADLOOM_ROOT=str(home), **MARKERS[vendor])


async def test_a_replay_never_hands_another_vendor_what_the_policy_withholds(home: Path) -> None:
    (home / ".env").write_text("THREADLOOM_EGRESS=same-vendor\n")
    call = {"text": "Zanzibar prefers tabs", "idempotency_key": "claim-1"}
    async with Client(params(home, "claude"), mode="legacy") as claude:
        first = structured(await claude.call_tool("user_claim", call))
    async with Client(params(home, "claude"), mode="legacy") as claude:  # a retry from the same CLI replays
        assert structured(await claude.call_tool("user_claim", call)) == first | {"replayed": True}
    assert count_rows(home, "user_claims") == 1
    async with Client(params(home, "codex"), mode="legacy") as codex:
        reused = await codex.call_tool("user_claim", call | {"text": "Likes spaces"})
        assert not reused.is_error, reused
        assert "Zanzibar" not in json.dumps(reused.structured_content), reused
        review = structured(await codex.call_tool("user_review", {}))
    assert "Zanzibar" not in json.dumps(review) and "withheld" in review
