"""`threadloom serve --http`: the same server over streamable HTTP, with its exposure rules."""

from __future__ import annotations

import json
import socket
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.helpers import DEFAULT_TOOLS, PY, env_for, structured, wait_for

pytestmark = pytest.mark.anyio
TOKEN = "s3cret-token"
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def accepting(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
    except OSError:
        return False
    return True


@pytest.fixture
def http_server(home: Path, request: pytest.FixtureRequest) -> Iterator[int]:
    """A running `serve --http`; parametrize indirectly with a token, or (bind host, token)."""
    param = getattr(request, "param", None)
    bind, token = param if isinstance(param, tuple) else ("127.0.0.1", param)
    port = free_port()
    extra = {"THREADLOOM_HTTP_TOKEN": token} if token else {}
    proc = subprocess.Popen(
        [PY, "-m", "threadloom", "serve", "--http", f"{bind}:{port}"],
        env=env_for(home, **extra),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for(lambda: accepting(port) or proc.poll() is not None, what="the HTTP server")
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stderr:
            proc.stderr.close()


def post(port: int, headers: dict[str, str]) -> tuple[int, str]:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/mcp",
        data=json.dumps(INIT).encode(),
        headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


async def test_status_over_http(http_server: int, home: Path) -> None:
    async with Client(f"http://127.0.0.1:{http_server}/mcp", mode="legacy") as client:
        tools = await client.list_tools()
        assert [t.name for t in tools.tools] == list(DEFAULT_TOOLS)
        st = structured(await client.call_tool("status", {}))
        bad = await client.call_tool("status", {"recent_events": "x"})
    assert st["server"]["mode"] == "http"
    assert st["session"]["transport"] == "http"
    assert st["store"]["path"] == str(home / "threadloom.db")
    assert bad.is_error
    assert structured(bad)["retryable"] is False


def test_a_foreign_origin_is_rejected(http_server: int) -> None:
    status, body = post(http_server, {"Origin": "http://evil.example"})
    assert status == 403
    assert json.loads(body)["retryable"] is False
    status, _ = post(http_server, {"Origin": f"http://localhost:{http_server}"})
    assert status == 200


def test_a_forged_host_is_rejected_on_loopback(http_server: int) -> None:
    status, _ = post(http_server, {"Host": f"rebound.example:{http_server}"})
    assert status == 421


@pytest.mark.parametrize("http_server", [("0.0.0.0", TOKEN)], indirect=True)
def test_a_wildcard_bind_with_a_token_serves_local_clients(http_server: int) -> None:
    assert post(http_server, {"Authorization": f"Bearer {TOKEN}"})[0] == 200
    assert post(http_server, {})[0] == 401
    assert post(http_server, {"Authorization": f"Bearer {TOKEN}", "Origin": "http://evil.example"})[0] == 403


@pytest.mark.parametrize("http_server", [TOKEN], indirect=True)
def test_a_request_without_the_token_is_rejected(http_server: int) -> None:
    status, body = post(http_server, {})
    assert status == 401
    assert json.loads(body) == {"error": "missing or wrong bearer token", "retryable": False}
    status, _ = post(http_server, {"Authorization": "Bearer wrong"})
    assert status == 401
    status, _ = post(http_server, {"Authorization": f"Bearer {TOKEN}"})
    assert status == 200


@pytest.mark.parametrize("http_server", [TOKEN], indirect=True)
async def test_a_client_with_the_token_is_served(http_server: int) -> None:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})
    async with (
        http,
        Client(
            streamable_http_client(f"http://127.0.0.1:{http_server}/mcp", http_client=http), mode="legacy"
        ) as client,
    ):
        st = structured(await client.call_tool("status", {}))
    assert st["server"]["mode"] == "http"


def test_a_non_loopback_address_without_a_token_is_refused(home: Path) -> None:
    done = subprocess.run(
        [PY, "-m", "threadloom", "serve", "--http", f"0.0.0.0:{free_port()}"],
        env=env_for(home),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "THREADLOOM_HTTP_TOKEN" in done.stderr
