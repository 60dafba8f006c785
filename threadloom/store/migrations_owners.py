"""SQL of the migrations that give every row a reader could see an owner, and make uniqueness per owner; and
the node that owns each spawned task (m032).

Kept beside `migrations.py` (which names and orders them) so neither file outgrows the module cap.
"""

from __future__ import annotations

M014_OWNERS_SQL = """
    -- Sessions say whom they act for, so journals, peers and signals can be read per user.
    ALTER TABLE sessions ADD COLUMN user TEXT;
    ALTER TABLE sessions ADD COLUMN org TEXT;

    -- A memory's organisation: `org` visibility means everyone of the owner's organisation, from
    -- every project. Until the team server defines organisations, a user's own name is their org.
    ALTER TABLE memories ADD COLUMN org TEXT;
    UPDATE memories SET org = owner;

    -- Deduplication, idempotency keys and core keys are per owner: another user's text or key must
    -- neither block a write nor reveal that it exists. The old column keeps its UNIQUE constraint
    -- (SQLite cannot drop it in place), so its keys move to a new column and it stays empty.
    ALTER TABLE memories ADD COLUMN request_key TEXT;
    UPDATE memories SET request_key = idempotency_key, idempotency_key = NULL WHERE idempotency_key IS NOT NULL;
    CREATE UNIQUE INDEX memories_request_key ON memories (owner, request_key) WHERE request_key IS NOT NULL;
    DROP INDEX memories_content;
    CREATE UNIQUE INDEX memories_content ON memories (owner, COALESCE(project, ''), content_hash);
    DROP INDEX memories_core_key;
    CREATE UNIQUE INDEX memories_core_key ON memories (owner, COALESCE(project, ''), core_key)
        WHERE core_key IS NOT NULL;

    -- Only its owner may restore a pruned memory, or learn that it was pruned.
    ALTER TABLE memory_archive ADD COLUMN owner TEXT;
    UPDATE memory_archive SET owner = json_extract(payload, '$.memory.owner');
    CREATE INDEX memory_archive_owner ON memory_archive (owner, pruned_at);

    -- Core preferences are a user's, per project (they were per project, for whoever set them last).
    CREATE TABLE core_preferences (
        owner TEXT NOT NULL,
        project TEXT NOT NULL,
        auto TEXT NOT NULL DEFAULT '[]',
        approval TEXT NOT NULL DEFAULT '[]',
        excluded TEXT NOT NULL DEFAULT '[]',
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (owner, project)
    );
    INSERT INTO core_preferences (owner, project, auto, approval, excluded, updated_at)
        SELECT DISTINCT m.owner, p.scope, p.auto, p.approval, p.excluded, p.updated_at
        FROM memory_preferences p JOIN memories m ON COALESCE(m.project, '') = p.scope;
    DROP TABLE memory_preferences;

    -- Verbatim quotes are their speaker's; notes are the project's. Rows from before have no owner.
    ALTER TABLE thread_notes ADD COLUMN owner TEXT;

    -- Spawned tasks are their spawner's user's.
    ALTER TABLE tasks ADD COLUMN owner TEXT;
"""

M015_TOOL_REQUESTS_SQL = """
    -- Idempotency keys of write tools (threadloom/requests.py): claimed in the call's first write
    -- transaction, the result kept for retries. Per owner: another user's key is another key.
    CREATE TABLE tool_requests (
        owner TEXT NOT NULL,
        tool TEXT NOT NULL,
        key TEXT NOT NULL,
        nonce TEXT NOT NULL,
        result TEXT,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (owner, tool, key)
    );
    CREATE INDEX tool_requests_created ON tool_requests (created_at);
"""

# Which node started a task (jobs.node_id: a server's machine, or its THREADLOOM_NODE name there). Only that node
# judges the task by its pids; any other, by the node's lease. A session's agent pid is the same: it names a
# process on the machine recorded beside it (a hook links to a session by its pid on that machine alone).
# NULL: a row from before they were recorded.
M032_TASK_NODES_SQL = """
    ALTER TABLE tasks ADD COLUMN node TEXT;
    ALTER TABLE sessions ADD COLUMN machine TEXT;
"""
