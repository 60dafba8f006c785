"""The document index in SQLite: rows, their FTS5 full-text index and their vectors.

Everything dialect-specific about search lives here (FTS5 match syntax, bm25(),
upserts); the engine in `threadloom.search` sees only plain rows and scores. A new row's
full-text entry is written here beside it (see `_write`); changes and deletions reach the
index through triggers. Vectors are deleted with their rows
(ON DELETE CASCADE) and carry the content hash they were computed from, so a vector
can never outlive or silently mismatch its row.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from threadloom.search.model import Document, Filters
from threadloom.store import postgres_search
from threadloom.store import terms as term_stats
from threadloom.store.base import Reader, Row, Writer
from threadloom.store.document_batch import Ahead, insert_new, text_hash
from threadloom.store.sql import placeholders
from threadloom.store.visibility import memory_scope_sql, shared_documents_sql

# Postings one full-text query may score: ~15 ms of BM25 at the ~1.5 µs each measured in bench/memory.py.
POSTINGS_BUDGET = 10_000
# How much of the item before a threaded document goes into its embedding (see `unembedded`).
CONTEXT_CHARS = 600
_COLUMNS = "d.id, d.kind, d.ref, d.project, d.thread, d.source, d.status, d.body, d.occurred_at, d.created_at"


def content_hash(doc: Document) -> str:
    return text_hash(doc.title, doc.body)


def filter_sql(filters: Filters) -> tuple[str, dict[str, Any]]:
    """SQL conditions on alias `d` and their parameters; always a valid expression."""
    clauses = ["1 = 1"]
    params: dict[str, Any] = {}
    if filters.project is not None:
        clauses.append("d.project = :f_project")
        params["f_project"] = filters.project
    if filters.thread is not None:
        clauses.append("d.thread = :f_thread")
        params["f_thread"] = filters.thread
    for name, column, values in (
        ("kind", "d.kind", filters.kinds),
        ("source", "d.source", filters.sources),
        ("status", "d.status", filters.statuses),
    ):
        if values:
            keys, named = placeholders(f"f_{name}", values)
            clauses.append(f"{column} IN ({keys})")
            params.update(named)
    if filters.since is not None:
        clauses.append("COALESCE(d.occurred_at, d.created_at) >= :f_since")
        params["f_since"] = filters.since
    if filters.until is not None:
        clauses.append("COALESCE(d.occurred_at, d.created_at) < :f_until")
        params["f_until"] = filters.until
    if filters.vendors:
        keys, named = placeholders("f_vendor", filters.vendors)
        clauses.append(
            "d.kind = 'transcript' AND EXISTS (SELECT 1 FROM transcript_messages tv "
            f"WHERE tv.id = CAST(d.ref AS INTEGER) AND tv.source IN ({keys}))"
        )
        params.update(named)
    if filters.memory is not None:
        memory_where, memory_params = memory_scope_sql(filters.memory)
        scoped = f"d.kind = 'memory' AND EXISTS (SELECT 1 FROM memories m WHERE m.id = d.ref AND {memory_where})"
        params.update(memory_params)
        others = [kind for kind in filters.kinds if kind != "memory"]
        if others:  # the scope's viewer decides who sees them too (store/visibility.py)
            shared_where, shared_params = shared_documents_sql(filters.memory, others)
            scoped = f"(({scoped}) OR ({shared_where}))"
            params.update(shared_params)
        clauses.append(scoped)
    return " AND ".join(clauses), params


def upsert(w: Writer, doc: Document, now: int) -> int:
    """Insert or update the document of (kind, ref); return its id. A changed body makes its vectors stale."""
    return upsert_many(w, [doc], now)[0]


def upsert_many(w: Writer, docs: Sequence[Document], now: int, ahead: Sequence[Ahead] | None = None) -> list[int]:
    """`upsert` for a batch: held rows looked up in one statement per kind, new rows inserted together, term
    frequencies counted once (a key given twice is upserted again after the rest). `ahead`, when given, is
    each document's `Ahead.of` its title and body, worked out before the transaction."""
    sql = "SELECT id, ref, content_hash, title, body FROM documents WHERE kind = :k AND ref "
    # PostgreSQL: an array, looked up by the (kind, ref) index; its planner guessed a function's row count and
    # hashed every document of the kind instead (a scan per batch that grew with the store).
    sql += "= ANY(:r)" if w.dialect == "postgresql" else "IN (SELECT value FROM json_each(:r))"
    held: dict[tuple[str, str], Row] = {}
    for kind in {d.kind for d in docs}:
        refs = [d.ref for d in docs if d.kind == kind]
        given = refs if w.dialect == "postgresql" else json.dumps(refs)
        held.update(((kind, r["ref"]), r) for r in w.rows(sql, {"k": kind, "r": given}))
    ids: list[int] = [0] * len(docs)
    fresh: list[tuple[int, dict[str, Any]]] = []
    again: list[int] = []
    seen: set[tuple[str, str]] = set()
    with term_stats.batched(w):
        for n, doc in enumerate(docs):
            key = (doc.kind, doc.ref)
            if key in seen:
                again.append(n)
            elif key in held:
                ids[n] = _update(w, doc, _values(doc, now), held[key])
            else:
                known = ahead[n] if ahead is not None else Ahead.of(doc.title, doc.body)
                fresh.append((n, _values(doc, now, known.digest)))
                term_stats.count(w, known.terms, 1)
            seen.add(key)
        for (n, _), doc_id in zip(fresh, _insert(w, [values for _, values in fresh]), strict=True):
            ids[n] = doc_id
    for n in again:
        ids[n] = upsert(w, docs[n], now)
    return ids


