"""A change to a project's threads, all or nothing: the new state of each thread is validated whole
(every section, the whole file, its search entry) before the first byte is written; then the files
are written in the order given, each atomically, and indexed in one transaction. A failure after
the first file is written puts back every file already written, so a refused change leaves the
files as they were. A keyed call records its files before writing them, and its retry finishes what a call
killed before the index left (`finish`; pending.py).

The search entry holds the thread's text scrubbed (`scrubber`): a section typed by hand into the file
may carry a credential that no service call scrubbed; the file itself is the user's and stays as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import suppress

from threadloom.errors import InvalidInput, ThreadloomError
from threadloom.identity import Provenance
from threadloom.scrub import Scrubber
from threadloom.search.engine import SearchEngine
from threadloom.search.model import Document
from threadloom.sessions import record_event
from threadloom.store.base import Store, Writer
from threadloom.threads import pending
from threadloom.threads.files import ThreadFiles, checked
from threadloom.threads.model import Thread


class Changes:
    def __init__(self, store: Store, engine: SearchEngine) -> None:
        self._store = store
        self._engine = engine

    def save(
        self,
        files: ThreadFiles,
        prov: Provenance,
        threads: Sequence[Thread],
        scrubber: Scrubber,
        also: Callable[[Writer], None] | None = None,
    ) -> None:
        """Replace the files of `threads`, in order (call inside `files.locked()`). Put the one whose
        change says the others are done (a merged child's status) last. `also`: as in `create`."""
        texts = [checked(t) for t in threads]
        docs = [_document(files.project, prov, t, scrubber) for t in threads]
        written: list[tuple[str, str | None]] = []
        for thread, text in zip(threads, texts, strict=True):
            pending.record(self._store, files.files, files.rel_of(thread.id), text)
        try:
            for thread, text in zip(threads, texts, strict=True):
                before = files.raw(thread.id)
                files.put(thread.id, text)
                written.append((thread.id, before))
            self._index(files.project, prov, docs, also)
        except BaseException:
            _put_back(files, written)
            raise

    def create(
        self,
        files: ThreadFiles,
        prov: Provenance,
        thread: Thread,
        scrubber: Scrubber,
        also: Callable[[Writer], None] | None = None,
    ) -> bool:
        """Write a new thread's file and index it; False, writing nothing, when a file of its name
        exists (readable or not: it is never replaced). `also` writes in the index's transaction (the
        session's cursor moved to the thread: with the call's idempotency key, so a retry never finds
        the key claimed and the cursor unmoved)."""
        text = checked(thread)
        doc = _document(files.project, prov, thread, scrubber)
        pending.record(self._store, files.files, files.rel_of(thread.id), text)
        if not files.put(thread.id, text, replace=False):
            return False
        try:
            self._index(files.project, prov, [doc], also)
        except BaseException:
            _put_back(files, [(thread.id, None)])
            raise
        return True

    def finish(
        self,
        files: ThreadFiles,
        prov: Provenance,
        threads: dict[str, Thread],
        scrubber: Scrubber,
        also: Callable[[Thread], Callable[[Writer], None] | None] = lambda _: None,
    ) -> Thread | None:
        """The first of `threads` (as loaded, inside `files.locked()`) whose file a call with the current key
        wrote and was killed before indexing, now indexed (with `also(thread)`, and the key's claim); None when
        there is none. A retry finishes that call's work instead of doing it again."""
        rels = {files.rel_of(tid): tid for tid in threads}
        found = pending.left(self._store, files.files, rels)
        if not found:
            return None
        thread = threads[rels[next(iter(found))]]
        self._index(files.project, prov, [_document(files.project, prov, thread, scrubber)], also(thread))
        return thread

    def reindex(self, files: ThreadFiles, prov: Provenance, threads: Sequence[Thread], scrubber: Scrubber) -> None:
        """Put back the index entries of `threads`, whose files stay (a deletion that failed midway); the first
        failure is the one reported."""
        docs = [_document(files.project, prov, t, scrubber) for t in threads]
        with suppress(ThreadloomError):
            self._store.write(lambda w: [self._engine.index(w, doc) for doc in docs])

    def _index(
        self, project: str, prov: Provenance, docs: list[Document], also: Callable[[Writer], None] | None = None
    ) -> None:
        def tx(w: Writer) -> None:
            for doc in docs:
                self._engine.index(w, doc)
                record_event(w, prov, "thread.written", {"project": project, "thread": doc.ref.split("/", 1)[1]})
            if also is not None:
                also(w)

        self._store.write(tx)


def _document(project: str, prov: Provenance, thread: Thread, scrubber: Scrubber) -> Document:
    try:
        return Document(
            kind="thread",
            ref=f"{project}/{thread.id}",
            body=scrubber.text(thread.summary.render() or thread.title),
            title=scrubber.text(thread.title),
            project=prov.project,
            status=thread.status,
            source=thread.author,
        )
    except InvalidInput as exc:  # the thread's own checks come first: this is a limit they do not know
        raise InvalidInput(f"{thread.id} cannot be indexed: {exc.message}") from None


def _put_back(files: ThreadFiles, written: list[tuple[str, str | None]]) -> None:
    """Restore the files already written, the last first, as they were read before."""
    for thread_id, before in reversed(written):
        with suppress(ThreadloomError):  # the first failure is the one to report
            files.restore(thread_id, before)
