"""JSON-RPC lines that cannot go to the MCP SDK as they are, and the answers they get. Standard library only.

The SDK drops a line it cannot validate without a word, so a client waits forever for the answer
to a request whose id was there to read. Every request with an id gets one answer here instead:
a JSON-RPC error for a broken envelope (not JSON, not UTF-8, a batch, `"jsonrpc":"1.0"`, `params`
not an object), a tool error for `tools/call` arguments that cannot be taken (too large, nested too
deep, or a lone surrogate), which the model can act on. Each carries threadloom's `{error,
retryable}` (a JSON-RPC error's `data`, a tool error's structured content), as the HTTP gates'
refusals do. A line that is not JSON is answered by the id found among its top-level members before
the broken one, else with `id: null` (JSON-RPC's rule); a notification or a response gets nothing.

A line over `MAX_MESSAGE_BYTES` is never held whole: its first and last `WINDOW_BYTES` are kept,
and its id looked for in its top-level members before the one cut short (`{"jsonrpc", "id",
"method", "params"...}`, the Python SDK's order) or after it (`...,"jsonrpc":"2.0","id":5}`, the
TypeScript SDK's). When neither holds it, the session is closed: nothing can answer the request.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

MAX_MESSAGE_BYTES = 16 * 1024 * 1024
WINDOW_BYTES = 64 * 1024
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
METHOD_NOT_FOUND = -32601
INTERNAL_ERROR = -32603
LOG_EXCERPT = 200
# The SDK parses with pydantic (jiter), which refuses arrays and objects nested deeper than this, in words
# ("recursion limit exceeded") that say the JSON is invalid; Python's own parser stops near 1,000 levels.
MAX_DEPTH = 200
_TOO_DEEP_DETAIL = "recursion limit exceeded"
TOO_DEEP = (
    f"the message nests arrays and objects more than {MAX_DEPTH} levels deep, which this server does not "
    "read; send flatter data (a deeply nested document can be stored as text)"
)
# MCP methods that change nothing: a bridge sends them again, as they are, to a daemon that replaced one that died.
READ_ONLY_METHODS = frozenset(
    [
        "ping",
        "tools/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "prompts/list",
        "prompts/get",
        "completion/complete",
    ]
)

_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(rb"\\[uU][dD][89a-fA-F]")
_WS = re.compile(r"\s*")
# The last top-level members of a line, when the id is among them: `"id": 5` (or a string) then only short
# string members (`"jsonrpc"`, `"method"`) before the closing brace. A nested `"id"` is followed by two braces.
_TAIL_ID = re.compile(
    r'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*((?:,\s*"\w+"\s*:\s*"(?:[^"\\]|\\.)*"\s*)*)\}\s*$', re.DOTALL
)
_TAIL_MEMBER = re.compile(r'"(\w+)"\s*:\s*("(?:[^"\\]|\\.)*")')


def valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def error_line(request_id: Any, code: int, message: str, *, retryable: bool = False) -> bytes:
    said = {"error": message, "retryable": retryable}
    return encode({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message, "data": said}})


def tool_error_line(request_id: Any, message: str, *, retryable: bool) -> bytes:
    """A `tools/call` answered with a tool error result, as threadloom's own tool failures are."""
    body = {"error": message, "retryable": retryable}
    result = {"content": [{"type": "text", "text": json.dumps(body)}], "structuredContent": body, "isError": True}
    return encode({"jsonrpc": "2.0", "id": request_id, "result": result})


def excerpt(data: bytes | str, limit: int = LOG_EXCERPT) -> str:
    """The start of some input, for a log line that must never copy megabytes."""
    text = data if isinstance(data, str) else data[: limit * 4].decode("utf-8", "replace")
    return repr(text[:limit]) + (f"... ({len(data):,} in all)" if len(data) > limit else "")


@dataclass(frozen=True)
class Refusal:
    """A line that does not go on to the SDK: the answers it gets and why, for the log."""

    reason: str
    replies: list[bytes] = field(default_factory=list)
    # The one answer (its id, JSON-RPC code and words), for a transport that answers a message once (HTTP).
    said: tuple[Any, int, str] | None = None


