"""`threadloom serve`: a thin stdio bridge to the user's one threadloom daemon.

It imports only the standard library, connects to the daemon's Unix socket
(starting the daemon when none answers), introduces the session, then relays
JSON-RPC lines between its stdio and the socket (`relay.py`), reconnecting
when the daemon goes away, until the agent closes its side.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

from threadloom import __version__
from threadloom.agents import FORWARDED_ENV
from threadloom.daemon import protocol
from threadloom.daemon.launch import START_TIMEOUT_S, LaunchError, until_served
from threadloom.daemon.launch import start_daemon as _start_daemon
from threadloom.daemon.relay import Relay, RelayError
from threadloom.home import HomeLayout, default_home

# A welcomed connection: the socket, what followed the greeting, and the session id the daemon gave.
Welcome = tuple[socket.socket, bytes, str | None]


class BridgeError(RelayError):
    pass


def _hello(session: str | None) -> bytes:
    env = {k: os.environ[k] for k in FORWARDED_ENV if k in os.environ}
    hello = {"kind": protocol.HELLO, "version": __version__, "pid": os.getppid(), "cwd": os.getcwd(), "env": env}
    if session is not None:
        hello["session"] = session  # the session this bridge had with a daemon that went away: resume it
    return protocol.encode(hello)


def _read_line(sock: socket.socket) -> tuple[bytes, bytes]:
    """The first line from the daemon and whatever arrived after it."""
    data = b""
    while b"\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return b"", b""
        data += chunk
        if len(data) > protocol.MAX_HEADER_BYTES:
            raise BridgeError("the daemon sent an oversized greeting")
    line, _, rest = data.partition(b"\n")
    return line, rest


def _try_session(path: Path, session: str | None) -> Welcome | str:
    """A welcomed connection, or why not: 'absent', 'retiring' or 'closed'."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
        sock.settimeout(protocol.HELLO_TIMEOUT_S)
        sock.sendall(_hello(session))
        line, rest = _read_line(sock)
    except (FileNotFoundError, ConnectionRefusedError):
        sock.close()
        return "absent"
    except (ConnectionResetError, BrokenPipeError, TimeoutError):
        sock.close()
        return "closed"
    if not line:
        sock.close()
        return "closed"
    try:
        reply = protocol.decode(line)
    except ValueError:
        sock.close()
        raise BridgeError(f"something other than a threadloom daemon answers on {path}: {line[:80]!r}") from None
    if reply.get("kind") == protocol.WELCOME:
        sock.settimeout(None)
        given = reply.get("session")
        return sock, rest, given if isinstance(given, str) else None
    sock.close()
    if reply.get("kind") == protocol.REFUSED:
        raise BridgeError(str(reply.get("error", "the daemon refused the session")))
    return "retiring" if reply.get("kind") == protocol.RETIRING else "closed"


def connect(layout: HomeLayout, timeout: float = START_TIMEOUT_S, session: str | None = None) -> Welcome:
    """A welcomed connection to the daemon, starting (or replacing) one as needed, asking to resume `session`."""
    try:
        # `_start_daemon` is looked up at each start, so that a test may replace it.
        return until_served(layout, lambda: _try_session(layout.socket, session), timeout, lambda at: _start_daemon(at))
    except LaunchError as exc:
        raise BridgeError(str(exc)) from None


def main() -> int:
    layout = HomeLayout(default_home())
    try:
        sock, pending, session = connect(layout)
    except BridgeError as exc:
        print(f"threadloom: {exc}", file=sys.stderr)
        return 2

    def reconnect(session: str | None, timeout: float) -> Welcome:
        return connect(layout, timeout, session)

    return Relay(reconnect, layout.socket, sock, pending, session).run()
