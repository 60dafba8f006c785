"""`threadloom serve --http`: streamable HTTP from the same server code as the daemon.

Binds 127.0.0.1 unless told otherwise, validates Host and Origin against
DNS rebinding, refuses a non-loopback address without an access token, and
requires that token (as `Authorization: Bearer ...`) whenever one is set.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Receive, Scope, Send

from threadloom.config import Settings
from threadloom.errors import ConfigError
from threadloom.runtime import open_runtime
from threadloom.server.app import ThreadloomServer, build_server, toolset_for
from threadloom.server.connection import HttpConnections

log = logging.getLogger(__name__)
MCP_PATH = "/mcp"


def parse_bind(value: str) -> tuple[str, int]:
    """`[HOST:]PORT` -> (host, port); the host defaults to 127.0.0.1."""
    host, sep, port_text = value.rpartition(":")
    if not sep:
        host, port_text = "127.0.0.1", value
    host = host.strip("[]") or "127.0.0.1"
    try:
        port = int(port_text)
    except ValueError:
        raise ConfigError(f"--http takes [HOST:]PORT, not {value!r}") from None
    if not 0 <= port <= 65535:
        raise ConfigError(f"port {port} is out of range")
    return host, port


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class BearerTokenGate:
    """Rejects every HTTP request that does not carry the configured token."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers") or []).get(b"authorization", b"")
        if hmac.compare_digest(given, self._expected):
            await self.app(scope, receive, send)
            return
        body = json.dumps({"error": "missing or wrong bearer token", "retryable": False}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")],
            }
        )
        await send({"type": "http.response.body", "body": body})


class OriginGate:
    """Refuses requests from web pages of other origins, and, on loopback, forged Host headers.

    A browser sends Origin with every cross-site request; a page that reaches a loopback server
    through DNS rebinding shows a foreign Host. Clients that are not browsers send no Origin.
    """

    def __init__(self, app: ASGIApp, host: str, extra_origins: list[str]) -> None:
        self.app = app
        self._loopback = is_loopback(host)
        names = ["127.0.0.1", "localhost", "[::1]"]
        if not self._loopback and host not in ("0.0.0.0", "::"):
            names.append(f"[{host}]" if ":" in host else host)
        self._hosts = names
        self._origins = [f"{scheme}://{n}" for n in names for scheme in ("http", "https")] + extra_origins

    def _origin_ok(self, origin: str) -> bool:
        for allowed in self._origins:
            if origin == allowed or (origin.startswith(allowed + ":") and origin[len(allowed) + 1 :].isdigit()):
                return True
        return False

    def _host_ok(self, host: str) -> bool:
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        return name in self._hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            origin = headers.get(b"origin", b"").decode("latin-1")
            host = headers.get(b"host", b"").decode("latin-1")
            if origin and not self._origin_ok(origin):
                await _refuse(send, 403, f"origin {origin} is not allowed; see THREADLOOM_HTTP_ALLOWED_ORIGINS")
                return
            if self._loopback and not self._host_ok(host):
                await _refuse(send, 421, f"host {host or '(none)'} is not this server")
                return
        await self.app(scope, receive, send)


async def _refuse(send: Send, status: int, message: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps({"error": message, "retryable": False}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), *(headers or [])],
        }
    )
    await send({"type": "http.response.body", "body": body})


def http_app(server: ThreadloomServer, settings: Settings, host: str) -> ASGIApp:
    # The SDK's own Host/Origin check knows no wildcard bind, so OriginGate does that job for every bind.
    app: ASGIApp = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        host=host,
    )
    if settings.http_token is not None:
        app = BearerTokenGate(app, settings.http_token.get_secret_value())
    return OriginGate(app, host, settings.allowed_origins())


def check_exposure(settings: Settings, host: str) -> None:
    if not is_loopback(host) and settings.http_token is None:
        raise ConfigError(
            f"refusing to serve on non-loopback address {host} without an access token; set THREADLOOM_HTTP_TOKEN"
        )


def serve_http(settings: Settings, bind: str) -> int:
    host, port = parse_bind(bind)
    check_exposure(settings, host)
    runtime = open_runtime(settings, "http")

    @asynccontextmanager
    async def lifespan(srv: Any) -> AsyncIterator[HttpConnections]:
        async with anyio.create_task_group() as tg:
            tg.start_soon(runtime.run_background_jobs)
            yield HttpConnections(runtime, lambda env: toolset_for(server, env))
            tg.cancel_scope.cancel()

    server = build_server(runtime, lifespan=lifespan)
    import uvicorn

    config = uvicorn.Config(http_app(server, settings, host), host=host, port=port, log_level="warning")
    log.warning("threadloom serving streamable HTTP on http://%s:%d%s", host, port, MCP_PATH)
    try:
        anyio.run(uvicorn.Server(config).serve)
    finally:
        runtime.close()
    return 0
