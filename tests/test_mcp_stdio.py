"""The real server, spawned as an agent CLI would spawn it, driven by the real MCP client."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp_types import ListRootsResult, Root

from tests.helpers import DEFAULT_TOOLS, MODES, RawSession, count_rows, serve_params, structured
from threadloom.store.sqlite import SqliteStore

pytestmark = pytest.mark.anyio


@pytest.fixture(params=sorted(MODES))
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_status_reports_store_session_and_server(home: Path, mode: str) -> None:
    params = serve_params(home, *MODES[mode], THREADLOOM_SESSION_ID="sess-1", THREADLOOM_ROOT=str(home))
    async with Client(params, mode="legacy") as client:
        assert "threadloom" in (client.instructions or "")
        tools = await client.list_tools()
        assert [t.name for t in tools.tools] == list(DEFAULT_TOOLS)
        st = structured(await client.call_tool("status", {}))
    assert st["store"]["path"] == str(home / "threadloom.db")
    assert st["store"]["schema_version"] >= 1
    assert st["session"]["id"] == "sess-1"
    assert st["session"]["project"] == str(home)
    assert st["session"]["transport"] == ("bridge" if mode == "bridge" else "stdio")
    assert st["server"]["mode"] == ("daemon" if mode == "bridge" else "in-process")
    assert st["versions"]["threadloom"]


async def test_the_vendor_comes_from_the_agent_environment(home: Path, mode: str) -> None:
    async with Client(serve_params(home, *MODES[mode], GEMINI_CLI="1"), mode="legacy") as client:
        st = structured(await client.call_tool("status", {}))
    assert st["session"]["vendor"] == "gemini"


async def test_the_project_root_comes_from_the_client_roots(home: Path, mode: str, tmp_path: Path) -> None:
    async def roots(_ctx: Any) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri=tmp_path.as_uri())])

    async with Client(serve_params(home, *MODES[mode]), mode="legacy", list_roots_callback=roots) as client:
        st = structured(await client.call_tool("status", {}))
    assert st["session"]["project"] == str(tmp_path)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"recent_events": "many"}, "valid integer"),
        ({"recent_events": 1000}, "less than or equal to 100"),
        ({"recent_event": 1}, "unknown argument"),
    ],
)
async def test_bad_arguments_get_a_structured_error_and_write_nothing(
    home: Path, mode: str, arguments: dict[str, Any], message: str
) -> None:
    async with Client(serve_params(home, *MODES[mode]), mode="legacy") as client:
        await client.call_tool("status", {})
        before = count_rows(home, "events")
        result = await client.call_tool("status", arguments)
        assert result.is_error
        body = structured(result)
        assert message in body["error"]
        assert body["retryable"] is False
        assert json.loads(result.content[0].text) == body  # type: ignore[union-attr]
        assert count_rows(home, "events") == before
        again = await client.call_tool("status", {"recent_events": 2})
    assert not again.is_error
    assert len(structured(again)["events"]) == 2


async def test_an_unknown_tool_is_a_structured_error(home: Path, mode: str) -> None:
    async with Client(serve_params(home, *MODES[mode]), mode="legacy") as client:
        result = await client.call_tool("no_such_tool", {})
    assert result.is_error
    assert structured(result) == {"error": "Unknown tool: no_such_tool", "retryable": False}


@pytest.mark.parametrize("mode_args", list(MODES.values()), ids=list(MODES))
def test_malformed_messages_never_break_the_transport(home: Path, mode_args: tuple[str, ...]) -> None:
    raw = RawSession(home, *mode_args)
    try:
        assert raw.initialize()["result"]["serverInfo"]["name"] == "threadloom"
        bad = raw.request("tools/call", {"name": "status", "arguments": 5})
        assert bad["result"]["isError"] is True
        assert bad["result"]["structuredContent"]["retryable"] is False
        missing = raw.request("tools/call", {})
        assert missing["result"]["isError"] is True
        raw.send_line(b"this is not json")
        raw.send_line(b'{"jsonrpc": "2.0", "id": "x", "method": 42}')
        ok = raw.request("tools/call", {"name": "status", "arguments": {}})
        assert ok["result"]["structuredContent"]["store"]["schema_version"] >= 1
    finally:
        assert raw.close() == 0


async def test_the_status_resource_and_the_help_prompt_are_served(home: Path, mode: str) -> None:
    async with Client(serve_params(home, *MODES[mode]), mode="legacy") as client:
        resources = await client.list_resources()
        assert [str(r.uri) for r in resources.resources] == ["threadloom://status", "threadloom://now"]
        body = await client.read_resource("threadloom://status")
        status = json.loads(body.contents[0].text)  # type: ignore[union-attr]
        assert status["store"]["path"] == str(home / "threadloom.db")
        prompts = await client.list_prompts()
        assert "help" in [p.name for p in prompts.prompts]
        help_text = await client.get_prompt("help")
    assert "status" in help_text.messages[0].content.text  # type: ignore[union-attr]


async def test_an_unknown_tool_group_is_refused_with_a_clear_message(home: Path, mode: str) -> None:
    raw = RawSession(home, *MODES[mode], THREADLOOM_TOOLSET="core,bogus")
    code = raw.close()
    assert raw.proc.returncode == code
    assert code == 2


async def test_a_child_agent_session_records_its_parent(home: Path, mode: str) -> None:
    params = serve_params(home, *MODES[mode], THREADLOOM_SESSION_ID="kid-1", THREADLOOM_PARENT_SESSION="mom-1")
    async with Client(params, mode="legacy") as client:
        await client.call_tool("status", {})
    store = SqliteStore(home / "threadloom.db")
    try:
        parent = store.read(lambda r: r.scalar("SELECT parent_id FROM sessions WHERE id = 'kid-1'"))
    finally:
        store.close()
    assert parent == "mom-1"
