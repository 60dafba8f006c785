"""Moving a personal SQLite store into a PostgreSQL team database (`threadloom migrate --to`).

Every row keeps its id, owner, validity and provenance columns as they are: the copy is the rows, table by
table, parents before the tables that reference them. Each batch is one transaction on the target that also
records how far that table got (`job_cursors`, `migrate.copy:<table>`), so a copy killed at any point resumes
where its last batch committed; rows are upserted by their key, so running it again, finished or not, ends in
the same target. Once every table is copied the progress rows go and the source's mark stays
(`migrate.source:<id>`), which is how a later run knows the rows it finds are its own.

What is not copied: SQLite's full-text tables (the target indexes each document as it lands), the schema's
own bookkeeping, live job leases (they name local processes), and accounts and organisations (a team
database has its own, made with `threadloom admin`). A target that already holds another store's rows (a
teammate moved in first) takes this one beside them: text ids are kept, integer ids are shifted past the
target's (store/transfer_ids.py), and then the job cursors are not copied (they count in this store's ids),
a thread summary the target already indexes keeps its entry, and the terms' document frequencies are counted
again over every document.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from threadloom.errors import StoreError
from threadloom.store import postgres_search, transfer_ids
from threadloom.store.base import Reader, Store, Writer

BATCH = 200
SKIPPED = frozenset(
    {
        "schema_migrations",
        "search_generation",
        "job_leases",
        "accounts",
        "account_tokens",
        "organisations",
        "org_members",
        "org_projects",
    }
)
SKIPPED_PREFIXES = ("documents_fts", "sqlite_")
# A target with rows in any of these, and no mark of this source, holds someone else's store.
OCCUPIED_BY = ("memories", "documents", "events", "signals", "thread_notes", "sessions")
PROGRESS = "migrate.copy:"
MARK = "migrate.source:"
BORN = "migrate.born:"  # when the source store was made (its first migration): tells a new store at the same path
EXTENT = "migrate.extent:"  # a source's largest id per table when it last moved in alone, or first beside others

Refs = dict[str, tuple[str, str]]  # column -> (parent table, parent column)
Progress = Callable[[str, int, int], None]  # (table, rows copied so far, rows in the table)


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[str, ...]
    key: tuple[str, ...]  # the conflict target: primary key, else the first unique index
    rowid: bool  # batches by rowid (resumable); else by key order and offset


@dataclass
class Report:
    source: str
    target: str
    tables: dict[str, int] = field(default_factory=dict)  # rows copied this run
    resumed: bool = False
    again: bool = False  # this source had been copied before: rows refreshed

    def as_dict(self) -> dict[str, Any]:
        return {"source": self.source, "target": self.target, "resumed": self.resumed, "again": self.again,
                "tables": self.tables, "rows": sum(self.tables.values())}  # fmt: skip


def source_id(path: Path) -> str:
    """Which personal store this is: its machine and file, short."""
    return hashlib.sha256(f"{socket.gethostname()}:{os.path.realpath(path)}".encode()).hexdigest()[:16]


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def tables(r: Reader) -> list[Table]:
    """The source's tables to copy, each after the tables it references."""
    names = [
        str(row["name"])
        for row in r.rows("SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name")
        if row["name"] not in SKIPPED and not str(row["name"]).startswith(SKIPPED_PREFIXES)
    ]
    found: dict[str, Table] = {}
    parents: dict[str, set[str]] = {}
    for name in names:
        info = r.rows(f"PRAGMA table_info({_quoted(name)})")
        columns = tuple(str(c["name"]) for c in info)
        key = tuple(str(c["name"]) for c in sorted(info, key=lambda c: int(c["pk"])) if int(c["pk"]))
        if not key:
            for index in r.rows(f"PRAGMA index_list({_quoted(name)})"):
                if int(index["unique"]):
                    key = tuple(str(c["name"]) for c in r.rows(f"PRAGMA index_info({_quoted(index['name'])})"))
                    break
        sql = str(r.scalar("SELECT sql FROM sqlite_master WHERE name = :n", {"n": name}) or "")
        found[name] = Table(name, columns, key, "WITHOUT ROWID" not in sql.upper())
        parents[name] = {str(fk["table"]) for fk in r.rows(f"PRAGMA foreign_key_list({_quoted(name)})")}
    ordered: list[Table] = []
    placed: set[str] = set()
    while len(ordered) < len(found):
        ready = [n for n in found if n not in placed and parents[n] - {n} <= placed | (parents[n] - set(found))]
        if not ready:  # a cycle: take the rest in name order, as SQLite would accept them
            ready = [n for n in found if n not in placed]
        for name in ready:
            ordered.append(found[name])
            placed.add(name)
    return ordered


