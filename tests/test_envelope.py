"""Messages the SDK cannot take, sent by a clumsy client over each transport: each gets threadloom's
`{error, retryable: false}` (a notification: silence), and the session goes on.

Tried from outside first: over HTTP, valid JSON nested past the SDK parser's 200 levels got its bare "Parse
error: recursion limit exceeded", a number, `[]`, a batch or `params` of the wrong type a pydantic dump, a
request whose id is null was taken for a notification (202, never answered), and a 1 MB method name came back
whole in "Method not found". Over stdio the nested one said "invalid request: Invalid JSON" under -32600, a
`tools/call` as well, and no JSON-RPC error carried `{error, retryable}`.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from tests.helpers import MODES, RawSession, new_home, stop_everything
from tests.http_server import INIT, Served, client, git_repo, serve_http
from threadloom.daemon.jsonrpc import MAX_DEPTH

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

TOO_DEEP = f"more than {MAX_DEPTH} levels deep"


def nested(levels: int) -> bytes:
    return b"[" * levels + b"]" * levels


def call(request_id: int, arguments: bytes) -> bytes:
    head = b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"status","arguments":{"x":' % request_id
    return head + arguments + b"}}}"


# (body, the id the answer carries, its JSON-RPC code, words it says)
BODIES: list[tuple[bytes, Any, int, str]] = [
    (call(7, nested(300)), 7, -32602, TOO_DEEP),  # deeper than the SDK's parser, not Python's
    (b'{"jsonrpc":"2.0","id":8,"method":"ping","params":{"x":' + nested(100_000) + b"}}", 8, -32602, TOO_DEEP),
    (b'{"jsonrpc":"2.0","method":"ping","params":{"x":' + nested(300) + b'},"id":9}', 9, -32602, TOO_DEEP),
    (nested(100_000), None, -32700, TOO_DEEP),
    (b"5", None, -32600, "a JSON-RPC message is a JSON object, not a number"),
    (b'"hi"', None, -32600, "a JSON-RPC message is a JSON object, not a string"),
    (b"[]", None, -32600, "an empty batch"),
    (
        json.dumps([{"jsonrpc": "2.0", "id": i, "method": "ping"} for i in range(10_000)]).encode(),
        None,
        -32600,
        "batches are not part of MCP",
    ),
    (json.dumps({"jsonrpc": "2.0", "id": 3, "method": "x" * 1_000_000}).encode(), 3, -32601, "(1,000,000 characters)"),
    (json.dumps({"jsonrpc": "2.0", "id": 4, "method": "initialize", "params": [1, 2]}).encode(), 4, -32602, "params"),
    (json.dumps({"jsonrpc": "2.0", "id": None, "method": "ping"}).encode(), None, -32600, "a request id is"),
    (json.dumps({"jsonrpc": "2.0", "id": None, "method": "notifications/initialized"}).encode(), None, -32600, "id"),
]
IDS = ["deep", "deeper than python", "deep, id last", "deep, no object", "number", "string", "empty batch", "batch",
       "1 MB method", "positional params", "null id", "null id notification"]  # fmt: skip


def post(served: Served, body: bytes, session: str | None) -> tuple[int, dict[str, Any]]:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **served.auth()}
    if session is not None:
        headers |= {"Mcp-Session-Id": session, "Mcp-Protocol-Version": "2025-11-25"}
    request = urllib.request.Request(served.url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as answered:
            return answered.status, {"raw": answered.read().decode()[:500]}
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[Served, str]]:
    home = new_home()
    with serve_http(home, git_repo(home / "repo")) as server:
        request = urllib.request.Request(
            server.url,
            data=json.dumps(INIT).encode(),
            headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
            | server.auth(),
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=60) as answered:
            session = answered.headers["Mcp-Session-Id"]
        yield server, session
    stop_everything(home)


@pytest.mark.parametrize(("body", "answer_id", "code", "said"), BODIES, ids=IDS)
def test_over_http_each_is_refused_in_threadloom_words(
    served: tuple[Served, str], body: bytes, answer_id: Any, code: int, said: str
) -> None:
    server, session = served
    # A client outside a session gets {error, retryable}, as from every other gate.
    status, answer = post(server, body, None)
    assert status == 400 and answer["retryable"] is False and said in answer["error"], answer
    # One in a session gets a JSON-RPC error under the request's id (when it can be read), carrying the same.
    status, answer = post(server, body, session)
    assert status == 400 and (answer["id"], answer["error"]["code"]) == (answer_id, code), answer
    assert said in answer["error"]["message"] and len(answer["error"]["message"]) < 500, answer
    assert answer["error"]["data"] == {"error": answer["error"]["message"], "retryable": False}
    status, answer = post(server, json.dumps({"jsonrpc": "2.0", "id": 99, "method": "ping"}).encode(), session)
    assert status == 200 and '"id":99,"result":{}' in answer["raw"]


# (method, path, headers beside the token, body, the status, words the SDK says)
SDK_REFUSALS: list[tuple[str, str, dict[str, str], bytes | None, int, str]] = [
    ("POST", "/mcp", {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"},
     b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}', 400, "Missing session ID"),
    ("POST", "/mcp", {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                      "Mcp-Session-Id": "no-such-session"},
     b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}', 404, "Session not found"),
    ("POST", "/mcp", {"Content-Type": "application/json", "Accept": "text/html"}, json.dumps(INIT).encode(), 406,
     "Not Acceptable"),
    ("GET", "/mcp", {"Accept": "text/event-stream"}, None, 400, "Missing session ID"),
    ("PUT", "/mcp", {}, None, 405, "Method Not Allowed"),
    ("GET", "/elsewhere", {}, None, 404, "Not Found"),
]  # fmt: skip


SDK_IDS = ["no session", "unknown session", "accepts no stream", "get, no session", "put", "path"]


@pytest.mark.parametrize(("method", "path", "headers", "body", "status", "words"), SDK_REFUSALS, ids=SDK_IDS)
def test_over_http_the_sdks_own_refusals_carry_error_and_retryable(
    served: tuple[Served, str],
    method: str,
    path: str,
    headers: dict[str, str],
    body: bytes | None,
    status: int,
    words: str,
) -> None:
    server, _ = served
    url = f"http://127.0.0.1:{server.port}{path}"
    request = urllib.request.Request(url, data=body, headers=headers | server.auth(), method=method)
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=60)
    assert refused.value.code == status and refused.value.headers["Content-Type"] == "application/json"
    answer = json.loads(refused.value.read())
    said = answer["error"]["data"] if isinstance(answer.get("error"), dict) else answer
    assert said["retryable"] is False and words in said["error"], answer


def test_over_http_a_body_not_declared_json_is_refused_in_words(served: tuple[Served, str]) -> None:
    server, _ = served
    for content_type in ("text/plain", ""):
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": content_type, **server.auth()}
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
        request = urllib.request.Request(server.url, data=body, headers=headers, method="POST")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=60)
        assert refused.value.code == 415
        said = json.loads(refused.value.read())
        assert said["retryable"] is False and "Content-Type: application/json" in said["error"], said


async def test_an_mcp_client_sees_why_its_too_deep_arguments_were_refused(served: tuple[Served, str]) -> None:
    server, _ = served
    deep: Any = "bottom"
    for _ in range(250):
        deep = [deep]
    async with client(server) as c:
        with pytest.raises(MCPError) as refused:
            await c.call_tool("memory_store", {"content": "a nested note", "entities": deep})
        assert TOO_DEEP in refused.value.error.message
        assert refused.value.error.data == {"error": refused.value.error.message, "retryable": False}
        assert (await c.call_tool("status", {})).is_error is False


BAD_INIT = {"protocolVersion": 5}
GOOD_INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw-test", "version": "1"}}


def test_over_stdio_a_bad_initialize_says_what_is_wrong_and_a_good_one_after_it_is_served(home: Path) -> None:
    # The SDK said "Invalid request parameters" (data ""), and the transport took that initialize for one under
    # way: every later one, a good one too, got "initialize is already under way", for good.
    for mode in MODES.values():
        raw = RawSession(home, *mode)
        try:
            refused = raw.request("initialize", BAD_INIT)
            said = refused["error"]["message"]
            assert said.startswith("initialize params: protocolVersion: Input should be a valid string"), refused
            assert refused["error"]["data"] == {"error": said, "retryable": False}
            assert raw.request("initialize", GOOD_INIT)["result"]["serverInfo"]["name"] == "threadloom"
        finally:
            raw.close()


def test_over_stdio_a_request_before_initialize_is_told_to_initialize_first(home: Path) -> None:
    # The SDK said "Invalid request parameters" (data "") of a tools/list whose params were fine.
    for mode in MODES.values():
        raw = RawSession(home, *mode)
        try:
            early = raw.request("tools/list")
            said = early["error"]["message"]
            assert "send initialize first" in said and early["error"]["data"] == {"error": said, "retryable": False}
            assert raw.request("ping")["result"] == {}  # ping is allowed before it, as MCP says
            raw.initialize()
            assert raw.request("tools/list")["result"]["tools"]
        finally:
            raw.close()


def test_over_http_a_bad_initialize_says_what_is_wrong(served: tuple[Served, str]) -> None:
    server, _ = served
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": BAD_INIT}).encode()
    status, answer = post(server, body, None)
    assert status == 400 and answer["retryable"] is False, answer
    assert answer["error"].startswith("initialize params: protocolVersion: Input should be a valid string"), answer


def test_over_stdio_each_is_answered_in_threadloom_words(raw: RawSession) -> None:
    for (body, answer_id, code, said), name in zip(BODIES, IDS, strict=True):
        raw.send_line(body)
        replies = [raw.read() for _ in range(10_000 if name == "batch" else 1)]
        reply = replies[0]
        assert reply["id"] == (0 if name == "batch" else answer_id), (name, reply)
        if name == "deep":  # arguments of a tool call: a tool error the model can act on
            assert reply["result"]["isError"] is True and said in reply["result"]["structuredContent"]["error"]
            assert reply["result"]["structuredContent"]["retryable"] is False
            continue
        assert reply["error"]["code"] == code and said in reply["error"]["message"], (name, reply)
        assert all(r["error"]["data"] == {"error": r["error"]["message"], "retryable": False} for r in replies)
    # A notification nested too deep gets no answer: the next line read is the ping's.
    raw.send_line(b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"x":' + nested(300) + b"}}")
    assert raw.request("ping")["result"] == {}
