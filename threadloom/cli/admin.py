"""`threadloom admin ...`: a team server's accounts, run on the server's machine (its shell is the authority).

user add|list|remove|grant-server-admin|revoke-server-admin, org add|list, org member add|remove, project
assign, token create|list|revoke. A token is printed once, when it is made, on stdout alone (so `$(threadloom
admin token create alice)` captures it); only its SHA-256 is stored. A server administrator is made here and
nowhere else: no tool or header grants it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Annotated, Any, TypeVar

import typer
from rich.markup import escape

from threadloom.accounts.service import Accounts
from threadloom.cli.app import err, out, settings
from threadloom.clock import iso, now_ms
from threadloom.errors import InvalidInput
from threadloom.runtime import open_settings_store

T = TypeVar("T")
admin_app = typer.Typer(help="A team server's users, organisations, projects and access tokens.", no_args_is_help=True)
user_cmd = typer.Typer(help="Accounts: add, list, remove.", no_args_is_help=True)
org_cmd = typer.Typer(help="Organisations and their members.", no_args_is_help=True)
member_cmd = typer.Typer(
    help="An organisation's members and their roles (owner, admin, member, reader).", no_args_is_help=True
)
project_cmd = typer.Typer(help="Which organisation a project belongs to.", no_args_is_help=True)
token_cmd = typer.Typer(help="Per-user access tokens for serve --http --accounts.", no_args_is_help=True)
admin_app.add_typer(user_cmd, name="user")
admin_app.add_typer(org_cmd, name="org")
org_cmd.add_typer(member_cmd, name="member")
admin_app.add_typer(project_cmd, name="project")
admin_app.add_typer(token_cmd, name="token")
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON.")]


@contextmanager
def _accounts() -> Iterator[Accounts]:
    store = open_settings_store(settings())  # the team's store: THREADLOOM_STORE_URL, else the home's SQLite
    try:
        yield Accounts(store)
    finally:
        store.close()


def _with(fn: Callable[[Accounts], T]) -> T:
    with _accounts() as accounts:
        return fn(accounts)


def _json(value: Any) -> None:
    out.print_json(json.dumps(value, default=lambda o: o.__dict__))


ServerAdmin = Annotated[
    bool, typer.Option("--server-admin", help="A server administrator: status and health show the whole store.")
]


@user_cmd.command("add")
def user_add(name: str, server_admin: ServerAdmin = False) -> None:
    """Create an account."""
    _with(lambda a: a.add_user(name, server_admin=server_admin))
    out.print(f"added user {escape(name)}" + (", a server administrator" if server_admin else ""))


@user_cmd.command("grant-server-admin")
def user_grant_server_admin(name: str) -> None:
    """Make a user a server administrator: their status, health and threadloom://status show the whole store's
    figures (counts, size, index, connections, jobs), never another user's memories. From their next call."""
    _with(lambda a: a.set_server_admin(name, True))
    out.print(f"{escape(name)} is a server administrator")


@user_cmd.command("revoke-server-admin")
def user_revoke_server_admin(name: str) -> None:
    """Make a server administrator an ordinary user again: their own figures only, from their next call."""
    _with(lambda a: a.set_server_admin(name, False))
    out.print(f"{escape(name)} is not a server administrator")


@user_cmd.command("list")
def user_list(as_json: AsJson = False) -> None:
    """Every account: its organisations with its role in each, and whether it is a server administrator."""
    users = _with(lambda a: a.users())
    if as_json:
        _json(
            [
                {
                    "name": u.name,
                    "created_at": u.created_at,
                    "orgs": {m.org: m.role for m in u.orgs},
                    "server_admin_since": u.server_admin_since,
                }
                for u in users
            ]
        )
        return
    for u in users:
        orgs = ", ".join(f"{m.org} ({m.role})" for m in u.orgs) or "no organisation"
        admin = "  server admin" if u.server_admin_since is not None else ""
        out.print(f"{escape(u.name)}  {escape(orgs)}{admin}")


@user_cmd.command("remove")
def user_remove(name: str) -> None:
    """Delete an account, its memberships and tokens (its sessions lose access at their next call; what it
    wrote stays, owned by that name)."""
    gone = _with(lambda a: a.remove_user(name))
    out.print(f"removed user {escape(name)} ({gone['memberships']} memberships, {gone['tokens']} tokens)")


