"""Where a session starts: which project, and which thread of it, with why. A session that chose
nothing yet continues where this user last was in this repository (their sessions started in the same
working directory first), so a new session does not begin at the root thread every time. Reading the
position writes nothing: the session's own cursor is written when it switches, creates or writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, Literal

from threadloom.errors import InvalidInput, NotFound
from threadloom.identity import Provenance
from threadloom.store.base import Store
from threadloom.threads import git
from threadloom.threads.cursors import cursor, recent_of_user
from threadloom.threads.files import ThreadFiles
from threadloom.threads.projects import Project
from threadloom.threads.tree import Tree

ROOT_THREAD: Final = "main"
TRUNK_BRANCHES: Final = frozenset({"main", "master", "trunk", "develop"})
Why = Literal["session", "branch", "resumed", "root"]


@dataclass(frozen=True)
class Position:
    thread: str
    why: Why  # session: its own choice; branch: linked to the checked-out branch; resumed; root
    last_active: int | None = None  # resumed: when this user's session chose or last wrote it (epoch ms)
    branch: str | None = None

    def note(self) -> str:
        """One line saying where the session is and why (what a model needs to trust it)."""
        if self.why == "resumed" and self.last_active is not None:
            when = datetime.fromtimestamp(self.last_active / 1000, UTC).isoformat(timespec="seconds")
            return f"resumed thread {self.thread}, last active {when} by you"
        if self.why == "branch":
            return f"started at thread {self.thread}, linked to the checked-out branch {self.branch}"
        if self.why == "root":
            return f"started at the root thread {self.thread}: no earlier thread of yours in this project"
        return f"on thread {self.thread}, chosen in this session"


def locate(store: Store, prov: Provenance, repo: Path, project: Project, files: ThreadFiles) -> Position:
    """The session's own thread; else the active thread linked to a feature branch checked out; else
    the thread this user was last on here; else the root. Reads a few files unless a feature branch
    needs the tree (the thread files hold the links)."""
    chosen_project, chosen = cursor(store, prov, repo)
    if chosen_project == project.id and chosen is not None and _exists(files, chosen):
        return Position(chosen, "session")
    current = git.branch(repo)
    if current and current not in TRUNK_BRANCHES:
        threads, _ = files.load()
        linked = [t for t in threads.values() if t.branch == current and t.status == "active"]
        if linked:
            return Position(max(linked, key=lambda t: t.updated_at).id, "branch", branch=current)
    for _, thread, at in recent_of_user(store, prov, repo, project.id):
        if thread is not None and _exists(files, thread):
            return Position(thread, "resumed", at)
    if _exists(files, ROOT_THREAD) and files.read(ROOT_THREAD).parent is None:
        return Position(ROOT_THREAD, "root")
    roots = Tree(files.load()[0]).roots()
    if not roots:
        raise NotFound(f"project {project.id} has no readable threads")
    return Position(roots[0].id, "root")


def choose_project(
    store: Store, prov: Provenance, repo: Path, found: dict[str, Project], named: str | None
) -> tuple[Project, str]:
    """The `named` project, else the session's, else the only one, else the one this user last used
    here (their sessions in this working directory first); with why."""
    if named:
        return found[named], "named"
    chosen = cursor(store, prov, repo)[0]
    if chosen in found:
        return found[chosen], "session"
    if len(found) == 1:
        return next(iter(found.values())), "only"
    if not found:
        raise NotFound("no threadloom project in this repository; create one first")
    for last, _, _ in recent_of_user(store, prov, repo):
        if last in found:
            return found[last], "resumed"
    raise InvalidInput(
        f"several projects here ({', '.join(found)}) and none used by you yet: switch to one first "
        "(thread_project action=switch, or `threadloom thread project --switch ID`)"
    )


def _exists(files: ThreadFiles, thread_id: str) -> bool:
    try:
        files.read(thread_id)
    except (NotFound, InvalidInput):
        return False
    return True
