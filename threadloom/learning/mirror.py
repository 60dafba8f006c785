"""Copies of a user's skills in each installed agent CLI's personal skills folder, so every CLI loads them.

Where each CLI looks (user scope; each also reads project folders, which threadloom leaves alone):
- Claude Code: `~/.claude/skills/<name>/SKILL.md` ("Personal" skills, all your projects;
  https://code.claude.com/docs/en/skills, "Where skills live").
- Codex: `$HOME/.agents/skills` (the USER scope of https://developers.openai.com/codex/skills, "Where to
  save skills"; older releases read `$CODEX_HOME/skills`, which current ones no longer document).
- Gemini CLI: `~/.gemini/skills/` "or the `~/.agents/skills/` alias" (https://geminicli.com/docs/cli/
  using-agent-skills/, "Discovery tiers").
- GitHub Copilot CLI: `~/.copilot/skills` or `~/.agents/skills` (https://docs.github.com/en/copilot/how-tos/
  copilot-cli/customize-copilot/create-skills).
So two folders reach all four: `~/.claude/skills` and the shared `~/.agents/skills`. A folder is written
only when one of its clients is installed (its own folder under the home exists).

What mirroring may touch: only files inside those skills folders, through `Repository` (no link followed out
of the folder; whole-file writes). A skills folder that is itself a symlink, or whose real place is outside
the home (a link on the way), is refused, not followed. Inside
it, only skill folders threadloom made are written or removed: each holds a manifest (`MANIFEST`) naming its
owner and the digest of what was written. A folder without one is someone else's and is never touched; one
owned by another threadloom user is left to them; one edited by hand since it was written is left as the
person made it. A copy whose SKILL.md is broken is reported by `scan`, never fatal.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable, Mapping
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from threadloom.errors import InvalidInput
from threadloom.learning.skills import SKILL_FILE, check_name, files_digest, parse
from threadloom.threads.repository import Repository

MANIFEST: Final = ".threadloom-skill.json"  # hidden: Codex skips dot-files when it scans a skills folder


@dataclass(frozen=True)
class Target:
    """One personal skills folder, relative to the user's home, and the clients that load it."""

    folder: str
    clients: tuple[str, ...]
    markers: tuple[str, ...]  # folders under the home whose presence says one of the clients is installed


TARGETS: Final = (
    Target(".claude/skills", ("claude-code",), (".claude",)),
    Target(".agents/skills", ("codex", "gemini", "copilot"), (".codex", ".gemini", ".copilot", ".agents")),
)


@dataclass(frozen=True)
class Outcome:
    folder: str
    status: str  # written, unchanged, removed, absent, foreign, other-owner, edited, refused
    detail: str = ""

    def as_dict(self) -> dict[str, str]:
        row = {"folder": self.folder, "status": self.status}
        if self.detail:
            row["detail"] = self.detail
        return row


