"""An open MCP session on a team server whose account changes mid-session (issue 21), over real HTTP: the
refused call says why in the gate's words and writes nothing; a call that was waiting when the change came ends
with the same words before it answers; no header and no session id makes an account a server administrator."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.team_server import Team, admin, call, team_client
from threadloom.store.sqlite import SqliteStore

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(300)]
ENV = {"THREADLOOM_MAINTENANCE_INTERVAL": "0", "THREADLOOM_PROBE_INTERVAL": "0", "THREADLOOM_TOOLSET": "full"}


@pytest.fixture
def team_env() -> dict[str, str]:
    return ENV


def rows(team: Team, sql: str) -> list[dict[str, Any]]:
    store = SqliteStore(team.home / "threadloom.db")
    try:
        return store.read(lambda r: r.rows(sql))
    finally:
        store.close()


async def waiting_inbox(team: Team, bob: Client, alice: Client, alice2: Client, *change: str) -> dict[str, Any]:
    """bob waits on his inbox; `change` is made to his account (threadloom admin ...); alice whispers him and her
    other session (which wakes every waiter): what bob's waiting call answers."""
    bobs = (await call(bob, "status", {}))["session"]["id"]
    hers = (await call(alice2, "status", {}))["session"]["id"]
    first = await call(alice, "signal_send", {"to": bobs, "text": "before the change"})
    assert [s["id"] for s in (await call(bob, "signal_inbox", {}))["unread"]] == [first["id"]]
    answer: dict[str, Any] = {}

    async def wait() -> None:
        result = await bob.call_tool("signal_inbox", {"wait_s": 60})
        answer.update(result.structured_content or {})

    async with anyio.create_task_group() as tg:
        tg.start_soon(wait)
        # the waiting call's first look acknowledges what the last one showed: once that is written, it waits
        read = f"SELECT read_at FROM signal_deliveries WHERE signal_id = {int(first['id'])}"
        while rows(team, read) == [{"read_at": None}]:
            await anyio.sleep(0.05)
        admin(team.home, *change)
        await alice.call_tool("signal_send", {"to": bobs, "text": "sent after the change: pelicanword"})
        await call(alice, "signal_send", {"to": hers, "text": "a wake-up for every waiter"})
    return answer


async def test_a_waiting_call_ends_with_the_gates_words_when_the_token_is_revoked(team: Team) -> None:
    async with (
        team_client(team, "bob", "shop") as bob,
        team_client(team, "alice", "shop") as alice,
        team_client(team, "alice", "shop") as alice2,
    ):
        answer = await waiting_inbox(team, bob, alice, alice2, "token", "revoke", team.tokens["bob"].split("_")[1])
    assert answer["retryable"] is False and "was revoked at" in answer["error"], answer
    assert "pelicanword" not in json.dumps(answer)
    unread = rows(team, "SELECT d.read_at FROM signal_deliveries d JOIN signals s ON s.id = d.signal_id "
                       "WHERE s.body LIKE '%pelicanword%'")  # fmt: skip
    assert unread == [{"read_at": None}]  # delivered to nobody: still unread, as sent


async def test_a_waiting_call_ends_when_its_user_leaves_the_organisation(team: Team) -> None:
    async with (
        team_client(team, "bob", "shop") as bob,
        team_client(team, "alice", "shop") as alice,
        team_client(team, "alice", "shop") as alice2,
    ):
        answer = await waiting_inbox(team, bob, alice, alice2, "org", "member", "remove", "acme", "bob")
    assert "not a project of any organisation 'bob' belongs to" in answer["error"], answer
    assert "pelicanword" not in json.dumps(answer)