def check_target(target: Store, mark: str) -> tuple[bool, bool]:
    """Whether this source was copied (or began to be) into the target before, and whether the target held
    another store's rows when it first began."""

    def look(r: Reader) -> tuple[bool, bool]:
        marks = {str(row["name"]) for row in r.rows("SELECT name FROM job_cursors WHERE name LIKE 'migrate.source:%'")}
        if mark in marks:
            shifted = r.scalar("SELECT 1 FROM job_cursors WHERE name LIKE :o AND position > 0 LIMIT 1",
                               {"o": f"{transfer_ids.OFFSET}{mark.removeprefix(MARK)}:%"})  # fmt: skip
            return True, shifted is not None
        return False, any(r.scalar(f"SELECT 1 FROM {t} LIMIT 1") is not None for t in OCCUPIED_BY)

    return target.read(look)


def _offsets(source: Store, target: Store, sid: str, fresh: bool) -> dict[str, int]:
    """Each identity table's shift for this source: the target's largest id when it first began (recorded
    then), so every later run lands each row on the same id; 0 for a source that moved into an empty target."""
    copied = {t.name for t in source.read(tables)}
    names = [name for name in source.read(transfer_ids.identity_tables) if name in copied]
    prefix = f"{transfer_ids.OFFSET}{sid}:"
    if fresh:

        def record(w: Writer) -> dict[str, int]:
            found = {t: int(w.scalar(f"SELECT COALESCE(max(id), 0) FROM {_quoted(t)}")) for t in names}
            for t, offset in found.items():  # a run killed before its mark landed no row: its offsets are redone
                w.execute("INSERT INTO job_cursors (name, position) VALUES (:n, :p) "
                          "ON CONFLICT (name) DO UPDATE SET position = excluded.position",
                          {"n": prefix + t, "p": offset})  # fmt: skip
            return found

        return target.write(record)
    rows = target.read(
        lambda r: r.rows("SELECT name, position FROM job_cursors WHERE name LIKE :p", {"p": prefix + "%"})
    )
    return {str(row["name"]).removeprefix(prefix): int(row["position"]) for row in rows}


def _kept(w: Writer, table: Table, batch: list[tuple[Any, ...]], parents: Refs) -> list[tuple[Any, ...]]:
    """A shifted source's rows whose parent rows are in the target (a parent the target already had in its
    own form, under another key, was left out, and so are its children)."""
    at = {c: i for i, c in enumerate(table.columns)}
    for column, (parent, key) in parents.items():
        values = sorted({str(row[at[column]]) for row in batch if row[at[column]] is not None})
        text = f"CAST({_quoted(key)} AS TEXT)"
        sql = f"SELECT {text} FROM {_quoted(parent)} WHERE {text} IN (SELECT value FROM json_each(:v))"
        present = {str(r[0]) for r in w.tuples(sql, {"v": json.dumps(values)})}
        batch = [row for row in batch if row[at[column]] is None or str(row[at[column]]) in present]
    return batch


