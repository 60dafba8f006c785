"""Which account and project opened each MCP session of a team server, checked on every request naming one.

An MCP session id is also the threadloom session's id, and `peers` shows a project's session ids to its
members: so the id is no secret, and must not be a capability. The SDK ends a session on any DELETE naming
it and serves any POST or GET naming it; and the connection state that remembers the session's account is
created at its first tool call and dropped after a silence. So the owner is recorded here when the server
answers the request that made the session, and a request naming a session is let through only for that
owner: another account gets 403, and a session this gate does not know (ended, or another node's) 404.
"""

from __future__ import annotations

from collections import OrderedDict

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from threadloom.server.http_gates import header_values, refuse

SESSION_HEADER = b"mcp-session-id"
MAX_SESSIONS = 100_000  # the oldest are forgotten past it: their clients get 404 and open a new session

Owner = tuple[str, str]  # user, project


class SessionOwners:
    def __init__(self, limit: int = MAX_SESSIONS) -> None:
        self._owners: OrderedDict[str, Owner] = OrderedDict()
        self._limit = limit

    def _record(self, session_id: str, owner: Owner) -> None:
        self._owners[session_id] = owner
        while len(self._owners) > self._limit:
            self._owners.popitem(last=False)

    async def pass_on(self, app: ASGIApp, scope: Scope, receive: Receive, send: Send, owner: Owner) -> None:
        """Call `app` for this request of `owner`, or refuse it when it names another's session."""
        named = [v.decode("latin-1") for v in header_values(scope, SESSION_HEADER)]
        if len(named) > 1:
            await refuse(send, 400, "send one Mcp-Session-Id header", scope=scope)
            return
        if not named:
            await app(scope, receive, self._recording(send, owner))
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
        await app(scope, receive, send)

    def _recording(self, send: Send, owner: Owner) -> Send:
        async def recorded(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] < 300:
                for key, value in message.get("headers") or []:
                    if key.lower() == SESSION_HEADER:
                        self._record(value.decode("latin-1"), owner)
            await send(message)

        return recorded

    def _forgetting(self, send: Send, session_id: str) -> Send:
        async def forgotten(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] < 300:
                self._owners.pop(session_id, None)
            await send(message)

        return forgotten
