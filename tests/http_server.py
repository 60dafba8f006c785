"""A real `threadloom serve --http` in a subprocess, for the HTTP tests."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.helpers import PY, env_for, wait_for

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


@dataclass
class Served:
    """One running server: where it listens, the token its clients send, and its stderr."""

    port: int
    home: Path
    log: Path
    token: str | None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def post(self, headers: dict[str, str] | None = None, *, auth: bool = True, timeout: float = 10) -> tuple[int, str]:
        """POST an initialize request; with `auth`, carrying the server's token."""
        req = urllib.request.Request(
            self.url,
            data=json.dumps(INIT).encode(),
            headers={
                "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream",
                **(self.auth() if auth else {}),
                **(headers or {}),
            },
            method="POST",
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()


def raw_post(port: int, headers: list[tuple[str, str]]) -> int:
    """POST an initialize request with exactly these headers, repeated names included; the status."""
    body = json.dumps(INIT).encode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.putrequest("POST", "/mcp", skip_host=True, skip_accept_encoding=True)
        named_host = any(name.lower() == "host" for name, _ in headers)
        for name, value in [
            *([] if named_host else [("Host", f"127.0.0.1:{port}")]),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("Content-Length", str(len(body))),
            *headers,
        ]:
            conn.putheader(name, value)
        conn.endheaders(body)
        return conn.getresponse().status
    finally:
        conn.close()


# Runs the server under a lower open-file limit, set in the child itself (no preexec_fn in a threaded parent).
LIMITED = (
    "import os, resource, sys; n = int(sys.argv[1]); resource.setrlimit(resource.RLIMIT_NOFILE, (n, n)); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[2:]])"
)


@contextmanager
def start_http(
    home: Path,
    cwd: Path,
    *args: str,
    bind: str = "127.0.0.1",
    port: int | None = None,
    accounts: bool = False,
    node: str = "",
    store_url: str = "",
    open_files: int | None = None,
    **env: str,
) -> Iterator[tuple[Served, subprocess.Popen[bytes]]]:
    """Start `serve --http` in `cwd` (`accounts`: a team server, `--accounts`; `node`, `store_url`: its
    THREADLOOM_NODE and THREADLOOM_STORE_URL; `env`: more settings) and wait until it accepts connections; it
    is stopped on leaving unless it has already gone (a test may kill it). The token is THREADLOOM_HTTP_TOKEN
    or the one it stored in the home; none with accounts (each user has its own) or `--no-token`."""
    home.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    log = home / f"http-{port}.log"
    settings = {"THREADLOOM_NODE": node, "THREADLOOM_STORE_URL": store_url}
    with log.open("wb") as stderr:
        command = ["-m", "threadloom", "serve", "--http", f"{bind}:{port}", *(["--accounts"] * accounts), *args]
        proc = subprocess.Popen(
            [PY, "-c", LIMITED, str(open_files), *command] if open_files else [PY, *command],
            env=env_for(home, **{k: v for k, v in settings.items() if v}, **env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        wait_for(lambda: accepting(port) or proc.poll() is not None, timeout=60, what="the HTTP server")
        assert proc.poll() is None, log.read_text()
        token_file = home / "http.token"
        token = env.get("THREADLOOM_HTTP_TOKEN") or (
            token_file.read_text().strip()
            if token_file.exists() and "--no-token" not in args and not accounts
            else None
        )
        yield Served(port, home, log, token), proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextmanager
def serve_http(
    home: Path, cwd: Path, *args: str, bind: str = "127.0.0.1", open_files: int | None = None, **env: str
) -> Iterator[Served]:
    """`start_http` for a one-user server."""
    with start_http(home, cwd, *args, bind=bind, open_files=open_files, **env) as (served, _):
        yield served


def run_http(
    home: Path, cwd: Path, *args: str, bind: str = "127.0.0.1", **env: str
) -> subprocess.CompletedProcess[str]:
    """`serve --http` expected to refuse to start."""
    return subprocess.run(
        [PY, "-m", "threadloom", "serve", "--http", f"{bind}:{free_port()}", *args],
        env=env_for(home, **env),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def git_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return Path(os.path.realpath(path))


@asynccontextmanager
async def client(served: Served, headers: dict[str, str] | None = None, **options: Any) -> AsyncIterator[Client]:
    """A real MCP client carrying the server's token."""
    http = create_mcp_http_client(headers={**served.auth(), **(headers or {})})
    async with http, Client(streamable_http_client(served.url, http_client=http), mode="legacy", **options) as c:
        yield c
