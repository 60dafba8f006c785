"""The access token of `serve --http`: its file, the CLI that shows it, and how requests must carry it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from starlette.types import Receive, Scope, Send

from tests.helpers import cli
from tests.http_server import raw_post, serve_http
from threadloom.errors import ConfigError
from threadloom.server.http_gates import BearerTokenGate
from threadloom.server.http_token import read_token, stored_token


def test_a_stored_token_is_made_once_0600_and_read_back(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "home" / "http.token"
    token = stored_token(path)
    assert len(token) >= 43
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert token in capsys.readouterr().err
    assert stored_token(path) == token
    assert token not in capsys.readouterr().err
    assert [p.name for p in path.parent.iterdir()] == ["http.token"]


def test_a_symlinked_short_or_shared_token_file_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "elsewhere"
    real.write_text("y" * 40)
    real.chmod(0o600)
    link = tmp_path / "http.token"
    link.symlink_to(real)
    with pytest.raises(ConfigError, match="plain file"):
        read_token(link)
    link.unlink()
    link.write_text("short")
    link.chmod(0o600)
    with pytest.raises(ConfigError, match="at least 16"):
        read_token(link)
    link.write_text("z" * 40)
    os.chmod(link, 0o640)
    with pytest.raises(ConfigError, match="chmod 600"):
        read_token(link)


def test_http_token_prints_the_path_and_makes_the_token(home: Path) -> None:
    done = cli(home, "http", "token")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(home / "http.token")
    token = (home / "http.token").read_text().strip()
    assert token in done.stderr and token not in done.stdout
    again = cli(home, "http", "token")
    assert again.stdout.strip() == str(home / "http.token")
    assert token not in again.stderr


def test_a_repeated_authorization_or_host_header_or_an_upgrade_gets_nothing_past_the_token(
    home: Path, tmp_path: Path
) -> None:
    with serve_http(home, tmp_path) as served:
        right = ("Authorization", f"Bearer {served.token}")
        assert raw_post(served.port, [right, ("Host", "127.0.0.1")]) == 200
        assert raw_post(served.port, [right, ("Authorization", "Bearer wrong"), ("Host", "127.0.0.1")]) == 401
        assert raw_post(served.port, [right, ("Host", "127.0.0.1"), ("Host", "evil.example")]) in (400, 421)
        upgrade = [("Connection", "Upgrade"), ("Upgrade", "websocket"), ("Sec-WebSocket-Version", "13")]
        assert raw_post(served.port, [*upgrade, ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")]) == 401


@pytest.mark.anyio
async def test_the_token_gate_lets_no_websocket_through() -> None:
    reached: list[str] = []
    sent: list[dict[str, object]] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        reached.append(scope["type"])

    async def receive() -> dict[str, object]:
        return {"type": "websocket.connect"}

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    gate = BearerTokenGate(app, "t" * 20)
    headers = [(b"authorization", b"Bearer " + b"t" * 20)]
    await gate({"type": "websocket", "headers": headers}, receive, send)
    await gate({"type": "lifespan"}, receive, send)
    assert reached == ["lifespan"]
    assert sent == [{"type": "websocket.close", "code": 1008}]