def _answer(message: dict[str, Any], code: int, text: str, *, tool_args: bool = False) -> bytes:
    if tool_args and message.get("method") == "tools/call":
        return tool_error_line(message["id"], text, retryable=False)
    return error_line(message["id"], code, text)


def _one(request_id: Any, code: int, why: str, *, method: object = None, tool_args: bool = False) -> Refusal:
    """A refusal answered once, under `request_id`."""
    line = _answer({"id": request_id, "method": method}, code, why, tool_args=tool_args)
    return Refusal(why, [line], (request_id, code, why))


def _lone_surrogate(value: Any) -> str | None:
    """The first lone UTF-16 surrogate in any string of a decoded message, as an escape."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found = _SURROGATE.search(item)
            if found:
                return f"\\u{ord(found.group()):04x}"
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def diagnose(line: bytes, detail: str) -> Refusal:
    """The answer to a line the SDK refused (`detail` says why it did), for every request id in it."""
    encoding_problem = None
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        encoding_problem = f"the message is not valid UTF-8 (byte {exc.start}); send UTF-8"
        text = line.decode("utf-8", "replace")
    try:
        message = json.loads(text)
    except RecursionError:
        return _too_deep(text)
    except ValueError as exc:
        why = encoding_problem or f"the message is not JSON ({exc})"[:300]
        # Its id may still be plain to read among the members before the broken one: answer it by that.
        members = _leading_members(text[:WINDOW_BYTES])
        known = members["id"] if "method" in members and valid_id(members.get("id")) else None
        return _one(known, PARSE_ERROR, why)
    if isinstance(message, list):
        why = "JSON-RPC batches are not part of MCP; send one message per line"
        requests = [m for m in message if isinstance(m, dict) and "method" in m and valid_id(m.get("id"))]
        if not message:
            return _one(None, INVALID_REQUEST, "an empty batch; " + why)
        replies = [error_line(m["id"], INVALID_REQUEST, why) for m in requests]
        return Refusal(f"a batch of {len(message)}", replies, (None, INVALID_REQUEST, why))
    if not isinstance(message, dict):
        return _one(None, INVALID_REQUEST, f"a JSON-RPC message is a JSON object, not {_kind(message)}")
    if "id" in message and not valid_id(message["id"]):
        why = "a request id is a string or an integer"
        return _one(None, INVALID_REQUEST, why) if "method" in message else Refusal(why)
    if "method" not in message or "id" not in message:
        # A notification or a response: nothing may answer it.
        return Refusal(f"a malformed {'response' if 'method' not in message else 'notification'}: {detail}")
    if encoding_problem:
        return _one(message["id"], PARSE_ERROR, encoding_problem)
    if message.get("jsonrpc") != "2.0":
        why = f'"jsonrpc" must be "2.0", not {json.dumps(message.get("jsonrpc"))[:40]}'
        return _one(message["id"], INVALID_REQUEST, why)
    if not isinstance(message["method"], str):
        return _one(message["id"], INVALID_REQUEST, "the method is a string")
    if "params" in message and not isinstance(message["params"], dict):
        why = "params must be an object of named parameters (MCP has no positional ones)"
        return _one(message["id"], INVALID_PARAMS, why)
    if _TOO_DEEP_DETAIL in detail:
        return _one(message["id"], INVALID_PARAMS, TOO_DEEP, method=message["method"], tool_args=True)
    surrogate = _lone_surrogate(message) if _SURROGATE_ESCAPE.search(line) else None
    if surrogate:
        why = f"a string holds a lone UTF-16 surrogate ({surrogate}), which is not Unicode text; send valid text"
        return _one(message["id"], INVALID_PARAMS, why, method=message["method"], tool_args=True)
    return _one(message["id"], INVALID_REQUEST, f"invalid request: {detail}"[:500])


def _kind(value: Any) -> str:
    return {str: "a string", bool: "a boolean", type(None): "null"}.get(type(value), "a number")


def _too_deep(text: str) -> Refusal:
    """A message nested deeper than Python's parser goes: answered by the id read before or after the depth."""
    members = _leading_members(text[:WINDOW_BYTES])
    if not valid_id(members.get("id")):
        members = {**members, **_trailing_members(text[-WINDOW_BYTES:])}
    if not valid_id(members.get("id")):
        return _one(None, PARSE_ERROR, TOO_DEEP)  # as JSON-RPC answers what it could not read
    return _one(members["id"], INVALID_PARAMS, TOO_DEEP, method=members.get("method"), tool_args=True)


