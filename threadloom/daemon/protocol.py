"""The daemon socket's opening exchange, before MCP takes over the connection.

The first line each way is a JSON object: the client sends `hello` (a bridge
opening an MCP session) or `control` (status, stop); the daemon answers
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


def version_key(version: str) -> tuple[int, ...]:
    """Comparable form of a release number; anything after the numeric part is ignored."""
    return tuple(int(part) for part in re.findall(r"\d+", version.split("+")[0])[:4])
