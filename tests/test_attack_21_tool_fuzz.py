"""Every tool of a team server, every argument, fed what a clumsy or hostile client sends (issue 21), over HTTP
on each backend (PostgreSQL in the slow tier): empty, 1.5 MB and NUL-carrying strings, every wrong type,
negative and past-64-bit numbers, impossible dates, unknown enum values. Each call must answer: a result, or
`{error, retryable}` with is_error, never an internal error, a protocol error or silence.

Found this way: an error quoting a multi-megabyte argument (an unknown memory id) was larger than the 1 MiB
an MCP client takes in one message, so the client got no answer at all ("SSE stream failed"); errors now
quote at most 2,000 characters of themselves.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from tests.backend_home import home  # noqa: F401  (each test on both backends)
from tests.team_server import Team, call, team_client

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(600)]

BAD: tuple[tuple[str, Any], ...] = (
    ("empty", ""),
    ("nul", "a\x00b"),
    ("1.5 MB", "x" * (3 * 512 * 1024)),
    ("int", 7),
    ("negative", -1),
    ("int32+1", 2**31),
    ("int64 max", 2**63 - 1),
    ("past int64", 2**64),
    ("float", 1.5),
    ("bool", True),
    ("null", None),
    ("list", ["a"]),
    ("object", {"a": 1}),
    ("no such date", "2026-13-45"),
    ("year 0", "0000-01-01"),
    ("before year 1", -62135596800001),
    ("unknown enum", "zzz"),
)


def plain(name: str, schema: dict[str, Any], memory: str) -> Any:
    """A well-formed value for a required argument, so that the bad one beside it is what the tool meets."""
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "string":
        return memory if "id" in name else "probe text"
    if kind in ("integer", "number"):
        return max(1, schema.get("minimum", 1))
    return {"boolean": False, "array": [], "object": {}}.get(str(kind), "probe")


async def test_every_tool_answers_every_bad_argument_in_words(team: Team) -> None:
    failures: list[str] = []
    async with team_client(team, "alice", "shop", **{"X-Threadloom-Toolset": "full"}) as c:
        memory = (await call(c, "memory_store", {"content": "the fuzz's own memory", "visibility": "project"}))["id"]
        tools = (await c.list_tools()).tools
        assert len(tools) > 30, [t.name for t in tools]
        for tool in tools:
            props: dict[str, Any] = tool.input_schema.get("properties", {})
            base = {k: plain(k, props[k], memory) for k in tool.input_schema.get("required", [])}
            cases = [("no arguments", {})]
            cases += [(f"{p}={label}", base | {p: v}) for p in props if p != "idempotency_key" for label, v in BAD]
            for label, args in cases:
                what = f"{tool.name}({label})"
                try:
                    with anyio.fail_after(60):
                        result = await c.call_tool(tool.name, args)
                except TimeoutError:
                    failures.append(f"{what}: no answer in 60 s")
                    continue
                except MCPError as exc:
                    failures.append(f"{what}: protocol error {exc.error.code} {exc.error.message[:120]}")
                    continue
                said = result.structured_content or {}
                if result.is_error and (
                    not isinstance(said.get("error"), str)
                    or not isinstance(said.get("retryable"), bool)
                    or "internal error" in said["error"]
                ):
                    failures.append(f"{what}: {str(said or result.content)[:160]}")
    assert not failures, "\n".join(failures)