async def test_the_call_after_a_change_is_refused_whole_and_says_why(team: Team) -> None:
    async with team_client(team, "bob", "shop") as bob:
        await call(bob, "memory_store", {"content": "bob's first note"})
        session = (await call(bob, "status", {}))["session"]["id"]
        journaled = len(rows(team, f"SELECT id FROM events WHERE session_id = '{session}'"))
        admin(team.home, "org", "member", "remove", "acme", "bob")
        with pytest.raises(MCPError, match="not a project of any organisation 'bob' belongs to"):
            await bob.call_tool("memory_store", {"content": "written after removal: ospreyword"})
        admin(team.home, "org", "member", "add", "acme", "bob")
        await call(bob, "memory_recall", {"query": "first note"})  # back in: the same session serves again
        admin(team.home, "user", "remove", "bob")
        with pytest.raises(MCPError, match="unknown access token"):
            await bob.call_tool("memory_store", {"content": "written after removal: ospreyword"})
        with pytest.raises(MCPError, match="unknown access token"):
            await bob.read_resource("threadloom://status")
    assert rows(team, "SELECT id FROM memories WHERE content LIKE '%ospreyword%'") == []
    # the refused calls left no trace in bob's session: only the recall he made while back in was journaled
    after = rows(team, f"SELECT kind, detail FROM events WHERE session_id = '{session}'")
    new = after[journaled:]
    assert {e["kind"] for e in new} <= {"tool.call", "memory.recalled"} and new, new
    assert all("memory_recall" in e["detail"] for e in new if e["kind"] == "tool.call"), new


async def test_no_header_or_session_makes_an_account_a_server_admin(team: Team) -> None:
    admin(team.home, "user", "grant-server-admin", "carol")
    forged = {
        "X-Threadloom-Server-Admin": "true",
        "X-Threadloom-Role": "server-admin",
        "X-Threadloom-Scope": "store",
        "X-Threadloom-Admin": "1",
    }
    async with team_client(team, "alice", "shop", **forged) as owner:  # acme's owner, not a server admin
        assert (await call(owner, "status", {}))["store"]["scope"] == "yours"
        assert (await call(owner, "health", {}))["scope"] == "yours"
    for identity in ({"X-Threadloom-User": "carol"}, {"X-Threadloom-Author": "carol"}, {"X-Threadloom-Org": "globex"}):
        status, _, body = team.post(team.headers("bob", "shop") | identity)
        assert status == 400, (identity, body)

    # carol's own MCP session, carried by another's token: refused, whatever carol may see
    status, headers, _ = team.post(team.headers("carol", "garden"))
    assert status == 200
    carols = {"Mcp-Session-Id": headers["mcp-session-id"], "Mcp-Protocol-Version": "2025-11-25"}
    ready = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert team.post(team.headers("carol", "garden") | carols, body=ready)[0] == 202
    ask = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "status", "arguments": {}}}
    status, _, body = team.post(team.headers("carol", "garden") | carols, body=ask)
    assert status == 200 and result_of(body)["structuredContent"]["store"]["scope"] == "store"
    for who, project in (("bob", "shop"), ("alice", "shop")):
        status, _, body = team.post(team.headers(who, project) | carols, body=ask)
        refused = result_of(body)  # a JSON-RPC error, no result
        assert "belongs to another account" in refused["message"] and "structuredContent" not in refused, body


def result_of(body: str) -> dict[str, Any]:
    """The JSON-RPC result of a response, sent as JSON or as one server-sent event."""
    lines = [line[5:] for line in body.splitlines() if line.startswith("data:")] or [body]
    message = json.loads(lines[-1])
    return dict(message.get("result") or message.get("error") or {})


async def test_an_ask_waiting_for_its_answer_ends_when_the_token_is_revoked(team: Team) -> None:
    async with team_client(team, "bob", "shop") as bob, team_client(team, "alice", "shop") as alice:
        hers = (await call(alice, "status", {}))["session"]["id"]
        answer: dict[str, Any] = {}

        async def ask() -> None:
            result = await bob.call_tool("signal_send", {"kind": "ask", "to": hers, "text": "ready?", "wait_s": 60})
            answer.update(result.structured_content or {})

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask)
            asked = "SELECT id FROM signals WHERE body = 'ready?'"
            while not rows(team, asked):  # once the ask is written, bob's call is past the gate and waits
                await anyio.sleep(0.05)
            admin(team.home, "token", "revoke", team.tokens["bob"].split("_")[1])
            reply = {"kind": "answer", "reply_to": rows(team, asked)[0]["id"], "text": "yes: heronword"}
            await call(alice, "signal_send", reply)
    assert answer["retryable"] is False and "was revoked at" in answer["error"], answer
    assert "heronword" not in json.dumps(answer)
