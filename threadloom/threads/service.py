"""Projects and threads of one repository: create, switch, summarise, finish, merge, move, delete
(the reads, and the context a session loads, are `reads.py`). Files are the truth (committed with
the code); the store keeps each session's position and a search index of the summaries.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any, Final

from threadloom.clock import now_ms
from threadloom.errors import InvalidInput, NotFound
from threadloom.identity import Provenance
from threadloom.scrub import SCRUB, Scrubber
from threadloom.threads import git, pending
from threadloom.threads.cursors import write_cursor
from threadloom.threads.files import ThreadFiles
from threadloom.threads.model import (
    MAX_BRANCH_CHARS,
    MAX_REASON_CHARS,
    MAX_SECTION_CHARS,
    MAX_SUMMARY_CHARS,
    MAX_SYSTEM_CONTEXT_CHARS,
    MAX_TITLE,
    STATUSES,
    Summary,
    Thread,
    check_paths,
    check_thread_id,
    slugify,
)
from threadloom.threads.position import ROOT_THREAD, TRUNK_BRANCHES
from threadloom.threads.projects import PROJECTS, Project, create_project_file, load_projects
from threadloom.threads.reads import ThreadReads, repo_of
from threadloom.threads.repository import Repository
from threadloom.threads.tree import Context, Tree

__all__ = ["ROOT_THREAD", "ThreadService", "repo_of"]
MODES: Final = ("solo", "team")


class ThreadService(ThreadReads):
    """Writes; the reads are `ThreadReads`."""

    scrubber: Scrubber = SCRUB  # open_runtime sets THREADLOOM_SCRUB_SECRETS's

    # projects

    def create_project(self, prov: Provenance, title: str, system_context: str = "", mode: str = "solo") -> Project:
        repo, title = repo_of(prov), " ".join(self.scrubber.text(title).split())  # one line: heads every context
        if mode not in MODES:
            raise InvalidInput("mode is solo or team")
        if not title.strip() or len(title) > MAX_TITLE:
            raise InvalidInput(f"a project title is 1-{MAX_TITLE} characters")
        system_context = self.scrubber.text(system_context)
        if len(system_context.strip()) > MAX_SYSTEM_CONTEXT_CHARS:
            raise InvalidInput(
                f"a project's system_context is at most {MAX_SYSTEM_CONTEXT_CHARS:,} characters (it is in every "
                f"context; {len(system_context.strip()):,} given): keep standing instructions, put the rest in threads"
            )
        files = Repository(repo)
        now = now_ms()
        root = Thread(
            ROOT_THREAD, title.strip(), None, "active", git.author(repo, prov.author or self._author), now, now
        )
        root.check()  # before the project's file is written
        # a call with this key killed before the root's index left its project's file: this call finishes it
        left = pending.left(self._store, files, [f"{PROJECTS}/{p}.yaml" for p in load_projects(files)[0]])
        if left:
            project = load_projects(files)[0][next(iter(left)).removeprefix(f"{PROJECTS}/").removesuffix(".yaml")]
        else:
            record = partial(pending.record, self._store, files)
            check = partial(_check_new_project, files)
            project = create_project_file(files, title, system_context, mode, check, record)
        threads = ThreadFiles(files, project.id)
        try:
            with threads.locked():
                cursor = partial(write_cursor, prov=prov, repo=repo, project=project.id, thread=ROOT_THREAD)
                found = {k: v for k, v in threads.load()[0].items() if k == ROOT_THREAD}
                if self._changes.finish(threads, prov, found, self.scrubber, lambda _: cursor) is None and not (
                    self._changes.create(threads, prov, root, self.scrubber, also=cursor)
                ):
                    raise InvalidInput(f"{threads.rel_of(ROOT_THREAD)} appeared meanwhile; it was left as it is")
        except BaseException:
            if not left:  # a project without its root is not made (a file this call did not write is not its own)
                files.delete(f"{PROJECTS}/{project.id}.yaml")
            raise
        return project

    def switch_project(self, prov: Provenance, project_id: str) -> Project:
        found = self._projects(repo_of(prov))
        if check_thread_id(project_id) not in found:
            raise NotFound(f"no project {project_id!r}; known: {', '.join(found) or 'none'}")
        self._set_cursor(prov, project_id, None)
        return found[project_id]

    # threads

    def create(self, prov: Provenance, title: str, parent: str | None = None) -> Thread:
        """A child of `parent` (default: the active thread); on a feature branch, linked to it. Its id
        is one no file holds: a file that could not be read (broken, conflict-marked) is never replaced."""
        repo, project, title = repo_of(prov), self.project(prov), " ".join(self.scrubber.text(title).split())
        files = ThreadFiles(repo, project.id)
        with files.locked():
            threads, problems = files.load()
            left = self._changes.finish(  # the session moves to it, as to a thread this call makes
                files,
                prov,
                threads,
                self.scrubber,
                lambda t: partial(write_cursor, prov=prov, repo=repo, project=project.id, thread=t.id),
            )
            if left is not None:  # its file, left by a call with this key killed before indexing it
                return left
            parent_id = parent or self._position(prov, project, files).thread
            Tree(threads).get(check_thread_id(parent_id))
            current = git.branch(repo)
            linked = current if current and current not in TRUNK_BRANCHES and len(current) <= MAX_BRANCH_CHARS else None
            author, commit, now = git.author(repo, prov.author or self._author), git.head(repo), now_ms()
            taken = set(threads) | files.names(problems)
            while True:
                thread_id = slugify(title, taken)
                thread = Thread(
                    thread_id, title.strip(), parent_id, "active", author, now, now, branch=linked, commit=commit
                )
                # the session moves to it in the transaction that indexes it (and claims the call's key)
                cursor = partial(write_cursor, prov=prov, repo=repo, project=project.id, thread=thread_id)
                if self._changes.create(files, prov, thread, self.scrubber, also=cursor):
                    break
                taken.add(thread_id)  # a file appeared under that name since the folder was read
        return thread

    def switch(self, prov: Provenance, thread_id: str, max_tokens: int | None = None) -> Context:
        """`thread_id`'s context; then it is the session's thread (a failure leaves the session where it was)."""
        context = self.context(prov, max_tokens, check_thread_id(thread_id))
        self._set_cursor(prov, self.project(prov).id, thread_id)
        return context

    def update_summary(
        self,
        prov: Provenance,
        text: str,
        section: str | None = None,
        replace_section: bool = False,
        paths: list[str] | None = None,
        thread_id: str | None = None,
    ) -> Thread:
        """Replace the whole summary, or add to (or replace) one section; records the head commit. The
        thread as it would become is checked whole (each section, the summary, the file) first."""
        check_paths(paths or [])
        _check_size(text, MAX_SUMMARY_CHARS if section is None else MAX_SECTION_CHARS)
        text = self.scrubber.text(text)
        paths = list(self.scrubber.texts(paths)) if paths is not None else None  # written to the thread's file
        whole = Summary.parse(text, strict=True) if section is None else None

        def change(thread: Thread, repo: Path) -> Thread:
            summary = (
                whole if whole is not None else thread.summary.with_section(section or "", text, not replace_section)
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
        reason = " ".join(self.scrubber.text(reason or "").split()) or None  # one line: a bullet and the outcome
        if reason is not None and len(reason) > MAX_REASON_CHARS:
            raise InvalidInput(f"a reason is at most {MAX_REASON_CHARS:,} characters ({len(reason):,} given)")

        def change(thread: Thread, _: Path) -> Thread:
            summary = thread.summary
            if reason and status in ("done", "abandoned"):
                summary = summary.with_section("Decisions", f"- {status.capitalize()}: {reason}", append=True)
            return thread.touched(now_ms(), status=status, summary=summary, outcome=reason or thread.outcome)

        return self._modify(prov, thread_id, change)

    def merge(self, prov: Provenance, parent_summary: str, thread_id: str | None = None) -> Thread:
        """Fold a finished thread into its parent: the parent's summary becomes `parent_summary` (which
        carries the child's conclusions), the child is done, and the session moves to the parent. Both
        are checked before either is written; the parent is written first, the child's status last."""
        _check_size(parent_summary, MAX_SUMMARY_CHARS)
        summary = Summary.parse(self.scrubber.text(parent_summary), strict=True)
        repo, project = repo_of(prov), self.project(prov)
        files = ThreadFiles(repo, project.id)
        with files.locked():
            threads, _ = files.load()
            child = Tree(threads).get(thread_id or self._position(prov, project, files).thread)
            if child.parent is None or child.parent not in threads:
                raise InvalidInput(f"{child.id} has no parent to merge into")
            self._own(prov, project, repo, [child, threads[child.parent]], "merge (the thread and its parent)")
            now = now_ms()
            parent = threads[child.parent].touched(now, summary=summary, status="active")
            merged = child.touched(now, status="done", outcome=f"merged into {parent.id}")
            self._changes.save(files, prov, [parent, merged], self.scrubber)
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
            # Out of the index first: killed before the files go, the threads stay (their files, for a retry to
            # delete), never a search entry for a thread whose file is gone, which no retry would find again.
            self._store.write(lambda w: [self._engine.remove(w, "thread", f"{project.id}/{t}") for t in gone])
            removed: list[str] = []
            try:
                for tid in reversed(gone):  # the deepest first: a failure midway leaves no thread without its parent
                    files.delete(tid)
                    removed.append(tid)
            except BaseException:
                self._changes.reindex(files, prov, [threads[t] for t in gone if t not in removed], self.scrubber)
                raise
        if self._cursor(prov)[1] in gone:
            self._set_cursor(prov, project.id, target.parent)
        return gone

    # shared

    def teammates(self, prov: Provenance, threads: list[Thread]) -> list[Thread]:
        """Those of `threads` this session may not change: in a team project, others' threads."""
        repo, project = repo_of(prov), self.project(prov)
        if project.mode != "team":
            return []
        me = git.author(repo, prov.author or self._author)
        return [t for t in threads if t.author != me]

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
            current = Tree(threads).get(check_thread_id(thread_id or self._position(prov, project, files).thread))
            self._own(prov, project, repo, [current], "change a thread")
            # the session's own thread, perhaps resumed: it is now where the session is (with the change's key)
            cursor = partial(write_cursor, prov=prov, repo=repo, project=project.id, thread=current.id)
            also = cursor if thread_id is None else None
            left = self._changes.finish(files, prov, {current.id: current}, self.scrubber, lambda _: also)
            if left is not None:  # the change is in its file (a call with this key was killed before indexing it)
                return left
            updated: Thread = change(current, repo, threads) if with_tree else change(current, repo)
            self._changes.save(files, prov, [updated], self.scrubber, also=also)
        return updated


def _check_size(text: str, most: int) -> None:
    """Refuse at once a text the summary could never hold (the thread is checked whole later)."""
    if len(text) > most:
        what = "a summary" if most == MAX_SUMMARY_CHARS else "a section"
        raise InvalidInput(f"{what} is at most {most:,} characters ({len(text):,} given): nothing was written")


def _check_new_project(files: Repository, project_id: str) -> None:
    """Before a new project's file is written: its thread paths are refused now if they would be
    later, and a folder of threads whose project file is missing is never taken over."""
    threads = ThreadFiles(files, project_id)
    threads.check()
    try:
        if files.read_text(f"{PROJECTS}/{project_id}.yaml") is not None:
            return  # the name is taken: the project file is not written there, and the next name tried
    except InvalidInput:
        return  # likewise (a file that cannot be read holds its name)
    found, problems = threads.load()
    held = sorted(found) + sorted(threads.names(problems))
    if held:
        raise InvalidInput(
            f"{threads.rel_of(held[0]).rsplit('/', 1)[0]} already holds threads ({', '.join(held[:5])}) of a project "
            f"whose file {PROJECTS}/{project_id}.yaml is missing: restore it (git) or choose another title"
        )