def _values(doc: Document, now: int, digest: str | None = None) -> dict[str, Any]:
    return {
        "kind": doc.kind,
        "ref": doc.ref,
        "project": doc.project,
        "thread": doc.thread,
        "source": doc.source,
        "status": doc.status,
        "title": doc.title,
        "body": doc.body,
        "hash": digest or content_hash(doc),
        "occurred_at": doc.occurred_at,
        "now": now,
    }


def _insert(w: Writer, rows: Sequence[dict[str, Any]]) -> list[int]:
    if w.dialect == "postgresql":  # their terms in each row as it is inserted: no second version of it
        return postgres_search.insert_documents(w, rows)
    return insert_new(w, rows)


def _update(w: Writer, doc: Document, values: dict[str, Any], found: Row) -> int:
    w.execute(
        "UPDATE documents SET project = :project, thread = :thread, source = :source, status = :status, "
        "title = :title, body = :body, content_hash = :hash, occurred_at = :occurred_at, updated_at = :now "
        "WHERE id = :id",
        values | {"id": found["id"]},
    )
    if found["content_hash"] != values["hash"]:
        w.execute("DELETE FROM document_vectors WHERE doc_id = :id", {"id": found["id"]})
        term_stats.count(w, f"{found['title']}\n{found['body']}", -1)
        term_stats.count(w, f"{doc.title}\n{doc.body}", 1)
    if w.dialect == "postgresql" and (found["title"], found["body"]) != (doc.title, doc.body):
        postgres_search.index_text(w, int(found["id"]), doc.title, doc.body)  # SQLite's follows by trigger
    return int(found["id"])


def set_status(w: Writer, kind: str, ref: str, status: str) -> bool:
    """Whether the status changed; an unchanged row is not rewritten (recall sets it on every hit)."""
    params = {"s": status, "k": kind, "r": ref}
    return w.execute("UPDATE documents SET status = :s WHERE kind = :k AND ref = :r AND status <> :s", params) > 0


def remove(w: Writer, kind: str, ref: str) -> bool:
    found = w.one("SELECT title, body FROM documents WHERE kind = :k AND ref = :r", {"k": kind, "r": ref})
    if found is None:
        return False
    term_stats.count(w, f"{found['title']}\n{found['body']}", -1)
    return w.execute("DELETE FROM documents WHERE kind = :k AND ref = :r", {"k": kind, "r": ref}) > 0


