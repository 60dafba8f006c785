"""Per-connection state: one MCP connection is one threadloom session."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import anyio
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context

from threadloom.agents import FORWARDED_ENV
from threadloom.errors import StoreFull, ThreadloomError
from threadloom.identity import (
    Identity,
    Provenance,
    detect_vendor,
    parent_session_from,
    project_root,
    session_id_from,
)
from threadloom.runtime import Runtime
from threadloom.sessions import SessionInfo

log = logging.getLogger(__name__)

ROOTS_TIMEOUT_S = 2.0
TOUCH_INTERVAL_S = 30.0


def forwarded_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The part of an environment that identifies the session and its agent."""
    return {k: environ[k] for k in FORWARDED_ENV if k in environ}


@dataclass
class ConnectionState:
    """Who is on the other end of one connection, resolved lazily on its first real request."""

    keeps_threads: ClassVar[bool] = True  # a team server's account: thread files stay in the laptop's repository
    runtime: Runtime
    transport: str
    env: Mapping[str, str]
    cwd: str
    pid: int | None
    toolset: frozenset[str]
    session_id_hint: str | None = None
    session: SessionInfo | None = None
    roots_stale: bool = False
    _lock: anyio.Lock = field(default_factory=anyio.Lock)
    _last_touch: float = 0.0
    _recorded: bool = False  # the session's row is written (a full disk may have put that off)
    delivered: set[int] = field(default_factory=set)  # signals shown on this connection, not yet acknowledged

    @property
    def store_wide(self) -> bool:
        """Whether status and health may show figures of the whole store (every user's rows): yes on one
        person's server; on a team server only for a server administrator's request (http_auth.py)."""
        return True

    async def recheck(self, ctx: ServerRequestContext[Any, Any]) -> None:
        """Raise if the caller lost access since this request began (a team server's account, http_auth.py): a
        call that waits asks again before it answers. Nothing to ask on one person's server."""

    async def ensure_session(self, ctx: ServerRequestContext[Any, Any]) -> SessionInfo:
        """Register the session on first use; afterwards keep its last-seen time fresh."""
        async with self._lock:
            if self.session is not None and not self.roots_stale:
                if not self._recorded:
                    self._recorded = await self._record(self.runtime.sessions.open, self.session)
                elif time.monotonic() - self._last_touch > TOUCH_INTERVAL_S:
                    self._last_touch = time.monotonic()
                    await self._record(self.runtime.sessions.touch, self.session.id)
                return self.session
            client = ctx.session.client_params.client_info if ctx.session.client_params else None
            who = self.identity()
            roots = await self._client_roots(ctx)
            project = self.project_of(roots)
            previous = self.session
            info = SessionInfo(
                id=previous.id
                if previous
                else session_id_from(self.env.get("THREADLOOM_SESSION_ID") or self.session_id_hint),
                vendor=detect_vendor(client.name if client else None, self.env),
                transport=self.transport,
                project=project,
                cwd=self.cwd,
                pid=self.pid,
                client_name=client.name if client else None,
                client_version=client.version if client else None,
                parent_id=parent_session_from(self.env.get("THREADLOOM_PARENT_SESSION")),
                user=who.user,
                author=who.author,
                org=who.org,
            )
            self._recorded = await self._record(self.runtime.sessions.open, info)
            self.session, self.roots_stale, self._last_touch = info, False, time.monotonic()
            self.runtime.live[info.id] = info
            self.runtime.start_embedder()  # after the handshake, never in a session's way
            return info

    def project_of(self, roots: list[str]) -> str:
        """The session's project: its repository root (a team server's account sessions name theirs)."""
        return str(project_root(self.env, roots, self.cwd))

    def identity(self) -> Identity:
        """Whom this session acts for (raises InvalidInput for a malformed THREADLOOM_USER and the like)."""
        settings = self.runtime.settings
        return Identity.of(self.env, settings.user, settings.author, settings.org)

    async def _client_roots(self, ctx: ServerRequestContext[Any, Any]) -> list[str]:
        if self.env.get("THREADLOOM_ROOT"):
            return []
        caps = ctx.session.client_capabilities
        if caps is None or caps.roots is None:
            return []
        with anyio.move_on_after(ROOTS_TIMEOUT_S):
            try:
                result = await ctx.session.list_roots()
            except Exception as exc:  # noqa: BLE001 - a client's broken roots answer must not fail the call
                log.info("client roots unavailable: %r", exc)
                return []
            return [str(r.uri) for r in result.roots]
        log.info("client did not answer roots/list within %.0fs", ROOTS_TIMEOUT_S)
        return []

    async def _record(self, fn: Any, *args: Any) -> bool:
        """Session bookkeeping (open, touch, close) that a full disk must not turn into a failed call: the
        session still serves reads, and is recorded on a later call once the disk has room."""
        try:
            await self.runtime.call(fn, *args)
        except StoreFull as exc:
            log.warning("session bookkeeping not written: %s", exc.message)
            return False
        return True

    async def end(self) -> None:
        info, self.session = self.session, None
        if info is not None:
            self.runtime.live.pop(info.id, None)
            try:
                await self._record(self.runtime.sessions.close, info)
            except ThreadloomError as exc:  # ending one session never takes the server down with it
                log.warning("session %s not recorded as ended: %s", info.id, exc.message)


