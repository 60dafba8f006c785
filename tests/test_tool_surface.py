"""The tool surface changes only on purpose: a snapshot of tools/list, a token budget for the default
set, time arguments that take what the brief's now table shows, honest read-only hints, and prompts
that name only the tools a session has. All through a real MCP client over stdio."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.helpers import serve_params, structured
from threadloom import tokens
from threadloom.server.coordination_tools import COORDINATION_TOOLS
from threadloom.server.memory_tools import MEMORY_TOOLS
from threadloom.server.thread_tools import THREAD_TOOLS
from threadloom.server.tools import TOOLS

pytestmark = pytest.mark.anyio
SNAPSHOT = Path(__file__).parent / "snapshots" / "tools_list.json"
# Tokens (cl100k_base) an agent pays in every session for the default toolset: tools/list as sent plus
# the server instructions (issue 16). The full surface is opt-in; its budget only stops silent growth.
DEFAULT_BUDGET_TOKENS = 3_000
FULL_BUDGET_TOKENS = 11_000  # 10,000 until the learning group (533 tokens) joined the full surface
# The calls an agent is told to make first: a client gating a read-only mode on the hint must let them through.
FIRST_CALLS = ("brief", "status", "memory_recall", "thread_context")
ISO_WITH_OFFSET = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3})?[+-]\d\d:\d\d$")


async def listing(home: Path, toolset: str) -> tuple[list[dict[str, Any]], str]:
    async with Client(serve_params(home, "--in-process", THREADLOOM_TOOLSET=toolset), mode="legacy") as client:
        listed = await client.list_tools()
        instructions = client.instructions or ""
    return [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in listed.tools], instructions


async def tools_list(home: Path, toolset: str) -> list[dict[str, Any]]:
    return (await listing(home, toolset))[0]


def cost(tools: list[dict[str, Any]], instructions: str) -> tuple[int, str]:
    """Tokens of tools/list (compact JSON, as sent) plus the instructions, and the per-tool breakdown."""
    total = tokens.count(json.dumps({"tools": tools}, separators=(",", ":"))) + tokens.count(instructions)
    rows = [f"{t['name']:<20}{tokens.count(json.dumps(t, separators=(',', ':'))):>6}" for t in tools]
    rows.append(f"{'(instructions)':<20}{tokens.count(instructions):>6}")
    return total, "\n".join(rows)


async def test_every_tool_has_a_title_a_description_and_documented_arguments(home: Path) -> None:
    for tool in await tools_list(home, "full"):
        assert tool.get("title"), tool["name"]
        assert tool.get("description"), tool["name"]
        hints = tool.get("annotations", {})
        assert hints.get("openWorldHint") is False, tool["name"]
        if not hints.get("readOnlyHint"):  # MCP: destructive defaults to true, so a writer must say it is not
            assert isinstance(hints.get("destructiveHint"), bool), tool["name"]
        for name, prop in tool["inputSchema"].get("properties", {}).items():
            assert prop.get("description"), f"{tool['name']}.{name} is undocumented"
            assert "title" not in prop and {"type": "null"} not in prop.get("anyOf", []), f"{tool['name']}.{name}"


async def test_tools_list_matches_the_snapshot(home: Path) -> None:
    current = await tools_list(home, "full")
    if os.environ.get("UPDATE_SNAPSHOTS"):
        SNAPSHOT.write_text(json.dumps(current, indent=2, sort_keys=True) + "\n")
    assert current == json.loads(SNAPSHOT.read_text()), "tools/list changed; rerun with UPDATE_SNAPSHOTS=1 if meant"


async def test_the_default_toolset_and_instructions_fit_3000_tokens(home: Path) -> None:
    default, instructions = await listing(home, "default")
    used, breakdown = cost(default, instructions)
    assert used <= DEFAULT_BUDGET_TOKENS, f"default toolset: {used} tokens > {DEFAULT_BUDGET_TOKENS}\n{breakdown}"
    full, _ = await listing(home, "full")
    used, breakdown = cost(full, instructions)
    assert used <= FULL_BUDGET_TOKENS, f"full toolset: {used} tokens > {FULL_BUDGET_TOKENS}\n{breakdown}"


async def test_the_default_toolset_covers_a_session(home: Path) -> None:
    default, instructions = await listing(home, "default")
    names = {t["name"] for t in default}
    remember, recall, correct, pick_up, note = (
        "memory_store",
        "memory_recall",
        "memory_amend",
        "thread_context",
        "thread_note",
    )
    inbox, tell = "signal_inbox", "signal_send"  # tell, ask and answer an ask (kind answer)
    assert {remember, recall, correct, pick_up, note, inbox, tell} <= names
    answer = next(t for t in default if t["name"] == tell)["inputSchema"]["properties"]
    assert "answer" in answer["kind"]["enum"] and "reply_to" in answer
    assert set(re.findall(r"`([a-z_]+)`", instructions)) <= names  # the instructions name only tools it has


async def test_a_toolset_limits_what_is_listed_and_what_may_be_called(home: Path) -> None:
    default = {t["name"] for t in await tools_list(home, "default")}
    assert "memory_traverse" not in default and "memory_core" not in default
    async with Client(serve_params(home, "--in-process"), mode="legacy") as client:
        refused = await client.call_tool("memory_stats", {})
    assert refused.is_error and "not in this session's toolset" in refused.structured_content["error"]
    graph = {t["name"] for t in await tools_list(home, "core,memory_graph")}
    assert "memory_traverse" in graph and "memory_store" not in graph and "signal_send" not in graph


async def test_the_first_calls_are_read_only(home: Path) -> None:
    hints = {t["name"]: t.get("annotations", {}) for t in await tools_list(home, "default")}
    for name in FIRST_CALLS:
        assert hints[name].get("readOnlyHint") is True, name


async def test_reading_another_threads_context_does_not_switch_to_it(home: Path, tmp_path: Path) -> None:
    params = serve_params(home, "--in-process", THREADLOOM_ROOT=str(tmp_path), THREADLOOM_SESSION_ID="s1")
    async with Client(params, mode="legacy") as client:
        await client.call_tool("thread_project", {"action": "create", "title": "Shop"})
        child = structured(await client.call_tool("thread_create", {"title": "cart"}))
        await client.call_tool("thread_status", {"status": "active", "thread_id": "main"})
        peeked = structured(await client.call_tool("thread_context", {"thread_id": child["id"]}))
        still = structured(await client.call_tool("thread_context", {}))
        await client.call_tool("thread_status", {"status": "active", "thread_id": child["id"]})
        moved = structured(await client.call_tool("thread_context", {}))
    assert peeked["threads"][0] == child["id"]
    assert still["threads"][0] == "main"  # the read left the session where it was
    assert moved["threads"][0] == child["id"]  # thread_status active is the switch


async def test_moving_to_a_teammates_thread_rewrites_nothing_of_it(home: Path, tmp_path: Path) -> None:
    def session(author: str) -> Any:
        env = {"THREADLOOM_ROOT": str(tmp_path), "THREADLOOM_AUTHOR": author, "THREADLOOM_SESSION_ID": author}
        return serve_params(home, "--in-process", **env)

    async with Client(session("alice"), mode="legacy") as alice:
        await alice.call_tool("thread_project", {"action": "create", "title": "Team", "mode": "team"})
        hers = structured(await alice.call_tool("thread_create", {"title": "alice work"}))
    async with Client(session("bob"), mode="legacy") as bob:
        moved = await bob.call_tool("thread_status", {"status": "active", "thread_id": hers["id"]})
        context = structured(await bob.call_tool("thread_context", {}))
        reopened = await bob.call_tool("thread_status", {"status": "active", "thread_id": hers["id"], "reason": "x"})
    assert not moved.is_error and context["threads"][0] == hers["id"]
    assert reopened.is_error and "only the author" in structured(reopened)["error"]  # a change is still hers to make


def _required(tool: dict[str, Any]) -> dict[str, Any]:
    schema = tool["inputSchema"]
    return {name: "probe" for name in schema.get("required", [])}


async def test_every_time_argument_takes_iso_dates_datetimes_and_epoch_ms(home: Path) -> None:
    params = serve_params(home, "--in-process", THREADLOOM_TOOLSET="full,coordination,agents")
    async with Client(params, mode="legacy") as client:
        listed = [t.model_dump(by_alias=True, exclude_none=True) for t in (await client.list_tools()).tools]
        timed = [
            (tool, name)
            for tool in listed
            for name, prop in tool["inputSchema"].get("properties", {}).items()
            if prop.get("type") == ["string", "integer"]
        ]
        known = {
            ("memory_store", "valid_from"),
            ("memory_recall", "as_of"),
            ("memory_search", "created_since"),
            ("memory_search", "active_since"),
        }
        assert {(t["name"], n) for t, n in timed} >= known
        for tool, name in timed:
            for good in ("2026-11-01", "2026-11-01T09:30:00+02:00", "2026-11-01T09:30Z", 1_793_491_200_000, 1.7935e12):
                result = await client.call_tool(tool["name"], _required(tool) | {name: good})
                if (tool["name"], name) in known:
                    assert not result.is_error, (tool["name"], name, good, result.structured_content)
                else:  # a tool may need more than this probe gives it, but never refuses the time
                    assert not result.is_error or f"{name}: " not in structured(result)["error"], (tool["name"], good)
            for bad, said in (("last week", "ISO 8601"), ("yesterday", "ISO 8601"), (1.5, "ISO 8601"), (True, "")):
                result = await client.call_tool(tool["name"], _required(tool) | {name: bad})
                body = structured(result)
                assert result.is_error and body["retryable"] is False, (tool["name"], name, bad)
                assert name in body["error"] and said in body["error"], body
                assert 'brief(scope="now")' in body["error"], body  # where to copy a right value from
        found = structured(await client.call_tool("memory_search", {"query": ""}))
    [memory, *_] = found["memories"]
    for key in ("created_at", "valid_from", "last_reactivated_at"):
        assert ISO_WITH_OFFSET.match(memory[key]), (key, memory[key])
    assert memory["valid_from"].startswith("2026-11-01")


@pytest.mark.parametrize("toolset", ["default", "full"])
async def test_help_and_merge_prompts_name_only_the_sessions_tools(home: Path, toolset: str) -> None:
    async with Client(serve_params(home, "--in-process", THREADLOOM_TOOLSET=toolset), mode="legacy") as client:
        names = {t.name for t in (await client.list_tools()).tools}
        help_text = (await client.get_prompt("help")).messages[0].content.text  # type: ignore[union-attr]
        merge = (await client.get_prompt("merge")).messages[0].content.text  # type: ignore[union-attr]
        switch = (await client.get_prompt("switch", {"thread_id": "x"})).messages[0].content.text  # type: ignore[union-attr]
    listed = re.findall(r"^- ([a-z_]+) \(", help_text, re.MULTILINE)
    assert set(listed) == names and len(listed) == len(names)
    for line in help_text.splitlines():
        if line.startswith("- "):
            assert line.rstrip().endswith((".", ")")), line  # whole sentences, never cut
    every_tool = {t.name for t in (*TOOLS, *MEMORY_TOOLS, *THREAD_TOOLS, *COORDINATION_TOOLS)}
    named = set(re.findall(r"\b([a-z]+_[a-z_]+)\b", merge + switch)) & every_tool
    assert named and named <= names, named - names
    assert ("thread_merge" in merge) == (toolset == "full")
    assert set(re.findall(r"`([a-z_]+)`", help_text)) & every_tool <= names  # the advice too names only its tools


async def test_help_leaves_out_advice_about_tools_the_session_lacks(home: Path) -> None:
    params = serve_params(home, "--in-process", THREADLOOM_TOOLSET="core,memory_graph")
    async with Client(params, mode="legacy") as client:
        names = {t.name for t in (await client.list_tools()).tools}
        help_text = (await client.get_prompt("help")).messages[0].content.text  # type: ignore[union-attr]
    every_tool = {t.name for t in (*TOOLS, *MEMORY_TOOLS, *THREAD_TOOLS, *COORDINATION_TOOLS)}
    advice = help_text.split("Your tools")[0]
    assert set(re.findall(r"`([a-z_]+)`", advice)) & every_tool <= names
    assert "memory_store" not in advice and '"retryable"' in advice  # the advice that holds is kept


async def test_instructions_and_thread_prompts_name_only_the_sessions_tools(home: Path) -> None:
    every_tool = {t.name for t in (*TOOLS, *MEMORY_TOOLS, *THREAD_TOOLS, *COORDINATION_TOOLS)}
    params = serve_params(home, "--in-process", THREADLOOM_TOOLSET="core,memory_graph")
    async with Client(params, mode="legacy") as client:
        names = {t.name for t in (await client.list_tools()).tools}
        instructions = client.instructions or ""
        texts = [
            (await client.get_prompt(name, args)).messages[0].content.text  # type: ignore[union-attr]
            for name, args in [("merge", {}), ("switch", {"thread_id": "x"}), ("create", {"title": "t"})]
        ]
    assert set(re.findall(r"`([a-z_]+)`", instructions)) & every_tool <= names
    assert "memory_store" not in instructions and '"retryable"' in instructions
    for text in texts:
        assert "not offered" in text and "THREADLOOM_TOOLSET" in text, text
        assert "Call thread_" not in text