def fts_expression(terms: Sequence[str]) -> str:
    """An FTS5 OR-query of quoted terms: no user text is ever parsed as FTS syntax."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


def lexical(
    r: Reader,
    terms: Sequence[str],
    filters: Filters,
    limit: int,
    max_terms: int | None = None,
    chosen: Sequence[str] | None = None,
) -> list[tuple[int, float]]:
    """Ids and BM25 scores (higher is better) of the best documents that pass `filters`. Only
    informative terms are scored (see `terms`); `max_terms` keeps just the rarest few.

    The index ranks alone first (no join per match); when enough of its best pass the filters, or
    it had no more to give, that is exactly the filtered ranking. Otherwise the filters go into the
    ranking query itself, so a selective filter never comes back short. `chosen`: the terms
    `terms.choose` kept, when the caller has them already.
    """
    if chosen is None:
        chosen = term_stats.informative(r, terms, POSTINGS_BUDGET, max_terms) if terms else []
    if not chosen:
        return []
    if r.dialect == "postgresql":  # one statement: the documents' own columns select, visibility in rank order
        where, params = filter_sql(replace(filters, memory=None))
        visible = filter_sql(filters) if filters.memory is not None else ("1 = 1", {})
        return postgres_search.lexical(r, chosen, where, params, limit, visible)
    match = fts_expression(chosen)
    pool = limit * 2
    ranked = r.tuples(
        "SELECT rowid, -bm25(documents_fts) FROM documents_fts WHERE documents_fts MATCH :match "
        "ORDER BY bm25(documents_fts) LIMIT :pool",
        {"match": match, "pool": pool},
    )
    ids = [int(i) for i, _ in ranked]
    passed = passing(r, ids[:limit], filters)  # usually all of the best pass: the rest need no look
    if len(passed) < limit:
        passed |= passing(r, ids[limit:], filters)
    if len(passed) >= limit or len(ranked) < pool:
        return [(int(i), float(score)) for i, score in ranked if i in passed][:limit]
    where, params = filter_sql(filters)
    rows = r.tuples(
        "SELECT d.id, -bm25(documents_fts) FROM documents_fts "
        "JOIN documents d ON d.id = documents_fts.rowid "
        f"WHERE documents_fts MATCH :match AND {where} ORDER BY bm25(documents_fts) LIMIT :limit",
        params | {"match": match, "limit": limit},
    )
    return [(int(i), float(score)) for i, score in rows]


def passing(r: Reader, ids: Sequence[int], filters: Filters) -> set[int]:
    if not ids or filters == Filters():
        return set(ids)
    where, params = filter_sql(filters)
    # From the id list into the table by primary key: given `d.id IN (...)` beside `d.kind = ...`,
    # SQLite preferred scanning the kind index, 20x slower at 25k documents.
    rows = r.tuples(
        f"SELECT d.id FROM json_each(:ids) j CROSS JOIN documents d ON d.id = CAST(j.value AS INTEGER) WHERE {where}",
        params | {"ids": json.dumps(list(ids))},
    )
    return {int(i) for (i,) in rows}


def lexical_within(r: Reader, terms: Sequence[str], ids: Sequence[int], limit: int) -> list[tuple[int, float]]:
    """BM25 over a few given documents only (FTS5 looks each rowid up rather than scanning the terms)."""
    if not terms or not ids:
        return []
    if r.dialect == "postgresql":
        return postgres_search.lexical_within(r, terms, ids, limit)
    keys = {f"i{n}": i for n, i in enumerate(ids)}
    rows = r.tuples(
        "SELECT rowid, -bm25(documents_fts) FROM documents_fts WHERE documents_fts MATCH :match "
        f"AND rowid IN ({', '.join(':' + k for k in keys)}) ORDER BY bm25(documents_fts) LIMIT :limit",
        keys | {"match": fts_expression(terms), "limit": limit},
    )
    return [(int(i), float(score)) for i, score in rows]


def recent(r: Reader, filters: Filters, limit: int) -> list[int]:
    where, params = filter_sql(filters)
    rows = r.rows(
        f"SELECT d.id AS id FROM documents d WHERE {where} "
        "ORDER BY COALESCE(d.occurred_at, d.created_at) DESC, d.id DESC LIMIT :limit",
        params | {"limit": limit},
    )
    return [int(row["id"]) for row in rows]


def fetch(r: Reader, ids: Sequence[int]) -> dict[int, Row]:
    if not ids:
        return {}
    keys = {f"i{n}": i for n, i in enumerate(ids)}
    rows = r.rows(f"SELECT {_COLUMNS} FROM documents d WHERE d.id IN ({', '.join(':' + k for k in keys)})", keys)
    return {int(row["id"]): row for row in rows}


def facts(r: Reader, ids: Sequence[int]) -> dict[int, tuple[int, str | None, str | None]]:
    """When each document's content happened (else when it was stored), its source and its thread."""
    if not ids:
        return {}
    rows = r.tuples(  # an id list as JSON: one statement for any number, 40% less time than IN chunks
        "SELECT d.id, COALESCE(d.occurred_at, d.created_at), d.source, d.thread "
        "FROM json_each(:ids) j CROSS JOIN documents d ON d.id = CAST(j.value AS INTEGER)",
        {"ids": json.dumps(list(ids))},
    )
    return {int(i): (int(at), source, thread) for i, at, source, thread in rows}


