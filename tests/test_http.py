"""`threadloom serve --http`: the same server over streamable HTTP, with its exposure rules."""

from __future__ import annotations

import json
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import DEFAULT_TOOLS, structured
from tests.http_server import Served, client, git_repo, run_http, serve_http

pytestmark = pytest.mark.anyio
TOKEN = "s3cret-token"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """The folder the server starts in: a git repository, the one root it allows by default."""
    return git_repo(tmp_path / "repo")


@pytest.fixture
def http_server(home: Path, repo: Path, request: pytest.FixtureRequest) -> Iterator[Served]:
    """A running `serve --http`; parametrize indirectly with a token, or (bind host, token)."""
    param = getattr(request, "param", None)
    bind, token = param if isinstance(param, tuple) else ("127.0.0.1", param)
    extra = {"THREADLOOM_HTTP_TOKEN": token} if token else {}
    with serve_http(home, repo, bind=bind, **extra) as served:
        yield served


async def test_status_over_http(http_server: Served, home: Path) -> None:
    async with client(http_server) as c:
        tools = await c.list_tools()
        assert [t.name for t in tools.tools] == list(DEFAULT_TOOLS)
        st = structured(await c.call_tool("status", {}))
        bad = await c.call_tool("status", {"recent_events": "x"})
    assert st["server"]["mode"] == "http"
    assert st["session"]["transport"] == "http"
    assert st["store"]["path"] == str(home / "threadloom.db")
    assert bad.is_error
    assert structured(bad)["retryable"] is False


def test_a_foreign_origin_is_rejected(http_server: Served) -> None:
    status, body = http_server.post({"Origin": "http://evil.example"})
    assert status == 403
    assert json.loads(body)["retryable"] is False
    status, _ = http_server.post({"Origin": f"http://localhost:{http_server.port}"})
    assert status == 200


def test_a_forged_host_is_rejected_on_loopback(http_server: Served) -> None:
    status, _ = http_server.post({"Host": f"rebound.example:{http_server.port}"})
    assert status == 421


@pytest.mark.parametrize("http_server", [("0.0.0.0", TOKEN)], indirect=True)
def test_a_wildcard_bind_with_a_token_serves_local_clients(http_server: Served) -> None:
    assert http_server.post()[0] == 200
    assert http_server.post(auth=False)[0] == 401
    assert http_server.post({"Origin": "http://evil.example"})[0] == 403


@pytest.mark.parametrize("http_server", [TOKEN], indirect=True)
def test_a_request_without_the_token_is_rejected(http_server: Served) -> None:
    status, body = http_server.post(auth=False)
    assert status == 401
    assert json.loads(body) == {"error": "missing or wrong bearer token", "retryable": False}
    assert http_server.post({"Authorization": "Bearer wrong"})[0] == 401
    assert http_server.post()[0] == 200


@pytest.mark.parametrize("http_server", [TOKEN], indirect=True)
async def test_a_client_with_the_token_is_served(http_server: Served) -> None:
    async with client(http_server) as c:
        st = structured(await c.call_tool("status", {}))
    assert st["server"]["mode"] == "http"


def test_loopback_without_a_token_setting_still_requires_one(http_server: Served) -> None:
    status, body = http_server.post(auth=False)
    assert status == 401
    assert json.loads(body)["retryable"] is False
    assert http_server.post({"Origin": "http://evil.example"}, auth=False)[0] == 401  # the token is checked first


def test_a_generated_token_is_stored_0600_printed_once_and_reused(home: Path, repo: Path) -> None:
    token_file = home / "http.token"
    with serve_http(home, repo) as first:
        assert first.token is not None
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        assert first.post()[0] == 200
    assert first.log.read_text().count(first.token) == 1
    with serve_http(home, repo) as second:
        assert second.token == first.token
        assert second.post(auth=False)[0] == 401
        assert second.post()[0] == 200
    assert first.token not in second.log.read_text()
    assert str(token_file) in first.log.read_text()


def test_a_token_file_others_can_read_is_refused(home: Path, repo: Path) -> None:
    token_file = home / "http.token"
    token_file.write_text("x" * 43 + "\n")
    token_file.chmod(0o644)
    done = run_http(home, repo)
    assert done.returncode == 2
    assert "chmod 600" in done.stderr
    assert "x" * 43 not in done.stderr


def test_no_token_is_an_explicit_loudly_logged_loopback_only_choice(home: Path, repo: Path) -> None:
    with serve_http(home, repo, "--no-token") as served:
        assert served.post(auth=False)[0] == 200
    assert "WITHOUT an access token" in served.log.read_text()
    assert not (home / "http.token").exists()
    done = run_http(home, repo, "--no-token", bind="0.0.0.0")
    assert done.returncode == 2
    assert "loopback" in done.stderr
    done = run_http(home, repo, "--no-token", THREADLOOM_HTTP_TOKEN=TOKEN)
    assert done.returncode == 2


@pytest.mark.parametrize("header", ["X-Threadloom-User", "X-Threadloom-Author", "X-Threadloom-Org"])
def test_per_client_identity_headers_are_refused(http_server: Served, header: str) -> None:
    status, body = http_server.post({header: "alice"})
    assert status == 400
    refused = json.loads(body)
    assert "one HTTP server serves one user" in refused["error"]
    assert refused["retryable"] is False


@pytest.mark.parametrize(
    ("header", "value", "named"),
    [
        ("X-Threadloom-Toolset", "everything", "everything"),
        ("X-Threadloom-Session-Id", "bad id!", "THREADLOOM_SESSION_ID"),
        ("X-Threadloom-Parent-Session", "bad id!", "THREADLOOM_PARENT_SESSION"),
    ],
)
def test_a_malformed_session_header_is_refused_before_the_session_starts(
    http_server: Served, header: str, value: str, named: str
) -> None:
    status, body = http_server.post({header: value})
    assert status == 400
    refused = json.loads(body)
    assert named in refused["error"] and "TaskGroup" not in refused["error"], refused


async def test_every_http_client_acts_as_the_servers_own_user(home: Path, repo: Path) -> None:
    with serve_http(home, repo, THREADLOOM_USER="owner") as served:
        async with client(served) as c:
            stored = structured(await c.call_tool("memory_store", {"content": "the deploy key rotates monthly"}))
    with sqlite3.connect(f"file:{home / 'threadloom.db'}?mode=ro", uri=True) as db:
        (owner,) = db.execute("SELECT owner FROM memories WHERE id = ?", (stored["id"],)).fetchone()
    assert owner == "owner"
