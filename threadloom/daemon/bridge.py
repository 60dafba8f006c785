"""`threadloom serve`: a thin stdio bridge to the user's one threadloom daemon.

It imports only the standard library, connects to the daemon's Unix socket
(starting the daemon when none answers), introduces the session, then copies
bytes between its stdio and the socket until either side closes.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from threadloom import __version__
from threadloom.agents import FORWARDED_ENV, IDENTITY_KEYS, PER_SESSION_KEYS
from threadloom.daemon import protocol
from threadloom.home import HomeLayout, default_home, try_lock

if TYPE_CHECKING:
    import subprocess

START_TIMEOUT_S = 20.0
POLL_S = 0.01
MAX_POLL_S = 0.1


class BridgeError(Exception):
    pass


def _hello() -> bytes:
    env = {k: os.environ[k] for k in FORWARDED_ENV if k in os.environ}
    return protocol.encode(
        {
            "kind": protocol.HELLO,
            "version": __version__,
            "pid": os.getppid(),
            "cwd": os.getcwd(),
            "env": env,
        }
    )


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


def _try_session(path: Path) -> tuple[socket.socket, bytes] | str:
    """A welcomed connection, or why not: 'absent', 'retiring' or 'closed'."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
        sock.settimeout(protocol.HELLO_TIMEOUT_S)
        sock.sendall(_hello())
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
    reply = protocol.decode(line)
    if reply.get("kind") == protocol.WELCOME:
        sock.settimeout(None)
        return sock, rest
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


def connect(layout: HomeLayout, timeout: float = START_TIMEOUT_S) -> tuple[socket.socket, bytes]:
    """A welcomed connection to the daemon, starting (or replacing) one as needed."""
    deadline = time.monotonic() + timeout
    candidate: subprocess.Popen[bytes] | None = None
    pause = POLL_S
    try:
        while time.monotonic() < deadline:
            outcome = _try_session(layout.socket)
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


def _copy_stdin(sock: socket.socket, done: threading.Event) -> None:
    """Copy stdin to the daemon; at its end, say so (before the daemon can answer) and half-close."""
    try:
        while True:
            data = os.read(0, 65536)
            if not data:
                break
            sock.sendall(data)
    except OSError:
        pass
    finally:
        done.set()
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_WR)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def main() -> int:
    try:
        sock, pending = connect(HomeLayout(default_home()))
    except BridgeError as exc:
        print(f"threadloom: {exc}", file=sys.stderr)
        return 2
    stdin_done = threading.Event()
    threading.Thread(target=_copy_stdin, args=(sock, stdin_done), daemon=True, name="stdin-to-daemon").start()
    try:
        if pending:
            _write_all(1, pending)
        while True:
            data = sock.recv(65536)
            if not data:
                break
            _write_all(1, data)
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        sock.close()
    if not stdin_done.is_set():
        print("threadloom: the daemon closed the session; restart the MCP server", file=sys.stderr)
        return 1
    return 0
