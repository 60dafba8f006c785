"""The `learning` group's skill tools through the real server (bridge and daemon) and the real MCP client:
reading counts a view, using counts a use, pinning protects an entry from the loops, and another user sees
and changes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.helpers import serve_params, structured
from threadloom.config import Settings
from threadloom.errors import InvalidInput
from threadloom.learning.library import Library
from threadloom.runtime import open_runtime

pytestmark = pytest.mark.anyio


def params(home: Path, user: str) -> Any:
    return serve_params(home, THREADLOOM_USER=user, THREADLOOM_TOOLSET="default,learning", THREADLOOM_ROOT=str(home))


def seed(home: Path) -> str:
    rt = open_runtime(Settings(home=home, embedder="none"), "cli")
    try:
        lib = Library(rt)
        lib.write_skill("alice", "run-tests", "Run the tests.", "Run `pytest -q`.", "person", "cli", {"ci.md": "tox"})
        lib.write_skill("alice", "from-loop", "A loop's.", "Step one.", "loop", "review:1")
        return str(lib.add_lesson("alice", "Always rebase before merging.", "loop", "cand:1")["name"])
    finally:
        rt.close()


def loop_write(home: Path) -> None:
    rt = open_runtime(Settings(home=home, embedder="none"), "cli")
    try:
        Library(rt).write_skill("alice", "from-loop", "A loop's.", "Step two.", "loop", "review:2")
    finally:
        rt.close()


async def error_of(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    result = await client.call_tool(tool, arguments)
    content = result.structured_content or {}
    assert result.is_error, result
    return str(content.get("error") or result.content)


async def test_skills_are_read_used_and_pinned_by_their_owner_alone(home: Path) -> None:
    lesson = seed(home)
    async with Client(params(home, "alice"), mode="legacy") as alice:
        listed = structured(await alice.call_tool("skill_list", {}))["entries"]
        assert [(e["kind"], e["name"], e["origin"]) for e in listed] == [
            ("skill", "from-loop", "loop"),
            ("skill", "run-tests", "person"),
            ("lesson", lesson, "loop"),
        ]
        shown = structured(await alice.call_tool("skill_show", {"name": "run-tests"}))
        assert "Run `pytest -q`." in shown["text"] and shown["references"] == ["ci.md"] and shown["viewed"] == 1
        ref = structured(await alice.call_tool("skill_show", {"name": "run-tests", "reference": "ci.md"}))
        assert ref["text"] == "tox"
        assert structured(await alice.call_tool("skill_used", {"name": "run-tests"}))["used"] == 1
        shown = structured(await alice.call_tool("skill_show", {"name": lesson, "kind": "lesson"}))
        assert shown["text"] == "Always rebase before merging."
        assert structured(await alice.call_tool("skill_pin", {"name": "from-loop"}))["pinned"] is True
        assert "not valid" in await error_of(alice, "skill_show", {"name": "../../etc"})
        assert await error_of(alice, "skill_show", {"name": "x" * 100_000})  # refused by the schema
        assert "no reference" in await error_of(alice, "skill_show", {"name": "run-tests", "reference": "../x"})
    with pytest.raises(InvalidInput, match="pinned"):
        loop_write(home)

    async with Client(params(home, "bob"), mode="legacy") as bob:
        assert structured(await bob.call_tool("skill_list", {}))["entries"] == []
        assert await error_of(bob, "skill_show", {"name": "run-tests"}) == "no skill named 'run-tests'"
        assert await error_of(bob, "skill_used", {"name": "run-tests"}) == "no skill named 'run-tests'"
        assert await error_of(bob, "skill_pin", {"name": lesson, "kind": "lesson"}) == f"no lesson named {lesson!r}"

    async with Client(params(home, "alice"), mode="legacy") as alice:
        rows = {e["name"]: e for e in structured(await alice.call_tool("skill_list", {}))["entries"]}
        assert (rows["run-tests"]["viewed"], rows["run-tests"]["used"]) == (1, 1)
        assert rows["from-loop"]["pinned"] is True and rows[lesson]["pinned"] is False
