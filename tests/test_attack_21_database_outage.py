"""The database going away under a running team node (issue 21, tried from outside).

The gate asks the store about the caller's token at every request; when PostgreSQL could not be reached, that
question's `StoreBusy` escaped the ASGI app: a 500 and the SDK's bare "Server returned an error response"
(-32603), no `retryable`. And once it was back, each connection the pool held before failed one call more.
Now the caller is told the store is unreachable, retryable, and the same node serves at once when the
database is back, without a restart.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import psycopg
import pytest
from mcp.shared.exceptions import MCPError
from psycopg.conninfo import conninfo_to_dict

from tests.backend_home import _URLS
from tests.http_server import git_repo
from tests.team_server import Team, call, make_team, team_client, team_server

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture
def team(home: Path, tmp_path: Path, postgres_url: str) -> Iterator[Team]:
    _URLS[home] = postgres_url
    try:
        tokens = make_team(home)
        with team_server(home, git_repo(tmp_path / "repo")) as served:
            served.tokens = tokens
            yield served
    finally:
        _URLS.pop(home, None)


def outage(cluster: str, url: str, *, down: bool) -> None:
    """The database refuses new connections and every open one is ended (down), or takes them again."""
    name = conninfo_to_dict(url)["dbname"]
    with psycopg.connect(cluster, autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS {"false" if down else "true"}'.encode())
        if down:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))


async def test_a_call_while_the_database_is_down_is_told_retryable_and_the_node_serves_again(
    team: Team, postgres_cluster: str, postgres_url: str
) -> None:
    async with team_client(team, "alice", "shop") as c:
        await call(c, "memory_store", {"content": "stored before the outage"})
        async with anyio.create_task_group() as tg:  # the pool opens several connections, all ended below
            for _ in range(12):
                tg.start_soon(call, c, "memory_recall", {"query": "outage"})
        outage(postgres_cluster, postgres_url, down=True)
        try:
            with pytest.raises(MCPError) as refused:
                await c.call_tool("memory_store", {"content": "refused during the outage"})
        finally:
            outage(postgres_cluster, postgres_url, down=False)
        data = refused.value.error.data
        assert isinstance(data, dict) and data["retryable"] is True, refused.value.error
        assert "unreachable" in data["error"] and data["error"] == refused.value.error.message
        assert "internal error" not in data["error"]

        # Every call succeeds from the first: not one failure per pooled connection the outage ended.
        for _ in range(8):
            await call(c, "memory_recall", {"query": "outage"})
        assert (await call(c, "memory_store", {"content": "stored after the outage"}))["created"] is True
        found = await call(c, "memory_recall", {"query": "outage", "limit": 10})
        contents = sorted(m["content"] for m in found["memories"])
    assert contents == ["stored after the outage", "stored before the outage"]
    assert "Exception in ASGI application" not in team.log.read_text()
