"""The daemon socket's greeting, and the JSON-RPC lines every transport must answer."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.helpers import MODES, PY, RawSession, env_for
from threadloom.daemon.jsonrpc import MAX_MESSAGE_BYTES
from threadloom.daemon.protocol import decode, encode, version_key


@pytest.mark.parametrize(
    ("older", "newer"),
    [("0.0.1", "0.1.0"), ("0.2.0rc1", "0.2.0"), ("0.2.0", "0.2.1"), ("1.9.0", "1.10.0"), ("junk", "0.0.1")],
)
def test_versions_order_as_releases_do(older: str, newer: str) -> None:
    assert version_key(older) < version_key(newer)


def test_trailing_zeros_and_build_labels_do_not_make_a_version_newer() -> None:
    assert version_key("0.1") == version_key("0.1.0") == version_key("0.1.0+local.3")


def test_headers_round_trip_and_reject_non_objects() -> None:
    assert decode(encode({"kind": "hello", "n": 1}).strip()) == {"kind": "hello", "n": 1}
    with pytest.raises(ValueError):
        decode(b"[1, 2]")


# Through the real server, bridged to the daemon or in-process: every request with an id gets an answer.

CALL_STATUS = b'"method":"tools/call","params":{"name":"status","arguments":{}}'


def still_serves(raw: RawSession) -> None:
    assert raw.request("ping")["result"] == {}


# (line, the id its answer carries, the JSON-RPC error code)
MALFORMED = [
    (b'{"jsonrpc":"2.0","id":41,"method":"tools/list","params":["all"]}', 41, -32602),
    (b'{"jsonrpc":"2.0","id":"p","method":"tools/call","params":"status"}', "p", -32602),
    (b'{"jsonrpc":"1.0","id":42,"method":"tools/list"}', 42, -32600),
    (b'{"id":43,"method":"tools/list"}', 43, -32600),
    (b'{"jsonrpc":"2.0","id":44,"method":42}', 44, -32600),
    (
        b'{"jsonrpc":"2.0","id":45,"method":"tools/call","params":{"name":"status","arguments":{"x":"\xff\xfe"}}}',
        45,
        -32700,
    ),
    (b'{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}', None, -32600),
    (b'{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}', None, -32600),
    (b"this is not json", None, -32700),
    (b'{"jsonrpc":"2.0","id":46,"method":"tools/list"', 46, -32700),
    (b'{"jsonrpc":"2.0","id":null,"method":"ping"}', None, -32600),
    (b"[]", None, -32600),
]


def test_every_malformed_request_gets_a_json_rpc_error_with_its_id(raw: RawSession) -> None:
    for line, answer_id, code in MALFORMED:
        raw.send_line(line)
        reply = raw.read()
        assert (reply["id"], reply["error"]["code"]) == (answer_id, code), line[:80]
        assert reply["error"]["message"]
        assert reply["error"]["data"] == {"error": reply["error"]["message"], "retryable": False}
    still_serves(raw)


def test_a_batch_gets_one_error_per_request_in_it(raw: RawSession) -> None:
    raw.send_line(
        b'[{"jsonrpc":"2.0","id":51,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},'
        b'{"jsonrpc":"2.0","id":52,' + CALL_STATUS + b"}]"
    )
    replies = [raw.read(), raw.read()]
    assert [r["id"] for r in replies] == [51, 52]
    assert all("batches are not part of MCP" in r["error"]["message"] for r in replies)
    still_serves(raw)


def test_a_lone_surrogate_is_a_tool_error_naming_it(raw: RawSession) -> None:
    for n, params in enumerate(
        [
            b'{"name":"memory_store","arguments":{"content":"half \\ud83d a smile"}}',
            b'{"name":"stat\\udfffus","arguments":{}}',
        ]
    ):
        raw.send_line(b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}' % (61 + n, params))
        reply = raw.read()
        assert reply["id"] == 61 + n
        assert reply["result"]["isError"] is True
        assert "lone UTF-16 surrogate" in reply["result"]["structuredContent"]["error"]
        assert reply["result"]["structuredContent"]["retryable"] is False
    # A surrogate pair is one character: it goes through.
    smile = raw.request("tools/call", {"name": "memory_store", "arguments": {"content": "a smile \U0001f600 here"}})
    assert smile["result"]["isError"] is False, smile


def test_a_notification_or_response_that_is_malformed_gets_no_answer(raw: RawSession) -> None:
    raw.send_line(b'{"jsonrpc":"1.0","method":"notifications/initialized"}')
    raw.send_line(b'{"jsonrpc":"2.0","id":999,"result":"not an object"}')
    assert raw.request("ping")["result"] == {}  # the next line read is the ping's answer


def test_a_request_over_the_size_limit_is_answered_and_the_session_goes_on(raw: RawSession) -> None:
    params = {"name": "memory_store", "arguments": {"content": "x" * (MAX_MESSAGE_BYTES + 1024)}}
    for message in [
        {"jsonrpc": "2.0", "id": 71, "method": "tools/call", "params": params},  # the Python SDK's order
        {"method": "tools/call", "params": params, "jsonrpc": "2.0", "id": 71},  # the TypeScript SDK's
    ]:
        raw.send_line(json.dumps(message).encode())
        reply = raw.read()
        assert reply["id"] == 71
        assert reply["result"]["isError"] is True
        assert "over the 16 MiB limit" in reply["result"]["structuredContent"]["error"]
    still_serves(raw)


@pytest.mark.parametrize(("mode", "code"), [("bridge", 1), ("in-process", 0)])
def test_an_oversized_request_whose_id_cannot_be_found_closes_the_session_saying_why(
    home: Path, mode: str, code: int
) -> None:
    raw = RawSession(home, *MODES[mode])
    raw.initialize()
    params = {"name": "memory_store", "arguments": {"content": "x" * (MAX_MESSAGE_BYTES + 1024)}}
    message = {"jsonrpc": "2.0", "method": "tools/call", "params": params, "id": 72, "more": {"a": "b" * 100_000}}
    raw.send_line(json.dumps(message).encode())
    assert raw.proc.stdout is not None and raw.proc.stderr is not None
    assert raw.proc.stdout.readline() == b""
    assert raw.proc.wait(timeout=20) == code
    assert b"id could not be found" in raw.proc.stderr.read()
    raw.close()


def test_logs_never_copy_megabytes_of_input(home: Path) -> None:
    (home / ".env").write_text("THREADLOOM_LOG_LEVEL=DEBUG\n")
    raw = RawSession(home)
    raw.initialize()
    big = "x" * 5_000_000
    try:
        for n, line in enumerate(
            [
                json.dumps({"jsonrpc": "2.0", "id": 81, "method": "tools/call", "params": [big]}).encode(),
                json.dumps({"jsonrpc": "1.0", "id": 82, "method": "tools/call", "params": {"a": big}}).encode(),
                b'{"jsonrpc":"2.0","id":83,"method":"tools/call","params":{"name":"status","arguments":{"x":"\xff'
                + big.encode()
                + b'"}}}',
            ]
        ):
            raw.send_line(line)
            assert raw.read()["id"] == 81 + n
        for tool, arguments in [("memory_store", {"content": big}), ("memory_recall", {"query": big})]:
            raw.request("tools/call", {"name": tool, "arguments": arguments})
    finally:
        raw.close()
    assert (home / "daemon.log").stat().st_size < 200_000


def test_a_second_initialize_is_answered_under_its_own_id(raw: RawSession) -> None:
    again = raw.request(
        "initialize",
        {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw-test", "version": "1"}},
    )
    assert again["id"] == raw._next_id
    assert again["result"]["serverInfo"]["name"] == "threadloom"
    still_serves(raw)


@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_request_sent_just_before_the_client_closes_its_side_is_answered(home: Path, mode: str) -> None:
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "pipe", "version": "1"}}
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "status", "arguments": {}}},
    ]
    done = subprocess.run(
        [PY, "-m", "threadloom", "serve", *MODES[mode]],
        env=env_for(home),
        input=b"".join(json.dumps(m).encode() + b"\n" for m in lines),
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    answers = {json.loads(line)["id"]: json.loads(line) for line in done.stdout.splitlines()}
    assert sorted(answers) == [1, 2]
    assert answers[2]["result"]["isError"] is False
