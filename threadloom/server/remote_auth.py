"""What `serve --remote URL` sends a team server: its token, its project's name, and the first refusal.

The token is THREADLOOM_REMOTE_TOKEN, else the OS keyring's entry for the URL (service "threadloom",
user = the URL) when the optional `keyring` package is installed. The project is THREADLOOM_REMOTE_PROJECT,
else the name of the repository's folder. Before any agent traffic, one initialize request is sent, so a
wrong token, a project of someone else's organisation or a wrong URL ends the bridge with the server's own
words instead of a broken session.
"""

from __future__ import annotations

import contextlib
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping

from threadloom.errors import ConfigError
from threadloom.identity import detect_vendor, project_root

TOKEN_ENV = "THREADLOOM_REMOTE_TOKEN"
PROJECT_ENV = "THREADLOOM_REMOTE_PROJECT"
TIMEOUT_ENV = "THREADLOOM_REMOTE_TIMEOUT"
# The longest the bridge waits on the team server without a byte from it. A live server's event stream sends a
# ping every 15 s (sse-starlette's default) while a call runs, a 600 s `signal_inbox` wait included; the SDK's own
# default (300 s) let a server that accepts connections and never answers hold every call five minutes, and the
# session's reopening five more.
DEFAULT_TIMEOUT_S = 60.0
KEYRING_SERVICE = "threadloom"
_NOT_A_NAME = re.compile(r"[^A-Za-z0-9._-]+")
INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "threadloom-remote", "version": "1"},
    },
}


def remote_token(url: str, env: Mapping[str, str]) -> str:
    token = env.get(TOKEN_ENV, "").strip()
    if token:
        return token
    try:
        import keyring  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        stored, installed = None, False
    else:
        stored, installed = keyring.get_password(KEYRING_SERVICE, url), True
    if stored:
        return str(stored).strip()
    where = (
        f" or the OS keyring (service {KEYRING_SERVICE!r}, user {url!r})"
        if installed
        else f", or keep it in the OS keyring (pip install keyring, then keyring set {KEYRING_SERVICE} {url})"
    )
    raise ConfigError(f"no token for {url}: set {TOKEN_ENV}{where} (threadloom admin token create on the server)")


def remote_timeout(env: Mapping[str, str]) -> float:
    """THREADLOOM_REMOTE_TIMEOUT: seconds, more than the team server's 15 s between pings (16 to 3600)."""
    given = env.get(TIMEOUT_ENV, "").strip()
    if not given:
        return DEFAULT_TIMEOUT_S
    try:
        seconds = float(given)
    except ValueError:
        seconds = 0.0
    if not 16 <= seconds <= 3600:
        raise ConfigError(f"{TIMEOUT_ENV} is seconds from 16 to 3600 (the server pings every 15 s), not {given!r}")
    return seconds


def remote_project(env: Mapping[str, str], cwd: str) -> str:
    named = env.get(PROJECT_ENV, "").strip()
    if named:
        return named
    folder = project_root(env, [], cwd).name
    return _NOT_A_NAME.sub("-", folder).strip("-._") or "project"


def check_url(url: str) -> None:
    """`--remote` takes the team server's http(s) URL, refused before a token is looked up for it."""
    parts = urllib.parse.urlsplit(url)
    try:
        parts.port  # noqa: B018 - it raises on a port out of range or not a number
    except ValueError:
        parts = parts._replace(netloc="")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"--remote takes the team server's URL, http(s)://HOST[:PORT]/mcp, not {url[:80]!r}")


def remote_headers(url: str, env: Mapping[str, str], cwd: str) -> dict[str, str]:
    headers = {
        "Authorization": f"Bearer {remote_token(url, env)}",
        "X-Threadloom-Project": remote_project(env, cwd),
        "X-Threadloom-Vendor": detect_vendor(None, env),
    }
    for var, header in (
        ("THREADLOOM_TOOLSET", "X-Threadloom-Toolset"),
        ("THREADLOOM_SESSION_ID", "X-Threadloom-Session-Id"),
    ):
        if env.get(var):
            headers[header] = env[var]
    return headers


def preflight(url: str, headers: Mapping[str, str], timeout: float = 30) -> None:
    """One initialize request; ConfigError with the server's words when it refuses or cannot be reached."""
    request = urllib.request.Request(
        url,
        data=json.dumps(INIT).encode(),
        headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answered:
            opened = answered.headers.get("Mcp-Session-Id")
    except urllib.error.HTTPError as exc:
        try:
            error = json.loads(exc.read(65536)).get("error")  # a team server's: a JSON-RPC error object
            said = str((error.get("message") if isinstance(error, dict) else error) or exc.reason)
        except (ValueError, AttributeError):
            said = str(exc.reason)
        # a 503: the server's store is down, say; a 429: this account's sessions are all taken for now
        refused = Unreachable if exc.code >= 500 or exc.code == 429 else ConfigError
        raise refused(f"the team server at {url} refused this bridge ({exc.code}): {said}") from None
    except (OSError, ValueError) as exc:
        raise Unreachable(f"cannot reach the team server at {url}: {exc}") from None
    if opened:  # it counts against the account's sessions until it ends: end it now
        ending = urllib.request.Request(url, headers={**headers, "Mcp-Session-Id": opened}, method="DELETE")
        with contextlib.suppress(OSError, ValueError), urllib.request.urlopen(ending, timeout=timeout):
            pass


class Unreachable(ConfigError):
    """The team server is down or cannot answer now: the same request may well succeed later."""

    retryable = True


def local_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment of the local bridge for threads: never the remote token or project."""
    return {k: v for k, v in environ.items() if k not in (TOKEN_ENV, PROJECT_ENV)}
