"""The `learning` tools through a real MCP client over stdio: candidates listed, one accepted as a lesson
(edited), one rejected, another user seeing and deciding nothing, wrong arguments answered with
{error, retryable}, and `status` saying when extract last ran and what it did."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.helpers import cli, serve_params, structured
from tests.test_learning_extract import seed
from threadloom.store.sqlite import open_store

pytestmark = pytest.mark.anyio


def client_for(home: Path, user: str) -> Client:
    env = {"THREADLOOM_USER": user, "THREADLOOM_TOOLSET": "core,learning", "HOME": str(home / "user-home")}
    return Client(serve_params(home, "--in-process", **env), mode="legacy")


def world(home: Path) -> None:
    store = open_store(home / "threadloom.db")
    try:
        seed(store, "alice", "a", [("user", "Always squash fixup commits before merging."), ("user", "Thanks!")])
        seed(store, "alice", "b", [("user", "We decided to run the linters in CI only.")])
        seed(store, "bob", "c", [("user", "Never log request bodies in production.")])
    finally:
        store.close()


async def test_review_through_the_tools_is_each_users_own(home: Path) -> None:
    world(home)
    extracted = cli(home, "learn", "extract", "--json", THREADLOOM_USER="alice")
    assert extracted.returncode == 0, extracted.stderr
    async with client_for(home, "alice") as alice:
        listed = structured(await alice.call_tool("learning_candidates", {}))
        ids = {c["text"]: c["id"] for c in listed["candidates"]}
        squash, linters = (
            ids["Always squash fixup commits before merging."],
            ids["We decided to run the linters in CI only."],
        )
        edit = "Squash fixup commits before merging a branch."
        accepted = structured(await alice.call_tool("learning_accept", {"id": squash, "text": edit}))
        rejected = structured(await alice.call_tool("learning_reject", {"ids": [linters], "reason": "one-off"}))
        status = structured(await alice.call_tool("status", {}))
    assert set(ids) == {"Always squash fixup commits before merging.", "We decided to run the linters in CI only."}
    assert accepted["as"] == "lesson" and accepted["written"]["origin"] == "person"
    assert edit in Path(accepted["written"]["path"]).read_text()
    assert rejected == {"rejected": [linters], "skipped": []}
    learning = status["learning"]
    assert learning["extract"]["enabled"] is False  # the daemon's loop is off until THREADLOOM_LEARN_EXTRACT
    did = learning["extract"]["last_pass"]["did"]
    assert (did["read"], did["queued"]) == (4, 3)
    assert learning["candidates"] == {"accepted": 1, "rejected": 1}
    async with client_for(home, "bob") as bob:
        his = structured(await bob.call_tool("learning_candidates", {}))
        stolen = await bob.call_tool("learning_accept", {"id": squash})
        rejected_by_bob = structured(await bob.call_tool("learning_reject", {"ids": [linters]}))
    assert [c["text"] for c in his["candidates"]] == ["Never log request bodies in production."]
    assert stolen.is_error and stolen.structured_content == {"error": f"no candidate {squash}", "retryable": False}
    assert rejected_by_bob["skipped"] == [{"id": linters, "why": "not found"}]


async def test_wrong_arguments_are_refused_with_a_reason(home: Path) -> None:
    async with client_for(home, "alice") as alice:
        calls: list[tuple[str, dict[str, Any]]] = [
            ("learning_reject", {"ids": []}),
            ("learning_reject", {"ids": "1"}),
            ("learning_accept", {"id": 1, "text": "x" * 1_000_001}),
            ("learning_accept", {"id": 0}),
            ("learning_candidates", {"status": "everything"}),
            ("learning_accept", {"id": 12345}),
        ]
        results = [await alice.call_tool(name, args) for name, args in calls]
    for (name, args), result in zip(calls, results, strict=True):
        assert result.is_error, (name, args)
        body = result.structured_content
        assert body is not None and body["retryable"] is False and body["error"], (name, body)
        assert "internal error" not in body["error"].lower()
