"""Attack from outside (issue 18): a hint that stores a name the guard's phrases did not know. "soy Juan
García" (Spanish: I am Juan García) went in as an idiolect habit; a self-introduction followed by a
capitalised name is a name in any of the languages the guard reads, and is refused with nothing stored,
while ordinary phrases that start the same way still pass. Through the real server and MCP client."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from tests.helpers import count_rows, serve_params

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
NAMES = ("soy Juan García", "I'm Juan", "I am Maria Lopez", "je m'appelle Marie", "ich heiße Jonas")
PHRASES = ("soy yo", "I'm done", "I am on it", "soy de Madrid")  # lowercase after the introduction


async def test_a_self_introduction_with_a_name_is_refused_and_ordinary_phrases_pass(home: Path) -> None:
    params = serve_params(home, "--in-process", THREADLOOM_TOOLSET="user_model")
    async with Client(params, mode="legacy") as client:
        for text in NAMES:
            result = await client.call_tool("style_hint", {"hints": [{"kind": "idiolect", "text": text}]})
            content = result.structured_content or {}
            assert result.is_error and "refused, it would store a name" in content.get("error", ""), (text, result)
        assert count_rows(home, "style_habits") == 0
        for text in PHRASES:
            result = await client.call_tool("style_hint", {"hints": [{"kind": "idiolect", "text": text}]})
            assert not result.is_error, (text, result)
    assert count_rows(home, "style_habits") == len(PHRASES)
