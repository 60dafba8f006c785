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
    """Who made a write. `origin` is `foreground`, `hook` or `job:<name>` for a background job."""

    session_id: str | None
    vendor: str
    project: str | None
    origin: str = FOREGROUND

    def __post_init__(self) -> None:
        if not _ORIGIN_RE.match(self.origin):
            raise InvalidInput(f"origin must be foreground, hook or job:<name>, not {self.origin!r}")
        if self.vendor not in VENDORS:
            raise InvalidInput(f"vendor must be one of {', '.join(VENDORS)}, not {self.vendor!r}")


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
    """`THREADLOOM_ROOT`, then the first `file://` root the client offers, then the working directory."""
    explicit = env.get("THREADLOOM_ROOT")
    if explicit:
        return Path(explicit).expanduser().absolute()
    for uri in client_roots:
        if uri.startswith("file://"):
            from urllib.parse import unquote, urlparse

            return Path(unquote(urlparse(uri).path)).absolute()
    return Path(cwd).absolute()
