"""The daemon socket's opening exchange, before MCP takes over the connection.

The first line each way is a JSON object: the client sends `hello` (a bridge
opening an MCP session) or `control` (status, stop, or recall: `threadloom memory
recall` run by the warm daemon, with the caller's `env` and `cwd`); the daemon answers
`welcome`, `retiring` (it is being replaced: start a new daemon and reconnect),
`refused` (with an `error` to show the user),
or a control reply. After `welcome` the connection carries newline-delimited
JSON-RPC, unchanged, in both directions.
"""

from __future__ import annotations

import json
import re
from typing import Any

HELLO = "hello"
WELCOME = "welcome"
RETIRING = "retiring"
REFUSED = "refused"
CONTROL = "control"
MAX_HEADER_BYTES = 64 * 1024
HELLO_TIMEOUT_S = 5.0


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def decode(line: bytes) -> dict[str, Any]:
    value = json.loads(line)
    if not isinstance(value, dict):
        raise ValueError("a protocol header must be a JSON object")
    return value


_VERSION_RE = re.compile(r"^\s*v?(\d+(?:\.\d+)*)(.*)$")


def version_key(version: str) -> tuple[tuple[int, ...], int, str]:
    """Comparable form of a release number: 0.1 == 0.1.0, and 0.2.0rc1 < 0.2.0 < 0.2.1.

    Local build labels (`+...`) are ignored; anything unparseable sorts lowest.
    """
    match = _VERSION_RE.match(version.split("+")[0])
    if match is None:
        return ((), 0, "")
    numbers = [int(n) for n in match.group(1).split(".")]
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers.pop()
    suffix = match.group(2).strip(".-_")
    return (tuple(numbers), 0 if suffix else 1, suffix)
