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


def security_for(settings: Settings, host: str) -> TransportSecuritySettings:
    hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
    origins = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
    if not is_loopback(host) and host not in ("0.0.0.0", "::"):
        hosts.append(f"{host}:*")
        origins.append(f"http://{host}:*")
    if host in ("0.0.0.0", "::"):
        hosts = ["*"]  # any interface: the token is the guard; Origin is still checked
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=hosts,
        allowed_origins=origins + settings.allowed_origins(),
    )


def http_app(server: ThreadloomServer, settings: Settings, host: str) -> ASGIApp:
    app: ASGIApp = server.streamable_http_app(
        streamable_http_path=MCP_PATH, transport_security=security_for(settings, host), host=host
    )
    if settings.http_token is not None:
        app = BearerTokenGate(app, settings.http_token.get_secret_value())
    return app


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
        yield HttpConnections(runtime, lambda env: toolset_for(server, env))

    server = build_server(runtime, lifespan=lifespan)
    import uvicorn

    config = uvicorn.Config(http_app(server, settings, host), host=host, port=port, log_level="warning")
    log.warning("threadloom serving streamable HTTP on http://%s:%d%s", host, port, MCP_PATH)
    try:
        anyio.run(uvicorn.Server(config).serve)
    finally:
        runtime.close()
    return 0
