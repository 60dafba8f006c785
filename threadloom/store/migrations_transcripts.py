"""SQL of `m019_transcripts`: agent CLIs' conversations as ingested by `threadloom/ingest/`.

Kept beside `migrations.py` (which names and orders them) so neither file outgrows the module cap.
The tables are described in `store/transcripts.py`, which holds every statement that reads or writes them.
"""

from __future__ import annotations

M019_TRANSCRIPTS_SQL = """
    -- One row per transcript file ingested for a user: where reading stopped (the reader's cursor as
    -- JSON) and that file's counters. Written in the same transaction as the messages read up to it.
    CREATE TABLE transcript_files (
        owner TEXT NOT NULL,
        source TEXT NOT NULL,
        path TEXT NOT NULL,
        cursor TEXT NOT NULL,
        stats TEXT NOT NULL DEFAULT '{}',
        problem TEXT,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (owner, path)
    );
    CREATE INDEX transcript_files_source ON transcript_files (owner, source);

    -- One row per message, private to its owner. `key` is the adapter's stable key (unique within its
    -- source), so re-reading a file never stores a message twice; a revised message updates its row.
    CREATE TABLE transcript_messages (
        id INTEGER PRIMARY KEY,
        owner TEXT NOT NULL,
        source TEXT NOT NULL,
        session_id TEXT NOT NULL,
        key TEXT NOT NULL,
        role TEXT NOT NULL,
        text TEXT NOT NULL,
        tools TEXT NOT NULL DEFAULT '[]',
        at INTEGER,
        cwd TEXT,
        project TEXT,
        model TEXT,
        format TEXT NOT NULL,
        path TEXT NOT NULL,
        offset INTEGER NOT NULL DEFAULT 0,
        ingested_at INTEGER NOT NULL,
        UNIQUE (owner, source, key)
    );
    CREATE INDEX transcript_messages_session ON transcript_messages (owner, source, session_id, at, id);
    CREATE INDEX transcript_messages_time ON transcript_messages (owner, at);
    CREATE INDEX transcript_messages_project ON transcript_messages (owner, project, at);

    -- Per user and source: the counters of the last pass that read anything (the alarms' input).
    CREATE TABLE transcript_sources (
        owner TEXT NOT NULL,
        source TEXT NOT NULL,
        last_pass TEXT NOT NULL DEFAULT '{}',
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (owner, source)
    );
"""
