"""The HTTP gate for a POST body the SDK cannot take as one JSON-RPC message (`envelope.py` says why).

The SDK answers such a body in its own words, without threadloom's `{error, retryable}`: a JSON-RPC
"Parse error" for valid JSON nested deeper than its parser goes, a pydantic dump for a number, `[]` or
`params` of the wrong type, and a request whose id is null it takes for a notification and never answers;
a body that is not declared JSON got a plain-text "Invalid Content-Type header".
This gate, inside `BodyLimitGate` (so the body is at most its limit), reads the body, answers those with
a 400 and hands every other on, whole, to the app.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from threadloom.daemon import jsonrpc
from threadloom.server.envelope import read_message
from threadloom.server.http_gates import MAX_BODY_BYTES, gather, header_values, refuse, replay


class EnvelopeGate:
    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self._limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        types = [v.decode("latin-1") for v in header_values(scope, b"content-type")] or ["none"]
        if not all(t.strip().lower().startswith("application/json") for t in types):  # the SDK: plain-text 400
            said = f"send the JSON-RPC message with Content-Type: application/json, not {types[0][:80]!r}"
            await refuse(send, 415, said, scope=scope)
            return
        body = await gather(receive, self._limit)
        if body is None:
            return  # the client went away
        if isinstance(body, tuple):  # over a declared length BodyLimitGate let through: not HTTP/1.1 as h11 reads it
            await refuse(send, 413, f"the request's body passed {self._limit:,} bytes", scope=scope)
            return
        message = read_message(body)
        if not isinstance(message, jsonrpc.Refusal):
            await self.app(scope, replay(body, receive), send)
            return
        request_id, code, why = message.said or (None, jsonrpc.INVALID_REQUEST, message.reason)
        await refuse(send, 400, why, scope=scope, close=False, request_id=request_id, code=code)
