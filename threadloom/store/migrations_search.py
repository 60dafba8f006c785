"""SQL of the migrations that narrow what moves the search generation (m013).

Kept beside `migrations.py` (which names and orders them) so neither file outgrows the module cap.
"""

from __future__ import annotations

_BUMP = "BEGIN UPDATE search_generation SET value = value + 1; END;"

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
