"""Attack from outside (issue 18): "claims with no text" includes text of invisible characters only (a
right-to-left override, zero-width spaces, a BOM). user_claim stored such a claim; it is refused like an
empty one and nothing is stored. Through the real server and the real MCP client."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from tests.helpers import count_rows, serve_params

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
INVISIBLE = ("\u202e", "\u200b\u200b", "\ufeff \u200d", "\u2060\u00ad")


async def test_a_claim_or_statement_of_invisible_characters_is_empty(home: Path) -> None:
    params = serve_params(home, "--in-process", THREADLOOM_TOOLSET="user_model")
    async with Client(params, mode="legacy") as client:
        for text in INVISIBLE:
            for arguments in ({"text": text}, {"text": "Prefers tabs", "statement": text}):
                result = await client.call_tool("user_claim", arguments)
                content = result.structured_content or {}
                assert result.is_error and "is empty" in content.get("error", ""), (arguments, result)
                assert content["retryable"] is False
    assert count_rows(home, "user_claims") == 0 and count_rows(home, "user_evidence") == 0
