"""Signals are delivered by acknowledgement: one shown to an agent whose reply was lost comes again."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from tests.helpers import serve_params, structured

pytestmark = pytest.mark.anyio


def params(home: Path, sid: str) -> object:
    return serve_params(home, THREADLOOM_SESSION_ID=sid, THREADLOOM_TOOLSET="full", THREADLOOM_ROOT=str(home))


async def test_a_signal_whose_reply_was_lost_is_shown_again_and_acknowledged_by_the_next_read(home: Path) -> None:
    async with Client(params(home, "sender-1"), mode="legacy") as sender:
        async with Client(params(home, "reader-1"), mode="legacy") as reader:
            await reader.call_tool("peers", {})
            await sender.call_tool("signal_send", {"to": "reader-1", "text": "the build is red"})
            shown = structured(await reader.call_tool("signal_inbox", {}))
            assert [s["body"] for s in shown["unread"]] == ["the build is red"]
        # that connection ended before anything acknowledged what it was shown (a reply lost in a crash)
        async with Client(params(home, "reader-1"), mode="legacy") as again:
            first = structured(await again.call_tool("signal_inbox", {}))
            assert [s["body"] for s in first["unread"]] == ["the build is red"]
            await sender.call_tool("signal_send", {"to": "reader-1", "text": "fixed now"})
            second = structured(await again.call_tool("signal_inbox", {}))  # acknowledges the first reply
            assert [s["body"] for s in second["unread"]] == ["fixed now"]
            status = structured(await again.call_tool("status", {}))
            assert status["unread_signals"] == 1
            third = structured(await again.call_tool("signal_inbox", {"ack": second["unread"][0]["id"]}))
            assert third["unread"] == [] and structured(await again.call_tool("status", {}))["unread_signals"] == 0