def neighbours(r: Reader, ids: Sequence[int], filters: Filters) -> dict[int, list[int]]:
    """For each document, the ones that pass `filters` written just before and after it in its thread and kind."""
    where, params = filter_sql(filters)
    found: dict[int, list[int]] = {}
    for start in range(0, len(ids), 300):
        chunk = {f"i{n}": i for n, i in enumerate(ids[start : start + 300])}
        keys = ", ".join(":" + k for k in chunk)
        rows = r.tuples(_neighbours_sql(r.dialect, where, keys), params | chunk)
        for i, before, after in rows:
            found[int(i)] = [int(x) for x in (before, after) if x is not None]
    return found


def _neighbours_sql(dialect: str, where: str, keys: str) -> str:
    same = "d.thread = o.thread AND d.kind = o.kind"
    if dialect == "postgresql":  # its max() over a join aggregates the whole thread; LIMIT 1 walks the index
        before = f"SELECT d.id FROM documents d WHERE {same} AND d.id < o.id AND {where} ORDER BY d.id DESC LIMIT 1"
        after = f"SELECT d.id FROM documents d WHERE {same} AND d.id > o.id AND {where} ORDER BY d.id LIMIT 1"
    else:
        before = f"SELECT max(d.id) FROM documents d WHERE {same} AND d.id < o.id AND {where}"
        after = f"SELECT min(d.id) FROM documents d WHERE {same} AND d.id > o.id AND {where}"
    return f"SELECT o.id, ({before}), ({after}) FROM documents o WHERE o.id IN ({keys}) AND o.thread IS NOT NULL"


def graph_neighbours(r: Reader, ids: Sequence[int], filters: Filters) -> list[tuple[int, int, float]]:
    """(from, to, edge weight) for memory documents linked by a memory-graph edge, either direction;
    `to` passes `filters`."""
    where, params = filter_sql(filters)
    if r.dialect == "postgresql":
        return postgres_search.graph_neighbours(r, ids, where, params)
    found: list[tuple[int, int, float]] = []
    for start in range(0, len(ids), 300):
        chunk = {f"i{n}": i for n, i in enumerate(ids[start : start + 300])}
        keys = ", ".join(":" + k for k in chunk)
        for near, far in (("source", "target"), ("target", "source")):
            rows = r.tuples(
                # CROSS JOIN fixes the order and `+s.kind` keeps the kind index out: from the few seeds along
                # their edges, never from all memory documents.
                f"""SELECT s.id, d.id, e.weight FROM documents s
                    CROSS JOIN memory_edges e ON e.{near} = s.ref
                    CROSS JOIN documents d ON d.kind = 'memory' AND d.ref = e.{far}
                    WHERE s.id IN ({keys}) AND +s.kind = 'memory' AND {where}""",
                params | chunk,
            )
            found.extend((int(a), int(b), float(w)) for a, b, w in rows)
    return found


def sources_named(r: Reader, terms: Sequence[str]) -> set[str]:
    """Sources (speakers, authors) whose name is one of the query's terms, compared case-blind."""
    if not terms:
        return set()
    keys = {f"t{n}": t for n, t in enumerate(terms)}
    column = "source COLLATE NOCASE"
    if r.dialect == "postgresql":  # its index is on lower(source)
        column, keys = "lower(source)", {k: t.lower() for k, t in keys.items()}
    named = ", ".join(":" + k for k in keys)
    rows = r.tuples(f"SELECT DISTINCT source FROM documents WHERE {column} IN ({named})", keys)
    return {str(source).lower() for (source,) in rows}


def count(r: Reader, filters: Filters) -> int:
    where, params = filter_sql(filters)
    return int(r.scalar(f"SELECT COUNT(*) FROM documents d WHERE {where}", params))


def generation(r: Reader) -> int:
    """A number that changes with every write to what a search's candidates depend on (migration m013)."""
    return int(r.scalar("SELECT value FROM search_generation"))


def filtered_ids(r: Reader, filters: Filters, cap: int) -> list[int]:
    """Ids of the documents that pass the filters, at most `cap` of them."""
    where, params = filter_sql(filters)
    rows = r.tuples(f"SELECT d.id FROM documents d WHERE {where} LIMIT :cap", params | {"cap": cap})
    return [int(i) for (i,) in rows]
