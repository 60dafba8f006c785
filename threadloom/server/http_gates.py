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

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from threadloom.errors import ThreadloomError
from threadloom.server.http_roots import RootPolicy

# Until the team server brings accounts, one HTTP server serves one user: its own settings say who.
IDENTITY_HEADERS = (b"x-threadloom-user", b"x-threadloom-author", b"x-threadloom-org")
ONE_USER = (
    "one HTTP server serves one user: its own THREADLOOM_USER, THREADLOOM_AUTHOR and THREADLOOM_ORG; "
    "the headers X-Threadloom-User, X-Threadloom-Author and X-Threadloom-Org are refused"
)
BY_TOKEN = (  # a team server (--accounts): the request's own token names its account
    "the account is the one your access token names; "
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


# The SDK answers a larger body with a plain-text 413 of its own; this gate says it first, in our words.
MAX_BODY_BYTES = 4 * 1024 * 1024
DRAIN_BYTES = 64 * 1024 * 1024
REFUSED = -32001  # a JSON-RPC server error code (-32000 to -32099) for a request refused before any tool ran


def in_mcp_session(scope: Scope | None) -> bool:
    """An MCP client past `initialize` (it sends its session id or protocol version on every request)."""
    return scope is not None and any(header_values(scope, n) for n in (b"mcp-session-id", b"mcp-protocol-version"))


async def refuse(
    send: Send,
    status: int,
    message: str,
    headers: list[tuple[bytes, bytes]] | None = None,
    *,
    scope: Scope | None = None,
    close: bool = True,
    retryable: bool = False,
    request_id: str | int | None = None,
    code: int = REFUSED,
) -> None:
    """{error, retryable}; to an MCP client in a session, as a JSON-RPC error carrying the same (data), since
    its SDK shows only "Server returned an error response" for any other body of a failed request."""
    said = {"error": message, "retryable": retryable}
    if in_mcp_session(scope):
        said = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message, "data": said}}
    body = json.dumps(said).encode()
    closing = [(b"connection", b"close")] if close else []
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), *closing, *(headers or [])],
        }
    )
    await send({"type": "http.response.body", "body": body})


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
        await refuse(send, 401, "missing or wrong bearer token", [(b"www-authenticate", b"Bearer")], scope=scope)


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
        self,
        app: ASGIApp,
        roots: RootPolicy,
        cwd: str,
        check: Callable[[dict[str, str]], object] | None = None,
        *,
        accounts: bool = False,
    ) -> None:
        self.app = app
        self._roots = roots
        self._cwd = cwd
        self._check = check
        self._identity = BY_TOKEN if accounts else ONE_USER

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            if any(header_values(scope, name) for name in IDENTITY_HEADERS):
                await refuse(send, 400, self._identity, scope=scope)
                return
            for value in header_values(scope, b"x-threadloom-root"):
                try:  # decoded as the app behind decodes it (Starlette: latin-1)
                    self._roots.resolve({"THREADLOOM_ROOT": value.decode("latin-1")}, [], self._cwd)
                except ThreadloomError as exc:
                    await refuse(send, 400, exc.message, scope=scope)
                    return
            if self._check is not None:
                env = {var: v.decode("latin-1") for name, var in SESSION_HEADERS for v in header_values(scope, name)}
                try:
                    self._check(env)
                except ThreadloomError as exc:
                    await refuse(send, 400, exc.message, scope=scope)
                    return
        await self.app(scope, receive, send)


class BodyLimitGate:
    """Refuses a request whose body is over MAX_BODY_BYTES, with a clear error: a declared length before the
    body is read; a chunked body (no length) once it passes the limit, read here first and handed on whole."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self._limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        lengths = header_values(scope, b"content-length")
        for value in lengths:
            size = int(value) if value.strip().isdigit() else 0
            if size > self._limit:
                await self._refuse(scope, receive, send, f"the request is {size:,} bytes")
                return
        if lengths or scope.get("method") in ("GET", "HEAD", "DELETE", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        body = await gather(receive, self._limit)
        if body is None:
            return  # the client went away
        if isinstance(body, tuple):
            seen, ended = body
            await self._refuse(scope, receive, send, f"the request's body passed {seen:,} bytes", ended=ended)
            return
        await self.app(scope, replay(body, receive), send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, what: str, *, ended: bool = False) -> None:
        message = (
            f"{what}; this server takes at most {self._limit:,} (4 MiB): send less (a long text is stored in parts)"
        )
        # A client that writes its whole body before reading (urllib, curl) sees the answer only if the body
        # was read: up to DRAIN_BYTES of it is, and thrown away (none when its end was read already).
        drained = ended or await _drain(receive, DRAIN_BYTES)
        await refuse(send, 413, message, scope=scope, close=not drained)


async def gather(receive: Receive, limit: int) -> bytes | tuple[int, bool] | None:
    """A chunked body: its bytes when within `limit`; when it passed it, the count read and whether that was
    the body's end; None when the client went away."""
    parts: list[bytes] = []
    seen = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunk = message.get("body", b"")
        seen += len(chunk)
        if seen > limit:
            return seen, not message.get("more_body", False)
        parts.append(chunk)
        if not message.get("more_body", False):
            return b"".join(parts)


def replay(body: bytes, receive: Receive) -> Receive:
    """The body read already, as one message; then the client's own (its disconnect)."""
    given = False

    async def again() -> Message:
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    return again


async def _drain(receive: Receive, limit: int) -> bool:
    """Read and drop the request's body; False when it is longer than `limit` or the client went away."""
    seen = 0
    while seen <= limit:
        message = await receive()
        if message["type"] != "http.request":
            return False
        seen += len(message.get("body", b""))
        if not message.get("more_body", False):
            return True
    return False
