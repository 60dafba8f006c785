"""A clumsy client: huge, empty, wrongly typed or out-of-range arguments each get a clear
{error, retryable} naming the argument — never "internal error", never silence."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.helpers import serve_params, structured

pytestmark = pytest.mark.anyio

HUGE = 10**30
CASES: list[tuple[str, dict[str, Any], str]] = [
    ("memory_recall", {"query": "x", "as_of": HUGE}, "as_of"),
    ("memory_recall", {"query": "x", "as_of": -5}, "as_of"),
    ("memory_recall", {"query": "x", "as_of": "last week"}, "as_of"),
    ("memory_store", {"content": "x", "valid_from": 1_700_000_000}, "looks like seconds"),
    ("memory_store", {"content": "x", "valid_from": 2**64}, "valid_from"),
    ("memory_search", {"created_since": HUGE}, "created_since"),
    ("memory_search", {"active_since": -1}, "active_since"),
    ("memory_search", {"categories": ["c"] * 40_000}, "categories"),
    ("memory_store", {"content": "a\x00b"}, "NUL"),
    ("memory_store", {"content": "x", "entities": ["e"] * 5_000}, "entities"),
    ("thread_create", {"title": "bad\x00title"}, "NUL"),
    ("signal_send", {"kind": "answer", "reply_to": 2**70, "text": "hi"}, "reply_to"),
    ("spawn", {"prompt": "hi", "cwd": "/" + "d" * 100_000}, "cwd"),
    ("spawn", {"prompt": "hi", "cwd": "/tmp/a\x00b"}, "NUL"),
    ("spawn", {"prompt": "hi", "cwd": "/etc"}, "outside this session's project"),
]


async def test_each_bad_argument_gets_a_clear_error_naming_it(home: Path, tmp_path: Path) -> None:
    params = serve_params(
        home, "--in-process", THREADLOOM_ROOT=str(tmp_path), THREADLOOM_TOOLSET="full,coordination,agents"
    )
    async with Client(params, mode="legacy") as client:
        for tool, arguments, named in CASES:
            result = await client.call_tool(tool, arguments)
            assert result.is_error, (tool, arguments)
            body = structured(result)
            assert named in body["error"], (tool, body)
            assert "internal error" not in body["error"] and body["retryable"] is False, (tool, body)
        assert structured(await client.call_tool("memory_search", {}))["memories"] == []  # nothing was written
        iso = await client.call_tool(
            "memory_search", {"created_since": "2026-01-01", "active_since": "2026-01-01T09:00Z"}
        )
        assert not iso.is_error, iso