class Mirror:
    """The installed clients' skills folders under `client_home` (the user's home folder)."""

    def __init__(self, client_home: Path) -> None:
        self.client_home = client_home

    def roots(self) -> list[Path]:
        """The skills folders of the clients installed under the home, made or not."""
        return [self.client_home / t.folder for t in TARGETS if any((self.client_home / m).is_dir() for m in t.markers)]

    def sync(self, owner: str, name: str, files: Mapping[str, str]) -> list[Outcome]:
        """Write skill `name`'s files (`Skill.files()`) into every installed client's skills folder where
        that is allowed."""
        check_name(name)
        for path in files:
            _inside(path)
        return [
            self._each(root, lambda repo: self._write(repo, owner, name, files), create=True) for root in self.roots()
        ]

    def remove(self, owner: str, name: str) -> list[Outcome]:
        """Take `owner`'s copy of skill `name` out of every skills folder where threadloom wrote it."""
        check_name(name)
        return [self._each(root, lambda repo: self._remove(repo, owner, name), create=False) for root in self.roots()]

    def scan(self, owner: str | None = None) -> list[dict[str, Any]]:
        """Every skill folder in the installed skills folders whose SKILL.md cannot be loaded, and why (a
        broken one is reported, never fatal), with whether threadloom wrote it; with `owner`, only the copies
        threadloom wrote for that user (what a server serving several users may tell one of them)."""
        problems: list[dict[str, Any]] = []
        for root in self.roots():
            if not root.is_dir() or root.is_symlink():
                continue
            repo = Repository(root)
            for entry in sorted(os.scandir(root), key=lambda e: e.name):
                if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
                    continue
                manifest = _manifest(repo, entry.name)
                ours = manifest is not None
                if owner is not None and (manifest or {}).get("owner") != owner:
                    continue
                try:
                    text = repo.read_text(f"{entry.name}/{SKILL_FILE}")
                    if text is None:
                        continue
                    parse(text, folder=entry.name)
                except InvalidInput as exc:
                    problems.append({"path": str(root / entry.name / SKILL_FILE), "error": exc.message, "ours": ours})
        return problems

    # the mechanism

    def _each(self, root: Path, act: Any, create: bool) -> Outcome:
        shown = str(root)
        if root.is_symlink():
            dest = os.path.realpath(root)
            return Outcome(shown, "refused", f"the skills folder is a symlink to {dest}; not followed")
        real, home = Path(os.path.realpath(root)), Path(os.path.realpath(self.client_home))
        if not real.is_relative_to(home):  # a folder on the way (~/.agents) links out of the home
            return Outcome(shown, "refused", f"the skills folder leads to {real}, outside {home}; not followed")
        if not root.exists():
            if not create:
                return Outcome(shown, "absent")
            try:
                root.mkdir(mode=0o755, parents=True)
            except OSError as exc:
                return Outcome(shown, "refused", f"cannot make the skills folder: {exc.strerror}")
        try:
            outcome: Outcome = act(Repository(root))
        except InvalidInput as exc:
            return Outcome(shown, "refused", exc.message)
        except OSError as exc:
            return Outcome(shown, "refused", f"{exc.strerror or exc}")
        return Outcome(shown, outcome.status, outcome.detail)

    def _write(self, repo: Repository, owner: str, name: str, files: Mapping[str, str]) -> Outcome:
        kept = _ours(repo, owner, name)
        if isinstance(kept, Outcome):
            return kept
        digest = files_digest(files)
        if kept is not None and kept.get("digest") == digest and not kept.get("writing"):
            return Outcome("", "unchanged")
        old_files = set(kept.get("files", ())) if kept else set()
        # The manifest goes first, marked as being written: a crash midway leaves a folder that is still
        # ours, which the next write completes (rather than taking the half-written files for a person's).
        _put_manifest(repo, name, owner, digest, sorted(files), writing=True)
        for path, text in files.items():
            repo.write_text(f"{name}/{path}", text)
        for path in sorted(old_files - set(files)):
            repo.delete(f"{name}/{_inside(path)}")
        _put_manifest(repo, name, owner, digest, sorted(files), writing=False)
        return Outcome("", "written")

    def _remove(self, repo: Repository, owner: str, name: str) -> Outcome:
        kept = _ours(repo, owner, name)
        if isinstance(kept, Outcome):
            return kept
        if kept is None:
            return Outcome("", "absent")
        for path in kept.get("files", ()):
            repo.delete(f"{name}/{_inside(path)}")
        repo.delete(f"{name}/{MANIFEST}")
        left = _remove_empty(repo.root, name)
        return Outcome("", "removed", f"kept files someone else added: {', '.join(left)}" if left else "")


def _ours(repo: Repository, owner: str, name: str) -> dict[str, Any] | Outcome | None:
    """The manifest of `name`'s folder when `owner` may replace it; None when there is no folder; else why
    it must be left alone."""
    try:
        st = os.lstat(repo.root / name)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        return Outcome("", "foreign", f"{name} is not a folder threadloom made; left as it is")
    manifest = _manifest(repo, name)
    if manifest is None:
        return Outcome("", "foreign", f"{name} was not made by threadloom; left as it is")
    if manifest.get("owner") != owner:
        return Outcome("", "other-owner", f"{name} is another threadloom user's copy; left as it is")
    if not manifest.get("writing"):
        current = {p: repo.read_text(f"{name}/{_inside(p)}") or "" for p in manifest.get("files", ())}
        if files_digest(current) != manifest.get("digest"):
            return Outcome("", "edited", f"{name} was edited by hand since threadloom wrote it; left as it is")
    return manifest


def _manifest(repo: Repository, name: str) -> dict[str, Any] | None:
    try:
        text = repo.read_text(f"{name}/{MANIFEST}")
    except InvalidInput:
        return None
    if text is None:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) and isinstance(data.get("files", []), list) else None


def _put_manifest(repo: Repository, name: str, owner: str, digest: str, files: list[str], writing: bool) -> None:
    data = {"owner": owner, "name": name, "digest": digest, "files": files, "writing": writing}
    repo.write_text(f"{name}/{MANIFEST}", json.dumps(data, indent=1) + "\n")


def _inside(path: object) -> str:
    """A path a manifest lists, refused unless it is one of the shapes a skill's files take."""
    if not isinstance(path, str) or (path != SKILL_FILE and not path.startswith("references/")) or ".." in path:
        raise InvalidInput(f"the manifest lists {str(path)[:80]!r}, which is not a skill's file")
    return path


def _remove_empty(root: Path, name: str) -> list[str]:
    """Remove the skill's folders when they are empty; what is left in them otherwise."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for rel in (f"{name}/references", name):
            with suppress(FileNotFoundError, NotADirectoryError, OSError):
                os.rmdir(rel, dir_fd=fd)
        try:
            return sorted(_listing(root / name))
        except FileNotFoundError:
            return []
    finally:
        os.close(fd)


def _listing(folder: Path) -> Iterable[str]:
    for entry in os.scandir(folder):
        yield entry.name
