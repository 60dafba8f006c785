"""Who is writing: session, agent vendor, project and origin.

Every write records a `Provenance`. The session id comes from the client or the
environment when given, and is generated otherwise; the vendor is detected from
the client's self-description, then from the environment the agent CLI set.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from threadloom.agents import VENDOR_ENV_MARKERS, VENDORS, Vendor
from threadloom.errors import InvalidInput
from threadloom.search.model import Viewer

FOREGROUND: Final = "foreground"
_CLIENT_NAME_MARKERS: Final[tuple[tuple[str, Vendor], ...]] = (
    ("claude", "claude"),
    ("codex", "codex"),
    ("gemini", "gemini"),
    ("cursor", "cursor"),
    ("copilot", "copilot"),
    ("visual studio code", "copilot"),
    ("vscode", "copilot"),
)
_SESSION_ID_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
_ORIGIN_RE: Final = re.compile(r"^(foreground|hook|job:[a-z0-9][a-z0-9_-]{0,63})$")


@dataclass(frozen=True)
class Provenance:
    """Who made a write. `origin` is `foreground`, `hook` or `job:<name>` for a background job.

    `user` owns what the session writes and decides what it may read; `org` is the user's
    organisation (their own name until the team server defines organisations); `author` is the
    id written on thread files (empty: from git). A background job acts for no user.
    """

    session_id: str | None
    vendor: str
    project: str | None
    origin: str = FOREGROUND
    user: str = ""
    author: str = ""
    org: str = ""

    def __post_init__(self) -> None:
        if not _ORIGIN_RE.match(self.origin):
            raise InvalidInput(f"origin must be foreground, hook or job:<name>, not {self.origin!r}")
        if self.vendor not in VENDORS:
            raise InvalidInput(f"vendor must be one of {', '.join(VENDORS)}, not {self.vendor!r}")

    def viewer(self) -> Viewer:
        """Whose eyes a read is made with; a session acting for no user may read nothing of anyone's."""
        if not self.user:
            raise InvalidInput("this call needs a user (THREADLOOM_USER); a background job acts for no one")
        return Viewer(self.user, self.project, self.org or self.user)


def check_user(value: str, setting: str) -> str:
    """A user, author or organisation name: 1-100 printable characters."""
    if not 1 <= len(value) <= 100 or not value.isprintable() or value != value.strip():
        raise InvalidInput(f"{setting} is 1-100 printable characters without surrounding spaces")
    return value


@dataclass(frozen=True)
class Identity:
    """Whom a session acts for: its own THREADLOOM_USER / _AUTHOR / _ORG, else the server's defaults."""

    user: str
    author: str
    org: str

    @classmethod
    def of(cls, env: Mapping[str, str], user: str, author: str, org: str) -> Identity:
        chosen_user = check_user(env.get("THREADLOOM_USER") or user, "THREADLOOM_USER")
        chosen_author = env.get("THREADLOOM_AUTHOR") or author
        if chosen_author:
            check_user(chosen_author, "THREADLOOM_AUTHOR")
        chosen_org = env.get("THREADLOOM_ORG") or org or chosen_user
        return cls(chosen_user, chosen_author, check_user(chosen_org, "THREADLOOM_ORG"))


def new_session_id() -> str:
    return uuid.uuid4().hex


def parent_session_from(value: str | None) -> str | None:
    """THREADLOOM_PARENT_SESSION, validated like a session id; None when unset."""
    if not value:
        return None
    if not _SESSION_ID_RE.match(value):
        raise InvalidInput("THREADLOOM_PARENT_SESSION is 1-128 characters of letters, digits and . _ : - ")
    return value


def session_id_from(explicit: str | None) -> str:
    """A given session id, validated, or a new one."""
    if not explicit:
        return new_session_id()
    if not _SESSION_ID_RE.match(explicit):
        raise InvalidInput("a session id is 1-128 characters of letters, digits and . _ : - ")
    return explicit


