"""What the accounts service returns, and the two refusals a surface turns into HTTP 401 and 403."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from threadloom.errors import InvalidInput

Role = Literal["owner", "admin", "member", "reader"]
ROLES: Final[tuple[Role, ...]] = ("owner", "admin", "member", "reader")  # what each may do: store/roles.py


class Unauthenticated(InvalidInput):
    """No valid credential: a token that is unknown, revoked or expired, or whose user is gone (HTTP 401)."""


class Forbidden(InvalidInput):
    """A valid credential that may not do this: a project of an organisation the user is not in (HTTP 403)."""


@dataclass(frozen=True)
class Membership:
    org: str
    account: str
    role: Role
    added_at: int


@dataclass(frozen=True)
class Account:
    name: str
    created_at: int
    orgs: tuple[Membership, ...] = ()
    server_admin_since: int | None = None  # a server administrator since then (status and health store-wide)


@dataclass(frozen=True)
class Organisation:
    name: str
    created_at: int
    members: tuple[Membership, ...] = ()
    projects: tuple[str, ...] = ()


@dataclass(frozen=True)
class TokenInfo:
    """A token as listed: never the token itself."""

    id: str
    account: str
    label: str
    created_at: int
    expires_at: int | None
    revoked_at: int | None
    last_used_at: int | None

    def state(self, now: int) -> str:
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= now:
            return "expired"
        return "active"


@dataclass(frozen=True)
class NewToken:
    """A token just made: `secret` is the whole token, shown once and never stored."""

    info: TokenInfo
    secret: str


@dataclass(frozen=True)
class Access:
    """Whom an authenticated call acts for, in which project, and the organisation that holds it; whether the
    user is a server administrator now (read at every request, like the rest)."""

    user: str
    project: str
    org: str
    role: Role
    server_admin: bool = False
