"""Signals between real server processes sharing one store."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client

from tests.helpers import serve_params, structured

pytestmark = pytest.mark.anyio


def params(home: Path, sid: str) -> object:
    return serve_params(
        home, "--in-process", THREADLOOM_SESSION_ID=sid, THREADLOOM_TOOLSET="full", THREADLOOM_ROOT=str(home)
    )


async def test_a_waiting_agent_wakes_when_another_process_whispers(home: Path) -> None:
    async with (
        Client(params(home, "waiter-1"), mode="legacy") as waiter,
        Client(params(home, "sender-1"), mode="legacy") as sender,
    ):
        await waiter.call_tool("peers", {})
        await sender.call_tool("peers", {})
        result: dict[str, object] = {}

        async def wait() -> None:
            started = time.monotonic()
            result.update(structured(await waiter.call_tool("signal_inbox", {"wait_s": 30})))
            result["took"] = time.monotonic() - started

        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)
            await anyio.sleep(0.5)
            sent = structured(await sender.call_tool("signal_send", {"to": "waiter", "text": "build is green"}))
        assert sent["delivered_to"] == ["waiter-1"]
        assert result["timed_out"] is False and [s["body"] for s in result["unread"]] == ["build is green"]  # type: ignore[union-attr]
        assert float(result["took"]) < 25  # woke on the signal, not at the timeout  # type: ignore[arg-type]
        quiet = structured(await waiter.call_tool("signal_inbox", {"wait_s": 0.3}))
        assert quiet["timed_out"] is True and quiet["unread"] == []


async def test_ask_waits_for_the_answer_from_another_process(home: Path) -> None:
    async with (
        Client(params(home, "lead-1"), mode="legacy") as lead,
        Client(params(home, "dev-1"), mode="legacy") as dev,
    ):
        await dev.call_tool("peers", {})
        answer: dict[str, object] = {}

        async def ask() -> None:
            answer.update(
                structured(
                    await lead.call_tool("signal_send", {"kind": "ask", "to": "dev-1", "text": "done?", "wait_s": 30})
                )
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask)
            box = structured(await dev.call_tool("signal_inbox", {"wait_s": 20}))
            question = box["unread"][0]
            await dev.call_tool("signal_send", {"kind": "answer", "reply_to": question["id"], "text": "yes"})
        assert answer["timed_out"] is False and answer["answer"]["body"] == "yes"  # type: ignore[index]


async def test_four_servers_exchange_whispers_and_broadcasts_without_loss_duplication_or_reordering(home: Path) -> None:
    names = [f"agent-{n}" for n in range(4)]
    whispers, broadcasts = 250, 25  # per sender: 1,000 whispers and 100 broadcasts in all
    async with (
        Client(params(home, names[0]), mode="legacy") as c0,
        Client(params(home, names[1]), mode="legacy") as c1,
        Client(params(home, names[2]), mode="legacy") as c2,
        Client(params(home, names[3]), mode="legacy") as c3,
    ):
        clients = [c0, c1, c2, c3]
        for client in clients:
            await client.call_tool("peers", {})

        async def send(n: int) -> None:
            for i in range(whispers):
                to = names[(n + 1 + i % 3) % 4]
                await clients[n].call_tool("signal_send", {"to": to, "text": f"{names[n]} w{i}"})
                if i % 10 == 0:
                    await clients[n].call_tool("signal_send", {"kind": "broadcast", "text": f"{names[n]} b{i // 10}"})

        async with anyio.create_task_group() as tg:
            for n in range(4):
                tg.start_soon(send, n)
        got: dict[str, list[str]] = {}
        for n, client in enumerate(clients):
            bodies: list[str] = []
            while True:
                box = structured(await client.call_tool("signal_inbox", {"limit": 200}))
                bodies += [s["body"] for s in box["unread"]]
                if not box["unread_left"]:
                    break
            got[names[n]] = bodies
    for receiver, bodies in got.items():
        assert len(bodies) == len(set(bodies)), f"{receiver} got a duplicate"
        for sender in names:
            if sender == receiver:
                continue
            mine = [b for b in bodies if b.startswith(sender + " ")]
            w = [int(b.split(" w")[1]) for b in mine if " w" in b]
            b = [int(x.split(" b")[1]) for x in mine if " b" in x]
            expected_w = [i for i in range(whispers) if names[(names.index(sender) + 1 + i % 3) % 4] == receiver]
            assert w == expected_w, f"{receiver} from {sender}: whispers lost or out of order"
            assert b == list(range(broadcasts)), f"{receiver} from {sender}: broadcasts lost or out of order"


async def test_a_spawned_child_signals_its_parent_who_is_waiting(home: Path) -> None:
    fake = f"{sys.executable} {Path(__file__).parent / 'fake_agent.py'}"
    server = serve_params(
        home, "--in-process", THREADLOOM_SESSION_ID="boss-1", THREADLOOM_TOOLSET="full", THREADLOOM_ROOT=str(home),
        THREADLOOM_SPAWN_COMMAND=fake,
    )  # fmt: skip
    async with Client(server, mode="legacy") as boss:
        task = structured(await boss.call_tool("spawn", {"prompt": "signal tests pass", "role": "tester"}))
        box = structured(await boss.call_tool("signal_inbox", {"wait_s": 60}))
        assert [s["body"] for s in box["unread"]] == ["tests pass"] and box["unread"][0]["task"] == task["id"]
        for _ in range(100):
            shown = structured(await boss.call_tool("tasks", {"task_id": task["id"]}))
            if shown["task"]["status"] == "done":
                break
            await anyio.sleep(0.2)
        assert shown["task"]["status"] == "done" and "parent=boss-1" in shown["log_tail"]
        assert [s["body"] for s in shown["signals"]] == ["tests pass"]
