"""What every HTTP request must pass before the MCP app sees it, each a small ASGI wrapper.

Outermost first: the bearer token (an unauthenticated client learns nothing else), then Host and
Origin against DNS rebinding, then the per-client headers (identity refused, root allow-listed).
Each gate looks at every value of a header it checks: a repeated header cannot show one value to
a gate and another to the app behind it. A refusal closes the connection.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Callable
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from threadloom.errors import ThreadloomError
from threadloom.server.http_roots import RootPolicy

# Until the team server brings accounts, one HTTP server serves one user: its own settings say who.
IDENTITY_HEADERS = (b"x-threadloom-user", b"x-threadloom-author", b"x-threadloom-org")
ONE_USER = (
    "one HTTP server serves one user: its own THREADLOOM_USER, THREADLOOM_AUTHOR and THREADLOOM_ORG; "
    "the headers X-Threadloom-User, X-Threadloom-Author and X-Threadloom-Org are refused"
)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def header_values(scope: Scope, name: bytes) -> list[bytes]:
    return [value for key, value in scope.get("headers") or [] if key == name]


async def refuse(
    send: Send,
    status: int,
    message: str,
    headers: list[tuple[bytes, bytes]] | None = None,
    body: dict[str, Any] | None = None,
) -> None:
    """Answer `status` with `body` (else `{error: message, retryable: false}`) and close the connection."""
    content = json.dumps(body if body is not None else {"error": message, "retryable": False}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"connection", b"close"), *(headers or [])],
        }
    )
    await send({"type": "http.response.body", "body": content})


class BearerTokenGate:
    """Rejects every HTTP request that does not carry the token, exactly once."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # a websocket, say: nothing here serves one, token or not
            await send({"type": "websocket.close", "code": 1008})
            return
        given = header_values(scope, b"authorization")
        if len(given) == 1 and hmac.compare_digest(given[0], self._expected):
            await self.app(scope, receive, send)
            return
        await refuse(send, 401, "missing or wrong bearer token", [(b"www-authenticate", b"Bearer")])


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
            for origin in (v.decode("latin-1") for v in header_values(scope, b"origin")):
                if not self._origin_ok(origin):
                    await refuse(send, 403, f"origin {origin} is not allowed; see THREADLOOM_HTTP_ALLOWED_ORIGINS")
                    return
            hosts = [v.decode("latin-1") for v in header_values(scope, b"host")]
            if self._loopback and (len(hosts) != 1 or not self._host_ok(hosts[0])):
                await refuse(send, 421, f"host {', '.join(hosts) or '(none)'} is not this server")
                return
        await self.app(scope, receive, send)


# Per-session settings an HTTP client may send as headers, checked before any session starts.
SESSION_HEADERS = (
    (b"x-threadloom-toolset", "THREADLOOM_TOOLSET"),
    (b"x-threadloom-session-id", "THREADLOOM_SESSION_ID"),
    (b"x-threadloom-parent-session", "THREADLOOM_PARENT_SESSION"),
)


class ClientHeaderGate:
    """Refuses identity headers, a root header outside the folders this server may use, and per-session
    headers `check` refuses (an unknown toolset, a malformed session id): 400 before the session starts."""

    def __init__(
        self, app: ASGIApp, roots: RootPolicy, cwd: str, check: Callable[[dict[str, str]], object] | None = None
    ) -> None:
        self.app = app
        self._roots = roots
        self._cwd = cwd
        self._check = check

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            if any(header_values(scope, name) for name in IDENTITY_HEADERS):
                await refuse(send, 400, ONE_USER)
                return
            for value in header_values(scope, b"x-threadloom-root"):
                try:  # decoded as the app behind decodes it (Starlette: latin-1)
                    self._roots.resolve({"THREADLOOM_ROOT": value.decode("latin-1")}, [], self._cwd)
                except ThreadloomError as exc:
                    await refuse(send, 400, exc.message)
                    return
            if self._check is not None:
                env = {var: v.decode("latin-1") for name, var in SESSION_HEADERS for v in header_values(scope, name)}
                try:
                    self._check(env)
                except ThreadloomError as exc:
                    await refuse(send, 400, exc.message)
                    return
        await self.app(scope, receive, send)
