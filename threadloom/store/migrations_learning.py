"""SQL of `m023_learning`: the learning loops' candidate queue (`threadloom/learning/`).

Kept beside `migrations.py` (which names and orders them) so neither file outgrows the module cap.
"""

from __future__ import annotations

M023_LEARNING_SQL = """
    -- Decision- and rule-shaped utterances the extract pass found, waiting for review. Private to `owner`
    -- (the user whose message or note it came from). `source` is 'message' (transcript_messages.id) or
    -- 'note' (thread_notes.id) and `span` the character offset in it: a sentence is queued at most once.
    -- `cluster` is the id of the first candidate of its paraphrase cluster (its own id when alone);
    -- `vector` the float32 embedding used to cluster, under the model `vector_model`.
    CREATE TABLE learning_candidates (
        id INTEGER PRIMARY KEY,
        owner TEXT NOT NULL,
        kind TEXT NOT NULL,
        locale TEXT NOT NULL,
        text TEXT NOT NULL,
        source TEXT NOT NULL,
        source_ref TEXT NOT NULL,
        span INTEGER NOT NULL,
        session_id TEXT,
        project TEXT,
        at INTEGER,
        cluster INTEGER,
        similarity REAL,
        vector BLOB,
        vector_model TEXT,
        status TEXT NOT NULL DEFAULT 'pending',
        created_at INTEGER NOT NULL,
        decided_at INTEGER,
        decision TEXT,
        UNIQUE (source, source_ref, span)
    );
    CREATE INDEX learning_candidates_owner ON learning_candidates (owner, status, id);
    CREATE INDEX learning_candidates_cluster ON learning_candidates (owner, cluster);
"""
