"""Style learning through the real daemon: Claude Code transcripts in the user's home are ingested by the
daemon's poll, its style job learns the habits the user showed in two sessions (not the one shown in one,
not the assistant's), and the capsule reaches the brief; another user of the same daemon learns nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.helpers import serve_params, structured
from tests.test_ingest import claude_file, line

pytestmark = pytest.mark.anyio


async def capsule_until(client: Client, check: Any) -> dict[str, Any]:
    with anyio.fail_after(60):
        while True:
            found = structured(await client.call_tool("style", {}))
            if check(found):
                return found
            await anyio.sleep(0.2)
    raise AssertionError("unreachable")  # pragma: no cover - fail_after raises first


async def test_the_daemon_learns_habits_from_ingested_transcripts(home: Path, tmp_path: Path) -> None:
    user = tmp_path / "u"
    first, second = claude_file(user, "s1.jsonl"), claude_file(user, "s2.jsonl")
    first.write_text(
        line(1, "lgtm, ship it 🚀 and no vague praise please", session="s1")
        + line(2, "Great catch! lgtm lgtm ship it", session="s1")  # the assistant's words teach nothing
        + line(3, "omg, the flaky test again", session="s1")
    )
    second.write_text(line(1, "ok ship it 🚀", session="s2") + line(3, "lgtm", session="s2"))
    (home / ".env").write_text("THREADLOOM_USER=ada\n")
    env = {
        "HOME": str(user),
        "THREADLOOM_INGEST": "true",
        "THREADLOOM_INGEST_INTERVAL": "0.2",
        "THREADLOOM_TOOLSET": "default,user_model",
    }
    async with Client(serve_params(home, **env), mode="legacy") as ada:
        found = await capsule_until(ada, lambda c: len(c["habits"]) >= 3)
        assert {(h["kind"], h["text"]) for h in found["habits"]} == {
            ("catchphrase", "ship it"),
            ("catchphrase", "lgtm"),
            ("emoji", "🚀"),
        }
        assert found["language"] == "en" and "No vague praise" in found["text"]
        habits = structured(await ada.call_tool("style", {"view": "habits"}))["habits"]
        lgtm = next(h for h in habits if h["text"] == "lgtm")
        assert lgtm["seen"] == 2 and lgtm["sessions"] == 2 and lgtm["vendor"] == "claude"
        assert next(h for h in habits if h["text"] == "omg")["status"] == "candidate"
        brief = structured(await ada.call_tool("brief", {}))["text"]
        assert '"ship it"' in brief and "the user's style" in brief
        async with Client(serve_params(home, **env, THREADLOOM_USER="bob"), mode="legacy") as bob:
            assert structured(await bob.call_tool("style", {}))["revision"] == 0
            assert structured(await bob.call_tool("style", {"view": "habits"}))["habits"] == []
