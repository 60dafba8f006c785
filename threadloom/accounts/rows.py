"""Every statement on m030's tables. Named parameters, the SQL SQLite and PostgreSQL share."""

from __future__ import annotations

from typing import Any

from threadloom.accounts.model import Membership, Role, TokenInfo
from threadloom.store.base import Reader, Row, Writer

_TOKEN_COLUMNS = "id, account, label, created_at, expires_at, revoked_at, last_used_at"


def account_exists(r: Reader, name: str) -> bool:
    return r.one("SELECT 1 AS x FROM accounts WHERE name = :n", {"n": name}) is not None


def org_exists(r: Reader, name: str) -> bool:
    return r.one("SELECT 1 AS x FROM organisations WHERE name = :n", {"n": name}) is not None


def accounts(r: Reader) -> list[Row]:
    return r.rows("SELECT name, created_at, server_admin_since FROM accounts ORDER BY name")


def server_admin_since(r: Reader, name: str) -> int | None:
    row = r.one("SELECT server_admin_since FROM accounts WHERE name = :n", {"n": name})
    return None if row is None or row["server_admin_since"] is None else int(row["server_admin_since"])


def set_server_admin(w: Writer, name: str, since: int | None) -> None:
    w.execute("UPDATE accounts SET server_admin_since = :s WHERE name = :n", {"s": since, "n": name})


def organisations(r: Reader) -> list[Row]:
    return r.rows("SELECT name, created_at FROM organisations ORDER BY name")


def memberships(r: Reader, *, account: str | None = None, org: str | None = None) -> list[Membership]:
    where, params = ["1 = 1"], {}
    if account is not None:
        where.append("account = :a")
        params["a"] = account
    if org is not None:
        where.append("org = :o")
        params["o"] = org
    sql = f"SELECT org, account, role, added_at FROM org_members WHERE {' AND '.join(where)} ORDER BY org, account"
    return [Membership(row["org"], row["account"], row["role"], row["added_at"]) for row in r.rows(sql, params)]


def role_of(r: Reader, org: str, account: str) -> Role | None:
    row = r.one("SELECT role FROM org_members WHERE org = :o AND account = :a", {"o": org, "a": account})
    return None if row is None else row["role"]


def owners(r: Reader, org: str) -> int:
    return int(r.scalar("SELECT count(*) FROM org_members WHERE org = :o AND role = 'owner'", {"o": org}))


def projects_of(r: Reader, org: str) -> list[str]:
    return [
        row["project"] for row in r.rows("SELECT project FROM org_projects WHERE org = :o ORDER BY project", {"o": org})
    ]


def org_of_project(r: Reader, project: str) -> str | None:
    row = r.one("SELECT org FROM org_projects WHERE project = :p", {"p": project})
    return None if row is None else str(row["org"])


def token(r: Reader, token_id: str) -> tuple[TokenInfo, str] | None:
    row = r.one(f"SELECT {_TOKEN_COLUMNS}, digest FROM account_tokens WHERE id = :id", {"id": token_id})
    return None if row is None else (_token_info(row), str(row["digest"]))


def tokens(r: Reader, account: str | None) -> list[TokenInfo]:
    where, params = ("account = :a", {"a": account}) if account is not None else ("1 = 1", {})
    sql = f"SELECT {_TOKEN_COLUMNS} FROM account_tokens WHERE {where} ORDER BY account, created_at, id"
    return [_token_info(row) for row in r.rows(sql, params)]


def _token_info(row: Row) -> TokenInfo:
    return TokenInfo(
        id=row["id"],
        account=row["account"],
        label=row["label"],
        created_at=row["created_at"],
        expires_at=row["expires_at"],
        revoked_at=row["revoked_at"],
        last_used_at=row["last_used_at"],
    )


def insert_token(w: Writer, info: TokenInfo, token_digest: str) -> None:
    w.execute(
        "INSERT INTO account_tokens (id, account, label, digest, created_at, expires_at) "
        "VALUES (:id, :a, :label, :d, :t, :exp)",
        {"id": info.id, "a": info.account, "label": info.label, "d": token_digest, "t": info.created_at,
         "exp": info.expires_at},
    )  # fmt: skip


def remove_account(w: Writer, name: str) -> dict[str, Any]:
    """The account, its memberships and its tokens (what it owns, memories and the rest, stays its data)."""
    members = w.execute("DELETE FROM org_members WHERE account = :n", {"n": name})
    dropped = w.execute("DELETE FROM account_tokens WHERE account = :n", {"n": name})
    w.execute("DELETE FROM accounts WHERE name = :n", {"n": name})
    return {"memberships": members, "tokens": dropped}
