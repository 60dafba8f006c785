"""Accounts of a team server: users, organisations, members and roles, projects, per-user tokens (issue 21)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Backend
from tests.helpers import cli
from threadloom.accounts.model import Forbidden, Unauthenticated
from threadloom.accounts.service import Accounts
from threadloom.accounts.tokens import digest
from threadloom.errors import InvalidInput, NotFound
from threadloom.store.base import Store


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000_000

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def store(backend: Backend) -> Iterator[Store]:
    """The accounts service on both backends (its SQL passes through the storage seam)."""
    opened = backend.open()
    yield opened
    opened.close()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def accounts(store: Store, clock: Clock) -> Accounts:
    a = Accounts(store, clock)
    for user in ("alice", "bob", "carol"):
        a.add_user(user)
    a.add_org("acme", "alice")
    a.add_org("globex", "carol")
    a.set_member("acme", "bob", "member")
    a.assign_project("shop", "acme")
    a.assign_project("garden", "globex")
    return a


def everything(store: Store) -> dict[str, list[dict[str, object]]]:
    tables = ("accounts", "organisations", "org_members", "org_projects", "account_tokens")
    return {t: store.read(lambda r, t=t: r.rows(f"SELECT * FROM {t} ORDER BY 1, 2")) for t in tables}


def test_a_token_is_stored_as_its_hash_only_and_names_its_user(accounts: Accounts, store: Store) -> None:
    made = accounts.create_token("bob", "laptop")
    assert accounts.authenticate(made.secret) == "bob"
    row = store.read(lambda r: r.one("SELECT * FROM account_tokens WHERE id = :id", {"id": made.info.id}))
    assert row is not None and row["digest"] == digest(made.secret)
    assert made.secret not in str(everything(store))
    assert [(t.id, t.account, t.label) for t in accounts.tokens("bob")] == [(made.info.id, "bob", "laptop")]


def test_a_revoked_expired_unknown_or_altered_token_is_refused(accounts: Accounts, clock: Clock) -> None:
    made = accounts.create_token("bob")
    soon = accounts.create_token("alice", expires_at=clock.now + 1000)
    altered = made.secret[:-1] + ("A" if made.secret[-1] != "A" else "B")
    for bad in (altered, "tlk_000000000000_" + "x" * 43, "", "Bearer x", made.secret + " "):
        with pytest.raises(Unauthenticated, match="unknown access token"):
            accounts.authenticate(bad)
    accounts.revoke_token(made.info.id)
    with pytest.raises(Unauthenticated, match="revoked"):
        accounts.authenticate(made.secret)
    assert accounts.authenticate(soon.secret) == "alice"
    clock.now += 1000
    with pytest.raises(Unauthenticated, match="expired"):
        accounts.authenticate(soon.secret)
    assert [t.state(clock.now) for t in accounts.tokens()] == ["expired", "revoked"]


def test_a_removed_user_loses_tokens_and_memberships(accounts: Accounts) -> None:
    made = accounts.create_token("bob")
    assert accounts.access("bob", "shop").org == "acme"
    accounts.remove_user("bob")
    with pytest.raises(Unauthenticated):
        accounts.authenticate(made.secret)
    with pytest.raises(Unauthenticated, match="no account"):
        accounts.access("bob", "shop")


def test_access_needs_membership_of_the_projects_organisation(accounts: Accounts) -> None:
    assert (accounts.access("alice", "shop").org, accounts.access("alice", "shop").role) == ("acme", "owner")
    with pytest.raises(Forbidden) as theirs:
        accounts.access("carol", "shop")
    with pytest.raises(Forbidden) as nowhere:
        accounts.access("carol", "no-such-project")
    # the same words whether the project exists in another organisation or not at all
    assert str(theirs.value).replace("shop", "P") == str(nowhere.value).replace("no-such-project", "P")
    accounts.remove_member("acme", "bob")
    with pytest.raises(Forbidden):
        accounts.access("bob", "shop")


def test_bad_admin_input_is_refused_and_writes_nothing(accounts: Accounts, store: Store) -> None:
    before = everything(store)
    for call, error in (
        (lambda: accounts.set_member("acme", "zed", "member"), NotFound),
        (lambda: accounts.set_member("nope", "bob", "member"), NotFound),
        (lambda: accounts.set_member("acme", "bob", "god"), InvalidInput),
        (lambda: accounts.remove_member("acme", "carol"), NotFound),
        (lambda: accounts.remove_member("acme", "alice"), InvalidInput),  # the last owner
        (lambda: accounts.set_member("acme", "alice", "member"), InvalidInput),
        (lambda: accounts.remove_user("carol"), InvalidInput),  # globex's last owner
        (lambda: accounts.remove_user("zed"), NotFound),
        (lambda: accounts.add_user("bob"), InvalidInput),
        (lambda: accounts.add_user(" bob"), InvalidInput),
        (lambda: accounts.add_user("x" * 101), InvalidInput),
        (lambda: accounts.add_org("acme", "bob"), InvalidInput),
        (lambda: accounts.add_org("new", "zed"), NotFound),
        (lambda: accounts.assign_project("shop", "globex"), InvalidInput),
        (lambda: accounts.assign_project("x", "nope"), NotFound),
        (lambda: accounts.assign_project("../shop", "acme"), InvalidInput),  # a name, never a path
        (lambda: accounts.assign_project("a/b", "acme"), InvalidInput),
        (lambda: accounts.access("bob", "/etc"), InvalidInput),
        (lambda: accounts.create_token("zed"), NotFound),
        (lambda: accounts.create_token("bob", expires_at=1), InvalidInput),
        (lambda: accounts.create_token("bob", "\x1b[31m"), InvalidInput),
        (lambda: accounts.revoke_token("000000000000"), NotFound),
        (lambda: accounts.tokens("zed"), NotFound),
    ):
        with pytest.raises(error):
            call()
    assert everything(store) == before


def test_roles_change_and_a_second_owner_frees_the_first(accounts: Accounts) -> None:
    accounts.set_member("acme", "bob", "owner")
    accounts.set_member("acme", "alice", "admin")
    assert {m.account: m.role for m in accounts.orgs()[0].members} == {"alice": "admin", "bob": "owner"}
    accounts.remove_member("acme", "alice")
    assert [u.orgs for u in accounts.users() if u.name == "alice"] == [()]


@pytest.mark.slow
def test_the_admin_cli_shows_a_token_once_and_refuses_unknown_names(home: Path) -> None:
    for args in (("user", "add", "dora"), ("org", "add", "initech", "--owner", "dora")):
        assert cli(home, "admin", *args).returncode == 0
    made = cli(home, "admin", "token", "create", "dora", "--label", "laptop", "--expires", "30d")
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    assert token.startswith("tlk_") and "not shown again" in made.stderr
    listed = cli(home, "admin", "token", "list")
    assert "dora" in listed.stdout and "active" in listed.stdout and token not in listed.stdout
    assert "created 20" in listed.stdout and "last used never" in listed.stdout
    for args, words in (
        (("org", "member", "add", "initech", "zed"), "no user 'zed'"),
        (("token", "create", "zed"), "no user 'zed'"),
        (("user", "remove", "zed"), "no user 'zed'"),
        (("user", "grant-server-admin", "zed"), "no user 'zed'"),
        (("user", "revoke-server-admin", "zed"), "no user 'zed'"),
        (("token", "revoke", "nope"), "no token 'nope'"),
        (("token", "create", "dora", "--expires", "soon"), "--expires takes"),
    ):
        done = cli(home, "admin", *args)
        assert done.returncode == 2 and words in done.stderr, (args, done.stderr)
    token_id = token.split("_")[1]
    assert cli(home, "admin", "token", "revoke", token_id).returncode == 0
    assert "  revoked 20" in cli(home, "admin", "token", "list", "dora").stdout  # the state, then its date


def test_a_server_admin_is_granted_and_revoked_by_name_and_read_at_every_access(
    accounts: Accounts, store: Store, clock: Clock
) -> None:
    assert not accounts.access("bob", "shop").server_admin
    made = accounts.set_server_admin("bob", True)
    assert made.server_admin_since == clock.now and [m.org for m in made.orgs] == ["acme"]
    assert accounts.access("bob", "shop").server_admin and not accounts.access("alice", "shop").server_admin
    clock.now += 5
    assert accounts.set_server_admin("bob", True).server_admin_since == clock.now - 5  # the first grant's time
    assert accounts.set_server_admin("bob", False).server_admin_since is None
    assert not accounts.access("bob", "shop").server_admin
    dora = accounts.add_user("dora", server_admin=True)
    assert {u.name: u.server_admin_since for u in accounts.users()} == {
        "alice": None, "bob": None, "carol": None, "dora": dora.created_at,
    }  # fmt: skip
    before = everything(store)
    with pytest.raises(NotFound):
        accounts.set_server_admin("zed", True)
    assert everything(store) == before
    accounts.remove_user("dora")
    with pytest.raises(Unauthenticated):
        accounts.access("dora", "shop")
    assert accounts.add_user("dora").server_admin_since is None  # the name back is not the flag back
    assert [u.server_admin_since for u in accounts.users() if u.name == "dora"] == [None]


def test_every_admin_command_says_what_it_does_in_its_help() -> None:
    """`admin user --help` and `admin org --help` listed `list` with no words beside it."""
    import typer

    from threadloom.cli.admin import admin_app

    def walk(group: Any, path: str) -> Iterator[tuple[str, Any]]:
        for name, command in getattr(group, "commands", {}).items():
            yield f"{path} {name}", command
            yield from walk(command, f"{path} {name}")

    commands = list(walk(typer.main.get_command(admin_app), "admin"))
    assert len(commands) > 15
    silent = [path for path, command in commands if not (command.help or "").strip()]
    assert silent == [], silent
