"""SQL of `m027_concepts` (threadloom/learning/): the curator's snapshots, trash and entry states, concepts
with their observations, and insights with their votes. Every row names its owner; nothing is shared.

Kept beside `migrations.py` (which names and orders them) so neither file outgrows the module cap.
"""

from __future__ import annotations

from typing import Final

M027_CONCEPTS_SQL: Final = """
    -- A user's whole library (rows and canonical skill files) as it was before a destructive act.
    CREATE TABLE learning_snapshots (
        id INTEGER PRIMARY KEY,
        owner TEXT NOT NULL,
        reason TEXT NOT NULL,
        payload TEXT NOT NULL,
        entries INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL
    );
    CREATE INDEX learning_snapshots_owner ON learning_snapshots (owner, id);

    -- One deleted (or merged-away) entry, whole, until restored or past its retention.
    CREATE TABLE learning_trash (
        id INTEGER PRIMARY KEY,
        owner TEXT NOT NULL,
        kind TEXT NOT NULL,
        name TEXT NOT NULL,
        why TEXT NOT NULL,
        snapshot_id INTEGER,
        payload TEXT NOT NULL,
        deleted_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL
    );
    CREATE INDEX learning_trash_owner ON learning_trash (owner, id);

    -- The curator's standing verdict on an entry that outlives a pass (deprecated: deleted by a later pass
    -- when still unused after the grace period).
    CREATE TABLE learning_curation (
        owner TEXT NOT NULL,
        kind TEXT NOT NULL,
        name TEXT NOT NULL,
        state TEXT NOT NULL,
        since INTEGER NOT NULL,
        PRIMARY KEY (owner, kind, name)
    ) WITHOUT ROWID;

    -- Abstract regularities seen across sources; `norm` is the text normalised (the dedup key).
    CREATE TABLE concepts (
        id INTEGER PRIMARY KEY,
        owner TEXT NOT NULL,
        text TEXT NOT NULL,
        norm TEXT NOT NULL,
        vector BLOB,
        vector_model TEXT,
        confidence REAL NOT NULL,
        observations INTEGER NOT NULL DEFAULT 0,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        UNIQUE (owner, norm)
    );
    CREATE TABLE concept_observations (
        concept_id INTEGER NOT NULL REFERENCES concepts (id) ON DELETE CASCADE,
        source TEXT NOT NULL,
        text TEXT NOT NULL,
        session_id TEXT,
        observed_at INTEGER NOT NULL,
        PRIMARY KEY (concept_id, source)
    ) WITHOUT ROWID;

    -- Short insights agents distil and vote on; exported once (exported_at) above the vote threshold.
    CREATE TABLE insights (
        id INTEGER PRIMARY KEY,
        owner TEXT NOT NULL,
        text TEXT NOT NULL,
        norm TEXT NOT NULL,
        session_id TEXT,
        up INTEGER NOT NULL DEFAULT 0,
        down INTEGER NOT NULL DEFAULT 0,
        created_at INTEGER NOT NULL,
        exported_at INTEGER,
        UNIQUE (owner, norm)
    );
    CREATE INDEX insights_export ON insights (owner, exported_at);
    CREATE TABLE insight_votes (
        insight_id INTEGER NOT NULL REFERENCES insights (id) ON DELETE CASCADE,
        session_id TEXT NOT NULL,
        vote INTEGER NOT NULL CHECK (vote IN (-1, 1)),
        at INTEGER NOT NULL,
        PRIMARY KEY (insight_id, session_id)
    ) WITHOUT ROWID;
"""
