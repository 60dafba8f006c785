"""SQL of the migrations of the search generation: m013 makes it, m018 narrows what moves it.

Kept beside `migrations.py` (which names and orders them) so neither file outgrows the module cap.
"""

from __future__ import annotations

_BUMP = "BEGIN UPDATE search_generation SET value = value + 1; END;"

# Everything a search's candidates depend on: a document's columns (not its insert: it has no vector
# yet), its vectors, and the memory columns and entities that memory filters read.
_GENERATION_TRIGGERS = "\n".join(
    f"CREATE TRIGGER {table}_{event.lower()}_generation AFTER {event} ON {table} "
    "BEGIN UPDATE search_generation SET value = value + 1; END;"
    for table, events in (
        ("documents", ("UPDATE", "DELETE")),
        ("document_vectors", ("INSERT", "UPDATE", "DELETE")),
        ("memories", ("INSERT", "UPDATE", "DELETE")),
        ("memory_entities", ("INSERT", "UPDATE", "DELETE")),
    )
    for event in events
)

M013_SEARCH_GENERATION_SQL = (
    """
    -- Changes with every write a search's candidates depend on, in any process: a small store's
    -- candidates are kept in memory for as long as it stays the same (search/vector_index.py).
    CREATE TABLE search_generation (id INTEGER PRIMARY KEY CHECK (id = 1), value INTEGER NOT NULL);
    INSERT INTO search_generation (id, value) VALUES (1, 0);
    """
    + _GENERATION_TRIGGERS
)

M018_REACTIVATION_GENERATION_SQL = f"""
    -- A recall's reactivation (count, last time, decay score, lifecycle status) and a maintenance pass's
    -- rescoring change columns no search filter reads: only the columns memory filters read move the
    -- generation, so a default recall no longer empties every process's kept candidates. Filters on
    -- recent activity (last_reactivated_at) are never kept (search/engine.py).
    DROP TRIGGER memories_update_generation;
    CREATE TRIGGER memories_update_generation AFTER UPDATE OF
        id, owner, org, visibility, project, category, created_at, valid_from, valid_to, superseded_by, pinned,
        core_key
        ON memories {_BUMP}

    -- A recall as of a time reads when a memory was corrected (its supersedes edge).
    CREATE TRIGGER memory_edges_insert_generation AFTER INSERT ON memory_edges WHEN new.type = 'supersedes'
        {_BUMP}
    CREATE TRIGGER memory_edges_delete_generation AFTER DELETE ON memory_edges WHEN old.type = 'supersedes'
        {_BUMP}
"""

# A new document's full-text entry is written by `documents._write` itself, right after its row: FTS5 flushes
# its pending terms to a new segment at every statement savepoint, and the trigger opened one per row.
M026_FTS_EXPLICIT_INSERT_SQL = "DROP TRIGGER documents_fts_insert;"
