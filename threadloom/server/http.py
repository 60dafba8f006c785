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

from threadloom.accounts.service import Accounts
from threadloom.config import Settings
from threadloom.errors import ConfigError
from threadloom.runtime import open_runtime
from threadloom.server.app import ThreadloomServer, build_server, toolset_for
from threadloom.server.connection import HttpConnections
from threadloom.server.http_answers import ErrorShapeGate
from threadloom.server.http_auth import (
    AccountAuth,
    AccountConnections,
    AccountConnectionState,
    AccountGate,
    team_toolset,
)
from threadloom.server.http_envelope import EnvelopeGate
from threadloom.server.http_gates import BearerTokenGate, BodyLimitGate, ClientHeaderGate, OriginGate, is_loopback
from threadloom.server.http_guard import Limits, bound_logs
from threadloom.server.http_oauth import JwtVerifier, OAuthConfig
from threadloom.server.http_roots import HttpConnectionState, RootPolicy
from threadloom.server.http_sessions import SESSION_IDLE_S
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


def http_app(
    server: ThreadloomServer,
    settings: Settings,
    host: str,
    token: str | None,
    roots: RootPolicy,
    auth: AccountAuth | None = None,
) -> ASGIApp:
    # The SDK's own Host/Origin check knows no wildcard bind, so OriginGate does that job for every bind.
    app: ASGIApp = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        session_idle_timeout=SESSION_IDLE_S,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        host=host,
    )
    check = partial(check_session_settings, server)
    app = EnvelopeGate(ErrorShapeGate(app))
    app = BodyLimitGate(ClientHeaderGate(app, roots, os.getcwd(), check, accounts=auth is not None))
    app = OriginGate(app, host, settings.allowed_origins())
    if auth is not None:  # accounts: each request's own token says who (http_auth.py)
        return AccountGate(app, auth.accounts, auth.oauth, sessions_per_account=settings.http_account_sessions)
    return app if token is None else BearerTokenGate(app, token)


def team_root(settings: Settings) -> None:
    """An account session's project is a name, not a folder: the server works from an empty folder of its
    home, so no name can resolve to a folder (thread files live in the laptops' repositories, serve --remote)."""
    folder = settings.home / "team-root"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    if any(folder.iterdir()):
        raise ConfigError(f"{folder} must stay empty: it is where a team server's sessions start")
    os.chdir(folder)


def serve_http(
    settings: Settings, bind: str, *, no_token: bool = False, accounts: bool = False, oauth: OAuthConfig | None = None
) -> int:
    host, port = parse_bind(bind)
    if oauth is not None and not accounts:
        raise ConfigError("OAuth tokens name accounts: add --accounts")
    if accounts and (no_token or settings.http_token is not None):
        raise ConfigError("--accounts takes each user's own token: drop --no-token and THREADLOOM_HTTP_TOKEN")
    token = None if accounts else access_token(settings, host, no_token=no_token)
    roots = RootPolicy.of(settings, os.getcwd())
    limits = Limits.of(settings)
    bound_logs()
    runtime = open_runtime(settings, "http")
    auth = AccountAuth(Accounts(runtime.store), JwtVerifier(oauth) if oauth else None) if accounts else None
    if auth is not None:
        team_root(settings)

    @asynccontextmanager
    async def lifespan(srv: Any) -> AsyncIterator[HttpConnections]:
        async with anyio.create_task_group() as tg:
            tg.start_soon(runtime.run_background_jobs)
            groups = {name: t.group for name, t in server.tool_defs.items()}

            def toolset(env: dict[str, str]) -> frozenset[str]:
                chosen = toolset_for(server, env)
                return team_toolset(chosen, groups) if auth is not None else chosen

            if auth is not None:
                connections: HttpConnections = AccountConnections(runtime, toolset, AccountConnectionState)
            else:
                connections = HttpConnections(runtime, toolset, partial(HttpConnectionState, roots=roots))
            tg.start_soon(connections.keep_tidy)
            yield connections
            tg.cancel_scope.cancel()

    server = build_server(runtime, lifespan=lifespan)
    import uvicorn

    config = uvicorn.Config(
        http_app(server, settings, host, token, roots, auth),
        host=host,
        port=port,
        log_level="warning",
        **limits.uvicorn_options(),
    )
    log.warning(
        "threadloom serving streamable HTTP on http://%s:%d%s for %s",
        host,
        port,
        MCP_PATH,
        "the accounts' tokens" + (f" and OAuth tokens of {oauth.issuer}" if oauth else "")
        if accounts
        else f"user {settings.user} (roots: {', '.join(str(r) for r in roots.allowed)})",
    )
    try:
        anyio.run(uvicorn.Server(config).serve)
    finally:
        runtime.close()
    return 0
