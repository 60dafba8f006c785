"""The SDK's own refusals in threadloom's shape: every HTTP answer of 400 or more carries `{error, retryable}`.

The SDK answers a request without a session id (400), for a session it does not know (404), with a method
it does not serve (405) or from a client that does not accept its media types (406) with a JSON-RPC error
that has no `data`, and a path other than /mcp with a plain-text 404. threadloom's own refusals
(`http_gates.refuse`) carry `{error, retryable}`, as the body or as the JSON-RPC error's `data`; this gate,
around the SDK's app, gives the SDK's answers the same shape. Answers under 400 pass untouched, streamed.
"""

from __future__ import annotations

import json
from http import HTTPStatus

from starlette.types import ASGIApp, Message, Receive, Scope, Send

MAX_SAID_CHARS = 2000


class ErrorShapeGate:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start: Message | None = None
        body = bytearray()

        async def shaped(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start" and message["status"] >= 400:
                start = message
                return
            if start is None or message["type"] != "http.response.body":
                await send(message)
                return
            body.extend(message.get("body", b""))
            if message.get("more_body", False):
                return
            answer = reshaped(bytes(body), start["status"])
            replaced = (b"content-length", b"content-type")
            kept = [(k, v) for k, v in start.get("headers", []) if k.lower() not in replaced]
            headers = [*kept, (b"content-type", b"application/json"), (b"content-length", str(len(answer)).encode())]
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": answer})

        await self.app(scope, receive, shaped)


def reshaped(body: bytes, status: int) -> bytes:
    """`body` of an answer with `status` (400 or more), carrying `{error, retryable}`."""
    retryable = status in (HTTPStatus.REQUEST_TIMEOUT, HTTPStatus.TOO_MANY_REQUESTS) or status >= 500
    try:
        said = json.loads(body)
    except ValueError:
        said = None
    if isinstance(said, dict) and "retryable" in said:
        return body
    if isinstance(said, dict) and isinstance(said.get("error"), dict):  # a JSON-RPC error
        error = said["error"]
        if "data" not in error:
            message = str(error.get("message", ""))[:MAX_SAID_CHARS]
            error["data"] = {"error": message or _phrase(status), "retryable": retryable}
        return json.dumps(said).encode()
    text = body.decode("utf-8", "replace").strip()[:MAX_SAID_CHARS]
    return json.dumps({"error": text or _phrase(status), "retryable": retryable}).encode()


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return f"HTTP {status}"
