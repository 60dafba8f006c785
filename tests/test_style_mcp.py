"""The style tools through the real server (bridge and daemon) and the real MCP client: a habit passes the
gate across two sessions and reaches the brief, the capsule answers ack and delta, another user sees and
changes nothing, and bad input (1 MB hints, names, addresses, diagnoses, personality labels) is a clear
error that stores nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.helpers import count_rows, serve_params, structured

pytestmark = pytest.mark.anyio
TABLES = ("style_habits", "style_observations", "style_profile", "style_revisions")
HINT = {"kind": "idiolect", "text": "tiny but mighty", "example": "tiny but mighty, ship it"}


def params(home: Path, user: str, *args: str) -> Any:
    env = {"THREADLOOM_USER": user, "THREADLOOM_TOOLSET": "default,user_model", "THREADLOOM_ROOT": str(home)}
    return serve_params(home, *args, **env)


def counts(home: Path) -> tuple[int, ...]:
    return tuple(count_rows(home, t) for t in TABLES)


async def error_of(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    result = await client.call_tool(tool, arguments)
    content = result.structured_content or {}
    assert result.is_error and content.get("retryable") is False, result
    return str(content["error"])


async def test_a_habit_seen_in_two_sessions_reaches_the_capsule_and_the_brief(home: Path) -> None:
    async with Client(params(home, "ana"), mode="legacy") as first:
        made = structured(await first.call_tool("style_hint", {"hints": [HINT], "profile": ["conclusions first"]}))
        assert made["observed"] == [{"kind": "idiolect", "text": "tiny but mighty", "status": "candidate"}]
        capsule = structured(await first.call_tool("style", {}))
        assert capsule["mode"] == "capsule" and capsule["habits"] == []
        known = capsule["revision"]
    async with Client(params(home, "ana"), mode="legacy") as second:
        again = structured(await second.call_tool("style_hint", {"hints": [HINT]}))
        assert again["observed"][0]["status"] == "active"
        delta = structured(await second.call_tool("style", {"revision": known}))
        assert delta["mode"] == "delta" and any("tiny but mighty" in line for line in delta["added"])
        now = structured(await second.call_tool("style", {}))
        assert structured(await second.call_tool("style", {"revision": now["revision"]}))["mode"] == "ack"
        brief = structured(await second.call_tool("brief", {}))["text"]
        assert "tiny but mighty" in brief and "Lead with the conclusion" in brief
        hid = now["habits"][0]["id"]
        pinned = structured(await second.call_tool("style_manage", {"action": "pin", "target": hid}))
        assert pinned["revision"] == now["revision"]  # pinning an active habit changes nothing shown
        habits = structured(await second.call_tool("style", {"view": "habits"}))["habits"]
        assert [(h["id"], h["pinned"], h["sessions"]) for h in habits] == [(hid, True, 2)]
    stored = counts(home)

    async with Client(params(home, "ben"), mode="legacy") as ben:
        assert await error_of(ben, "style_manage", {"action": "forget", "target": hid}) == f"no habit {hid} of yours"
        other = "sh_0000000000000000"
        assert await error_of(ben, "style_manage", {"action": "pin", "target": other}) == f"no habit {other} of yours"
        mine = structured(await ben.call_tool("style", {}))
        assert mine["revision"] == 0 and mine["habits"] == [] and mine["profile"] == []
        assert structured(await ben.call_tool("style", {"view": "habits"}))["habits"] == []
        assert "tiny but mighty" not in structured(await ben.call_tool("brief", {}))["text"]
    assert counts(home) == stored

    async with Client(params(home, "ana"), mode="legacy") as third:
        gone = structured(await third.call_tool("style_manage", {"action": "forget", "target": hid}))
        assert gone["revision"] > now["revision"]
        assert structured(await third.call_tool("style", {}))["habits"] == []


BAD_INPUT: list[tuple[dict[str, Any], str]] = [
    ({"hints": [{"kind": "idiolect", "text": "x" * 1_000_000}]}, "at most 40 characters"),
    ({"hints": [{"kind": "idiolect", "text": "ok", "example": "y" * 1_000_000}]}, "at most 200 characters"),
    ({"profile": ["z" * 1_000_000]}, "at most 200 characters"),
    ({"hints": [{"kind": "idiolect", "text": "my name is Ana"}]}, "refused, it would store a name"),
    ({"hints": [{"kind": "idiolect", "text": "ok", "example": "ok I live at 221 Baker Street"}]}, "an address"),
    ({"profile": ["She was diagnosed with ADHD, keep it short"]}, "health or a diagnosis"),
    ({"profile": ["INTJ, so be blunt"]}, "a personality label"),
    ({"profile": ["我叫王伟，先给结论"]}, "a name"),
    ({"hints": [{"kind": "mood", "text": "grumpy"}]}, "catchphrase"),
    ({"hints": [{"kind": "emoji"}]}, "text"),
    ({"hints": [HINT] * 9}, "at most 8 hints"),
    ({}, "give hints"),
]


async def test_bad_input_is_a_clear_error_and_stores_nothing(home: Path) -> None:
    async with Client(params(home, "ana", "--in-process"), mode="legacy") as client:
        for arguments, message in BAD_INPUT:
            assert message in await error_of(client, "style_hint", arguments), arguments
        assert "action" in await error_of(client, "style_manage", {"action": "explode"})
        assert "sh_ and 16 hex" in await error_of(client, "style_manage", {"action": "pin", "target": "../../etc"})
        assert "a name" in await error_of(client, "style_manage", {"action": "profile_set", "target": "Me llamo Ana"})
        assert "revision" in await error_of(client, "style", {"revision": -1})
    assert counts(home) == (0, 0, 0, 0)


async def test_the_style_tools_are_not_in_the_default_toolset(home: Path) -> None:
    async with Client(serve_params(home, "--in-process"), mode="legacy") as client:
        names = {t.name for t in (await client.list_tools()).tools}
        refused = await client.call_tool("style", {})
    assert not names & {"style", "style_hint", "style_manage"}
    assert refused.is_error and "not in this session's toolset" in (refused.structured_content or {})["error"]


async def test_a_spawned_agent_cannot_change_the_users_style_memory(home: Path) -> None:
    env = {"THREADLOOM_USER": "ana", "THREADLOOM_TOOLSET": "user_model", "THREADLOOM_ROOT": str(home)}
    async with Client(serve_params(home, "--in-process", **env, THREADLOOM_SESSION_ID="parent-1"), mode="legacy") as p:
        assert structured(await p.call_tool("style", {}))["revision"] == 0  # the parent session exists
        child_env = env | {"THREADLOOM_PARENT_SESSION": "parent-1"}
        async with Client(serve_params(home, "--in-process", **child_env), mode="legacy") as child:
            assert "spawned agent" in await error_of(child, "style_hint", {"hints": [HINT]})
            assert "spawned agent" in await error_of(child, "style_manage", {"action": "pause"})
            assert structured(await child.call_tool("style", {}))["mode"] == "capsule"  # reading is allowed
        assert structured(await p.call_tool("style_hint", {"hints": [HINT]}))["learning"] is True
    assert counts(home)[0] == 1