def detect_vendor(client_name: str | None, env: Mapping[str, str]) -> Vendor:
    """The agent vendor: an explicit THREADLOOM_VENDOR, then the client's name, then the environment."""
    override = env.get("THREADLOOM_VENDOR", "").strip().lower()
    for vendor in VENDORS:
        if override == vendor:
            return vendor
    name = (client_name or "").lower()
    for marker, vendor in _CLIENT_NAME_MARKERS:
        if marker in name:
            return vendor
    for var, vendor in VENDOR_ENV_MARKERS:
        if env.get(var):
            return vendor
    if env.get("TERM_PROGRAM") == "vscode":
        return "copilot"
    return "other"


def project_root(env: Mapping[str, str], client_roots: Sequence[str], cwd: str) -> Path:
    """The repository a session works in. The search starts at `THREADLOOM_ROOT` (a relative one is
    taken from the agent's working directory `cwd`, not this process's), else at the first `file://`
    root the client offers, else at `cwd`, and goes up to the nearest folder holding `.git` or a
    threadloom project (stopping below the home folder and /); without one it is the folder itself.
    A folder that does not exist or is not a folder is refused, never created. / or the home folder
    is returned as it is: a session there keeps its memory (which needs no repository, and a spawned
    child inherits its parent's root), while `unsafe_repository_root` refuses every repository file
    there (`threads.repository`), so /AGENTS.md can never be written."""
    from urllib.parse import unquote, urlparse

    base = Path(cwd).expanduser().absolute()
    explicit = env.get("THREADLOOM_ROOT")
    if explicit:
        return _repository_root(base / Path(explicit).expanduser(), f"THREADLOOM_ROOT={explicit}")
    for uri in client_roots:
        if uri.startswith("file://"):
            parsed = urlparse(uri)
            if parsed.netloc not in ("", "localhost"):
                raise InvalidInput(f"the client's root {uri} is not a folder on this machine")
            return _repository_root(Path(unquote(parsed.path)), f"the client's root {uri}")
    return _repository_root(base, "the working directory")


# What marks a repository's root: git's folder (or the file a worktree or submodule has instead), or
# threadloom's projects. A bare `.threadloom` is not enough: the home folder is `~/.threadloom`.
_REPOSITORY_MARKERS: Final = (".git", ".threadloom/projects")
_USE_A_PROJECT: Final = " (start the agent in the project's folder, or set THREADLOOM_ROOT to it)"


def _repository_root(start: Path, source: str) -> Path:
    """The nearest folder from `start` up that holds a repository marker, else `start` itself."""
    try:
        folder = start.resolve(strict=True)
    except (FileNotFoundError, NotADirectoryError):
        raise InvalidInput(f"{source}: {start} does not exist (threadloom never creates a project folder)") from None
    except (OSError, RuntimeError) as exc:  # a symlink loop, a folder this user may not enter
        raise InvalidInput(f"{source}: {start} cannot be used: {exc}") from None
    except ValueError:  # a NUL byte (a hook's JSON or a client's root URI can carry one): no such path
        raise InvalidInput(f"{source}: {str(start)!r} holds a NUL character, which no path can") from None
    if not folder.is_dir():
        raise InvalidInput(f"{source}: {start} is not a folder")
    stops = {Path(folder.anchor), _home_folder()}
    for candidate in (folder, *folder.parents):
        if candidate in stops:
            break
        if any((candidate / m).exists() or (candidate / m).is_symlink() for m in _REPOSITORY_MARKERS):
            return candidate
    return folder


def _home_folder() -> Path | None:
    try:
        return Path.home().resolve()
    except (OSError, RuntimeError):  # no HOME and no password entry
        return None


def unsafe_repository_root(root: Path) -> str | None:
    """Why `root` (a resolved folder) can never be a repository, or None. Its files would be the
    machine's (/AGENTS.md) or the user's (~/.threadloom is threadloom's home)."""
    if root == Path(root.anchor):
        return f"refusing to use {root} as a repository: it is the filesystem root{_USE_A_PROJECT}"
    if root == _home_folder():
        return f"refusing to use {root} as a repository: it is the home folder{_USE_A_PROJECT}"
    return None
