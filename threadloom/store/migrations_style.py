"""The SQL of `m022_style` (threadloom/style/): a user's style habits, the sessions each was seen in
(`style_observations`), the interaction profile, and the style brief's revision with the snapshots deltas
are computed from. Every row is its owner's alone."""

from __future__ import annotations

from typing import Final

M022_STYLE_SQL: Final = """
    -- One row per habit of a user. `id` is derived from (owner, kind, key); `vendor` is the agent CLI of the
    -- session it was first seen in (the egress policy reads it); a forgotten habit keeps only its key, so a
    -- later pass does not learn it back.
    CREATE TABLE style_habits (
        id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        kind TEXT NOT NULL,
        key TEXT NOT NULL,
        text TEXT NOT NULL,
        locale TEXT NOT NULL DEFAULT '',
        origin TEXT NOT NULL,
        status TEXT NOT NULL DEFAULT 'candidate',
        pinned INTEGER NOT NULL DEFAULT 0,
        seen INTEGER NOT NULL DEFAULT 0,
        sessions INTEGER NOT NULL DEFAULT 0,
        example TEXT,
        vendor TEXT NOT NULL,
        first_at INTEGER NOT NULL,
        last_at INTEGER NOT NULL,
        activated_at INTEGER,
        UNIQUE (owner, kind, key)
    );
    CREATE INDEX style_habits_owner ON style_habits (owner, status, last_at);

    -- Per habit and session: how often it was seen there (`hinted`: a host hint counted, once per session).
    -- One row per session rather than per sighting: the gate needs distinct sessions, not a log.
    CREATE TABLE style_observations (
        habit_id TEXT NOT NULL REFERENCES style_habits (id),
        owner TEXT NOT NULL,
        session TEXT NOT NULL,
        seen INTEGER NOT NULL,
        hinted INTEGER NOT NULL DEFAULT 0,
        first_at INTEGER NOT NULL,
        last_at INTEGER NOT NULL,
        PRIMARY KEY (habit_id, session)
    );
    CREATE INDEX style_observations_owner ON style_observations (owner, session);

    CREATE TABLE style_profile (
        id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        key TEXT NOT NULL,
        text TEXT NOT NULL,
        origin TEXT NOT NULL,
        vendor TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        UNIQUE (owner, key)
    );

    -- Per user: learning on or paused, the capsule's revision and content digest, and the language votes.
    CREATE TABLE style_state (
        owner TEXT PRIMARY KEY,
        learning INTEGER NOT NULL DEFAULT 1,
        revision INTEGER NOT NULL DEFAULT 0,
        digest TEXT NOT NULL DEFAULT '',
        languages TEXT NOT NULL DEFAULT '{}',
        updated_at INTEGER NOT NULL
    );

    CREATE TABLE style_revisions (
        owner TEXT NOT NULL,
        revision INTEGER NOT NULL,
        content TEXT NOT NULL,
        at INTEGER NOT NULL,
        PRIMARY KEY (owner, revision)
    );
"""