def _recount_terms(w: Writer) -> None:
    """Document frequencies over every document of every store moved in (each store's own counts, copied,
    would only be its own): the target's terms are the stems the SQLite index uses (postgres_search.py)."""
    w.execute("DELETE FROM document_terms")
    w.execute(
        "INSERT INTO document_terms (term, df) SELECT lexeme, count(*) FROM documents d, "
        "unnest(d.fts) AS u (lexeme, positions, weights) GROUP BY lexeme"
    )
    w.execute("INSERT INTO document_terms (term, df) VALUES ('', (SELECT count(*) FROM documents))")


def _insert_sql(table: Table, rows: int, beside: bool = False) -> str:
    """An upsert by key; `beside` (a store moved in beside another's): a row that meets any existing one, by
    its key or by another unique rule (the same user's style habit, a thread summary already indexed), is
    left out, so nothing of the other store is overwritten."""
    columns = ", ".join(_quoted(c) for c in table.columns)
    values = ", ".join("(" + ", ".join(f":p{i}_{j}" for j in range(len(table.columns))) + ")" for i in range(rows))
    sql = f"INSERT INTO {_quoted(table.name)} ({columns}) VALUES {values}"
    if not table.key or beside:
        return sql + " ON CONFLICT DO NOTHING"
    rest = [c for c in table.columns if c not in table.key]
    target = ", ".join(_quoted(c) for c in table.key)
    if not rest:
        return f"{sql} ON CONFLICT ({target}) DO NOTHING"
    updates = ", ".join(f"{_quoted(c)} = excluded.{_quoted(c)}" for c in rest)
    return f"{sql} ON CONFLICT ({target}) DO UPDATE SET {updates}"


def _land(w: Writer, table: Table, batch: list[tuple[Any, ...]], beside: bool = False) -> None:
    """One batch into the target, with what PostgreSQL keeps beside the row (full-text terms, pgvector; a
    document left out updates nothing: its shifted id is no row)."""
    params = {f"p{i}_{j}": value for i, row in enumerate(batch) for j, value in enumerate(row)}
    w.execute(_insert_sql(table, len(batch), beside), params)
    at = {c: i for i, c in enumerate(table.columns)}
    if table.name == "documents":
        postgres_search.index_texts(w, [(int(r[at["id"]]), str(r[at["title"]]), str(r[at["body"]])) for r in batch])
    elif table.name == "document_vectors":
        postgres_search.put_embeddings(
            w, [(int(r[at["doc_id"]]), str(r[at["fingerprint"]]), r[at["vector"]]) for r in batch]
        )


def _count(table: Table, r: Reader) -> int:
    return int(r.scalar(f"SELECT count(*) FROM {_quoted(table.name)}"))


def _batch(r: Reader, *, table: Table, after: int) -> tuple[list[tuple[Any, ...]], int]:
    """The next rows after position `after` (a rowid, or an offset in key order), and the next position."""
    columns = ", ".join(_quoted(c) for c in table.columns)
    if table.rowid:
        got = r.tuples(
            f"SELECT rowid, {columns} FROM {_quoted(table.name)} WHERE rowid > :after ORDER BY rowid LIMIT :n",
            {"after": after, "n": BATCH},
        )
        return [tuple(row[1:]) for row in got], (int(got[-1][0]) if got else after)
    order = ", ".join(_quoted(c) for c in table.key) or "1"
    got = r.tuples(
        f"SELECT {columns} FROM {_quoted(table.name)} ORDER BY {order} LIMIT :n OFFSET :after",
        {"after": after, "n": BATCH},
    )
    return [tuple(row) for row in got], after + len(got)


def _reset_identities(w: Writer) -> None:
    """Identity columns continue after the largest id copied (the copy gave every id explicitly)."""
    for row in w.rows(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE is_identity = 'YES' AND table_schema = current_schema()"
    ):
        table, column = _quoted(str(row["table_name"])), _quoted(str(row["column_name"]))
        w.scalar(
            f"SELECT setval(pg_get_serial_sequence(:t, :c), GREATEST((SELECT max({column}) FROM {table}), 1))",
            {"t": str(row["table_name"]), "c": str(row["column_name"])},
        )


