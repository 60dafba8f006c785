"""Size-based rotation of the daemon log: `daemon.log` -> `daemon.log.1` -> ... -> `daemon.log.N`, the oldest
dropped (THREADLOOM_DAEMON_LOG_MAX_KB, THREADLOOM_DAEMON_LOG_KEEP).

The daemon's log is its own stdout and stderr (launch.py opens the file for it), where Python's logging and
whatever a library writes from C (onnxruntime's warnings) both go. Rotating renames the file and puts a fresh
one under descriptors 1 and 2 with dup2, so every writer follows without knowing. Only the daemon that holds
the daemon lock rotates, and only when its stderr is that very file (a daemon run by hand on a terminal writes
to the terminal): a retiring daemon beside its successor, still writing to the renamed file, never renames
anything. The size is looked at every guard tick, so the log may pass the limit by what a few seconds wrote.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from pathlib import Path

log = logging.getLogger(__name__)


def rotated(path: Path, n: int) -> Path:
    return path.with_name(f"{path.name}.{n}")


def writes_to(path: Path, fd: int = 2) -> bool:
    """Whether descriptor `fd` is the file at `path` (same device and inode)."""
    try:
        mine, there = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (mine.st_dev, mine.st_ino) == (there.st_dev, there.st_ino)


def rotate_if_due(path: Path, max_bytes: int, keep: int) -> bool:
    """Rotate the log when this process writes it and it has reached `max_bytes`; whether it did."""
    if not writes_to(path):
        return False
    try:
        if os.fstat(2).st_size < max_bytes:
            return False
    except OSError:
        return False
    rotate(path, keep)
    return True


def rotate(path: Path, keep: int) -> None:
    """Shift the rotated files up by one (the Nth is dropped), rename the log to `.1`, and write a new one."""
    with contextlib.suppress(FileNotFoundError):
        rotated(path, keep).unlink()
    for n in range(keep - 1, 0, -1):
        with contextlib.suppress(FileNotFoundError):
            rotated(path, n).replace(rotated(path, n + 1))
    sys.stdout.flush()
    sys.stderr.flush()
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_NOFOLLOW  # a planted link is not followed
    fresh = os.open(path.with_name(path.name + ".new"), flags, 0o600)
    try:
        path.replace(rotated(path, 1))
        os.replace(path.with_name(path.name + ".new"), path)
        os.dup2(fresh, 1)
        os.dup2(fresh, 2)
    finally:
        os.close(fresh)
    log.info("rotated the daemon log (%d kept)", keep)
