"""`Accounts`: users (and which are server administrators), organisations, members and roles, projects and
per-user tokens, over the store.

Each change is one write transaction that checks what it needs first (an unknown user or organisation,
the last owner of an organisation) and raises before writing anything. `authenticate` and `access` are what
the HTTP server asks on every request, so a revoked token or a removed member is refused at the next call.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from threadloom.accounts import rows
from threadloom.accounts.model import (
    ROLES,
    Access,
    Account,
    Forbidden,
    Membership,
    NewToken,
    Organisation,
    Role,
    TokenInfo,
    Unauthenticated,
)
from threadloom.accounts.tokens import digest, make_token, matches, token_id
from threadloom.clock import iso, now_ms
from threadloom.errors import InvalidInput, NotFound
from threadloom.identity import check_user
from threadloom.store.base import Reader, Store, Writer

PROJECT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
LAST_USED_EVERY_MS = 60_000  # a token's last use is written at most once a minute, not at every request
MAX_LABEL = 100


class Accounts:
    def __init__(self, store: Store, clock: Callable[[], int] = now_ms) -> None:
        self._store = store
        self._clock = clock

    # -- users ---------------------------------------------------------------------------------------------
    def add_user(self, name: str, *, server_admin: bool = False) -> Account:
        check_user(name, "a user name")
        at = self._clock()
        since = at if server_admin else None

        def write(w: Writer) -> None:
            if rows.account_exists(w, name):
                raise InvalidInput(f"user {name!r} already exists")
            w.execute(
                "INSERT INTO accounts (name, created_at, server_admin_since) VALUES (:n, :t, :s)",
                {"n": name, "t": at, "s": since},
            )

        self._store.write(write)
        return Account(name, at, server_admin_since=since)

    def set_server_admin(self, name: str, on: bool) -> Account:
        """Make `name` a server administrator (status and health show them the whole store's figures, never
        another user's memories), or no longer one. Only the server machine's CLI calls this: no tool does."""
        at = self._clock()

        def write(w: Writer) -> Account:
            _need_user(w, name)
            was = rows.server_admin_since(w, name)
            since = (was or at) if on else None  # granting again keeps the first grant's time
            if since != was:
                rows.set_server_admin(w, name, since)
            row = w.one("SELECT created_at FROM accounts WHERE name = :n", {"n": name})
            assert row is not None
            return Account(name, int(row["created_at"]), tuple(rows.memberships(w, account=name)), since)

        return self._store.write(write)

    def remove_user(self, name: str) -> dict[str, int]:
        def write(w: Writer) -> dict[str, int]:
            _need_user(w, name)
            for m in rows.memberships(w, account=name):
                _keep_an_owner(w, m.org, name, None)
            return rows.remove_account(w, name)

        return self._store.write(write)

    def users(self) -> list[Account]:
        def read(r: Reader) -> list[Account]:
            return [
                Account(
                    row["name"],
                    row["created_at"],
                    tuple(rows.memberships(r, account=row["name"])),
                    row["server_admin_since"],
                )
                for row in rows.accounts(r)
            ]

        return self._store.read(read)

    # -- organisations -------------------------------------------------------------------------------------
    def add_org(self, name: str, owner: str) -> Organisation:
        check_user(name, "an organisation name")
        at = self._clock()

        def write(w: Writer) -> None:
            _need_user(w, owner)
            if rows.org_exists(w, name):
                raise InvalidInput(f"organisation {name!r} already exists")
            w.execute("INSERT INTO organisations (name, created_at) VALUES (:n, :t)", {"n": name, "t": at})
            _insert_member(w, name, owner, "owner", at)

        self._store.write(write)
        return Organisation(name, at, (Membership(name, owner, "owner", at),))

    def orgs(self) -> list[Organisation]:
        def read(r: Reader) -> list[Organisation]:
            return [
                Organisation(
                    row["name"],
                    row["created_at"],
                    tuple(rows.memberships(r, org=row["name"])),
                    tuple(rows.projects_of(r, row["name"])),
                )
                for row in rows.organisations(r)
            ]

        return self._store.read(read)

    def set_member(self, org: str, user: str, role: str) -> Membership:
        """Add `user` to `org` with `role`, or change their role there."""
        if role not in ROLES:
            raise InvalidInput(f"role must be one of {', '.join(ROLES)}, not {role!r}")
        chosen: Role = role
        at = self._clock()

        def write(w: Writer) -> Membership:
            _need_org(w, org)
            _need_user(w, user)
            if rows.role_of(w, org, user) is None:
                _insert_member(w, org, user, chosen, at)
                return Membership(org, user, chosen, at)
            _keep_an_owner(w, org, user, chosen)
            w.execute(
                "UPDATE org_members SET role = :r WHERE org = :o AND account = :a", {"r": chosen, "o": org, "a": user}
            )
            return next(m for m in rows.memberships(w, account=user, org=org))

        return self._store.write(write)

    def remove_member(self, org: str, user: str) -> None:
        def write(w: Writer) -> None:
            _need_org(w, org)
            _need_user(w, user)
            if rows.role_of(w, org, user) is None:
                raise NotFound(f"user {user!r} is not a member of organisation {org!r}")
            _keep_an_owner(w, org, user, None)
            w.execute("DELETE FROM org_members WHERE org = :o AND account = :a", {"o": org, "a": user})

        self._store.write(write)

    def assign_project(self, project: str, org: str) -> None:
        """`project` belongs to `org` from now on. A project already held by another organisation is refused:
        moving it would show its shared memories to people who were never meant to see them."""
        check_project(project)
        at = self._clock()

        def write(w: Writer) -> None:
            _need_org(w, org)
            held = rows.org_of_project(w, project)
            if held == org:
                return
            if held is not None:
                raise InvalidInput(f"project {project!r} already belongs to organisation {held!r}")
            w.execute(
                "INSERT INTO org_projects (project, org, assigned_at) VALUES (:p, :o, :t)",
                {"p": project, "o": org, "t": at},
            )

        self._store.write(write)

    # -- tokens --------------------------------------------------------------------------------------------
    def create_token(self, user: str, label: str = "", expires_at: int | None = None) -> NewToken:
        label = label.strip()
        if len(label) > MAX_LABEL or not label.isprintable():
            raise InvalidInput(f"a token's label is up to {MAX_LABEL} printable characters")
        at = self._clock()
        if expires_at is not None and expires_at <= at:
            raise InvalidInput(f"the expiry {iso(expires_at)} is already past")
        new_id, secret = make_token()
        info = TokenInfo(new_id, user, label, at, expires_at, None, None)

        def write(w: Writer) -> None:
            _need_user(w, user)
            rows.insert_token(w, info, digest(secret))

        self._store.write(write)
        return NewToken(info, secret)

    def tokens(self, user: str | None = None) -> list[TokenInfo]:
        def read(r: Reader) -> list[TokenInfo]:
            if user is not None:
                _need_user(r, user)
            return rows.tokens(r, user)

        return self._store.read(read)

    def revoke_token(self, token_id_: str) -> TokenInfo:
        at = self._clock()

        def write(w: Writer) -> TokenInfo:
            found = rows.token(w, token_id_)
            if found is None:
                raise NotFound(f"no token {token_id_!r} (threadloom admin token list shows the ids)")
            w.execute(
                "UPDATE account_tokens SET revoked_at = :t WHERE id = :id AND revoked_at IS NULL",
                {"t": at, "id": token_id_},
            )
            return rows.token(w, token_id_)[0]  # type: ignore[index]

        return self._store.write(write)

    # -- what the server asks at every request -------------------------------------------------------------
    def authenticate(self, token: str) -> str:
        """The user a token acts for; Unauthenticated for a malformed, unknown, revoked or expired one."""
        found_id = token_id(token)
        found = self._store.read(lambda r: rows.token(r, found_id)) if found_id else None
        if found is None or not matches(token, found[1]):
            raise Unauthenticated("unknown access token")
        info, now = found[0], self._clock()
        if info.revoked_at is not None:
            raise Unauthenticated(f"access token {info.id} was revoked at {iso(info.revoked_at)}")
        if info.expires_at is not None and info.expires_at <= now:
            raise Unauthenticated(f"access token {info.id} expired at {iso(info.expires_at)}")
        if info.last_used_at is None or now - info.last_used_at >= LAST_USED_EVERY_MS:
            self._store.write(
                lambda w: w.execute(
                    "UPDATE account_tokens SET last_used_at = :t WHERE id = :id", {"t": now, "id": info.id}
                )
            )
        return info.account

    def known(self, user: str) -> bool:
        return self._store.read(lambda r: rows.account_exists(r, user))

    def access(self, user: str, project: str) -> Access:
        """`user` working in `project`: the organisation that holds it and their role there. Forbidden when
        the project is not one of their organisations' (the same words whether it exists or not)."""

        check_project(project)

        def read(r: Reader) -> Access:
            account = r.one("SELECT server_admin_since FROM accounts WHERE name = :n", {"n": user})
            if account is None:
                raise Unauthenticated(f"there is no account {user!r} on this server")
            org = rows.org_of_project(r, project)
            role = rows.role_of(r, org, user) if org is not None else None
            if org is None or role is None:
                raise Forbidden(
                    f"project {project!r} is not a project of any organisation {user!r} belongs to "
                    "(an admin adds you: threadloom admin org member add ORG USER)"
                )
            return Access(user, project, org, role, server_admin=account["server_admin_since"] is not None)

        return self._store.read(read)


def check_project(name: str) -> str:
    """A team project's name: 1-100 letters, digits and . _ - (never a path), starting with a letter or digit."""
    if not PROJECT_NAME.match(name):
        raise InvalidInput(f"a project name is 1-100 letters, digits, '.', '_' or '-' (no path), not {name[:120]!r}")
    return name


def _need_user(r: Reader, name: str) -> None:
    if not rows.account_exists(r, name):
        raise NotFound(f"no user {name!r} (threadloom admin user list shows them)")


def _need_org(r: Reader, name: str) -> None:
    if not rows.org_exists(r, name):
        raise NotFound(f"no organisation {name!r} (threadloom admin org list shows them)")


def _insert_member(w: Writer, org: str, user: str, role: Role, at: int) -> None:
    w.execute(
        "INSERT INTO org_members (org, account, role, added_at) VALUES (:o, :a, :r, :t)",
        {"o": org, "a": user, "r": role, "t": at},
    )


def _keep_an_owner(r: Reader, org: str, user: str, new_role: Role | None) -> None:
    """Refuse to remove or demote the last owner of `org`."""
    if new_role == "owner" or rows.role_of(r, org, user) != "owner" or rows.owners(r, org) > 1:
        return
    raise InvalidInput(f"{user!r} is the last owner of organisation {org!r}: make another member owner first")
