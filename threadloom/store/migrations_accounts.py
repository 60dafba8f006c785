"""SQL of `m030_accounts` (threadloom/accounts/): accounts, organisations with members and roles, the projects
an organisation holds, and per-user access tokens (only a digest is kept).

Written in the SQL that SQLite and PostgreSQL share: the PostgreSQL backend carries the same tables.
"""

from __future__ import annotations

from typing import Final

M030_ACCOUNTS_SQL: Final = """
    CREATE TABLE accounts (
        name TEXT PRIMARY KEY,
        created_at BIGINT NOT NULL
    );
    CREATE TABLE organisations (
        name TEXT PRIMARY KEY,
        created_at BIGINT NOT NULL
    );
    CREATE TABLE org_members (
        org TEXT NOT NULL REFERENCES organisations (name),
        account TEXT NOT NULL REFERENCES accounts (name),
        role TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
        added_at BIGINT NOT NULL,
        PRIMARY KEY (org, account)
    );
    CREATE INDEX org_members_account ON org_members (account);
    -- A project (the name a team server's clients send as X-Threadloom-Project) belongs to one organisation.
    CREATE TABLE org_projects (
        project TEXT PRIMARY KEY,
        org TEXT NOT NULL REFERENCES organisations (name),
        assigned_at BIGINT NOT NULL
    );
    CREATE INDEX org_projects_org ON org_projects (org);
    -- The token itself is shown once; `digest` is its SHA-256 (threadloom/accounts/tokens.py says why that hash).
    CREATE TABLE account_tokens (
        id TEXT PRIMARY KEY,
        account TEXT NOT NULL REFERENCES accounts (name),
        label TEXT NOT NULL,
        digest TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        expires_at BIGINT,
        revoked_at BIGINT,
        last_used_at BIGINT
    );
    CREATE INDEX account_tokens_account ON account_tokens (account);
"""

# m031: a read-only role. SQLite cannot change a CHECK constraint in place, so the table is rebuilt (nothing
# references org_members); PostgreSQL runs the same statements.
M031_READER_ROLE_SQL: Final = """
    CREATE TABLE org_members_v2 (
        org TEXT NOT NULL REFERENCES organisations (name),
        account TEXT NOT NULL REFERENCES accounts (name),
        role TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'member', 'reader')),
        added_at BIGINT NOT NULL,
        PRIMARY KEY (org, account)
    );
    INSERT INTO org_members_v2 (org, account, role, added_at) SELECT org, account, role, added_at FROM org_members;
    DROP TABLE org_members;
    ALTER TABLE org_members_v2 RENAME TO org_members;
    CREATE INDEX org_members_account ON org_members (account);
"""

# m033: a server administrator sees the whole store's figures in status and health (never another user's
# memories). NULL: not one; else when it was granted. Only `threadloom admin` on the server's machine sets it.
M033_SERVER_ADMIN_SQL: Final = """
    ALTER TABLE accounts ADD COLUMN server_admin_since BIGINT;
"""