def copy_store(source: Store, source_path: Path, target: Store, progress: Progress | None = None) -> Report:
    """Copy `source` (SQLite) into `target` (PostgreSQL): see the module's docstring."""
    if source.dialect != "sqlite" or target.dialect != "postgresql":
        raise StoreError("threadloom migrate copies a SQLite store into a PostgreSQL database")
    sid = source_id(source_path)
    mark = MARK + sid
    report = Report(source.location, target.location)
    report.again, occupied = check_target(target, mark)
    _check_born(source, target, sid, source_path)
    offsets = _offsets(source, target, sid, fresh=not report.again) if occupied or report.again else {}
    shifted = any(offsets.values())
    others, before = _check_extents(source, target, sid)
    moving = {t.name for t in source.read(tables)}
    identities = [t for t in source.read(transfer_ids.identity_tables) if t in moving]
    tops = source.read(partial(_largest_ids, tables=identities))
    target.write(partial(_reserve, sid=sid, tops=tops, offsets=offsets, before=before, others=others))
    beside = shifted or others  # another store's rows are here: never overwrite one
    progress_of = f"{PROGRESS}{sid}:"
    target.write(
        lambda w: w.execute(
            "INSERT INTO job_cursors (name, position) VALUES (:n, 0) ON CONFLICT (name) DO NOTHING", {"n": mark}
        )
    )
    started = {
        str(row["name"]): int(row["position"])
        for row in target.read(
            lambda r: r.rows("SELECT name, position FROM job_cursors WHERE name LIKE :p", {"p": progress_of + "%"})
        )
    }
    report.resumed = bool(started)
    for table in source.read(tables):
        if shifted and table.name == "job_cursors":
            continue
        refs = source.read(lambda r, t=table.name: transfer_ids.declared(r, t))  # type: ignore[misc]
        shift = transfer_ids.shifter(table.name, table.columns, {c: p for c, (p, _) in refs.items()}, offsets)
        total = int(source.read(partial(_count, table)))
        position, copied = started.get(progress_of + table.name, 0), 0
        while True:
            batch, after = source.read(partial(_batch, table=table, after=position))
            if not batch:
                break
            batch = [shift(row) for row in batch] if shifted else batch

            def land(
                w: Writer, t: Table = table, b: list[tuple[Any, ...]] = batch, a: int = after, p: Refs = refs
            ) -> None:
                b = _kept(w, t, b, p) if beside else b
                if b:
                    _land(w, t, b, beside)
                w.execute(
                    "INSERT INTO job_cursors (name, position) VALUES (:n, :p) "
                    "ON CONFLICT (name) DO UPDATE SET position = :p",
                    {"n": progress_of + t.name, "p": a},
                )

            target.write(land)
            position, copied = after, copied + len(batch)
            if progress is not None:
                progress(table.name, copied, total)
        report.tables[table.name] = copied

    def finish(w: Writer) -> None:
        _reset_identities(w)
        if w.scalar("SELECT count(*) FROM job_cursors WHERE name LIKE 'migrate.source:%'") > 1:
            _recount_terms(w)
        w.execute("DELETE FROM job_cursors WHERE name LIKE :p", {"p": progress_of + "%"})
        w.execute("UPDATE job_cursors SET position = 1 WHERE name = :n", {"n": mark})
        upsert = "DO NOTHING" if others else "DO UPDATE SET position = excluded.position"
        for name, largest in extents.items():  # how far its ids went, for `_check_extents`
            w.execute(f"INSERT INTO job_cursors (name, position) VALUES (:n, :p) ON CONFLICT (name) {upsert}",
                      {"n": f"{EXTENT}{sid}:{name}", "p": largest})  # fmt: skip

    extents = source.read(partial(_largest_ids, tables=source.read(transfer_ids.identity_tables)))
    target.write(finish)
    return report


