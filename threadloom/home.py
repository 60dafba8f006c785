"""The home folder and the files in it. Standard library only: the bridge uses it."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Mapping
from pathlib import Path


def default_home(environ: Mapping[str, str] | None = None) -> Path:
    """`THREADLOOM_HOME`, else `~/.threadloom`. It cannot be set in its own .env."""
    env = os.environ if environ is None else environ
    raw = env.get("THREADLOOM_HOME")
    return Path(raw).expanduser().absolute() if raw else Path.home() / ".threadloom"


def home_problem(home: Path) -> str | None:
    """Why `home` cannot be the home folder (made on first use), or None. Nothing is made here."""
    if home.is_symlink() and not home.exists():
        return f"the home {home} is a symbolic link to {os.readlink(home)}, which does not exist"
    if home.exists():
        return None if home.is_dir() else f"the home {home} is not a folder"
    ancestor = home.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        if ancestor.is_symlink():
            return f"the home {home} cannot be made: {ancestor} is a symbolic link to nothing"
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        return f"the home {home} cannot be made: {ancestor} is not a folder"
    return None


class HomeLayout:
    """Where each file of the home folder lives.

    A plain class, not a dataclass: `dataclasses` imports `inspect`, which would double the
    bridge's import time.
    """

    __slots__ = ("home",)

    def __init__(self, home: Path) -> None:
        self.home = home

    @property
    def env_file(self) -> Path:
        return self.home / ".env"

    @property
    def database(self) -> Path:
        return self.home / "threadloom.db"

    @property
    def socket(self) -> Path:
        return self.home / "daemon.sock"

    @property
    def lock(self) -> Path:
        """Held exclusively by the one daemon that owns the socket."""
        return self.home / "daemon.lock"

    @property
    def daemon_info(self) -> Path:
        return self.home / "daemon.json"

    @property
    def daemon_log(self) -> Path:
        return self.home / "daemon.log"

    @property
    def http_token(self) -> Path:
        """The access token of `serve --http`, made on first use when THREADLOOM_HTTP_TOKEN is unset (0600)."""
        return self.home / "http.token"

    @property
    def skills(self) -> Path:
        """The canonical copy of each user's skills (`<user>/<name>/SKILL.md`), mirrored into the CLIs'."""
        return self.home / "skills"

    @property
    def lessons(self) -> Path:
        """Each user's lessons file (`<user>.md`)."""
        return self.home / "lessons"

    @property
    def store_lock(self) -> Path:
        """Held shared by every server using the store, so a restore can tell that it is in use."""
        return self.home / "store.lock"


def try_lock(path: Path, *, shared: bool = False) -> int | None:
    """An fd holding a lock on `path`, or None when another process holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd
