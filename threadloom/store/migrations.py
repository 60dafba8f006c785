"""Named, recorded, transactional schema migrations.

Each migration runs once, inside its own `BEGIN IMMEDIATE` transaction, and is
recorded in `schema_migrations` in that same transaction: a crash leaves it
either wholly applied and recorded, or not at all. Append new migrations to
`MIGRATIONS`; never edit one that has shipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Migration:
    name: str
    sql: str


M001_INITIAL = Migration(
    "m001_initial",
    """
    CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        vendor TEXT NOT NULL,
        client_name TEXT,
        client_version TEXT,
        transport TEXT NOT NULL,
        project TEXT,
        cwd TEXT,
        pid INTEGER,
        origin TEXT NOT NULL,
        started_at INTEGER NOT NULL,
        last_seen_at INTEGER NOT NULL,
        ended_at INTEGER
    );
    CREATE INDEX sessions_last_seen ON sessions (last_seen_at);

    CREATE TABLE events (
        id INTEGER PRIMARY KEY,
        at INTEGER NOT NULL,
        kind TEXT NOT NULL,
        session_id TEXT,
        vendor TEXT,
        project TEXT,
        origin TEXT NOT NULL,
        detail TEXT NOT NULL DEFAULT '{}'
    );
    CREATE INDEX events_at ON events (at);
    CREATE INDEX events_session ON events (session_id, id);
    """,
)

MIGRATIONS: Sequence[Migration] = (M001_INITIAL,)

BOOTSTRAP_SQL = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    name TEXT PRIMARY KEY,
    applied_at INTEGER NOT NULL
)
"""
