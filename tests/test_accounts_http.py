"""`serve --http --accounts`: each request acts for its token's account, in a project of its organisation; a
revoked or expired token, a removed user or member is refused at the next call (issue 21)."""

from __future__ import annotations

import json

import pytest
from mcp.shared.exceptions import MCPError

from tests.helpers import cli
from tests.team_server import Team, admin, call, team_client
from threadloom.store.sqlite import SqliteStore

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(300)]


def token_id(token: str) -> str:
    return token.split("_")[1]


def error_of(body: str) -> str:
    """A refusal before any MCP session is `{error, retryable}`; within one, a JSON-RPC error carrying it."""
    said = json.loads(body)
    if "jsonrpc" in said:
        assert said["id"] is None and said["error"]["data"]["retryable"] is False
        said = said["error"]["data"]
    assert said["retryable"] is False
    return str(said["error"])


def test_every_refusal_is_a_clear_401_or_403(team: Team) -> None:
    status, headers, body = team.post({"X-Threadloom-Project": "shop"})
    assert (status, headers["www-authenticate"]) == (401, "Bearer") and "needs an access token" in body
    status, headers, body = team.post(
        {"Authorization": "Bearer tlk_000000000000_" + "x" * 43, "X-Threadloom-Project": "shop"}
    )
    assert status == 401 and 'error="invalid_token"' in headers["www-authenticate"]
    assert error_of(body) == "unknown access token"
    assert team.post(team.headers("bob", "shop"))[0] == 200
    lower = {"Authorization": f"bearer {team.tokens['bob']}", "X-Threadloom-Project": "shop"}
    assert team.post(lower)[0] == 200
    doubled = team.headers("bob", "shop") | {"Authorization": f"Bearer {team.tokens['bob']}, Bearer x"}
    assert team.post(doubled)[0] == 401
    status, _, body = team.post(team.headers("bob", "garden"))  # globex's: bob is not in it
    assert status == 403 and "not a project of any organisation 'bob' belongs to" in error_of(body)
    status, _, nowhere = team.post(team.headers("bob", "no-such-project"))
    assert status == 403 and error_of(nowhere).replace("no-such-project", "garden") == error_of(body)
    assert team.post({"Authorization": f"Bearer {team.tokens['bob']}"})[0] == 400  # no project named
    for extra in ({"X-Threadloom-User": "alice"}, {"X-Threadloom-Org": "globex"}, {"X-Threadloom-Root": "/"}):
        status, _, body = team.post(team.headers("bob", "shop") | extra)
        assert status == 400, (extra, body)
        if "X-Threadloom-Root" not in extra:  # not the single-user server's "one HTTP server serves one user"
            assert error_of(body).startswith("the account is the one your access token names"), body
    assert team.post(team.headers("bob", "../shop"))[0] == 400
    assert team.post(team.headers("bob", "shop"), path="/.well-known/oauth-protected-resource")[0] == 404


async def test_the_token_names_the_user_and_the_project_names_the_organisation(team: Team) -> None:
    async with team_client(team, "bob", "shop", **{"X-Threadloom-Toolset": "full"}) as c:
        stored = await call(c, "memory_store", {"content": "the gateway retries three times", "visibility": "org"})
        me = await call(c, "status", {})
        names = {t.name for t in (await c.list_tools()).tools}
        spawned = await c.call_tool("spawn", {"prompt": "echo hi"})
    assert "memory_recall" in names and not names & {"spawn", "tasks", "thread_create", "thread_note"}
    assert spawned.is_error and "not in this session's toolset" in str(spawned.structured_content)
    assert me["session"]["user"] == "bob" and me["session"]["project"] == "shop"
    store = SqliteStore(team.home / "threadloom.db")
    try:
        row = store.read(
            lambda r: r.one("SELECT owner, org, project FROM memories WHERE id = :id", {"id": stored["id"]})
        )
    finally:
        store.close()
    assert row == {"owner": "bob", "org": "acme", "project": "shop"}


async def test_revocation_expiry_and_removal_take_effect_at_the_next_call(team: Team) -> None:
    async with team_client(team, "bob", "shop") as c:
        await call(c, "memory_store", {"content": "bob's note on retries"})
        admin(team.home, "token", "revoke", token_id(team.tokens["bob"]))
        with pytest.raises(MCPError, match="was revoked at"):  # the gate's words, not a bare HTTP failure
            await c.call_tool("memory_recall", {"query": "retries"})
    status, _, body = team.post(team.headers("bob", "shop"))
    assert status == 401 and "was revoked at" in error_of(body)

    team.tokens["bob"] = admin(team.home, "token", "create", "bob")
    async with team_client(team, "bob", "shop") as c:
        await call(c, "memory_recall", {"query": "retries"})
        admin(team.home, "org", "member", "remove", "acme", "bob")
        with pytest.raises(MCPError, match="not a project of any organisation 'bob' belongs to"):
            await c.call_tool("memory_recall", {"query": "retries"})
    status, _, body = team.post(team.headers("bob", "shop"))
    assert status == 403 and "not a project of any organisation" in error_of(body)

    store = SqliteStore(team.home / "threadloom.db")  # time passes: alice's token's expiry is behind us
    try:
        store.write(lambda w: w.execute("UPDATE account_tokens SET expires_at = 1 WHERE account = 'alice'"))
    finally:
        store.close()
    status, _, body = team.post(team.headers("alice", "shop"))
    assert status == 401 and "expired at" in error_of(body)

    admin(team.home, "user", "remove", "bob")
    status, _, body = team.post(team.headers("bob", "shop"))
    assert status == 401 and error_of(body) == "unknown access token"
    assert cli(team.home, "admin", "token", "list", "bob").returncode == 2


async def test_a_session_stays_with_the_account_that_opened_it(team: Team) -> None:
    async with team_client(team, "bob", "shop") as bob:
        await call(bob, "memory_store", {"content": "bob's private plan canaryhijack"})
        sid = (await call(bob, "status", {}))["session"]["id"]
    async with team_client(team, "alice", "shop", **{"X-Threadloom-Session-Id": sid}) as alice:
        taken = await alice.call_tool("memory_recall", {"query": "canaryhijack"})
    assert taken.is_error and "belongs to another user" in str(taken.structured_content), taken

    # the HTTP session itself: alice's request carrying bob's Mcp-Session-Id is refused
    status, headers, _ = team.post(team.headers("bob", "shop"))
    assert status == 200
    bobs = {"Mcp-Session-Id": headers["mcp-session-id"], "Mcp-Protocol-Version": "2025-11-25"}
    ready = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert team.post(team.headers("bob", "shop") | bobs, body=ready)[0] == 202
    recall = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
              "params": {"name": "memory_recall", "arguments": {"query": "canaryhijack"}}}  # fmt: skip
    status, _, body = team.post(team.headers("bob", "shop") | bobs, body=recall)
    assert status == 200 and "canaryhijack" in body
    status, _, body = team.post(team.headers("alice", "shop") | bobs, body=recall)
    assert "canaryhijack" not in body and "belongs to another account" in body, (status, body)
