"""Named, recorded, transactional schema migrations.

Each migration runs once, inside its own `BEGIN IMMEDIATE` transaction, and is recorded in `schema_migrations` in
that same transaction: a crash leaves it either wholly applied and recorded, or not at all. Append new migrations to
`MIGRATIONS`; never edit one that has shipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from threadloom.store import migrations_search as search_sql
from threadloom.store.migrations_accounts import M030_ACCOUNTS_SQL, M031_READER_ROLE_SQL, M033_SERVER_ADMIN_SQL
from threadloom.store.migrations_concepts import M027_CONCEPTS_SQL
from threadloom.store.migrations_consolidate import M028_CONSOLIDATION_SQL
from threadloom.store.migrations_context import M017_MEMORY_CONTEXT_SQL
from threadloom.store.migrations_health import M025_PROBES_SQL
from threadloom.store.migrations_learning import M023_LEARNING_SQL
from threadloom.store.migrations_owners import M014_OWNERS_SQL, M015_TOOL_REQUESTS_SQL, M032_TASK_NODES_SQL
from threadloom.store.migrations_skills import M024_SKILLS_SQL
from threadloom.store.migrations_style import M022_STYLE_SQL
from threadloom.store.migrations_transcripts import M019_TRANSCRIPTS_SQL
from threadloom.store.migrations_usermodel import USER_MODEL_SQL


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

M002_DOCUMENTS = Migration(
    "m002_documents",
    """
    CREATE TABLE documents (
        id INTEGER PRIMARY KEY,
        kind TEXT NOT NULL,
        ref TEXT NOT NULL,
        project TEXT,
        thread TEXT,
        source TEXT,
        status TEXT NOT NULL DEFAULT 'active',
        title TEXT NOT NULL DEFAULT '',
        body TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        occurred_at INTEGER,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        UNIQUE (kind, ref)
    );
    CREATE INDEX documents_project_time ON documents (project, kind, occurred_at);
    CREATE INDEX documents_time ON documents (occurred_at);
    CREATE INDEX documents_updated ON documents (updated_at);
    CREATE INDEX documents_source ON documents (source COLLATE NOCASE);

    CREATE VIRTUAL TABLE documents_fts USING fts5(
        title, body, content='documents', content_rowid='id',
        tokenize='porter unicode61 remove_diacritics 2'
    );
    CREATE TRIGGER documents_fts_insert AFTER INSERT ON documents BEGIN
        INSERT INTO documents_fts (rowid, title, body) VALUES (new.id, new.title, new.body);
    END;
    CREATE TRIGGER documents_fts_delete AFTER DELETE ON documents BEGIN
        INSERT INTO documents_fts (documents_fts, rowid, title, body) VALUES ('delete', old.id, old.title, old.body);
    END;
    CREATE TRIGGER documents_fts_update AFTER UPDATE OF title, body ON documents BEGIN
        INSERT INTO documents_fts (documents_fts, rowid, title, body) VALUES ('delete', old.id, old.title, old.body);
        INSERT INTO documents_fts (rowid, title, body) VALUES (new.id, new.title, new.body);
    END;

    -- A rowid table: WITHOUT ROWID stores 1.5 KB rows badly, and fetching them by key was 10x slower.
    CREATE TABLE document_vectors (
        doc_id INTEGER NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
        fingerprint TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        vector BLOB NOT NULL
    );
    CREATE UNIQUE INDEX document_vectors_key ON document_vectors (doc_id, fingerprint);
    CREATE INDEX document_vectors_fingerprint ON document_vectors (fingerprint, doc_id);
    """,
)

M003_THREAD_ORDER = Migration(
    "m003_thread_order",
    """
    -- Walking a thread in write order: the items just before and after a hit (search context spread).
    CREATE INDEX documents_thread ON documents (thread, kind, id) WHERE thread IS NOT NULL;
    """,
)

M004_MEMORIES = Migration(
    "m004_memories",
    """
    CREATE TABLE memories (
        id TEXT PRIMARY KEY,
        content TEXT NOT NULL,
        summary TEXT,
        category TEXT,
        kind TEXT NOT NULL,
        entities TEXT NOT NULL DEFAULT '[]',
        project TEXT,
        visibility TEXT NOT NULL,
        owner TEXT NOT NULL,
        status TEXT NOT NULL,
        pinned INTEGER NOT NULL DEFAULT 0,
        core_key TEXT,
        core_priority INTEGER,
        session_id TEXT,
        vendor TEXT NOT NULL,
        origin TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        idempotency_key TEXT UNIQUE,
        created_at INTEGER NOT NULL,
        last_reactivated_at INTEGER NOT NULL,
        reactivation_count INTEGER NOT NULL DEFAULT 0,
        valid_from INTEGER NOT NULL,
        valid_to INTEGER,
        superseded_by TEXT,
        decay_score REAL NOT NULL,
        scored_at INTEGER NOT NULL
    );
    CREATE UNIQUE INDEX memories_content ON memories (COALESCE(project, ''), content_hash);
    CREATE UNIQUE INDEX memories_core_key ON memories (COALESCE(project, ''), core_key) WHERE core_key IS NOT NULL;
    CREATE INDEX memories_recent ON memories (last_reactivated_at);
    CREATE INDEX memories_created ON memories (created_at);
    CREATE INDEX memories_category ON memories (category);

    CREATE TABLE memory_entities (
        memory_id TEXT NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
        entity TEXT NOT NULL COLLATE NOCASE,
        PRIMARY KEY (entity, memory_id)
    ) WITHOUT ROWID;
    CREATE INDEX memory_entities_memory ON memory_entities (memory_id);

    CREATE TABLE memory_edges (
        id INTEGER PRIMARY KEY,
        source TEXT NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
        target TEXT NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
        type TEXT NOT NULL,
        weight REAL NOT NULL,
        made_by TEXT NOT NULL,
        reason TEXT,
        session_id TEXT,
        created_at INTEGER NOT NULL,
        UNIQUE (source, target, type)
    );
    CREATE INDEX memory_edges_target ON memory_edges (target, source);

    -- Pruned memories wait here, with their edges, until restored or purged.
    CREATE TABLE memory_archive (
        id TEXT PRIMARY KEY,
        payload TEXT NOT NULL,
        pruned_at INTEGER NOT NULL
    );
    CREATE INDEX memory_archive_pruned ON memory_archive (pruned_at);

    CREATE TABLE memory_preferences (
        scope TEXT PRIMARY KEY,
        auto TEXT NOT NULL DEFAULT '[]',
        approval TEXT NOT NULL DEFAULT '[]',
        excluded TEXT NOT NULL DEFAULT '[]',
        updated_at INTEGER NOT NULL
    );

    -- Background jobs: one lease per kind (single-flight across processes) and a record of every pass.
    CREATE TABLE job_leases (
        name TEXT PRIMARY KEY,
        holder TEXT NOT NULL,
        expires_at INTEGER NOT NULL
    );
    CREATE TABLE job_runs (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL,
        started_at INTEGER NOT NULL,
        finished_at INTEGER NOT NULL,
        dry_run INTEGER NOT NULL,
        outcome TEXT NOT NULL
    );
    CREATE INDEX job_runs_name ON job_runs (name, id);
    """,
)

M005_TERM_FREQUENCIES = Migration(
    "m005_term_frequencies",
    """
    -- Each index term's document frequency, and under the empty term the number of documents.
    CREATE TABLE document_terms (term TEXT PRIMARY KEY, df INTEGER NOT NULL) WITHOUT ROWID;
    CREATE VIRTUAL TABLE temp.m005_vocab USING fts5vocab(main, documents_fts, row);
    INSERT INTO document_terms (term, df) SELECT term, doc FROM temp.m005_vocab;
    INSERT INTO document_terms (term, df) VALUES ('', (SELECT count(*) FROM documents));
    DROP TABLE temp.m005_vocab;

    -- The few memories recall may inject (pinned or core), without scanning the rest.
    CREATE INDEX memories_kept ON memories (id) WHERE pinned = 1 OR core_key IS NOT NULL;
    """,
)

M006_THREAD_CURSORS = Migration(
    "m006_thread_cursors",
    """
    -- Machine-local: which project and thread each session works in, per repository.
    CREATE TABLE thread_cursors (
        session_id TEXT NOT NULL,
        repo TEXT NOT NULL,
        project TEXT,
        thread TEXT,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (session_id, repo)
    );
    """,
)

M007_THREAD_NOTES = Migration(
    "m007_thread_notes",
    """
    -- Notes (move, failed, insight, open_q, decision) and verbatim user quotes: many and personal,
    -- so they live in the store, not in the repository's thread files.
    CREATE TABLE thread_notes (
        id INTEGER PRIMARY KEY,
        repo TEXT NOT NULL,
        project TEXT NOT NULL,
        thread TEXT,
        kind TEXT NOT NULL,
        text TEXT NOT NULL,
        session_id TEXT,
        vendor TEXT NOT NULL,
        created_at INTEGER NOT NULL
    );
    CREATE INDEX thread_notes_thread ON thread_notes (repo, project, thread, id);
    """,
)

M008_THREAD_CLAIMS = Migration(
    "m008_thread_claims",
    """
    -- Who is working on a thread right now, so peers pick something else.
    CREATE TABLE thread_claims (
        repo TEXT NOT NULL,
        project TEXT NOT NULL,
        thread TEXT NOT NULL,
        session_id TEXT NOT NULL,
        claimed_at INTEGER NOT NULL,
        PRIMARY KEY (repo, project, thread)
    );
    CREATE INDEX thread_claims_session ON thread_claims (session_id);
    """,
)

M009_SESSION_PARENTS = Migration(
    "m009_session_parents",
    """
    -- A spawned child agent's session records its parent's: lineage for claims and signals.
    ALTER TABLE sessions ADD COLUMN parent_id TEXT;
    """,
)

M010_SIGNALS = Migration(
    "m010_signals",
    """
    -- Messages between sessions. A signal is fanned out to its recipients when it is sent: one
    -- delivery row each (the primary key makes a second delivery impossible), read in id order.
    CREATE TABLE signals (
        id INTEGER PRIMARY KEY,
        sender TEXT NOT NULL,
        kind TEXT NOT NULL,
        scope TEXT,
        body TEXT NOT NULL,
        reply_to INTEGER,
        task TEXT,
        created_at INTEGER NOT NULL
    );
    CREATE INDEX signals_reply ON signals (reply_to) WHERE reply_to IS NOT NULL;
    CREATE TABLE signal_deliveries (
        recipient TEXT NOT NULL,
        signal_id INTEGER NOT NULL REFERENCES signals (id) ON DELETE CASCADE,
        read_at INTEGER,
        PRIMARY KEY (recipient, signal_id)
    ) WITHOUT ROWID;
    CREATE INDEX signal_deliveries_unread ON signal_deliveries (recipient, read_at, signal_id);
    -- How far each session has caught up with what others wrote (the events journal).
    CREATE TABLE session_cursors (session_id TEXT PRIMARY KEY, event_id INTEGER NOT NULL) WITHOUT ROWID;
    """,
)

M011_TASKS = Migration(
    "m011_tasks",
    """
    -- Child agents this machine's sessions spawned.
    CREATE TABLE tasks (
        id TEXT PRIMARY KEY,
        parent_session TEXT,
        role TEXT,
        agent TEXT NOT NULL,
        cwd TEXT NOT NULL,
        command TEXT NOT NULL,
        pid INTEGER,
        status TEXT NOT NULL,
        exit_code INTEGER,
        timeout_s REAL NOT NULL,
        attempt INTEGER NOT NULL DEFAULT 1,
        tournament TEXT,
        log_path TEXT NOT NULL,
        started_at INTEGER NOT NULL,
        finished_at INTEGER
    );
    CREATE INDEX tasks_status ON tasks (status);
    CREATE INDEX tasks_parent ON tasks (parent_session, started_at);
    CREATE INDEX tasks_tournament ON tasks (tournament) WHERE tournament IS NOT NULL;
    """,
)

M012_TASK_USAGE = Migration(
    "m012_task_usage",
    """
    -- What a child reported spending, when its CLI reports usage: daily ceilings count it.
    ALTER TABLE tasks ADD COLUMN tokens INTEGER;
    ALTER TABLE tasks ADD COLUMN cost_usd REAL;
    """,
)

# How far a job has applied the events journal (memory/reactivation.py). It starts at the journal's end:
# the recalls before it were counted when they were made.
M021_JOB_CURSORS_SQL = """
CREATE TABLE job_cursors (name TEXT PRIMARY KEY, position INTEGER NOT NULL) WITHOUT ROWID;
INSERT INTO job_cursors (name, position) SELECT 'memory.recalls', coalesce(max(id), 0) FROM events;
"""

MIGRATIONS: Sequence[Migration] = (
    M001_INITIAL,
    M002_DOCUMENTS,
    M003_THREAD_ORDER,
    M004_MEMORIES,
    M005_TERM_FREQUENCIES,
    M006_THREAD_CURSORS,
    M007_THREAD_NOTES,
    M008_THREAD_CLAIMS,
    M009_SESSION_PARENTS,
    M010_SIGNALS,
    M011_TASKS,
    M012_TASK_USAGE,
    Migration("m013_search_generation", search_sql.M013_SEARCH_GENERATION_SQL),
    Migration("m014_owners", M014_OWNERS_SQL),  # SQL held in the modules beside this one
    Migration("m015_tool_requests", M015_TOOL_REQUESTS_SQL),
    Migration("m017_memory_context", M017_MEMORY_CONTEXT_SQL),
    Migration("m018_reactivation_generation", search_sql.M018_REACTIVATION_GENERATION_SQL),
    Migration("m019_transcripts", M019_TRANSCRIPTS_SQL),
    Migration("m020_user_model", USER_MODEL_SQL),
    Migration("m021_job_cursors", M021_JOB_CURSORS_SQL),
    Migration("m022_style", M022_STYLE_SQL),
    Migration("m023_learning", M023_LEARNING_SQL),
    Migration("m024_skills", M024_SKILLS_SQL),
    Migration("m025_probes", M025_PROBES_SQL),
    Migration("m026_fts_explicit_insert", search_sql.M026_FTS_EXPLICIT_INSERT_SQL),
    Migration("m027_concepts", M027_CONCEPTS_SQL),
    Migration("m028_consolidation", M028_CONSOLIDATION_SQL),
    Migration("m030_accounts", M030_ACCOUNTS_SQL),
    Migration("m031_reader_role", M031_READER_ROLE_SQL),
    Migration("m032_task_nodes", M032_TASK_NODES_SQL),
    Migration("m033_server_admin", M033_SERVER_ADMIN_SQL),
)

BOOTSTRAP_SQL = """
CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)
"""
