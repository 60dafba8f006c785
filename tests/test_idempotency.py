"""Every write tool takes an idempotency key: a retry with the key returns the first result and acts once."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from tests.helpers import count_rows, serve_params, structured

pytestmark = pytest.mark.anyio


async def test_retried_writes_with_a_key_act_once_and_return_the_first_result(home: Path, tmp_path: Path) -> None:
    def params(user: str, sid: str) -> object:
        return serve_params(
            home, "--in-process", THREADLOOM_ROOT=str(tmp_path), THREADLOOM_TOOLSET="full,coordination",
            THREADLOOM_USER=user, THREADLOOM_SESSION_ID=sid,
        )  # fmt: skip

    async with (
        Client(params("ana", "ana-1"), mode="legacy") as ana,
        Client(params("ben", "ben-1"), mode="legacy") as ben,
    ):
        await ben.call_tool("peers", {})
        sends = [
            structured(await ana.call_tool("signal_send", {"to": "ben-1", "text": "lunch?", "idempotency_key": "k1"}))
            for _ in range(3)
        ]
        assert sends[1] == sends[0] | {"replayed": True} and sends[2] == sends[1]
        assert count_rows(home, "signal_deliveries") == 1
        made = {"action": "create", "title": "Shop", "idempotency_key": "p1"}
        projects = [structured(await ana.call_tool("thread_project", made)) for _ in range(2)]
        assert projects[1] == projects[0] | {"replayed": True}, projects
        noted = [
            structured(await ana.call_tool("thread_note", {"text": "tried redis", "idempotency_key": "n1"}))
            for _ in range(2)
        ]
        assert noted[1].get("replayed"), noted
        assert count_rows(home, "thread_notes") == 1
        old = structured(await ana.call_tool("memory_store", {"content": "the port is 5432"}))["id"]
        fix = {"memory_id": old, "content": "the port is 6432", "idempotency_key": "a1"}
        first, again = [structured(await ana.call_tool("memory_amend", fix)) for _ in range(2)]
        assert again == first | {"replayed": True} and count_rows(home, "memories") == 2
        # another user's key is another key
        theirs = structured(await ben.call_tool("thread_note", {"text": "ben's own note", "idempotency_key": "n1"}))
        assert "replayed" not in theirs and count_rows(home, "thread_notes") == 2
        # a call that failed claimed nothing: its retry runs
        bad = await ana.call_tool("signal_send", {"to": "nobody-at-all", "text": "x", "idempotency_key": "k2"})
        assert bad.is_error
        good = structured(await ana.call_tool("signal_send", {"to": "ben-1", "text": "x", "idempotency_key": "k2"}))
        assert "replayed" not in good and good["delivered_to"] == ["ben-1"]
