"""Projects and threads of one repository: create, switch, summarise, finish, merge, move, delete,
and the context a session loads. Files are the truth (committed with the code); the store keeps
each session's position and a search index of the summaries.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any, Final

from threadloom.clock import now_ms
from threadloom.errors import InvalidInput, NotFound, StoreFull
from threadloom.identity import Provenance
from threadloom.search.engine import SearchEngine
from threadloom.search.model import Document
from threadloom.sessions import record_event
from threadloom.store.base import Store, Writer
from threadloom.threads import git
from threadloom.threads.files import ThreadFiles
from threadloom.threads.model import STATUSES, Summary, Thread, check_thread_id, slugify
from threadloom.threads.projects import Project, create_project_file, load_projects
from threadloom.threads.repository import Repository
from threadloom.threads.tree import Context, Tree, assemble, estimate_tokens

ROOT_THREAD: Final = "main"
MODES: Final = ("solo", "team")
TRUNK_BRANCHES: Final = frozenset({"main", "master", "trunk", "develop"})


class ThreadService:
    def __init__(self, store: Store, engine: SearchEngine, author: str = "") -> None:
        self._store = store
        self._engine = engine
        self._author = author  # THREADLOOM_AUTHOR; empty: from git config

    # projects

    def create_project(self, prov: Provenance, title: str, system_context: str = "", mode: str = "solo") -> Project:
        repo = repo_of(prov)
        if mode not in MODES:
            raise InvalidInput("mode is solo or team")
        if not title.strip() or len(title) > 200:
            raise InvalidInput("a project title is 1-200 characters")
        files = Repository(repo)
        project = create_project_file(files, title, system_context, mode, lambda p: ThreadFiles(files, p).check())
        now = now_ms()
        root = Thread(
            ROOT_THREAD, project.title, None, "active", git.author(repo, prov.author or self._author), now, now
        )
        self._save(repo, project.id, root, prov)
        self._set_cursor(prov, project.id, ROOT_THREAD)
        return project

    def projects(self, prov: Provenance) -> dict[str, Any]:
        found, skipped = load_projects(Repository(repo_of(prov)))
        selected = self._cursor(prov)[0]
        return {
            "projects": [p.__dict__ | {"selected": p.id == selected} for p in found.values()],
            "caveats": skipped + ([] if found else ["no project here yet: create one (it starts with a root thread)"]),
        }

    def switch_project(self, prov: Provenance, project_id: str) -> Project:
        found = self._projects(repo_of(prov))
        if project_id not in found:
            raise NotFound(f"no project {project_id!r}; known: {', '.join(found) or 'none'}")
        self._set_cursor(prov, project_id, None)
        return found[project_id]

    def _projects(self, repo: Path) -> dict[str, Project]:
        return load_projects(Repository(repo))[0]

    def project(self, prov: Provenance, named: str | None = None) -> Project:
        """The `named` project, else the session's; a single project is selected automatically."""
        found = self._projects(repo_of(prov))
        if named and named not in found:
            raise NotFound(f"no project {named!r} here; projects: {', '.join(found) or 'none'}")
        chosen = named or self._cursor(prov)[0]
        if chosen in found:
            return found[chosen]
        if len(found) == 1:
            return next(iter(found.values()))
        if not found:
            raise NotFound("no threadloom project in this repository; create one first")
        raise InvalidInput(f"several projects here ({', '.join(found)}); switch to one first")

    # threads

    def tree(self, prov: Provenance, project_id: str | None = None) -> dict[str, Any]:
        """The tree of `project_id` (default: the session's project)."""
        project = self.project(prov, project_id)
        files = ThreadFiles(repo_of(prov), project.id)
        threads, problems = files.load()
        active = self._active(prov, project, threads)
        return {
            "project": project.id,
            "active": active,
            "tree": Tree(threads).render(active),
            "problems": [p.__dict__ for p in problems],
        }

    def create(self, prov: Provenance, title: str, parent: str | None = None) -> Thread:
        """A child of `parent` (default: the active thread); on a feature branch, linked to it."""
        repo, project = repo_of(prov), self.project(prov)
        files = ThreadFiles(repo, project.id)
        with files.locked():
            threads, _ = files.load()
            parent_id = parent or self._active(prov, project, threads)
            Tree(threads).get(check_thread_id(parent_id))
            current = git.branch(repo)
            now = now_ms()
            thread = Thread(
                slugify(title, set(threads)),
                title.strip(),
                parent_id,
                "active",
                git.author(repo, prov.author or self._author),
                now,
                now,
                branch=current if current and current not in TRUNK_BRANCHES else None,
                commit=git.head(repo),
            )
            self._write(files, thread, prov)
        self._set_cursor(prov, project.id, thread.id)
        return thread

    def thread(self, prov: Provenance, thread_id: str | None = None) -> Thread:
        """One thread of the session's project (default: its active thread)."""
        project = self.project(prov)
        threads, _ = ThreadFiles(repo_of(prov), project.id).load()
        chosen = thread_id or self._active(prov, project, threads)
        return Tree(threads).get(check_thread_id(chosen))

    def switch(self, prov: Provenance, thread_id: str, max_tokens: int | None = None) -> Context:
        project = self.project(prov)
        threads, _ = ThreadFiles(repo_of(prov), project.id).load()
        Tree(threads).get(check_thread_id(thread_id))
        self._set_cursor(prov, project.id, thread_id)
        return self.context(prov, max_tokens)

    def context(self, prov: Provenance, max_tokens: int | None = None) -> Context:
        """Assembled from the active thread's file and its ancestors' only, however large the tree."""
        repo, project = repo_of(prov), self.project(prov)
        files = ThreadFiles(repo, project.id)
        chain = self._active_chain(prov, project, files)
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
        return assemble(tree, thread.id, project.title, project.system_context, max_tokens, tuple(warnings))

    def record_context_load(self, prov: Provenance, context: Context) -> None:
        """Journal a context load (its size feeds `stats`)."""
        project = self.project(prov)
        detail = {"project": project.id, "thread": context.threads[0], "tokens": context.tokens}
        with contextlib.suppress(StoreFull):  # bookkeeping: a full disk must not fail the read it follows
            self._store.write(lambda w: record_event(w, prov, "thread.context", detail))

    def stats(self, prov: Provenance) -> dict[str, Any]:
        """Summary sizes, and the context sessions loaded (conversation sizes come with transcripts)."""
        repo, project = repo_of(prov), self.project(prov)
        threads, problems = ThreadFiles(repo, project.id).load()
        sizes = sorted(estimate_tokens(t.summary.render()) for t in threads.values())
        loads = self._store.read(
            lambda r: r.tuples(
                "SELECT detail FROM events WHERE kind = 'thread.context' AND project = :repo "
                "ORDER BY id DESC LIMIT 500",
                {"repo": str(repo)},
            )
        )
        loaded = [int(json.loads(d).get("tokens", 0)) for (d,) in loads if json.loads(d).get("project") == project.id]
        by_status: dict[str, int] = {}
        for t in threads.values():
            by_status[t.status] = by_status.get(t.status, 0) + 1
        return {
            "project": project.id,
            "threads": len(threads),
            "by_status": by_status,
            "broken_files": len(problems),
            "summary_tokens": {
                "total": sum(sizes),
                "mean": round(sum(sizes) / len(sizes), 1) if sizes else 0,
                "max": sizes[-1] if sizes else 0,
            },
            "context_loads": {
                "count": len(loaded),
                "mean_tokens": round(sum(loaded) / len(loaded), 1) if loaded else None,
                "max_tokens": max(loaded) if loaded else None,
            },
            "conversation_tokens": None,
            "caveats": ["conversation sizes are not known yet: they come from transcript ingestion"],
        }

    def _active_chain(self, prov: Provenance, project: Project, files: ThreadFiles) -> list[Thread]:
        chosen_project, chosen = self._cursor(prov)
        if chosen_project == project.id and chosen is not None:
            try:
                return files.chain(chosen)
            except (NotFound, InvalidInput):
                pass  # deleted or broken since: fall back to the branch or the root
        threads, _ = files.load()
        return files.chain(self._active(prov, project, threads))

    def update_summary(
        self,
        prov: Provenance,
        text: str,
        section: str | None = None,
        replace_section: bool = False,
        paths: list[str] | None = None,
        thread_id: str | None = None,
    ) -> Thread:
        """Replace the whole summary, or add to (or replace) one section; records the head commit."""
        for path in paths or []:
            if path.startswith("/") or ".." in Path(path).parts:
                raise InvalidInput(f"watched paths are relative to the repository: {path!r}")

        def change(thread: Thread, repo: Path) -> Thread:
            summary = (
                Summary.parse(text)
                if section is None
                else thread.summary.with_section(section, text, not replace_section)
            )
            new_paths = tuple(paths) if paths is not None else thread.paths
            return thread.touched(now_ms(), summary=summary, paths=new_paths, commit=git.head(repo) or thread.commit)

        return self._modify(prov, thread_id, change)

    def set_status(
        self, prov: Provenance, status: str, reason: str | None = None, thread_id: str | None = None
    ) -> Thread:
        """done / abandoned (the reason joins Decisions), idle, or active to reopen."""
        if status not in STATUSES:
            raise InvalidInput(f"status must be one of {', '.join(STATUSES)}")

        def change(thread: Thread, _: Path) -> Thread:
            summary = thread.summary
            if reason and status in ("done", "abandoned"):
                summary = summary.with_section("Decisions", f"- {status.capitalize()}: {reason.strip()}", append=True)
            return thread.touched(now_ms(), status=status, summary=summary, outcome=reason or thread.outcome)

        return self._modify(prov, thread_id, change)

    def merge(self, prov: Provenance, parent_summary: str, thread_id: str | None = None) -> Thread:
        """Fold a finished thread into its parent: the parent's summary becomes `parent_summary` (which
        carries the child's conclusions), the child is done, and the session moves to the parent."""
        repo, project = repo_of(prov), self.project(prov)
        files = ThreadFiles(repo, project.id)
        with files.locked():
            threads, _ = files.load()
            child = Tree(threads).get(thread_id or self._active(prov, project, threads))
            if child.parent is None or child.parent not in threads:
                raise InvalidInput(f"{child.id} has no parent to merge into")
            self._own(prov, project, repo, [child, threads[child.parent]], "merge (the thread and its parent)")
            now = now_ms()
            parent = threads[child.parent].touched(now, summary=Summary.parse(parent_summary), status="active")
            self._write(files, child.touched(now, status="done", outcome=f"merged into {parent.id}"), prov)
            self._write(files, parent, prov)
        self._set_cursor(prov, project.id, parent.id)
        return parent

    def rebase(self, prov: Provenance, thread_id: str, new_parent: str) -> Thread:
        def change(thread: Thread, _: Path, threads: dict[str, Thread]) -> Thread:
            Tree(threads).check_move(thread.id, check_thread_id(new_parent))
            return thread.touched(now_ms(), parent=new_parent)

        return self._modify(prov, thread_id, change, with_tree=True)

    def delete(self, prov: Provenance, thread_id: str) -> list[str]:
        """Delete a thread and all its descendants; the root cannot be deleted."""
        repo, project = repo_of(prov), self.project(prov)
        files = ThreadFiles(repo, project.id)
        with files.locked():
            threads, _ = files.load()
            tree = Tree(threads)
            target = tree.get(check_thread_id(thread_id))
            if target.parent is None:
                raise InvalidInput("the root thread cannot be deleted; delete the project's files instead")
            below = tree.descendants(target.id)
            self._own(prov, project, repo, [target, *below], "delete (the thread and every descendant)")
            gone = [target.id, *[t.id for t in below]]
            for tid in gone:
                files.delete(tid)
            self._store.write(lambda w: [self._engine.remove(w, "thread", f"{project.id}/{tid}") for tid in gone])
        if self._cursor(prov)[1] in gone:
            self._set_cursor(prov, project.id, target.parent)
        return gone

    # shared

    def _own(self, prov: Provenance, project: Project, repo: Path, threads: list[Thread], action: str) -> None:
        """Team mode: only a thread's author may change it. Ownership prevents accidents; it is not
        access control (anyone can edit the files)."""
        if project.mode != "team":
            return
        me = git.author(repo, prov.author or self._author)
        theirs = [t for t in threads if t.author != me]
        if theirs:
            raise InvalidInput(
                f"in a team project only the author may {action}: {theirs[0].id} is {theirs[0].author}'s"
            )

    def _modify(self, prov: Provenance, thread_id: str | None, change: Any, with_tree: bool = False) -> Thread:
        repo, project = repo_of(prov), self.project(prov)
        files = ThreadFiles(repo, project.id)
        with files.locked():
            threads, _ = files.load()
            current = Tree(threads).get(check_thread_id(thread_id or self._active(prov, project, threads)))
            self._own(prov, project, repo, [current], "change a thread")
            updated: Thread = change(current, repo, threads) if with_tree else change(current, repo)
            self._write(files, updated, prov)
        return updated

    def _write(self, files: ThreadFiles, thread: Thread, prov: Provenance) -> None:
        files.write(thread)
        doc = Document(
            kind="thread",
            ref=f"{files.project}/{thread.id}",
            body=thread.summary.render() or thread.title,
            title=thread.title,
            project=prov.project,
            status=thread.status,
            source=thread.author,
        )

        def tx(w: Writer) -> None:
            self._engine.index(w, doc)
            record_event(w, prov, "thread.written", {"project": files.project, "thread": thread.id})

        self._store.write(tx)

    def _save(self, repo: Path, project: str, thread: Thread, prov: Provenance) -> None:
        files = ThreadFiles(repo, project)
        with files.locked():
            self._write(files, thread, prov)

    def _active(self, prov: Provenance, project: Project, threads: dict[str, Thread]) -> str:
        """The session's thread; else the one linked to the checked-out branch; else the root."""
        chosen_project, chosen = self._cursor(prov)
        if chosen_project == project.id and chosen in threads:
            return chosen
        current = git.branch(repo_of(prov))
        linked = [t for t in threads.values() if current and t.branch == current and t.status == "active"]
        if linked:
            return max(linked, key=lambda t: t.updated_at).id
        roots = Tree(threads).roots()
        if not roots:
            raise NotFound(f"project {project.id} has no readable threads")
        return roots[0].id

    def _cursor(self, prov: Provenance) -> tuple[str | None, str | None]:
        row = self._store.read(
            lambda r: r.one(
                "SELECT project, thread FROM thread_cursors WHERE session_id = :s AND repo = :r",
                {"s": prov.session_id or "", "r": str(repo_of(prov))},
            )
        )
        return (row["project"], row["thread"]) if row else (None, None)

    def _set_cursor(self, prov: Provenance, project: str, thread: str | None) -> None:
        self._store.write(
            lambda w: w.execute(
                "INSERT INTO thread_cursors (session_id, repo, project, thread, updated_at) "
                "VALUES (:s, :r, :p, :t, :now) ON CONFLICT (session_id, repo) DO UPDATE SET "
                "project = :p, thread = :t, updated_at = :now",
                {"s": prov.session_id or "", "r": str(repo_of(prov)), "p": project, "t": thread, "now": now_ms()},
            )
        )


def repo_of(prov: Provenance) -> Path:
    if not prov.project:
        raise InvalidInput("this session has no project root (set THREADLOOM_ROOT or open a folder)")
    return Path(prov.project)
