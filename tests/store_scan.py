"""Every column of every table of a store searched for a text: what an erasure must leave nowhere.

SQLite: each table of the schema (FTS5's shadow tables included), every column compared as bytes. PostgreSQL:
each table of the current schema, every column as text (a `tsvector` as its lexemes, JSON as its text), and
`bytea` columns as bytes. `needle` is compared in lower case: a row's text as it is on SQLite, lowered on PostgreSQL.
"""

from __future__ import annotations

from typing import Any

from threadloom.store.base import Reader, Store


def holding(store: Store, needle: str) -> list[str]:
    """`table.column` of each column some row of which contains `needle`."""
    return store.read(lambda r: _postgres(r, needle) if r.dialect == "postgresql" else _sqlite(r, needle))


def _sqlite(r: Reader, needle: str) -> list[str]:
    found: list[str] = []
    tables = [str(t) for (t,) in r.tuples("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")]
    for table in tables:
        for (column,) in r.tuples("SELECT name FROM pragma_table_info(:t)", {"t": table}):
            sql = f'SELECT COUNT(*) FROM "{table}" WHERE instr(CAST("{column}" AS BLOB), :n) > 0'
            if int(r.scalar(sql, {"n": needle.lower().encode()})):
                found.append(f"{table}.{column}")
    return found


def _postgres(r: Reader, needle: str) -> list[str]:
    found: list[str] = []
    columns: list[tuple[Any, ...]] = r.tuples(
        "SELECT c.table_name, c.column_name, c.data_type FROM information_schema.columns c "
        "JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name "
        "WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE' ORDER BY 1, 2"
    )
    for table, column, kind in columns:
        if kind == "bytea":
            test = f"position(convert_to(lower(:n), 'UTF8') IN \"{column}\") > 0"
        else:
            test = f'strpos(lower(CAST("{column}" AS TEXT)), lower(:n)) > 0'
        if int(r.scalar(f'SELECT COUNT(*) FROM "{table}" WHERE {test}', {"n": needle})):
            found.append(f"{table}.{column}")
    return found
