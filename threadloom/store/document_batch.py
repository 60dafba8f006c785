"""New search documents written as a batch (SQLite): the rows and their full-text entries by one prepared
statement each, ids assigned in order under the write lock, as SQLite itself would assign them. Transcript
ingest writes nearly every document this way (store/documents.py `upsert_many` decides which are new)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from threadloom.search.model import Document
from threadloom.store import terms as term_stats
from threadloom.store.base import Writer


def text_hash(title: str, body: str) -> str:
    return hashlib.blake2b(f"{title}\0{body}".encode(), digest_size=16).hexdigest()


@dataclass(frozen=True, slots=True)
class Ahead:
    """What a new document's write needs that its text alone decides, worked out before the transaction
    (transcript ingest: on the thread that reads the next batch, so the write holds the lock for less)."""

    digest: str
    terms: frozenset[str]

    @staticmethod
    def of(title: str, body: str) -> Ahead:
        return Ahead(text_hash(title, body), term_stats.distinct(f"{title}\n{body}"))


def insert_new(w: Writer, docs: Sequence[Document], now: int, ahead: Sequence[Ahead] | None) -> list[int]:
    """Insert documents none of which is held (callers check); their ids, in order. Term counts go through
    `terms.count`, so inside `terms.batched` they are counted once per distinct stem."""
    first = int(w.scalar("SELECT COALESCE(MAX(id), 0) + 1 FROM documents"))
    rows, entries = [], []
    for offset, doc in enumerate(docs):
        doc_id = first + offset
        known = ahead[offset] if ahead is not None else Ahead.of(doc.title, doc.body)
        term_stats.count(w, known.terms, 1)
        rows.append(
            (
                doc_id,
                doc.kind,
                doc.ref,
                doc.project,
                doc.thread,
                doc.source,
                doc.status,
                doc.title,
                doc.body,
                known.digest,
                doc.occurred_at,
                now,
                now,
            )
        )
        entries.append((doc_id, doc.title, doc.body))
    w.execute_many(
        "INSERT INTO documents (id, kind, ref, project, thread, source, status, title, body, content_hash, "
        "occurred_at, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    # Not a trigger (m026): FTS5 writes its pending terms out at every statement savepoint.
    w.execute_many("INSERT INTO documents_fts (rowid, title, body) VALUES (?, ?, ?)", entries)
    return [first + offset for offset in range(len(docs))]