@org_cmd.command("add")
def org_add(name: str, owner: Annotated[str, typer.Option("--owner", help="Its first owner (a user).")]) -> None:
    """Create an organisation with its first owner."""
    _with(lambda a: a.add_org(name, owner))
    out.print(f"added organisation {escape(name)} owned by {escape(owner)}")


@org_cmd.command("list")
def org_list(as_json: AsJson = False) -> None:
    """Every organisation: its members with their roles, and its projects."""
    orgs = _with(lambda a: a.orgs())
    if as_json:
        _json(
            [
                {"name": o.name, "members": {m.account: m.role for m in o.members}, "projects": list(o.projects)}
                for o in orgs
            ]
        )
        return
    for o in orgs:
        members = ", ".join(f"{m.account} ({m.role})" for m in o.members)
        out.print(f"{escape(o.name)}  members: {escape(members)}  projects: {escape(', '.join(o.projects) or '-')}")


@member_cmd.command("add")
def member_add(
    org: str,
    user: str,
    role: Annotated[
        str, typer.Option("--role", help="owner, admin, member or reader (reads shared items, writes none).")
    ] = "member",
) -> None:
    """Add a user to an organisation, or change their role there."""
    m = _with(lambda a: a.set_member(org, user, role))
    out.print(f"{escape(user)} is {m.role} of {escape(org)}")


@member_cmd.command("remove")
def member_remove(org: str, user: str) -> None:
    """Take a user out of an organisation: their sessions in its projects are refused from their next call."""
    _with(lambda a: a.remove_member(org, user))
    out.print(f"removed {escape(user)} from {escape(org)}")


@project_cmd.command("assign")
def project_assign(project: str, org: str) -> None:
    """Make PROJECT (the name clients send as X-Threadloom-Project) a project of ORG."""
    _with(lambda a: a.assign_project(project, org))
    out.print(f"project {escape(project)} belongs to {escape(org)}")


@token_cmd.command("create")
def token_create(
    user: str,
    label: Annotated[str, typer.Option("--label", help="What it is for (a laptop's name).")] = "",
    expires: Annotated[
        str | None, typer.Option("--expires", help="Days from now (30d) or a UTC date or time (2027-01-31).")
    ] = None,
) -> None:
    """Make an access token for USER. It is printed once, on stdout; only its hash is kept."""
    made = _with(lambda a: a.create_token(user, label, _expiry(expires)))
    until = iso(made.info.expires_at) if made.info.expires_at is not None else "never"
    err.print(f"token {made.info.id} for {escape(user)}, expires: {until}. It is not shown again.")
    print(made.secret, flush=True)


@token_cmd.command("list")
def token_list(
    user: Annotated[str | None, typer.Argument(help="Only this user's tokens.")] = None, as_json: AsJson = False
) -> None:
    """Tokens by id, user, label, state and dates (never the tokens themselves)."""
    with _accounts() as accounts:
        tokens, now = accounts.tokens(user), now_ms()
    rows = [t.__dict__ | {"state": t.state(now)} for t in tokens]
    if as_json:
        _json(rows)
        return
    for t in tokens:
        expiry = iso(t.expires_at) if t.expires_at is not None else "never"
        used = iso(t.last_used_at) if t.last_used_at is not None else "never"
        revoked = f"  revoked {iso(t.revoked_at)}" if t.revoked_at is not None else ""
        out.print(
            f"{t.id}  {escape(t.account)}  {t.state(now):<7}  created {iso(t.created_at)}  expires {expiry}  "
            f"last used {used}{revoked}  {escape(t.label)}"
        )


@token_cmd.command("revoke")
def token_revoke(token_id: str) -> None:
    """Revoke a token by id: the next request carrying it is refused (401)."""
    info = _with(lambda a: a.revoke_token(token_id))
    out.print(f"revoked token {info.id} of {escape(info.account)}")


def _expiry(value: str | None) -> int | None:
    if value is None:
        return None
    text = value.strip()
    if text.endswith("d") and text[:-1].isdigit():
        days = int(text[:-1])
        if not 1 <= days <= 3650:
            raise InvalidInput("--expires takes 1d to 3650d")
        return int(datetime.now(UTC).timestamp() * 1000) + days * 86_400_000
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInput(f"--expires takes days (30d) or an ISO date or time, not {value!r}") from None
    return int((when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp() * 1000)
