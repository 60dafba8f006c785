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
import time
from pathlib import Path
from typing import TYPE_CHECKING

from threadloom import __version__
from threadloom.agents import FORWARDED_ENV, IDENTITY_KEYS, PER_SESSION_KEYS
from threadloom.daemon import protocol
from threadloom.daemon.relay import Relay, RelayError
from threadloom.home import HomeLayout, default_home, try_lock

if TYPE_CHECKING:
    import subprocess

# A welcomed connection: the socket, what followed the greeting, and the session id the daemon gave.
Welcome = tuple[socket.socket, bytes, str | None]
START_TIMEOUT_S = 20.0
POLL_S = 0.01
MAX_POLL_S = 0.1


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


def _start_daemon(layout: HomeLayout) -> subprocess.Popen[bytes] | None:
    """A daemon started holding the daemon lock, taken here and handed over; None when another process
    (a daemon, or a candidate another bridge started) holds it. Bridges starting at once thus start one
    daemon between them, and never a stream of candidates that would fight for the lock (and the CPU)."""
    import subprocess  # only the first session of a cold start pays for it

    layout.home.mkdir(parents=True, exist_ok=True, mode=0o700)
    lock_fd = try_lock(layout.lock)
    if lock_fd is None:
        return None
    log_fd = os.open(layout.daemon_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        # The daemon outlives this session: it must not inherit this session's own settings.
        env = {k: v for k, v in os.environ.items() if k not in PER_SESSION_KEYS and k not in IDENTITY_KEYS}
        return subprocess.Popen(
            [sys.executable, "-m", "threadloom", "daemon", "run", "--lock-fd", str(lock_fd)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log_fd,
            stderr=log_fd,
            cwd="/",
            start_new_session=True,
            close_fds=True,
            pass_fds=(lock_fd,),
        )
    finally:
        os.close(log_fd)
        os.close(lock_fd)  # the daemon's copy holds the lock now


def _log_tail(path: Path, lines: int = 6) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, fh.seek(0, os.SEEK_END) - 4096))
            tail = fh.read().decode(errors="replace").splitlines()[-lines:]
    except OSError:
        return f"(no log at {path})"
    return "\n".join(tail) + f"\n(full log: {path})"


def connect(layout: HomeLayout, timeout: float = START_TIMEOUT_S, session: str | None = None) -> Welcome:
    """A welcomed connection to the daemon, starting (or replacing) one as needed, asking to resume `session`."""
    deadline = time.monotonic() + timeout
    candidate: subprocess.Popen[bytes] | None = None
    pause = POLL_S
    try:
        while time.monotonic() < deadline:
            outcome = _try_session(layout.socket, session)
            if not isinstance(outcome, str):
                return outcome
            if candidate is not None and candidate.poll():
                raise BridgeError(
                    f"the threadloom daemon failed to start (exit {candidate.returncode}):\n"
                    + _log_tail(layout.daemon_log)
                )
            # Start one only while nobody holds the daemon lock: a daemon still loading, or one that is
            # being replaced (it answers `retiring`), holds it.
            if outcome != "retiring" and (candidate is None or candidate.poll() is not None):
                candidate = _start_daemon(layout) or candidate
            time.sleep(pause)
            pause = min(pause * 1.5, MAX_POLL_S)
    finally:
        if candidate is not None:
            candidate.poll()  # reap a candidate that has exited
    raise BridgeError(
        f"no threadloom daemon answered on {layout.socket} within {timeout:.0f}s; see {layout.daemon_log}"
    )


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
