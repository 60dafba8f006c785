"""Which account and project opened each MCP session of a team server, checked on every request naming one.

An MCP session id is also the threadloom session's id, and `peers` shows a project's session ids to its
members: so the id is no secret, and must not be a capability. The SDK ends a session on any DELETE naming
it and serves any POST or GET naming it; and the connection state that remembers the session's account is
created at its first tool call and dropped after a silence. So the owner is recorded here when the server
answers the request that made the session, and a request naming a session is let through only for that
owner: another account gets 403, and a session this gate does not know (ended, or another node's) 404.

The SDK holds at most 10,000 sessions and ends one only after 30 idle minutes, so one account opening
sessions in a loop would leave its team none: an account may hold `per_account` sessions on a node at once
(429, retryable, past it). A session counts from its opening until its DELETE or until it was idle as long
as the SDK lets one be.
"""

from __future__ import annotations

import time
from collections import Counter, OrderedDict
from collections.abc import Callable

from mcp.server.streamable_http_manager import DEFAULT_SESSION_IDLE_TIMEOUT
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from threadloom.server.http_gates import header_values, refuse

SESSION_HEADER = b"mcp-session-id"
MAX_SESSIONS = 100_000  # the oldest are forgotten past it: their clients get 404 and open a new session
SESSION_IDLE_S = DEFAULT_SESSION_IDLE_TIMEOUT  # given to the SDK too (http.py), so both end a session alike

Owner = tuple[str, str]  # user, project


class SessionOwners:
    def __init__(self, per_account: int, limit: int = MAX_SESSIONS) -> None:
        self._owners: OrderedDict[str, Owner] = OrderedDict()
        self._limit = limit
        self._per_account = per_account
        self._live: dict[str, OrderedDict[str, float]] = {}  # user -> session -> last seen, oldest first
        self._opening: Counter[str] = Counter()

    def _record(self, session_id: str, owner: Owner) -> None:
        self._owners[session_id] = owner
        self._touch(session_id, owner[0])
        while len(self._owners) > self._limit:
            gone, (user, _) = self._owners.popitem(last=False)
            self._end(gone, user)

    def _touch(self, session_id: str, user: str) -> None:
        seen = self._live.setdefault(user, OrderedDict())
        seen[session_id] = time.monotonic()
        seen.move_to_end(session_id)

    def _end(self, session_id: str, user: str) -> None:
        seen = self._live.get(user)
        if seen is not None:
            seen.pop(session_id, None)

    def _open_sessions(self, user: str) -> int:
        seen = self._live.get(user)
        if seen is None:
            return 0
        idle_since = time.monotonic() - SESSION_IDLE_S
        while seen and next(iter(seen.values())) < idle_since:
            seen.popitem(last=False)
        if not seen:
            del self._live[user]
            return 0
        return len(seen)

    async def pass_on(self, app: ASGIApp, scope: Scope, receive: Receive, send: Send, owner: Owner) -> None:
        """Call `app` for this request of `owner`, or refuse it when it names another's session."""
        named = [v.decode("latin-1") for v in header_values(scope, SESSION_HEADER)]
        if len(named) > 1:
            await refuse(send, 400, "send one Mcp-Session-Id header", scope=scope)
            return
        if not named:
            await self._open(app, scope, receive, send, owner)
            return
        session_id = named[0]
        known = self._owners.get(session_id)
        if known is None:
            await refuse(
                send,
                404,
                f"no MCP session {session_id[:64]} here (it ended, or another node holds it): open a new one",
                scope=scope,
            )
            return
        if known != owner:
            message = "this MCP session belongs to another account or project; open a new session"
            await refuse(send, 403, message, scope=scope)
            return
        if scope.get("method") == "DELETE":
            await app(scope, receive, self._forgetting(send, session_id))
            return
        self._touch(session_id, owner[0])
        try:
            await app(scope, receive, send)
        finally:
            if session_id in self._owners:
                self._touch(session_id, owner[0])

    async def _open(self, app: ASGIApp, scope: Scope, receive: Receive, send: Send, owner: Owner) -> None:
        user = owner[0]
        if self._open_sessions(user) + self._opening[user] >= self._per_account:
            message = (
                f"account {user!r} holds {self._per_account} MCP sessions on this server already "
                f"(THREADLOOM_HTTP_ACCOUNT_SESSIONS): end one (DELETE) or wait until one has been idle "
                f"{SESSION_IDLE_S // 60:.0f} minutes"
            )
            await refuse(send, 429, message, [(b"retry-after", b"60")], scope=scope, retryable=True)
            return
        self._opening[user] += 1
        opening = [True]  # until the answer starts: then the session is recorded, or there is none

        def opened() -> None:
            if opening:
                opening.clear()
                self._opening[user] -= 1
                if not self._opening[user]:
                    del self._opening[user]

        try:
            await app(scope, receive, self._recording(send, owner, opened))
        finally:
            opened()

    def _recording(self, send: Send, owner: Owner, opened: Callable[[], None]) -> Send:
        async def recorded(message: Message) -> None:
            if message["type"] == "http.response.start":
                if message["status"] < 300:
                    for key, value in message.get("headers") or []:
                        if key.lower() == SESSION_HEADER:
                            self._record(value.decode("latin-1"), owner)
                opened()
            await send(message)

        return recorded

    def _forgetting(self, send: Send, session_id: str) -> Send:
        async def forgotten(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] < 300:
                owner = self._owners.pop(session_id, None)
                if owner is not None:
                    self._end(session_id, owner[0])
            await send(message)

        return forgotten
