"""`serve --http --accounts`: every request acts for the account its bearer token names, in one project.

The gate runs first on every request: a per-user token (`tlk_...`, threadloom/accounts/tokens.py) or, when
an issuer is configured, an OAuth JWT access token (http_oauth.py) names the user; X-Threadloom-Project
names the project, which must belong to an organisation the user is a member of. Both are asked of the
store at every request, so a revoked or expired token, a removed user or a member taken out of the
organisation is refused at their next call: 401 (with a WWW-Authenticate challenge pointing at the
protected-resource metadata, RFC 9728 section 5.1) or 403. The session then acts as that user, with the
project's organisation as its own; no header chooses who it is, and one MCP session stays with the user and
project that opened it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar, Final

import anyio
from mcp.server.context import ServerRequestContext
from starlette.types import ASGIApp, Receive, Scope, Send

from threadloom.accounts.model import Access, Forbidden, Unauthenticated
from threadloom.accounts.service import Accounts
from threadloom.accounts.tokens import looks_like_ours
from threadloom.errors import InvalidInput, ThreadloomError
from threadloom.identity import Identity, check_user
from threadloom.server.connection import ConnectionState, HttpConnections
from threadloom.server.http_gates import header_values, refuse
from threadloom.server.http_oauth import JwtVerifier
from threadloom.server.http_sessions import SessionOwners

log = logging.getLogger(__name__)
ACCESS_KEY = "threadloom.access"  # where the gate leaves the request's Access in the ASGI scope
RECHECK_KEY = "threadloom.recheck"  # and how to ask for it again: `async () -> Access`
WELL_KNOWN = "/.well-known/oauth-protected-resource"
PROJECT_HEADER = b"x-threadloom-project"
# Never on a team server: thread tools need the repository (a laptop's `serve --remote` answers them), and
# spawned agents would run programs on the server's machine as the server's user.
TEAM_EXCLUDED_GROUPS: Final = frozenset({"threads", "threads_admin", "agents"})


class AccountGate:
    """Authenticates and authorises every HTTP request before anything else sees it."""

    def __init__(
        self, app: ASGIApp, accounts: Accounts, oauth: JwtVerifier | None, *, sessions_per_account: int
    ) -> None:
        self.app = app
        self._accounts = accounts
        self._oauth = oauth
        self._sessions = SessionOwners(sessions_per_account)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["path"].startswith(WELL_KNOWN):
            await self._metadata(send)
            return
        given = header_values(scope, b"authorization")
        if not given:
            await self._challenge(send, scope, None, "this server needs an access token: Authorization: Bearer <token>")
            return
        try:
            access = await self._access(scope)
        except Unauthenticated as exc:
            await self._challenge(send, scope, "invalid_token", exc.message)
            return
        except Forbidden as exc:
            await refuse(send, 403, exc.message, scope=scope)
            return
        except InvalidInput as exc:
            await refuse(send, 400, exc.message, scope=scope)
            return
        except ThreadloomError as exc:  # the store or the issuer could not be asked: not the caller's fault
            after = str(getattr(exc, "retry_after_s", 1)).encode()
            retry = [(b"retry-after", after)] if exc.retryable else []
            await refuse(send, 503, exc.message, retry, scope=scope, retryable=exc.retryable)
            return
        except Exception as exc:  # a bug: said as one, in the shape every refusal has, never a bare 500 page
            log.exception("the account gate failed")
            await refuse(send, 500, f"internal error ({type(exc).__name__}); see the server's log", scope=scope)
            return
        scope[ACCESS_KEY] = access
        scope[RECHECK_KEY] = partial(self._access, scope)  # the same question again, for a call that waits
        await self._sessions.pass_on(self.app, scope, receive, send, (access.user, access.project))

    async def _access(self, scope: Scope) -> Access:
        """The request's credential and project, asked of the store now (raises Unauthenticated, Forbidden or
        InvalidInput)."""
        given = header_values(scope, b"authorization")
        if len(given) != 1 or given[0][:7].lower() != b"bearer ":  # the scheme is case-insensitive (RFC 9110 11.1)
            raise Unauthenticated("send one Authorization: Bearer <token> header")
        user = await self._user(given[0][7:].decode("latin-1").strip())
        if header_values(scope, b"x-threadloom-root"):
            raise InvalidInput("a team server's sessions name a project (X-Threadloom-Project), not a folder")
        named = [v.decode("latin-1") for v in header_values(scope, PROJECT_HEADER)]
        if len(named) != 1:
            raise InvalidInput("name the project you work in with one X-Threadloom-Project header")
        return await anyio.to_thread.run_sync(self._accounts.access, user, named[0])

    async def _user(self, token: str) -> str:
        if looks_like_ours(token) or self._oauth is None:
            return await anyio.to_thread.run_sync(self._accounts.authenticate, token)
        user = (await self._oauth.check(token)).subject or ""
        try:  # an account's name is 1-100 printable characters: anything else names none, the store is not asked
            check_user(user, "an account name")
            known = await anyio.to_thread.run_sync(self._accounts.known, user)
        except InvalidInput:
            known = False
        if not known:
            claim = self._oauth.config.user_claim
            raise Unauthenticated(f"the access token's {claim} {user[:100]!r} is no account here")
        return user

    async def _challenge(self, send: Send, scope: Scope, error: str | None, message: str) -> None:
        """401 with RFC 6750's challenge; no `error` when no credential was sent at all (section 3.1)."""
        parts = [f'error="{error}"', f'error_description="{_quoted(message)}"'] if error else []
        if self._oauth is not None:
            parts.append(f'resource_metadata="{self._oauth.config.metadata_url()}"')
        value = "Bearer" + (" " + ", ".join(parts) if parts else "")
        challenge = [(b"www-authenticate", value.encode("latin-1", "replace"))]
        await refuse(send, 401, message, challenge, scope=scope)

    async def _metadata(self, send: Send) -> None:
        if self._oauth is None:
            await refuse(send, 404, "this server takes no OAuth tokens (serve --http --oauth-issuer)")
            return
        body = self._oauth.config.metadata().model_dump_json(exclude_none=True).encode()
        headers = [(b"content-type", b"application/json"), (b"cache-control", b"max-age=3600")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _quoted(text: str) -> str:
    return json.dumps(text)[1:-1].replace("\\\\", "/")[:300]


@dataclass(kw_only=True)
class AccountConnectionState(ConnectionState):
    """A connection of an account: its user, author and organisation, and its project, come from the gate."""

    keeps_threads: ClassVar[bool] = False
    access: Access | None = None

    @property
    def store_wide(self) -> bool:
        """A server administrator's, as the gate read it for this request (so a revoke counts at the next);
        no other account learns what other users or organisations hold."""
        return self.access is not None and self.access.server_admin

    def project_of(self, roots: list[str]) -> str:
        return self._access().project

    async def recheck(self, ctx: ServerRequestContext[Any, Any]) -> None:
        """The gate's question asked again for this request: a token revoked, a user removed or taken out of the
        organisation while a call waited ends the call with the gate's words, before it answers."""
        again = (ctx.request.scope if ctx.request is not None else {}).get(RECHECK_KEY)
        if again is None:
            raise Unauthenticated("this request carries no authenticated account")
        access = await again()
        if (access.user, access.project) != (self._access().user, self._access().project):
            raise Forbidden("this MCP session belongs to another account or project; open a new session")

    def identity(self) -> Identity:
        access = self._access()
        return Identity(access.user, access.user, access.org)

    async def _client_roots(self, ctx: ServerRequestContext[Any, Any]) -> list[str]:
        return []  # the project is named, not a folder of the server's

    def _access(self) -> Access:
        if self.access is None:
            raise Unauthenticated("this request carries no authenticated account")
        return self.access


class AccountConnections(HttpConnections):
    """Each MCP session is bound to the account and project that opened it; another's request is refused."""

    def get(self, ctx: ServerRequestContext[Any, Any]) -> ConnectionState:
        scope = ctx.request.scope if ctx.request is not None else {}
        access = scope.get(ACCESS_KEY)
        if not isinstance(access, Access):
            raise Unauthenticated("this request carries no authenticated account")
        state = super().get(ctx)
        if not isinstance(state, AccountConnectionState):
            raise TypeError("an account server's connections are AccountConnectionState")
        if state.access is not None and (state.access.user, state.access.project) != (access.user, access.project):
            raise Forbidden("this MCP session belongs to another account or project; open a new session")
        state.access = access  # this request's: a role changed since the last one counts now
        return state


def team_toolset(chosen: frozenset[str], groups: Mapping[str, str]) -> frozenset[str]:
    """The tools a team server's session may have of those its toolset chose (`groups`: tool -> group)."""
    return frozenset(name for name in chosen if groups.get(name) not in TEAM_EXCLUDED_GROUPS)


@dataclass(frozen=True)
class AccountAuth:
    accounts: Accounts
    oauth: JwtVerifier | None
