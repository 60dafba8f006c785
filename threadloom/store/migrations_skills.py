"""The SQL of m024_skills (threadloom/learning/): one row per skill or lesson of a user, with who wrote it
(a person or a learning loop), where from, whether it is pinned, and how often it was viewed and used. A
skill's text lives in its SKILL.md under the home (the row keeps its digest); a lesson's text is the row's."""

from __future__ import annotations

from typing import Final

M024_SKILLS_SQL: Final = """
    CREATE TABLE learning_entries (
        id INTEGER PRIMARY KEY,
        owner TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('skill', 'lesson')),
        name TEXT NOT NULL,
        description TEXT NOT NULL DEFAULT '',
        body TEXT,
        origin TEXT NOT NULL CHECK (origin IN ('person', 'loop')),
        source TEXT NOT NULL,
        pinned INTEGER NOT NULL DEFAULT 0,
        digest TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        viewed INTEGER NOT NULL DEFAULT 0,
        used INTEGER NOT NULL DEFAULT 0,
        last_viewed_at INTEGER,
        last_used_at INTEGER,
        UNIQUE (owner, kind, name)
    );
"""
