"""`threadloom serve --http`: streamable HTTP from the same server code as the daemon.

Binds 127.0.0.1 unless told otherwise and always wants a bearer token: THREADLOOM_HTTP_TOKEN, else
one made once and kept in the home (`http.token`, 0600). Only `--no-token`, on loopback, turns that
off. One HTTP server serves one user, its own; a client may name its project root only among the
folders the server allows. The request gates are in `http_gates`, the connection bounds in `http_guard`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import anyio
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp

from threadloom.config import Settings
from threadloom.errors import ConfigError
from threadloom.runtime import open_runtime
from threadloom.server.app import ThreadloomServer, build_server, toolset_for
from threadloom.server.connection import HttpConnections
from threadloom.server.http_gates import BearerTokenGate, ClientHeaderGate, OriginGate, is_loopback
from threadloom.server.http_guard import Limits, bound_logs
from threadloom.server.http_roots import HttpConnectionState, RootPolicy
from threadloom.server.http_token import stored_token
from threadloom.server.transport import check_session_settings

__all__ = ["access_token", "http_app", "is_loopback", "parse_bind", "serve_http"]

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


def access_token(settings: Settings, host: str, *, no_token: bool) -> str | None:
    """The token every request must carry; None only for an explicit `--no-token` on loopback."""
    if not no_token:
        if settings.http_token is not None:
            return settings.http_token.get_secret_value()
        return stored_token(settings.layout.http_token)
    if not is_loopback(host):
        raise ConfigError(f"--no-token is only allowed on a loopback address, not {host}")
    if settings.http_token is not None:
        raise ConfigError("--no-token contradicts THREADLOOM_HTTP_TOKEN; unset one of them")
    log.warning(
        "serving HTTP WITHOUT an access token (--no-token): every program and every user of this machine "
        "can read and change your memories through it"
    )
    return None


def http_app(server: ThreadloomServer, settings: Settings, host: str, token: str | None, roots: RootPolicy) -> ASGIApp:
    # The SDK's own Host/Origin check knows no wildcard bind, so OriginGate does that job for every bind.
    app: ASGIApp = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        host=host,
    )
    app = ClientHeaderGate(app, roots, os.getcwd(), partial(check_session_settings, server))
    app = OriginGate(app, host, settings.allowed_origins())
    return app if token is None else BearerTokenGate(app, token)


def serve_http(settings: Settings, bind: str, *, no_token: bool = False) -> int:
    host, port = parse_bind(bind)
    token = access_token(settings, host, no_token=no_token)
    roots = RootPolicy.of(settings, os.getcwd())
    limits = Limits.of(settings)
    bound_logs()
    runtime = open_runtime(settings, "http")

    @asynccontextmanager
    async def lifespan(srv: Any) -> AsyncIterator[HttpConnections]:
        async with anyio.create_task_group() as tg:
            tg.start_soon(runtime.run_background_jobs)
            new_state = partial(HttpConnectionState, roots=roots)
            connections = HttpConnections(runtime, lambda env: toolset_for(server, env), new_state)
            tg.start_soon(connections.keep_tidy)
            yield connections
            tg.cancel_scope.cancel()

    server = build_server(runtime, lifespan=lifespan)
    import uvicorn

    config = uvicorn.Config(
        http_app(server, settings, host, token, roots),
        host=host,
        port=port,
        log_level="warning",
        **limits.uvicorn_options(),
    )
    log.warning(
        "threadloom serving streamable HTTP on http://%s:%d%s for user %s (roots: %s)",
        host,
        port,
        MCP_PATH,
        settings.user,
        ", ".join(str(r) for r in roots.allowed),
    )
    try:
        anyio.run(uvicorn.Server(config).serve)
    finally:
        runtime.close()
    return 0
