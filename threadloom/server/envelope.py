"""One JSON-RPC message as the SDK reads it, or threadloom's answer when the SDK cannot take it.

Both transports read messages through here: the stdio and daemon-socket lines (`transport.py`) and the
HTTP bodies (`http_envelope.py`). The SDK would drop such a line without a word, or answer a body with
its parser's words (a "Parse error" for valid JSON nested too deep, a pydantic dump for a number);
`daemon/jsonrpc.py` says what is wrong, under the request's id, with `{error, retryable}`.
"""

from __future__ import annotations

import json

import mcp_types as types
from pydantic import ValidationError

from threadloom.daemon import jsonrpc

# No MCP method name is anywhere near this long; the SDK's "Method not found" would echo a longer one whole.
MAX_METHOD_CHARS = 256


def read_message(line: bytes) -> types.JSONRPCMessage | jsonrpc.Refusal:
    try:
        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        if isinstance(message, types.JSONRPCNotification) and b'"id"' in line and _has_top_level_id(line):
            raise ValueError("a request whose id is neither a string nor an integer")
    except ValueError as exc:  # pydantic's ValidationError is one
        detail = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) and exc.errors() else str(exc)
        return jsonrpc.diagnose(line, detail)
    if isinstance(message, types.JSONRPCRequest) and message.method == "initialize":
        refused = _initialize_params(message)
        if refused is not None:
            return refused
    if isinstance(message, types.JSONRPCRequest | types.JSONRPCNotification) and len(message.method) > MAX_METHOD_CHARS:
        why = f"no method is named {message.method[:60]!r}... ({len(message.method):,} characters)"
        if isinstance(message, types.JSONRPCNotification):
            return jsonrpc.Refusal(why)
        code = jsonrpc.METHOD_NOT_FOUND
        return jsonrpc.Refusal(why, [jsonrpc.error_line(message.id, code, why)], (message.id, code, why))
    return message


def _initialize_params(message: types.JSONRPCRequest) -> jsonrpc.Refusal | None:
    """The SDK refuses an `initialize` it cannot read as "Invalid request parameters", saying nothing of which."""
    try:
        types.InitializeRequestParams.model_validate(message.params or {})
    except ValidationError as exc:
        wrong = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'params'}: {e['msg']}" for e in exc.errors()[:3])
        why = f"initialize params: {wrong}"[:500]
        code = jsonrpc.INVALID_PARAMS
        return jsonrpc.Refusal(why, [jsonrpc.error_line(message.id, code, why)], (message.id, code, why))
    return None


def _has_top_level_id(line: bytes) -> bool:
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return False
    return isinstance(value, dict) and "id" in value
