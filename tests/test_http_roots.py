"""An HTTP client names its project root only among the folders the server allows."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from mcp.types import ListRootsResult, Root

from tests.helpers import cli, structured
from tests.http_server import client, git_repo, raw_post, serve_http

pytestmark = pytest.mark.anyio


def tree(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


@pytest.fixture
def places(tmp_path: Path) -> dict[str, Path]:
    """The server's repository, an outside repository, a link from inside to outside, and an extra allowed one."""
    repo = git_repo(tmp_path / "repo")
    outside = git_repo(tmp_path / "outside")
    (repo / "escape").symlink_to(outside)
    return {"repo": repo, "outside": outside, "link": repo / "escape", "extra": git_repo(tmp_path / "extra")}


@pytest.mark.parametrize("name", ["outside", "link"])
def test_a_root_header_outside_the_allowed_roots_is_refused(home: Path, places: dict[str, Path], name: str) -> None:
    before = tree(places["outside"])
    with serve_http(home, places["repo"]) as served:
        status, body = served.post({"X-Threadloom-Root": str(places[name])})
        assert status == 400
        refused = json.loads(body)
        assert "THREADLOOM_HTTP_ROOTS" in refused["error"]
        assert refused["retryable"] is False
        for first, second in [("repo", name), (name, "repo")]:
            doubled = [("X-Threadloom-Root", str(places[first])), ("X-Threadloom-Root", str(places[second]))]
            assert raw_post(served.port, [*served.auth().items(), *doubled]) == 400
    assert tree(places["outside"]) == before


def test_the_servers_repository_and_the_listed_roots_are_allowed(home: Path, places: dict[str, Path]) -> None:
    with serve_http(home, places["repo"], THREADLOOM_HTTP_ROOTS=str(places["extra"])) as served:
        assert served.post({"X-Threadloom-Root": str(places["repo"])})[0] == 200
        assert served.post({"X-Threadloom-Root": str(places["extra"])})[0] == 200
        assert served.post({"X-Threadloom-Root": str(places["outside"])})[0] == 400


async def test_a_header_root_inside_is_the_sessions_project(home: Path, places: dict[str, Path]) -> None:
    with serve_http(home, places["repo"], THREADLOOM_HTTP_ROOTS=str(places["extra"])) as served:
        async with client(served, {"X-Threadloom-Root": str(places["extra"])}) as c:
            st = structured(await c.call_tool("status", {}))
    assert st["session"]["project"] == str(places["extra"])


@pytest.mark.parametrize("name", ["outside", "link"])
async def test_client_roots_outside_the_allowed_roots_are_a_tool_error_and_write_nothing(
    home: Path, places: dict[str, Path], name: str
) -> None:
    async def roots(_ctx: Any) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri=places[name].as_uri())])

    before = tree(places["outside"])
    with serve_http(home, places["repo"]) as served:
        async with client(served, list_roots_callback=roots) as c:
            made = await c.call_tool("thread_create", {"title": "Escape"})
            st = await c.call_tool("status", {})
    assert made.is_error and st.is_error
    assert "THREADLOOM_HTTP_ROOTS" in structured(made)["error"]
    assert structured(made)["retryable"] is False
    assert tree(places["outside"]) == before


async def test_client_roots_inside_are_used(home: Path, places: dict[str, Path]) -> None:
    inner = places["repo"] / "pkg"
    inner.mkdir()

    async def roots(_ctx: Any) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri=inner.as_uri())])

    with serve_http(home, places["repo"]) as served:
        async with client(served, list_roots_callback=roots) as c:
            st = structured(await c.call_tool("status", {}))
    assert Path(st["session"]["project"]) in (inner, places["repo"])
    assert os.path.realpath(st["session"]["project"]).startswith(str(places["repo"]))


def test_a_relative_http_root_setting_is_a_config_error(home: Path) -> None:
    done = cli(home, "http", "token", THREADLOOM_HTTP_ROOTS="some/where")
    assert done.returncode == 2
    assert "THREADLOOM_HTTP_ROOTS" in done.stderr


def test_a_server_started_in_the_filesystem_root_allows_that_folder_alone(home: Path, places: dict[str, Path]) -> None:
    """A service manager starts a server in / by default: that must not open every folder below it."""
    before = tree(places["outside"])
    with serve_http(home, Path("/")) as served:
        status, body = served.post({"X-Threadloom-Root": str(places["outside"])})
        assert status == 400, body
        assert "(itself only)" in json.loads(body)["error"]
        assert served.post({})[0] == 200  # a session in / keeps its memory, as anywhere
    with serve_http(home, Path("/"), THREADLOOM_HTTP_ROOTS=str(places["extra"])) as served:
        assert served.post({"X-Threadloom-Root": str(places["extra"])})[0] == 200
        assert served.post({"X-Threadloom-Root": str(places["outside"])})[0] == 400
    assert tree(places["outside"]) == before
