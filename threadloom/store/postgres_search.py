"""Search on PostgreSQL: full-text by BM25 over `tsvector` terms, dense by pgvector's HNSW index.

Full-text: a document's `fts` holds the SQLite index's own porter stems (store/terms.py) at their positions,
written as a `tsvector` literal, so nothing is parsed by a text-search configuration and both backends see
the same terms; `@@` with a `tsquery` of quoted stems finds candidates through the GIN index. BM25 is then
FTS5's formula (k1 1.2, b 0.75, one field over title and body, IDF from `document_terms`, the average
length from `document_lengths`), so a score means what it means on SQLite (search/fusion.py).

Dense: the float32 bytes stay in `vector` (as on SQLite, for export and moving stores) and pgvector's copy in
`embedding`, with one HNSW index (cosine) per dimension, made on the first vector of that dimension. A search
walks the index with `hnsw.ef_search` at the depth asked; the index filters after it walks, so a selective
filter can leave fewer than asked, and then the same query runs as an exact scan over what passes.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import Any

from threadloom.store import terms as term_stats
from threadloom.store.base import Reader, Writer

K1 = 1.2
B = 0.75
MAX_POSITIONS = 256  # PostgreSQL keeps at most this many positions of one lexeme
MAX_POSITION = 16383
MAX_LEXEME_BYTES = 2000  # PostgreSQL refuses a lexeme of 2 KB or more


def _quote(term: str) -> str:
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


def tsvector_of(title: str, body: str) -> tuple[str, int]:
    """The `tsvector` literal of a document's stems at their positions, and its length in terms."""
    stems = term_stats.stems(f"{title}\n{body}")
    positions: dict[str, list[int]] = {}
    for n, stem in enumerate(stems, start=1):
        if len(stem.encode()) < MAX_LEXEME_BYTES:
            kept = positions.setdefault(stem, [])
            if len(kept) < MAX_POSITIONS:
                kept.append(min(n, MAX_POSITION))
    literal = " ".join(f"{_quote(s)}:{','.join(map(str, p))}" for s, p in positions.items())
    return literal, len(stems)


def index_text(w: Writer, doc_id: int, title: str, body: str) -> None:
    """Write a document's terms (beside its row, in the same transaction; the length total follows by trigger)."""
    index_texts(w, [(doc_id, title, body)])


def index_texts(w: Writer, docs: Sequence[tuple[int, str, str]]) -> None:
    """`index_text` for (id, title, body) of each document, in one pipeline."""
    rows = []
    for doc_id, title, body in docs:
        literal, length = tsvector_of(title, body)
        rows.append({"fts": literal, "n": length, "id": doc_id})
    w.execute_many("UPDATE documents SET fts = CAST(:fts AS tsvector), fts_len = :n WHERE id = :id", rows)


def insert_documents(w: Writer, rows: Sequence[dict[str, Any]]) -> list[int]:
    """New documents' rows with their terms and lengths in them (`rows` as documents.py names the columns),
    in one pipeline; their ids in order."""
    terms = [tsvector_of(values["title"], values["body"]) for values in rows]
    return w.insert_many(
        "INSERT INTO documents (kind, ref, project, thread, source, status, title, body, content_hash, "
        "occurred_at, created_at, updated_at, fts, fts_len) VALUES (:kind, :ref, :project, :thread, :source, "
        ":status, :title, :body, :hash, :occurred_at, :now, :now, CAST(:fts AS tsvector), :fts_len)",
        [values | {"fts": literal, "fts_len": length} for values, (literal, length) in zip(rows, terms, strict=True)],
    )


def _tsquery(terms: Sequence[str]) -> tuple[str, dict[str, str]]:
    """An OR-query of the terms' stems (a term of several stems is a phrase, as FTS5 reads a quoted term),
    and each term's first stem."""
    parts, first = [], {}
    for term in terms:
        stems = [s for s in term_stats.stems(term) if len(s.encode()) < MAX_LEXEME_BYTES]
        if stems:
            parts.append("(" + " <-> ".join(_quote(s) for s in stems) + ")")
            first[term] = stems[0]
    return " | ".join(parts), first


