"""A team server for the tests: accounts made with `threadloom admin`, `serve --http --accounts` in a subprocess.

alice owns acme, bob is a member there, carol owns globex; acme holds the project shop, globex garden.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.backend_home import open_home_store, store_env
from tests.helpers import cli
from tests.http_server import INIT, start_http

PROJECTS = {"shop": "acme", "garden": "globex"}


def admin(home: Path, *args: str) -> str:
    done = cli(home, "admin", *args)
    assert done.returncode == 0, (args, done.stderr)
    return done.stdout.strip()


def make_team(home: Path) -> dict[str, str]:
    """The accounts above, written with the accounts service on the home's store (the admin CLI does the same,
    one process per command); a token for each user."""
    from threadloom.accounts.service import Accounts

    home.mkdir(parents=True, exist_ok=True)
    store = open_home_store(home)  # the home's file, or its PostgreSQL database (tests/backend_home.py)
    try:
        accounts = Accounts(store)
        for user in ("alice", "bob", "carol"):
            accounts.add_user(user)
        accounts.add_org("acme", "alice")
        accounts.add_org("globex", "carol")
        accounts.set_member("acme", "bob", "member")
        for project, org in PROJECTS.items():
            accounts.assign_project(project, org)
        return {user: accounts.create_token(user, "test").secret for user in ("alice", "bob", "carol")}
    finally:
        store.close()


@dataclass
class Team:
    port: int
    home: Path
    log: Path
    tokens: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def headers(self, user: str, project: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[user]}", "X-Threadloom-Project": project}

    def post(
        self, headers: dict[str, str], path: str = "/mcp", body: dict[str, Any] | None = None
    ) -> tuple[int, dict[str, str], str]:
        """POST a JSON-RPC message (initialize unless given) with these headers: status, response headers, body."""
        import json
        import urllib.error
        import urllib.request

        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            data=json.dumps(body or INIT).encode(),
            headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers},
            method="POST",
        )
        try:
            with urllib.request.urlopen(req, timeout=20) as resp:
                return resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, {k.lower(): v for k, v in err.headers.items()}, err.read().decode()


@contextmanager
def team_server(home: Path, cwd: Path, *args: str, port: int | None = None, **env: str) -> Iterator[Team]:
    with start_http(home, cwd, *args, port=port, accounts=True, **store_env(home) | env) as (served, _):
        yield Team(served.port, home, served.log)


@asynccontextmanager
async def team_client(team: Team, user: str, project: str, **headers: str) -> AsyncIterator[Client]:
    http = create_mcp_http_client(headers={**team.headers(user, project), **headers})
    async with http, Client(streamable_http_client(team.url, http_client=http), mode="legacy") as c:
        yield c


async def call(client: Client, name: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(name, args)
    assert not result.is_error, (name, args, result.structured_content)
    return dict(result.structured_content or {})
