"""What threads need from git: the checked-out branch, the head commit, the author, and how many
commits changed some paths since a summary was written. A folder that is not a repository (or a
machine without git) gets None and no warnings, never an error.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

TIMEOUT_S = 5.0
_SAFE = re.compile(r"[^a-z0-9]+")
_REDIRECTS = frozenset({"GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY"})


def _git(repo: Path, *args: str) -> str | None:
    # git looks at `repo` only: never at an enclosing repository (a home folder kept in git, say),
    # nor at one an inherited GIT_DIR or GIT_WORK_TREE names.
    env = {k: v for k, v in os.environ.items() if k not in _REDIRECTS} | {"GIT_CEILING_DIRECTORIES": str(repo.parent)}
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), *args],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
            env=env,
            stdin=subprocess.DEVNULL,
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


def author(repo: Path, override: str = "") -> str:
    """The author id: `override` (THREADLOOM_AUTHOR) when set, else git's user.name and a short hash of
    user.email (stable across clones, distinct for namesakes), else `unknown`."""
    if override.strip():
        return override.strip()[:100]
    name = _SAFE.sub("-", (_git(repo, "config", "user.name") or "").lower()).strip("-")[:40]
    email = _git(repo, "config", "user.email") or ""
    suffix = hashlib.sha1(email.strip().lower().encode()).hexdigest()[:4] if email else ""
    return "-".join(part for part in (name, suffix) if part) or "unknown"


def commits_since(repo: Path, commit: str, paths: Sequence[str]) -> int | None:
    """Commits after `commit` on the current history that touched `paths`; None when unknown."""
    if not paths or not re.fullmatch(r"[0-9a-f]{7,64}", commit):
        return None
    out = _git(repo, "rev-list", "--count", f"{commit}..HEAD", "--", *paths)
    return int(out) if out is not None and out.isdigit() else None