def local_connection(runtime: Runtime, toolset: frozenset[str]) -> ConnectionState:
    """The connection of an in-process stdio server: this process is the agent's child."""
    return ConnectionState(
        runtime=runtime,
        transport="stdio",
        env=forwarded_env(os.environ),
        cwd=os.getcwd(),
        pid=os.getppid(),
        toolset=toolset,
    )


# The per-session settings an HTTP client may pass as headers. Never who it is: one HTTP server serves one
# user (its own THREADLOOM_USER / _AUTHOR / _ORG), and the identity headers are refused before they get here.
_HTTP_HEADER_ENV = {
    "x-threadloom-root": "THREADLOOM_ROOT",
    "x-threadloom-session-id": "THREADLOOM_SESSION_ID",
    "x-threadloom-vendor": "THREADLOOM_VENDOR",
    "x-threadloom-toolset": "THREADLOOM_TOOLSET",
    "x-threadloom-parent-session": "THREADLOOM_PARENT_SESSION",
}
# HTTP has no connection to close: a client silent this long is dropped from the live view, so the heartbeat
# stops and liveness (coordination/presence.py LIVENESS_MS, 210 s) ends its session; its next request resumes it.
HTTP_STATE_TTL_S = 180.0


class HttpConnections:
    """HTTP clients share one server-wide state; this finds each one's connection by MCP session id.

    `new_state(**fields) -> ConnectionState` makes each connection's state (the HTTP server passes one
    that checks the roots a client names).
    """

    def __init__(self, runtime: Runtime, toolset_for: Any, new_state: Any = ConnectionState) -> None:
        self._runtime = runtime
        self._toolset_for = toolset_for
        self._new_state = new_state
        self._states: dict[str, tuple[ConnectionState, float]] = {}

    def get(self, ctx: ServerRequestContext[Any, Any]) -> ConnectionState:
        headers = ctx.request.headers if ctx.request is not None else {}
        key = headers.get("mcp-session-id") or "-"
        now = time.monotonic()
        found = self._states.get(key)
        if found is None:
            env = {var: headers[h] for h, var in _HTTP_HEADER_ENV.items() if h in headers}
            state: ConnectionState = self._new_state(
                runtime=self._runtime,
                transport="http",
                env=env,
                cwd=os.getcwd(),
                pid=None,
                toolset=self._toolset_for(env),
                session_id_hint=None if key == "-" else key,
            )
            self._forget_idle(now)
        else:
            state = found[0]
        self._states[key] = (state, now)
        return state

    async def keep_tidy(self) -> None:
        """Drop silent clients even when no new one arrives (their sessions then stop being heartbeated)."""
        while True:
            await anyio.sleep(HTTP_STATE_TTL_S / 6)
            self._forget_idle(time.monotonic())

    def _forget_idle(self, now: float) -> None:
        """A client silent for HTTP_STATE_TTL_S is dropped from the live view."""
        for key, (state, seen) in list(self._states.items()):
            if now - seen >= HTTP_STATE_TTL_S:
                del self._states[key]
                if state.session is not None:
                    self._runtime.live.pop(state.session.id, None)


def connection_of(ctx: ServerRequestContext[Any, Any]) -> ConnectionState:
    holder = ctx.lifespan_context
    if isinstance(holder, ConnectionState):
        return holder
    if isinstance(holder, HttpConnections):
        return holder.get(ctx)
    raise TypeError(f"no threadloom connection state on this request ({type(holder).__name__})")


async def caller(ctx: Context[Any, Any]) -> tuple[Runtime, Provenance]:
    """What a tool needs to call a service: the runtime and the calling session's provenance."""
    conn = connection_of(ctx.request_context)
    info = await conn.ensure_session(ctx.request_context)
    return conn.runtime, info.provenance()
