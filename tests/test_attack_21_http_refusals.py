"""A team server's refusals as a real MCP client sees them (issue 21's bad input, tried from outside).

The SDK's client shows a failed HTTP request's body only when it is a JSON-RPC error: a token revoked or a
member removed mid-session, or a 10 MB request, came out as "Server returned an error response" (-32603),
and the 10 MB one was the SDK's plain-text 413. Now each says why, and keeps `retryable`.
"""

from __future__ import annotations

import http.client
import json
import socket
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator

import pytest
from mcp.shared.exceptions import MCPError

from tests.team_server import Team, admin, call, team_client

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(300)]

TEN_MB = "x" * (10 * 1024 * 1024)


def refusal(exc: pytest.ExceptionInfo[MCPError]) -> tuple[str, object]:
    data = exc.value.error.data
    assert isinstance(data, dict) and data["error"] == exc.value.error.message, exc.value.error
    return exc.value.error.message, data["retryable"]


async def test_a_revoked_token_and_a_removed_member_are_told_why_mid_session(team: Team) -> None:
    bob = admin(team.home, "token", "create", "bob", "--label", "mid-session")
    team.tokens["bob"] = bob
    async with team_client(team, "bob", "shop") as c:
        await call(c, "memory_recall", {"query": "retries"})
        admin(team.home, "token", "revoke", bob.split("_")[1])
        with pytest.raises(MCPError) as revoked:
            await c.call_tool("memory_recall", {"query": "retries"})
    message, retryable = refusal(revoked)
    assert "was revoked at" in message and retryable is False

    team.tokens["bob"] = admin(team.home, "token", "create", "bob")
    async with team_client(team, "bob", "shop") as c:
        await call(c, "memory_recall", {"query": "retries"})
        admin(team.home, "org", "member", "remove", "acme", "bob")
        with pytest.raises(MCPError) as removed:
            await c.call_tool("memory_recall", {"query": "retries"})
    message, retryable = refusal(removed)
    assert "not a project of any organisation 'bob' belongs to" in message and retryable is False


async def test_a_ten_megabyte_request_is_refused_in_words_and_nothing_is_stored(team: Team) -> None:
    async with team_client(team, "alice", "shop") as c:
        with pytest.raises(MCPError) as big:
            await c.call_tool("memory_store", {"content": "needle " + TEN_MB})
        message, retryable = refusal(big)
        assert "this server takes at most 4,194,304" in message and retryable is False
        found = await call(c, "memory_recall", {"query": "needle"})
        assert found["memories"] == []
        assert (await call(c, "memory_store", {"content": "the session still works"}))["created"] is True

    # A client that is not in an MCP session gets the same words as {error, retryable}.
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "pad": TEN_MB}).encode()
    req = urllib.request.Request(
        team.url, data=body, method="POST", headers={"Content-Type": "application/json", **team.headers("bob", "shop")}
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(req, timeout=60)
    assert refused.value.code == 413
    said = json.loads(refused.value.read())
    assert said["retryable"] is False and "this server takes at most 4,194,304" in said["error"]


async def test_a_chunked_body_past_the_limit_is_refused_in_words_and_one_within_it_is_served(team: Team) -> None:
    def chunks(total: int) -> Iterator[bytes]:
        yield json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "pad": ""})[:-2].encode()
        for _ in range(total // 65536):
            yield b"x" * 65536
        yield b'"}'

    def post(total: int) -> tuple[int, str]:
        url = urllib.parse.urlsplit(team.url)
        conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=60)
        try:  # no Content-Length: the body goes in chunks, past the length check, into the gate's count
            conn.request("POST", url.path, body=chunks(total), encode_chunked=True, headers={
                "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                "Transfer-Encoding": "chunked", **team.headers("bob", "shop")})  # fmt: skip
            answer = conn.getresponse()
            return answer.status, answer.read().decode()
        finally:
            conn.close()

    status, text = post(6 * 1024 * 1024)
    assert status == 413, text
    said = json.loads(text)
    assert said["retryable"] is False and "this server takes at most 4,194,304" in said["error"]
    status, text = post(64 * 1024)
    assert status != 413 and "takes at most" not in text and "jsonrpc" in text, text


def test_a_chunked_body_whose_last_chunk_passes_the_limit_is_answered(team: Team) -> None:
    """The chunk that passes 4 MiB is the body's last: the gate had read the end already and then waited for
    more body to drop, so the client never got its 413 (the connection hung until the client gave up)."""
    url = urllib.parse.urlsplit(team.url)
    head = "".join(f"{k}: {v}\r\n" for k, v in team.headers("bob", "shop").items())
    with socket.create_connection((url.hostname or "", url.port or 80), timeout=60) as conn:
        conn.sendall(
            f"POST {url.path} HTTP/1.1\r\nHost: {url.netloc}\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\nTransfer-Encoding: chunked\r\n{head}\r\n".encode()
        )
        for _ in range(64):  # 64 x 64 KiB: exactly the limit, not past it
            conn.sendall(b"10000\r\n" + b"x" * 65536 + b"\r\n")
        conn.sendall(b"60\r\n" + b"x" * 96 + b"\r\n0\r\n\r\n")  # past it, and the end, in one write
        answer = b""
        while b"\r\n\r\n" not in answer:
            part = conn.recv(65536)
            assert part, answer
            answer += part
    assert answer.startswith(b"HTTP/1.1 413 "), answer
