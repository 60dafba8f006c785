"""The PostgreSQL schema: one migration per SQLite migration, of the same name, plus what differs.

Each SQLite migration's tables, columns and indexes are carried over by `postgres_sql.ddl` (types widened to
64 bits, FTS5 tables and triggers left out), so a new SQLite migration has its PostgreSQL twin by default;
`PG_EXTRA` adds the PostgreSQL side of what cannot be translated: full-text (a `tsvector` column with a GIN
index), vectors (pgvector, HNSW), and the search generation's triggers. `tests/test_postgres_schema.py`
compares both schemas' tables and columns after migration, so a migration cannot forget one side; a
migration whose statements do not translate gets its PostgreSQL SQL in `PG_OVERRIDES`.

Full-text: a document's terms are the SQLite index's own porter stems (store/terms.py), written as a
`tsvector` literal with one position per occurrence, and queried with a `tsquery` of stems, both under no
text-search configuration at all: PostgreSQL's stemmers and parser would find other terms than FTS5, and
BM25 (store/postgres_search.py) needs the same terms and counts as `document_terms`. ('simple' would do
for a parser; here nothing is parsed.)

Vectors: pgvector with an HNSW index rather than IVFFlat. IVFFlat's lists are fixed by the rows present when
the index is built (on an empty table, one centroid) and lose recall as the store grows from empty, which is
how every threadloom store starts; HNSW needs no training, takes inserts as they come, and answers at higher
recall for the same time, at the price of a slower build and more memory, which a memory store's size affords.
"""

from __future__ import annotations

from threadloom.store.migrations import MIGRATIONS, Migration
from threadloom.store.postgres_sql import ddl

# Made before the migrations, in the bootstrap: the extension and the JSON helpers the translator names.
BOOTSTRAP_SQL = """
CREATE EXTENSION IF NOT EXISTS vector;
CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at BIGINT NOT NULL);
CREATE OR REPLACE FUNCTION tl_json_each(doc TEXT) RETURNS TABLE (key TEXT, value TEXT)
LANGUAGE sql IMMUTABLE AS $$
    SELECT (e.n - 1)::text, e.v FROM jsonb_array_elements_text(doc::jsonb) WITH ORDINALITY AS e (v, n)
        WHERE jsonb_typeof(doc::jsonb) = 'array'
    UNION ALL
    SELECT o.k, o.v FROM jsonb_each_text(doc::jsonb) AS o (k, v) WHERE jsonb_typeof(doc::jsonb) = 'object'
$$;
CREATE OR REPLACE FUNCTION tl_json_extract(doc TEXT, path TEXT) RETURNS TEXT
LANGUAGE sql IMMUTABLE AS $$ SELECT jsonb_path_query_first(doc::jsonb, path::jsonpath) #>> '{}' $$;
-- Once a transaction: what readers compare is whether the committed value moved, and one row updated per
-- changed row made a batch of 5,000 memories rewrite it 15,000 times, each update reading every dead version.
CREATE OR REPLACE FUNCTION tl_bump_search_generation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('threadloom.generation_moved', true) IS DISTINCT FROM 'yes' THEN
        UPDATE search_generation SET value = value + 1;
        PERFORM set_config('threadloom.generation_moved', 'yes', true);
    END IF;
    RETURN NULL;
END $$;
CREATE OR REPLACE FUNCTION tl_document_length() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE document_lengths SET total = total
        + CASE WHEN TG_OP = 'DELETE' THEN 0 ELSE NEW.fts_len END
        - CASE WHEN TG_OP = 'INSERT' THEN 0 ELSE OLD.fts_len END;
    RETURN NULL;
END $$;
"""


def _bump(table: str, event: str, when: str = "") -> str:
    name = f"{table}_{event.split()[0].lower()}_generation"
    timing = f"FOR EACH ROW WHEN ({when})" if when else "FOR EACH ROW"
    return f"CREATE TRIGGER {name} AFTER {event} ON {table} {timing} EXECUTE FUNCTION tl_bump_search_generation();"


_MEMORY_FILTER_COLUMNS = (
    "id, owner, org, visibility, project, category, created_at, valid_from, valid_to, superseded_by, pinned, core_key"
)

PG_EXTRA: dict[str, str] = {
    # SQLite's entity is COLLATE NOCASE: one entity per memory whatever its case, looked up case-blind.
    "m004_memories": "CREATE UNIQUE INDEX memory_entities_nocase ON memory_entities (lower(entity), memory_id);",
    "m002_documents": """
        ALTER TABLE documents ADD COLUMN fts TSVECTOR NOT NULL DEFAULT ''::tsvector;
        ALTER TABLE documents ADD COLUMN fts_len INTEGER NOT NULL DEFAULT 0;
        CREATE INDEX documents_fts ON documents USING gin (fts);
        -- The sum of every document's length in terms: BM25's average, read in one row.
        CREATE TABLE document_lengths (id INTEGER PRIMARY KEY CHECK (id = 1), total BIGINT NOT NULL);
        INSERT INTO document_lengths (id, total) VALUES (1, 0);
        CREATE TRIGGER documents_length AFTER INSERT OR DELETE OR UPDATE OF fts_len ON documents
            FOR EACH ROW EXECUTE FUNCTION tl_document_length();
        -- The same float32 bytes as SQLite's `vector` (read by the in-process index), and pgvector's copy.
        ALTER TABLE document_vectors ADD COLUMN embedding vector;
    """,
    "m013_search_generation": "\n".join(
        [
            _bump("documents", "UPDATE"),
            _bump("documents", "DELETE"),
            _bump("document_vectors", "INSERT"),
            _bump("document_vectors", "UPDATE"),
            _bump("document_vectors", "DELETE"),
            _bump("memories", "INSERT"),
            _bump("memories", "UPDATE"),
            _bump("memories", "DELETE"),
            _bump("memory_entities", "INSERT"),
            _bump("memory_entities", "UPDATE"),
            _bump("memory_entities", "DELETE"),
        ]
    ),
    "m018_reactivation_generation": "\n".join(
        [
            "DROP TRIGGER memories_update_generation ON memories;",
            _bump("memories", f"UPDATE OF {_MEMORY_FILTER_COLUMNS}"),
            _bump("memory_edges", "INSERT", "NEW.type = 'supersedes'"),
            _bump("memory_edges", "DELETE", "OLD.type = 'supersedes'"),
        ]
    ),
}

# A migration whose SQLite statements do not translate: its PostgreSQL SQL whole.
PG_OVERRIDES: dict[str, str] = {}

# Migrations PostgreSQL databases have only ever been made with from empty (this backend arrived after
# them): their statements that rewrite existing rows have no rows to rewrite, and are left out.
BASELINE = frozenset(m.name for m in MIGRATIONS[: [m.name for m in MIGRATIONS].index("m027_concepts") + 1])


def pg_migration(m: Migration) -> Migration:
    sql = PG_OVERRIDES.get(m.name)
    if sql is None:
        sql = ddl(m.sql, baseline=m.name in BASELINE) + "\n" + PG_EXTRA.get(m.name, "")
    return Migration(m.name, sql)


PG_MIGRATIONS: tuple[Migration, ...] = tuple(pg_migration(m) for m in MIGRATIONS)

# Columns and tables only one side has, by design; the schema-parity test allows exactly these.
PG_ONLY_COLUMNS = frozenset({("documents", "fts"), ("documents", "fts_len"), ("document_vectors", "embedding")})
PG_ONLY_TABLES = frozenset({"document_lengths"})
SQLITE_ONLY_TABLE_PREFIXES = ("documents_fts",)