def _reserve(
    w: Writer, sid: str, tops: dict[str, int], offsets: dict[str, int], before: dict[str, int], others: bool
) -> None:
    """Move each identity's sequence past the ids this source's rows will take (its largest, shifted), before
    any lands: a server writing to the database meanwhile takes ids after them, never one of them. A source
    that grew since it moved in is refused when anything else took ids past its own since (a server's rows):
    its new rows' ids were never reserved. The extents are recorded here too, so a resumed run is not refused
    for the rows this one lands."""
    taken = sorted(t for t, top in tops.items() if t in before and top > before[t] and w.scalar(
        f"SELECT COALESCE(max(id), 0) FROM {_quoted(t)}") > before[t] + offsets.get(t, 0))  # fmt: skip
    if taken:
        raise StoreError(
            f"this store has grown since it moved in, and the database has rows written since in {', '.join(taken)}:"
            " its new rows would take ids that are not its own. Move what is new with threadloom export and"
            " threadloom import instead"
        )
    upsert = "DO NOTHING" if others else "DO UPDATE SET position = excluded.position"
    for table, top in tops.items():
        w.execute(f"INSERT INTO job_cursors (name, position) VALUES (:n, :p) ON CONFLICT (name) {upsert}",
                  {"n": f"{EXTENT}{sid}:{table}", "p": top})  # fmt: skip
        w.scalar(
            "SELECT setval(s, GREATEST(:top, COALESCE(pg_sequence_last_value(s::regclass), 0), 1)) "
            "FROM (SELECT pg_get_serial_sequence(:t, 'id') AS s) q WHERE s IS NOT NULL",
            {"t": table, "top": top + offsets.get(table, 0)},
        )


def _largest_ids(r: Reader, tables: list[str]) -> dict[str, int]:
    return {t: int(r.scalar(f"SELECT COALESCE(max(id), 0) FROM {_quoted(t)}")) for t in tables}


def _check_extents(source: Store, target: Store, sid: str) -> tuple[bool, dict[str, int]]:
    """Whether another store was moved into the target too; if so, refuse this one when it has grown since it
    moved in: its new rows' ids were never reserved, and would meet the other store's."""
    prefix = f"{EXTENT}{sid}:"
    found = target.read(lambda r: (
        r.scalar("SELECT count(*) FROM job_cursors WHERE name LIKE 'migrate.source:%' AND name <> :m",
                 {"m": MARK + sid}),
        {str(row["name"]).removeprefix(prefix): int(row["position"])
         for row in r.rows("SELECT name, position FROM job_cursors WHERE name LIKE :p", {"p": prefix + "%"})},
    ))  # fmt: skip
    others, extents = int(found[0]), found[1]
    if others and extents:
        now = source.read(partial(_largest_ids, tables=list(extents)))
        grown = sorted(t for t, largest in now.items() if largest > extents[t] and "_fts_" not in t)  # not FTS5's own
        if grown:
            raise StoreError(
                f"this store has grown since it moved into {target.location} ({', '.join(grown)}), and another "
                "store moved in since: its new rows would take ids that are not its own. Move what is new with "
                "threadloom export and threadloom import instead"
            )
    return others > 0, extents


def _check_born(source: Store, target: Store, sid: str, path: Path) -> None:
    """A source is known by its machine and path: refuse a store made afresh where one that moved in before was
    (its rows would be taken for that one's, and its ids meet them). Records the birth on first sight."""
    born = int(source.read(lambda r: r.scalar(
        "SELECT COALESCE(min(applied_at), 0) FROM schema_migrations WHERE name = 'm001_initial'")))  # fmt: skip
    name = BORN + sid

    def check(w: Writer) -> int:
        w.execute("INSERT INTO job_cursors (name, position) VALUES (:n, :p) ON CONFLICT (name) DO NOTHING",
                  {"n": name, "p": born})  # fmt: skip
        return int(w.scalar("SELECT position FROM job_cursors WHERE name = :n", {"n": name}))

    if target.write(check) != born:
        raise StoreError(
            f"another store, made before this one, moved into {target.location} from {path}: this one would be "
            "taken for it. Move this one with threadloom export and threadloom import instead"
        )
