"""Notes on a thread (move, failed, insight, open_q, decision) and verbatim user quotes, kept in the
store and indexed for search. A note on an idle or finished thread reopens it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from threadloom import requests
from threadloom.clock import now_ms
from threadloom.errors import InvalidInput
from threadloom.identity import Provenance
from threadloom.scrub import SCRUB, Scrubber
from threadloom.search.engine import SearchEngine
from threadloom.search.model import Document
from threadloom.sessions import record_event
from threadloom.store.base import Store, Writer
from threadloom.store.roles import require_shared_write
from threadloom.threads.model import check_thread_id
from threadloom.threads.service import ThreadService, repo_of

NOTE_KINDS: Final = ("move", "failed", "insight", "open_q", "decision")
MAX_NOTE_CHARS: Final = 10_000


@dataclass(frozen=True)
class Note:
    id: int
    thread: str | None
    kind: str
    text: str
    created_at: int

    def as_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


class NoteService:
    scrubber: Scrubber = SCRUB  # open_runtime sets THREADLOOM_SCRUB_SECRETS's

    def __init__(self, store: Store, engine: SearchEngine, threads: ThreadService) -> None:
        self._store = store
        self._engine = engine
        self._threads = threads

    def add_note(self, prov: Provenance, text: str, kind: str = "move", thread_id: str | None = None) -> dict[str, Any]:
        """A note on a thread (default: the active one); an idle or finished thread is reopened."""
        if kind not in NOTE_KINDS:
            raise InvalidInput(f"a note kind is one of {', '.join(NOTE_KINDS)}")
        _check_text(text)  # before the thread is reopened: a refused note changes nothing
        thread = self._threads.thread(prov, thread_id)
        reopened = thread.status != "active"
        if reopened:
            try:  # the call's idempotency key goes with the note, not this: killed between, a retry adds it
                with requests.unclaimed():
                    self._threads.set_status(prov, "active", thread_id=thread.id)
            except InvalidInput:  # a teammate's thread in a team project: the note still counts
                reopened = False
        note = self._add(prov, text, kind, thread.id)
        return {"note": note.as_dict(), "reopened": reopened}

    def add_quote(self, prov: Provenance, text: str, thread_id: str | None = None, project_wide: bool = False) -> Note:
        """The user's own words, verbatim, on a thread or (project_wide) on the whole project."""
        target = None if project_wide else self._threads.thread(prov, thread_id).id
        return self._add(prov, text, "quote", target)

    def notes(self, prov: Provenance, thread_id: str | None = None, limit: int = 50) -> list[Note]:
        """A thread's notes (shared with the project) and the caller's own quotes (a person's words are theirs);
        not those merged into another by consolidation."""
        project = self._threads.project(prov)
        thread = self._threads.thread(prov, thread_id).id
        rows = self._store.read(
            lambda r: r.rows(
                "SELECT id, thread, kind, text, created_at FROM thread_notes WHERE repo = :repo AND project = :p "
                "AND (thread = :t OR (thread IS NULL AND kind = 'quote')) "
                "AND (kind <> 'quote' OR owner = :owner) AND superseded_by IS NULL ORDER BY id DESC LIMIT :limit",
                {"repo": str(repo_of(prov)), "p": project.id, "t": thread, "limit": limit, "owner": prov.viewer().user},
            )
        )
        return [Note(**row) for row in rows]

    def _add(self, prov: Provenance, text: str, kind: str, thread: str | None) -> Note:
        _check_text(text)
        text = self.scrubber.text(text)
        if thread is not None:
            check_thread_id(thread)
        project = self._threads.project(prov)
        owner = prov.viewer().user
        now = now_ms()

        def tx(w: Writer) -> Note:
            if kind != "quote":  # a note is the project's; a quote its speaker's own
                require_shared_write(w, owner, "project", prov.project, None, "note")
            note_id = w.insert(
                "INSERT INTO thread_notes (repo, project, thread, kind, text, session_id, vendor, owner, created_at) "
                "VALUES (:repo, :p, :t, :k, :text, :s, :v, :owner, :now)",
                {
                    "repo": str(repo_of(prov)),
                    "p": project.id,
                    "t": thread,
                    "k": kind,
                    "text": text,
                    "s": prov.session_id,
                    "v": prov.vendor,
                    "owner": owner,
                    "now": now,
                },
            )
            self._engine.index(
                w,
                Document(
                    kind="quote" if kind == "quote" else "note",
                    ref=str(note_id),
                    body=text,
                    project=prov.project,
                    thread=f"{project.id}/{thread}" if thread else None,
                    source=kind,
                    occurred_at=now,
                ),
            )
            record_event(w, prov, f"thread.{'quote' if kind == 'quote' else 'note'}", {"id": note_id, "thread": thread})
            return Note(note_id, thread, kind, text, now)

        return self._store.write(tx)


def _check_text(text: str) -> None:
    if not text.strip() or len(text) > MAX_NOTE_CHARS:
        raise InvalidInput(f"a note is 1-{MAX_NOTE_CHARS:,} characters")
