"""Starting the daemon and waiting until it serves: shared by the bridge and the hooks. Standard library only.

A client that finds no daemon starts one holding the daemon lock (taken here and handed over), then
polls its own way of asking (a bridge's `hello`, a hook's control request) until the daemon answers.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from threadloom.agents import IDENTITY_KEYS, PER_SESSION_KEYS
from threadloom.home import HomeLayout, try_lock

if TYPE_CHECKING:
    import subprocess

T = TypeVar("T")
START_TIMEOUT_S = 20.0  # a cold start on a loaded machine (migrations included) has taken over 10 s
POLL_S = 0.01
MAX_POLL_S = 0.1
# What an attempt returns when the daemon did not serve it: nobody listens, or the daemon is being replaced.
ABSENT = "absent"
RETIRING = "retiring"
CLOSED = "closed"


class LaunchError(Exception):
    """No daemon could be reached or started; the message says why, for the user."""


def start_daemon(layout: HomeLayout) -> subprocess.Popen[bytes] | None:
    """A daemon started holding the daemon lock, taken here and handed over; None when another process
    (a daemon, or a candidate another client started) holds it. Clients starting at once thus start one
    daemon between them, and never a stream of candidates that would fight for the lock (and the CPU)."""
    import subprocess  # only the first client of a cold start pays for it

    try:
        layout.home.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise LaunchError(f"cannot make the home folder {layout.home}: {exc.strerror or exc}") from None
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


def log_tail(path: Path, lines: int = 6) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, fh.seek(0, os.SEEK_END) - 4096))
            tail = fh.read().decode(errors="replace").splitlines()[-lines:]
    except OSError:
        return f"(no log at {path})"
    return "\n".join(tail) + f"\n(full log: {path})"


def until_served(
    layout: HomeLayout,
    attempt: Callable[[], T | str],
    timeout: float,
    start: Callable[[HomeLayout], subprocess.Popen[bytes] | None] = start_daemon,
) -> T:
    """What `attempt` returns once a daemon serves it, starting (or replacing) the daemon as needed.

    `attempt` returns its result, or ABSENT, RETIRING or CLOSED when no daemon served it. Raises
    LaunchError when the daemon this started fails, or when none answers within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    candidate: subprocess.Popen[bytes] | None = None
    pause = POLL_S
    try:
        while time.monotonic() < deadline:
            outcome = attempt()
            if not isinstance(outcome, str):
                return outcome
            if candidate is not None and candidate.poll():
                raise LaunchError(
                    f"the threadloom daemon failed to start (exit {candidate.returncode}):\n"
                    + log_tail(layout.daemon_log)
                )
            # Start one only while nobody holds the daemon lock: a daemon still loading, or one that is
            # being replaced (it answers `retiring`), holds it.
            if outcome != RETIRING and (candidate is None or candidate.poll() is not None):
                candidate = start(layout) or candidate
            time.sleep(pause)
            pause = min(pause * 1.5, MAX_POLL_S)
    finally:
        if candidate is not None:
            candidate.poll()  # reap a candidate that has exited
    raise LaunchError(
        f"no threadloom daemon answered on {layout.socket} within {timeout:.0f}s; see {layout.daemon_log}"
    )