def skip_line(start: bytes, fd: int) -> tuple[bytes, bytes, int, bytes]:
    """Read from `fd` and drop the rest of a line over the limit that begins with `start`: its first and
    last WINDOW_BYTES, its size, and what followed it."""
    head, tail, size = start[:WINDOW_BYTES], start[-WINDOW_BYTES:], len(start)
    while data := _read(fd):
        at = data.find(b"\n")
        if at >= 0:
            return head, (tail + data[:at])[-WINDOW_BYTES:], size + at, data[at + 1 :]
        tail, size = (tail + data)[-WINDOW_BYTES:], size + len(data)
    return head, tail, size, b""


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, 65536)
    except OSError:
        return b""


def lost_answer(request_id: str | int, method: str, message: str) -> bytes:
    """The answer to a request the daemon that took it could not give: retryable, as a tool error for a
    `tools/call` and a JSON-RPC error otherwise."""
    if method == "tools/call":
        return tool_error_line(request_id, message, retryable=True)
    return error_line(request_id, INTERNAL_ERROR, message.replace("this call", "this request"), retryable=True)


def _leading_members(head: str) -> dict[str, Any]:
    """The top-level members of a JSON object that end within `head`, in order, up to the first cut short."""
    decoder = json.JSONDecoder()
    found: dict[str, Any] = {}
    at = _WS.match(head, 0).end()  # type: ignore[union-attr]
    if head[at : at + 1] != "{":
        return found
    at += 1
    try:
        while True:
            at = _WS.match(head, at).end()  # type: ignore[union-attr]
            if head[at : at + 1] != '"':
                return found
            key, at = json.decoder.scanstring(head, at + 1)  # type: ignore[attr-defined]
            at = _WS.match(head, at).end()  # type: ignore[union-attr]
            if head[at : at + 1] != ":":
                return found
            at = _WS.match(head, at + 1).end()  # type: ignore[union-attr]
            value, at = decoder.raw_decode(head, at)
            found[key] = value
            at = _WS.match(head, at).end()  # type: ignore[union-attr]
            if head[at : at + 1] != ",":
                return found
            at += 1
    except (ValueError, RecursionError):
        return found


def _trailing_members(tail: str) -> dict[str, Any]:
    match = _TAIL_ID.search(tail)
    if match is None:
        return {}
    found: dict[str, Any] = {"id": json.loads(match.group(1))}
    for name, value in _TAIL_MEMBER.findall(match.group(2)):
        found[name] = json.loads(value)
    return found


def oversized(head: bytes, tail: bytes, size: int) -> Refusal | None:
    """The answer to a line over the limit, of which `head` and `tail` were kept; None when it may be a
    request whose id neither holds, which nothing can answer."""
    why = (
        f"the message is {size:,} bytes, over the {MAX_MESSAGE_BYTES // (1024 * 1024)} MiB limit of one message; "
        "send less (store large content in a file and pass its path)"
    )
    members = _leading_members(head.decode("utf-8", "ignore"))
    if "result" in members or "error" in members:
        return Refusal(f"a response of {size:,} bytes, over the limit")
    if not valid_id(members.get("id")):
        members = {**members, **_trailing_members(tail.decode("utf-8", "ignore"))}
    if not valid_id(members.get("id")):
        return None
    return _one(members["id"], INVALID_REQUEST, why, method=members.get("method"), tool_args=True)
