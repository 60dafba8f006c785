"""Vectors read in batches in doc-id order, for building in-memory indexes: alone, or with what a search
filters them by (search/facets.py): each document's kind and time, and for a transcript message the
columns that never change once it is ingested (its owner, agent CLI, session, role and project)."""

from __future__ import annotations

from threadloom.store.base import Reader

FacetRow = tuple[int, bytes, str, int, str | None, str | None, str | None, str | None, str | None]


def vector_batch(r: Reader, fingerprint: str, after_id: int, limit: int) -> list[tuple[int, bytes]]:
    """Current vectors of one fingerprint in doc-id order, for building an in-memory index in batches."""
    rows = r.tuples(
        "SELECT v.doc_id, v.vector FROM document_vectors v JOIN documents d ON d.id = v.doc_id "
        "WHERE v.fingerprint = :fp AND v.doc_id > :after AND v.content_hash = d.content_hash "
        "ORDER BY v.doc_id LIMIT :limit",
        {"fp": fingerprint, "after": after_id, "limit": limit},
    )
    return [(int(i), bytes(v)) for i, v in rows]


def vector_facet_batch(r: Reader, fingerprint: str, after_id: int, limit: int) -> list[FacetRow]:
    """Current vectors of one fingerprint in doc-id order after `after_id`, each as
    (id, vector, kind, at, project, thread, source, owner, vendor); owner and vendor are None but for
    transcript messages."""
    rows = r.tuples(
        "SELECT v.doc_id, v.vector, d.kind, COALESCE(d.occurred_at, d.created_at), d.project, d.thread, d.source, "
        "t.owner, t.source FROM document_vectors v JOIN documents d ON d.id = v.doc_id "
        "LEFT JOIN transcript_messages t ON d.kind = 'transcript' AND t.id = CAST(d.ref AS INTEGER) "
        "WHERE v.fingerprint = :fp AND v.doc_id > :after AND v.content_hash = d.content_hash "
        "ORDER BY v.doc_id LIMIT :limit",
        {"fp": fingerprint, "after": after_id, "limit": limit},
    )
    return [
        (int(i), bytes(v), str(kind), int(at), project, thread, source, owner, vendor)
        for i, v, kind, at, project, thread, source, owner, vendor in rows
    ]
