"""Attack from outside (issues 17 and 18): a clumsy client's idempotency key on the new write tools
(user_claim, user_evidence, style_hint...). A key that is empty, too long or not a string must be answered
like every other bad argument, {error, retryable: false}, and store nothing; it came back as a bare text
error with no structured content. Through the real server and the real MCP client."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.helpers import count_rows, serve_params

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
BAD_KEYS: list[Any] = ["", "k" * 201, 42, ["a"], {"a": 1}]


async def test_a_bad_idempotency_key_is_a_clear_error_and_stores_nothing(home: Path) -> None:
    params = serve_params(home, "--in-process", THREADLOOM_TOOLSET="user_model")
    async with Client(params, mode="legacy") as client:
        for key in BAD_KEYS:
            result = await client.call_tool("user_claim", {"text": "Prefers tabs", "idempotency_key": key})
            assert result.is_error and result.structured_content is not None, (key, result)
            assert result.structured_content["retryable"] is False, key
            assert "idempotency key" in result.structured_content["error"], key
    assert count_rows(home, "user_claims") == 0
