"""Document vectors: one per document and embedder fingerprint, carrying the content hash it was
computed from, so a changed document's vector is never read as current (see `documents`)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from threadloom.search.model import Filters
from threadloom.store import postgres_search
from threadloom.store.base import Reader, Row, Writer
from threadloom.store.documents import CONTEXT_CHARS, filter_sql
from threadloom.store.sql import placeholders

_PUT = (
    "INSERT INTO document_vectors (doc_id, fingerprint, content_hash, vector) VALUES (:id, :fp, :h, :v) "
    "ON CONFLICT (doc_id, fingerprint) DO UPDATE SET content_hash = excluded.content_hash, vector = excluded.vector"
)


def put_vector(w: Writer, doc_id: int, fingerprint: str, digest: str, vector: bytes) -> None:
    put_vectors(w, fingerprint, [(doc_id, digest, vector)])


def put_vectors(w: Writer, fingerprint: str, items: Sequence[tuple[int, str, bytes]]) -> None:
    """Vectors of this fingerprint: (document id, the content hash it was computed from, float32 bytes)."""
    if w.dialect == "postgresql":
        postgres_search.put_vectors(w, fingerprint, items)
        return
    w.execute_many(_PUT, [{"id": i, "fp": fingerprint, "h": digest, "v": vector} for i, digest, vector in items])


def content_hashes(r: Reader, ids: Sequence[int]) -> dict[int, str]:
    """The current content hash of each of these documents that exists."""
    found: dict[int, str] = {}
    for start in range(0, len(ids), 400):
        keys, params = placeholders("i", ids[start : start + 400])
        found.update(r.tuples(f"SELECT id, content_hash FROM documents WHERE id IN ({keys})", params))
    return found


def unembedded(r: Reader, fingerprint: str, limit: int, after_id: int = 0, changed_since: int = 0) -> list[Row]:
    """Documents without a current vector of this fingerprint, in id order (resumable), each with the
    end of the one before it in its thread and kind as `context` (None when it has none).

    `changed_since` (epoch ms) limits the look to documents written since then, so that a
    periodic pass over a large store reads an index range instead of every row.
    """
    recent = "d.updated_at >= :since AND " if changed_since else ""
    return r.rows(
        "SELECT d.id AS id, d.title AS title, d.body AS body, d.content_hash AS content_hash, "
        f"(SELECT substr(p.body, -{CONTEXT_CHARS}) FROM documents p WHERE d.thread IS NOT NULL AND p.thread = d.thread "
        "AND p.kind = d.kind AND p.id < d.id ORDER BY p.id DESC LIMIT 1) AS context FROM documents d "
        "LEFT JOIN document_vectors v ON v.doc_id = d.id AND v.fingerprint = :fp "
        f"WHERE {recent}d.id > :after AND (v.doc_id IS NULL OR v.content_hash != d.content_hash) "
        "ORDER BY d.id LIMIT :limit",
        {"fp": fingerprint, "after": after_id, "limit": limit, "since": changed_since},
    )


def follows(r: Reader, doc_id: int) -> bool:
    """Whether a document has one before it in its thread and kind (then it is embedded after that one)."""
    return (
        r.one(
            "SELECT 1 AS x FROM documents d CROSS JOIN documents p ON p.thread = d.thread AND p.kind = d.kind "
            "AND p.id < d.id WHERE d.id = :id LIMIT 1",
            {"id": doc_id},
        )
        is not None
    )


def vector_coverage(r: Reader, fingerprint: str) -> tuple[int, int]:
    """(documents with a current vector of this fingerprint, all documents)."""
    total = int(r.scalar("SELECT COUNT(*) FROM documents"))
    done = int(
        r.scalar(
            "SELECT COUNT(*) FROM document_vectors v JOIN documents d ON d.id = v.doc_id "
            "WHERE v.fingerprint = :fp AND v.content_hash = d.content_hash",
            {"fp": fingerprint},
        )
    )
    return done, total


def vectors_of(
    r: Reader, fingerprint: str, ids: Sequence[int], filters: Filters
) -> list[tuple[int, bytes, int, str | None, str | None]]:
    """Current vectors of the given documents that pass the filters (deleted or changed ones drop out),
    each with its document's facts (see `facts`)."""
    where, params = filter_sql(filters)
    # From the id list by primary key, as in `passing`: with `d.id IN (...)` beside a kind filter, SQLite
    # scanned every document of the kind instead (3x slower for 600 ids among 10k memories).
    rows = r.tuples(
        "SELECT d.id, v.vector, COALESCE(d.occurred_at, d.created_at), d.source, d.thread "
        "FROM json_each(:ids) j CROSS JOIN documents d ON d.id = CAST(j.value AS INTEGER) "
        "CROSS JOIN document_vectors v ON v.doc_id = d.id AND v.fingerprint = :fp AND v.content_hash = d.content_hash "
        f"WHERE {where}",
        params | {"ids": json.dumps(list(ids)), "fp": fingerprint},
    )
    return [(int(i), bytes(v), int(at), source, thread) for i, v, at, source, thread in rows]
