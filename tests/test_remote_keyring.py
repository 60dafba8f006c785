"""`serve --remote URL` with its token in the OS keyring (service "threadloom", user the URL), through the
`keyring` package and a backend that runs here: keyrings.alt's file keyring, chosen as a user would choose
one (PYTHON_KEYRING_BACKEND), its file under the test's own XDG_DATA_HOME. A real stdio client -> serve
--remote -> a real team server over HTTP (issue 21)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client

from tests.helpers import PY, env_for
from tests.http_server import git_repo
from tests.team_server import admin, call, make_team, team_server
from tests.test_remote import remote, rows
from threadloom.errors import ConfigError
from threadloom.server.remote_auth import KEYRING_SERVICE, TOKEN_ENV, remote_token

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(300)]
BACKEND = "keyrings.alt.file.PlaintextKeyring"


def keyring_env(tmp: Path) -> dict[str, str]:
    return {"PYTHON_KEYRING_BACKEND": BACKEND, "XDG_DATA_HOME": str(tmp / "keyring-data")}


def keyring_set(laptop: Path, env: dict[str, str], url: str, token: str) -> None:
    """As a user stores it: the keyring package's own API, in a process of its own."""
    done = subprocess.run(
        [PY, "-c", "import keyring, sys; keyring.set_password(sys.argv[1], sys.argv[2], sys.argv[3])",
         KEYRING_SERVICE, url, token],
        env=env_for(laptop, **env), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_the_token_is_read_from_the_keyring_and_the_environment_wins(tmp_path: Path) -> None:
    import keyring
    from keyrings.alt.file import PlaintextKeyring

    backend = PlaintextKeyring()
    backend.file_path = str(tmp_path / "keyring_pass.cfg")
    before = keyring.get_keyring()
    keyring.set_keyring(backend)
    try:
        url = "https://team.example/mcp"
        with pytest.raises(ConfigError, match="or the OS keyring \\(service 'threadloom', user 'https://team"):
            remote_token(url, {})
        backend.set_password(KEYRING_SERVICE, url, "  tlk_stored  \n")
        assert remote_token(url, {}) == "tlk_stored"
        assert remote_token(url, {TOKEN_ENV: "tlk_from_env"}) == "tlk_from_env"
        with pytest.raises(ConfigError, match=r"no token for https://team\.example/other"):
            remote_token("https://team.example/other", {})  # the entry is the URL's own
    finally:
        keyring.set_keyring(before)


async def test_serve_remote_acts_for_the_keyrings_token(home: Path, tmp_path: Path, laptop: Path) -> None:
    tokens = make_team(home)
    repo = git_repo(tmp_path / "shop")
    env = keyring_env(tmp_path) | {"THREADLOOM_USER": "bob"}
    with team_server(home, tmp_path) as team:
        keyring_set(laptop, env, team.url, tokens["bob"])
        async with Client(remote(laptop, repo, team.url, **env), mode="legacy") as c:
            stored = await call(c, "memory_store", {"content": "the keyring's token reached the team server"})
        assert rows(
            home / "threadloom.db", f"SELECT owner, org, project FROM memories WHERE id = '{stored['id']}'"
        ) == [{"owner": "bob", "org": "acme", "project": "shop"}]

        keyring_set(laptop, env, team.url, tokens["carol"])  # carol's globex does not hold shop
        params = remote(laptop, repo, team.url, **env)
        refused = subprocess.run([params.command, *params.args], env=params.env, cwd=repo, capture_output=True,
                                 text=True, timeout=60, stdin=subprocess.DEVNULL)  # fmt: skip
        assert refused.returncode == 2 and "refused this bridge (403)" in refused.stderr, refused.stderr
        admin(home, "user", "list")  # the server is still up and answering

    elsewhere = remote(laptop, repo, "http://127.0.0.1:9/mcp", **env)  # no entry for this URL
    missing = subprocess.run([elsewhere.command, *elsewhere.args], env=elsewhere.env, cwd=repo, capture_output=True,
                             text=True, timeout=60, stdin=subprocess.DEVNULL)  # fmt: skip
    assert missing.returncode == 2 and "or the OS keyring (service 'threadloom'" in missing.stderr, missing.stderr


def test_without_the_keyring_package_the_error_says_how_to_use_the_keyring(monkeypatch: pytest.MonkeyPatch) -> None:
    """README's install (`pip install .`) brings no keyring package: the error named only THREADLOOM_REMOTE_TOKEN,
    so a user who had read about the keyring could not tell why it was not asked."""
    monkeypatch.setitem(sys.modules, "keyring", None)  # `import keyring` raises ImportError
    with pytest.raises(ConfigError) as refused:
        remote_token("https://team.example/mcp", {})
    assert "pip install keyring" in refused.value.message, refused.value.message
    assert "keyring set threadloom https://team.example/mcp" in refused.value.message, refused.value.message
