"""What threads need from git: the checked-out branch, the head commit, the author, and how many
commits changed some paths since a summary was written. A folder that is not a repository (or a
machine without git) gets None and no warnings, never an error.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

TIMEOUT_S = 5.0
_SAFE = re.compile(r"[^a-z0-9]+")


def _git(repo: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=TIMEOUT_S, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def branch(repo: Path) -> str | None:
    """The checked-out branch, or None (detached head, not a repository)."""
    name = _git(repo, "symbolic-ref", "--quiet", "--short", "HEAD")
    return name or None


def head(repo: Path) -> str | None:
    return _git(repo, "rev-parse", "--verify", "--quiet", "HEAD") or None


def author(repo: Path, env: Mapping[str, str]) -> str:
    """THREADLOOM_AUTHOR, else git's user.email (or user.name) as a short id, else `unknown`."""
    explicit = env.get("THREADLOOM_AUTHOR", "").strip()
    if explicit:
        return explicit[:100]
    for key in ("user.email", "user.name"):
        value = _git(repo, "config", key)
        if value:
            local = value.split("@")[0].lower()
            return _SAFE.sub("-", local).strip("-")[:60] or "unknown"
    return "unknown"


def commits_since(repo: Path, commit: str, paths: Sequence[str]) -> int | None:
    """Commits after `commit` on the current history that touched `paths`; None when unknown."""
    if not paths or not re.fullmatch(r"[0-9a-f]{7,64}", commit):
        return None
    out = _git(repo, "rev-list", "--count", f"{commit}..HEAD", "--", *paths)
    return int(out) if out is not None and out.isdigit() else None