def _weights(r: Reader, terms: Sequence[str]) -> tuple[str, list[str], list[float], float]:
    """The query, its stems and their IDF (FTS5's, floored at 1e-6), and the average document length: one
    statement for the frequencies and the length total."""
    query, first = _tsquery(terms)
    wanted = sorted({*first.values(), term_stats.TOTAL})
    found = dict(
        r.tuples(
            "SELECT term, df FROM document_terms WHERE term = ANY(:terms) "
            "UNION ALL SELECT NULL, total FROM document_lengths",
            {"terms": wanted},
        )
    )
    total, length_total = int(found.get(term_stats.TOTAL) or 0), int(found.get(None) or 0)
    idf: dict[str, float] = {}
    for stem in first.values():
        n = int(found.get(stem) or 0)
        idf[stem] = max(1e-6, math.log((total - n + 0.5) / (n + 0.5)))
    average = length_total / total if total else 1.0
    return query, list(idf), list(idf.values()), max(average, 1e-9)


# A candidate's BM25: only the query's stems are unnested (weight A marks them, ts_filter keeps them, in C),
# each weighted by its IDF looked up by position in the stems' array.
_SCORE = (
    "(SELECT SUM((CAST(:idf AS DOUBLE PRECISION[]))[array_position(CAST(:stems AS TEXT[]), u.lexeme)] "
    "* cardinality(u.positions) * (:k1 + 1) / (cardinality(u.positions) + :k1 * (1 - :b + :b * c.fts_len / :avg))) "
    "FROM unnest(ts_filter(setweight(c.fts, 'A', CAST(:stems AS TEXT[])), '{a}')) u)"
)
_COLUMNS = "d.id, d.kind, d.ref, d.project, d.thread, d.source, d.status, d.occurred_at, d.created_at, d.fts, d.fts_len"


def lexical(
    r: Reader,
    terms: Sequence[str],
    where: str,
    params: dict[str, Any],
    limit: int,
    visible: tuple[str, dict[str, Any]] = ("1 = 1", {}),
) -> list[tuple[int, float]]:
    """Ids and BM25 scores of the best `limit` documents matching any term that pass `where` and `visible`
    (both on alias `d`), in one statement. `where` (the documents' own columns) selects the candidates;
    `visible` (who may see them: a lookup of each candidate's memory, note or message) is checked in the
    ranking order, best first, until `limit` have passed: the same documents as checking every candidate
    before ranking, without a lookup per candidate (at 100k memories those lookups were most of a recall)."""
    query, stems, idf, average = _weights(r, terms)
    if not query:
        return []
    visible_sql, visible_params = visible
    rows = r.tuples(
        f"SELECT d.id, d.score FROM (SELECT c.*, {_SCORE} AS score FROM (SELECT {_COLUMNS} FROM documents d "
        f"WHERE d.fts @@ CAST(:q AS tsquery) AND {where}) c "
        # OFFSET 0 keeps `visible` out of this subquery (below the sort it would run on every candidate).
        f"ORDER BY score DESC, c.id OFFSET 0) d WHERE {visible_sql} ORDER BY d.score DESC, d.id LIMIT :limit",
        params
        | visible_params
        | {"q": query, "stems": stems, "idf": idf, "k1": K1, "b": B, "avg": average, "limit": limit},
    )
    return [(int(i), float(score)) for i, score in rows]


def lexical_within(r: Reader, terms: Sequence[str], ids: Sequence[int], limit: int) -> list[tuple[int, float]]:
    keys = {f"i{n}": i for n, i in enumerate(ids)}
    return lexical(r, terms, f"d.id IN ({', '.join(':' + k for k in keys)})", keys, limit)


def graph_neighbours(r: Reader, ids: Sequence[int], where: str, params: dict[str, Any]) -> list[tuple[int, int, float]]:
    """documents.py's `graph_neighbours` in one statement: the seeds' edges, both ways, are found first (a
    materialised CTE fixes that order), so `where` (visibility included) is checked on the few documents
    they reach. Left to itself the planner started from every memory document and checked each."""
    if not ids:
        return []
    rows = r.tuples(
        # `|| ''` keeps the kind index out (all memory documents, ANDed with ten ids); LATERAL keeps the reached
        # documents inner, looked up by (kind, ref) one by one.
        "WITH seeds AS MATERIALIZED (SELECT s.id, s.ref FROM documents s WHERE s.id = ANY(:ids) "
        "AND s.kind || '' = 'memory'), reached AS MATERIALIZED (SELECT s.id, e.target AS far, e.weight "
        "FROM seeds s JOIN memory_edges e ON e.source = s.ref "
        "UNION ALL SELECT s.id, e.source, e.weight FROM seeds s JOIN memory_edges e ON e.target = s.ref) "
        "SELECT x.id, y.id, x.weight FROM reached x CROSS JOIN LATERAL (SELECT d.id FROM documents d "
        f"WHERE d.kind = 'memory' AND d.ref = x.far AND {where}) y",
        params | {"ids": list(ids)},
    )
    return [(int(a), int(b), float(w)) for a, b, w in rows]


