"""The access token of `serve --http`: THREADLOOM_HTTP_TOKEN, else one made once and kept in the home.

The file is the user's alone (0600, not a symlink, their own); a file anyone else could read is
refused rather than trusted. The token is printed once, when it is made, and never logged.
"""

from __future__ import annotations

import os
import secrets
import stat
import sys
from pathlib import Path

from threadloom.errors import ConfigError

MIN_LENGTH = 16


def stored_token(path: Path) -> str:
    """The token in `path`, made (and printed once on stderr) when there is none yet."""
    try:
        return read_token(path)
    except FileNotFoundError:
        pass
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise ConfigError(f"cannot make the folder {path.parent}: {exc.strerror or exc}") from None
    token = secrets.token_urlsafe(32)
    draft = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(token + "\n")
        try:
            os.link(draft, path)  # never replaces a token another server made meanwhile
        except FileExistsError:
            return read_token(path)
    finally:
        draft.unlink(missing_ok=True)
    print(
        f"threadloom: made an access token for serve --http and stored it in {path} (mode 0600).\n"
        f"  Clients send: Authorization: Bearer {token}\n"
        f"  It is not shown again; read it with: cat {path}",
        file=sys.stderr,
        flush=True,
    )
    return token


def read_token(path: Path) -> str:
    """The token in an existing file that only this user can read; FileNotFoundError when there is none."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        problem = exc.strerror
        raise ConfigError(f"cannot read the HTTP access token {path} ({problem}); it must be a plain file") from None
    with os.fdopen(fd, "rb") as src:
        info = os.fstat(src.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"the HTTP access token {path} is not a plain file")
        if info.st_uid != os.getuid():
            raise ConfigError(f"the HTTP access token {path} belongs to another user; delete it to make a new one")
        if info.st_mode & 0o077:
            raise ConfigError(
                f"the HTTP access token {path} is readable by other users; run: chmod 600 {path} "
                "(or delete it and restart to make a new one)"
            )
        raw = src.read(4096)
    token = raw.decode("ascii", errors="replace").strip()
    if len(token) < MIN_LENGTH or not all(33 <= ord(c) < 127 for c in token):
        raise ConfigError(
            f"the HTTP access token {path} must be at least {MIN_LENGTH} printable characters without spaces; "
            "delete it to make a new one"
        )
    return token
