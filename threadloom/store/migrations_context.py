"""SQL of the migration that gives memories written before it their context in the search index.

Kept beside `migrations.py` (which names and orders them) so neither file outgrows the module cap.
"""

from __future__ import annotations

# memory/model.py `speaker`: a name of 2-40 ASCII letters, spaces and . ' - starting with a capital and
# not all capitals, then ": ". Its first ": " is where the name ends, as none of its characters is a colon.
_LABEL = "substr(m.content, 1, instr(m.content, ': ') - 1)"
_SPEAKER = (
    f"CASE WHEN instr(m.content, ': ') BETWEEN 3 AND 41 AND {_LABEL} GLOB '[A-Z]*' "
    f"AND {_LABEL} NOT GLOB '*[^A-Za-z .''-]*' AND {_LABEL} GLOB '*[a-z]*' THEN trim({_LABEL}) END"
)

M017_MEMORY_CONTEXT_SQL = f"""
    -- A memory's document carries its context, as memory/model.py's memory_document writes it: the
    -- session that stored it as its thread (memories stored in one session form a thread in storing
    -- order, which is document id order); the speaker it is written as, else its first entity, as its
    -- source. No text changes, so no vector goes stale and no term count moves.
    UPDATE documents SET
        thread = (SELECT 'session:' || m.session_id FROM memories m WHERE m.id = documents.ref),
        source = (
            SELECT COALESCE({_SPEAKER}, json_extract(m.entities, '$[0]')) FROM memories m WHERE m.id = documents.ref
        )
    WHERE kind = 'memory';
"""