# vectors

_indexed: set[tuple[str, int]] = set()
_indexed_lock = threading.Lock()


def _vector_text(vector: bytes) -> str:
    import numpy as np

    return "[" + ",".join(repr(float(x)) for x in np.frombuffer(vector, dtype=np.float32)) + "]"


def _ensure_index(w: Writer, dimension: int) -> None:
    """The HNSW index of vectors of this dimension, made the first time one is written."""
    database = str(w.scalar("SELECT current_database()"))
    with _indexed_lock:
        fresh = (database, dimension) not in _indexed
    if fresh:
        # One index per dimension: HNSW needs a typed column, and an embedder's dimension is known only here.
        w.execute(
            f"CREATE INDEX IF NOT EXISTS document_vectors_hnsw_{dimension} ON document_vectors "
            f"USING hnsw ((CAST(embedding AS vector({dimension}))) vector_cosine_ops) "
            f"WHERE vector_dims(embedding) = {dimension}"
        )
        with _indexed_lock:
            _indexed.add((database, dimension))


def put_embeddings(w: Writer, vectors: Sequence[tuple[int, str, bytes]]) -> None:
    """pgvector's copy of vectors just written (document id, fingerprint, float32 bytes), in one pipeline, and
    the HNSW index of their dimension the first time."""
    for dimension in sorted({len(vector) // 4 for _, _, vector in vectors}):
        _ensure_index(w, dimension)
    w.execute_many(
        "UPDATE document_vectors SET embedding = CAST(:e AS vector) WHERE doc_id = :id AND fingerprint = :fp",
        [{"e": _vector_text(vector), "id": doc_id, "fp": fp} for doc_id, fp, vector in vectors],
    )


def put_vectors(w: Writer, fingerprint: str, items: Sequence[tuple[int, str, bytes]]) -> None:
    """Vectors with pgvector's copy in the same row (documents.py's `put_vectors`), in one pipeline."""
    for dimension in sorted({len(vector) // 4 for _, _, vector in items}):
        _ensure_index(w, dimension)
    w.execute_many(
        "INSERT INTO document_vectors (doc_id, fingerprint, content_hash, vector, embedding) "
        "VALUES (:id, :fp, :h, :v, CAST(:e AS vector)) ON CONFLICT (doc_id, fingerprint) DO UPDATE SET "
        "content_hash = excluded.content_hash, vector = excluded.vector, embedding = excluded.embedding",
        [
            {"id": doc_id, "fp": fingerprint, "h": digest, "v": vector, "e": _vector_text(vector)}
            for doc_id, digest, vector in items
        ],
    )


def _set(r: Reader, name: str, value: str) -> None:
    """A setting for the rest of this transaction (SET LOCAL; allowed in a read-only one)."""
    r.scalar("SELECT set_config(:name, :value, true)", {"name": name, "value": value})


def dense(
    r: Reader, fingerprint: str, query: Any, where: str, params: dict[str, Any], depth: int, floor: float
) -> list[tuple[int, float]]:
    """The `depth` nearest current vectors of this fingerprint that pass `where`, with cosine >= `floor`."""
    import numpy as np

    vector = np.asarray(query, dtype=np.float32).reshape(-1)
    dimension = int(vector.shape[0])
    typed = f"CAST(v.embedding AS vector({dimension}))"
    sql = (
        f"SELECT d.id, 1 - ({typed} <=> CAST(:q AS vector({dimension}))) AS cosine FROM document_vectors v "
        "JOIN documents d ON d.id = v.doc_id "
        f"WHERE vector_dims(v.embedding) = {dimension} AND v.fingerprint = :fp AND v.content_hash = d.content_hash "
        f"AND {where} ORDER BY {typed} <=> CAST(:q AS vector({dimension})) LIMIT :depth"
    )
    values = params | {"q": _vector_text(vector.tobytes()), "fp": fingerprint, "depth": depth}
    _set(r, "hnsw.ef_search", str(min(1000, max(40, depth))))
    rows = r.tuples(sql, values)
    if len(rows) < depth:  # the index's walk ended short of `depth` passing rows: exactly, over what passes
        _set(r, "enable_indexscan", "off")
        rows = r.tuples(sql, values)
        _set(r, "enable_indexscan", "on")
    return [(int(i), float(c)) for i, c in rows if float(c) >= floor]
