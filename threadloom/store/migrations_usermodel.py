"""The SQL of the user model's migration (threadloom/usermodel/): claims about a user, their evidence and
each claim's tier history. A claim, its evidence and its transitions are their owner's alone."""

from __future__ import annotations

from typing import Final

USER_MODEL_SQL: Final = """
    CREATE TABLE user_claims (
        id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        domain TEXT NOT NULL,
        text TEXT NOT NULL,
        visibility TEXT NOT NULL DEFAULT 'private',
        vendor TEXT NOT NULL,
        session_id TEXT,
        tier TEXT NOT NULL DEFAULT 'hypothesis',
        support REAL NOT NULL DEFAULT 0,
        contradict REAL NOT NULL DEFAULT 0,
        last_contradict_at INTEGER,
        created_at INTEGER NOT NULL,
        valid_from INTEGER NOT NULL,
        valid_until INTEGER,
        superseded_at INTEGER,
        superseded_by TEXT REFERENCES user_claims (id),
        supersedes TEXT REFERENCES user_claims (id)
    );
    CREATE INDEX user_claims_owner ON user_claims (owner, superseded_by, domain);

    CREATE TABLE user_evidence (
        id INTEGER PRIMARY KEY,
        claim_id TEXT NOT NULL REFERENCES user_claims (id),
        kind TEXT NOT NULL CHECK (kind IN ('support', 'contradict')),
        weight REAL NOT NULL,
        effective REAL NOT NULL,
        source TEXT NOT NULL CHECK (source IN ('message', 'memory', 'note', 'statement')),
        ref TEXT NOT NULL,
        origin TEXT NOT NULL CHECK (origin IN ('user', 'automated')),
        vendor TEXT NOT NULL,
        session_id TEXT,
        at INTEGER NOT NULL
    );
    -- The same source counted once per claim and direction: a loop that re-reads a message adds nothing.
    CREATE UNIQUE INDEX user_evidence_once ON user_evidence (claim_id, kind, source, ref);

    CREATE TABLE user_claim_tiers (
        id INTEGER PRIMARY KEY,
        claim_id TEXT NOT NULL REFERENCES user_claims (id),
        from_tier TEXT,
        to_tier TEXT NOT NULL,
        reason TEXT NOT NULL,
        evidence_id INTEGER,
        at INTEGER NOT NULL
    );
    CREATE INDEX user_claim_tiers_claim ON user_claim_tiers (claim_id, id);
"""
