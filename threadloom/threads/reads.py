"""The read side of `ThreadService`: projects, where the session is, the tree, one thread, the context
and the bounded outline a session loads. Reading writes no file and no cursor; it costs what it
shows (a context reads the active chain's files; an outline needs the project's parsed files, kept
per process by `file_cache`).
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from threadloom.errors import InvalidInput, NotFound, StoreFull
from threadloom.identity import Provenance
from threadloom.search.engine import SearchEngine
from threadloom.sessions import record_event
from threadloom.store.base import Store
from threadloom.threads import git
from threadloom.threads.changes import Changes
from threadloom.threads.cursors import cursor, set_cursor
from threadloom.threads.files import FOLDER, Problem, ThreadFiles
from threadloom.threads.model import Thread, check_thread_id
from threadloom.threads.outline import Outline, outline
from threadloom.threads.position import Position, choose_project, locate
from threadloom.threads.projects import Project, load_projects
from threadloom.threads.repository import Repository
from threadloom.threads.stats import thread_stats
from threadloom.threads.tree import Context, Tree, assemble


class ThreadReads:
    def __init__(self, store: Store, engine: SearchEngine, author: str = "") -> None:
        self._store = store
        self._engine = engine
        self._author = author  # THREADLOOM_AUTHOR; empty: from git config
        self._changes = Changes(store, engine)

    def projects(self, prov: Provenance) -> dict[str, Any]:
        found, skipped = load_projects(Repository(repo_of(prov)))
        selected = self._cursor(prov)[0]
        if selected not in found and found:
            with contextlib.suppress(InvalidInput, NotFound):  # several, none used yet: none is selected
                selected = self.project(prov).id
        return {
            "projects": [p.__dict__ | {"selected": p.id == selected} for p in found.values()],
            "caveats": skipped + ([] if found else ["no project here yet: create one (it starts with a root thread)"]),
        }

    def _projects(self, repo: Path) -> dict[str, Project]:
        return load_projects(Repository(repo))[0]

    def project(self, prov: Provenance, named: str | None = None) -> Project:
        """The `named` project, else the session's, else the only one, else the one this user last
        used in this repository (their sessions in the same working directory first)."""
        repo = repo_of(prov)
        found = self._projects(repo)
        if named and check_thread_id(named) not in found:
            raise NotFound(f"no project {named!r} here; projects: {', '.join(found) or 'none'}")
        return choose_project(self._store, prov, repo, found, named)[0]

    def resume(self, prov: Provenance) -> dict[str, Any]:
        """Where this session is and why, for a brief or a first call: {project, thread, title, why
        (session | branch | resumed | root), last_active (ISO, when resumed), note}."""
        repo = repo_of(prov)
        project, _ = choose_project(self._store, prov, repo, self._projects(repo), None)
        at = self._position(prov, project, ThreadFiles(repo, project.id))
        thread = ThreadFiles(repo, project.id).read(at.thread)
        when = None if at.last_active is None else datetime.fromtimestamp(at.last_active / 1000, UTC).isoformat()
        return {
            "project": project.id,
            "thread": at.thread,
            "title": thread.title,
            "why": at.why,
            "last_active": when,
            "note": at.note(),
        }

    def tree(self, prov: Provenance, project_id: str | None = None) -> dict[str, Any]:
        """The whole tree of `project_id` (default: the session's project)."""
        project = self.project(prov, project_id)
        files = ThreadFiles(repo_of(prov), project.id)
        threads, problems = files.load()
        tree = Tree(threads)
        active = self._position(prov, project, files).thread
        return {
            "project": project.id,
            "active": active,
            "tree": tree.render(active),
            "problems": _problems(files, tree, problems),
        }

    def outline(self, prov: Provenance, thread_id: str | None = None) -> Outline:
        """The threads near the active one (or `thread_id`), bounded (`outline.py`)."""
        project = self.project(prov)
        files = ThreadFiles(repo_of(prov), project.id)
        threads, problems = files.load()
        tree = Tree(threads)
        active = check_thread_id(thread_id) if thread_id else self._position(prov, project, files).thread
        return outline(tree, active, _problems(files, tree, problems))

    def thread(self, prov: Provenance, thread_id: str | None = None) -> Thread:
        """One thread of the session's project (default: its active thread), reading its file only."""
        project = self.project(prov)
        files = ThreadFiles(repo_of(prov), project.id)
        return files.read(check_thread_id(thread_id) if thread_id else self._position(prov, project, files).thread)

    def context(self, prov: Provenance, max_tokens: int | None = None, thread_id: str | None = None) -> Context:
        """Assembled from the active thread's file (or `thread_id`'s) and its ancestors' only, however
        large the tree; opened by where the session is and why when it did not choose it itself."""
        repo, project = repo_of(prov), self.project(prov)
        files = ThreadFiles(repo, project.id)
        lead = ""
        if thread_id is None:
            at = self._position(prov, project, files)
            thread_id, lead = at.thread, "" if at.why == "session" else at.note()
        chain = files.chain(check_thread_id(thread_id))
        thread = chain[0]
        warnings = []
        if thread.commit and thread.paths:
            changed = git.commits_since(repo, thread.commit, thread.paths)
            if changed:
                warnings.append(
                    f"{changed} commit(s) changed {', '.join(thread.paths)} since this summary was written: "
                    "check it is still accurate"
                )
        tree = Tree({t.id: t for t in chain})
        folder = f"{FOLDER}/threads/{project.id}"
        return assemble(
            tree, thread.id, project.title, project.system_context, max_tokens, tuple(warnings), folder, lead
        )

    def record_context_load(self, prov: Provenance, context: Context) -> None:
        """Journal a context load (its size feeds `stats`)."""
        project = self.project(prov)
        detail = {"project": project.id, "thread": context.threads[0], "tokens": context.tokens}
        with contextlib.suppress(StoreFull):  # bookkeeping: a full disk must not fail the read it follows
            self._store.write(lambda w: record_event(w, prov, "thread.context", detail))

    def stats(self, prov: Provenance) -> dict[str, Any]:
        """Summary sizes, and the context sessions loaded (conversation sizes come with transcripts)."""
        return thread_stats(self._store, repo_of(prov), self.project(prov).id)

    def _position(self, prov: Provenance, project: Project, files: ThreadFiles) -> Position:
        return locate(self._store, prov, repo_of(prov), project, files)

    def _cursor(self, prov: Provenance) -> tuple[str | None, str | None]:
        return cursor(self._store, prov, repo_of(prov))

    def _set_cursor(self, prov: Provenance, project: str, thread: str | None) -> None:
        set_cursor(self._store, prov, repo_of(prov), project, thread)


def _problems(files: ThreadFiles, tree: Tree, problems: list[Problem]) -> list[dict[str, Any]]:
    cycles = [
        {
            "path": files.rel_of(cycle[0]),
            "error": f"a parent cycle: {' -> '.join([*cycle, cycle[0]])} (fix the parent: line of one of them)",
        }
        for cycle in tree.cycles()
    ]
    return [p.__dict__ for p in problems] + cycles


def repo_of(prov: Provenance) -> Path:
    if not prov.project:
        raise InvalidInput("this session has no project root (set THREADLOOM_ROOT or open a folder)")
    return Path(prov.project)
