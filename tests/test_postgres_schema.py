"""Both backends' schemas hold the same tables and columns after migration: a migration that forgets one
side fails here (the PostgreSQL twin of each SQLite migration is made in store/postgres_schema.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from threadloom.store.migrations import MIGRATIONS
from threadloom.store.postgres import open_postgres
from threadloom.store.postgres_schema import (
    PG_MIGRATIONS,
    PG_ONLY_COLUMNS,
    PG_ONLY_TABLES,
    SQLITE_ONLY_TABLE_PREFIXES,
)
from threadloom.store.sqlite import open_store

pytestmark = pytest.mark.slow


def sqlite_columns(path: Path) -> set[tuple[str, str]]:
    store = open_store(path)
    rows = store.read(
        lambda r: r.tuples(
            "SELECT m.name, p.name FROM sqlite_master m, pragma_table_info(m.name) p "
            "WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'"
        )
    )
    store.close()
    return {(t, c) for t, c in rows if not t.startswith(SQLITE_ONLY_TABLE_PREFIXES)}


def test_every_migration_has_a_postgresql_twin_of_the_same_name() -> None:
    assert [m.name for m in PG_MIGRATIONS] == [m.name for m in MIGRATIONS]


def test_tables_and_columns_match_after_migration(tmp_path: Path, postgres_url: str) -> None:
    store = open_postgres(postgres_url)
    rows = store.read(
        lambda r: r.tuples(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema()"
        )
    )
    store.close()
    pg = {(str(t), str(c)) for t, c in rows if t not in PG_ONLY_TABLES} - PG_ONLY_COLUMNS
    lite = sqlite_columns(tmp_path / "s.db")
    assert sorted(lite - pg) == [], "in SQLite only"
    assert sorted(pg - lite) == [], "in PostgreSQL only"


def test_integer_columns_are_64_bit_on_postgresql(postgres_url: str) -> None:
    """Times are epoch milliseconds: a 32-bit column would overflow in 1970 + 25 days."""
    store = open_postgres(postgres_url)
    narrow = store.read(
        lambda r: r.tuples(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND data_type IN ('integer', 'smallint') "
            "AND NOT (table_name = 'documents' AND column_name = 'fts_len') "
            "AND NOT (table_name = 'document_lengths' AND column_name = 'id')"
        )
    )
    store.close()
    assert narrow == []
