"""Ingested transcripts in the store: every statement that reads or writes their tables (m019).

Tables (all keyed by `owner`, the user whose home the transcripts were read from: a transcript is private
to that user, never visible to another `THREADLOOM_USER`; see `visibility.transcripts_sql`):

- `transcript_files (owner, source, path, cursor, stats, problem, updated_at)`, primary key (owner, path):
  where reading of one file stopped (`transcripts.Cursor.to_json()`), that file's counters
  (`SourceStats.to_dict()`, cumulative while the file keeps its identity) and its last problem, if any.
- `transcript_messages (id, owner, source, session_id, key, role, text, tools, at, cwd, project, model,
  format, path, offset, ingested_at)`, UNIQUE (owner, source, key): one row per message, scrubbed of
  secrets. `source` is the adapter (claude-code, codex, gemini, copilot), `key` its stable key, `role`
  user/assistant/tool, `tools` a JSON list of `{name, args, result, ok}` summaries, `at` epoch ms (NULL
  when the client wrote no time), `project` the repository root resolved from `cwd`, `format` the format
  version and record kind it came from. Each row is indexed as a search document of kind `transcript`
  with `ref` = the row id, `thread` = the session id, `source` = the role, `occurred_at` = `at`.
- `transcript_sources (owner, source, last_pass, updated_at)`: the counters of the last pass over a
  source that read any record, for the alarms.

A batch (messages read from one file and the cursor after them) is written in one transaction by
`threadloom/ingest/`, so a crash re-reads a batch, never skips or duplicates one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from threadloom.store.base import Reader, Row, Writer

DOCUMENT_KIND = "transcript"
ERASED_ROLE = "erased"  # a row `forget` emptied: its key stays, so a re-read file does not bring it back


@dataclass(frozen=True)
class StoredMessage:
    """A message as persisted: already scrubbed, its project resolved."""

    source: str
    session_id: str
    key: str
    role: str
    text: str
    tools: str  # JSON list
    at: int | None
    cwd: str | None
    project: str | None
    model: str | None
    format: str
    path: str
    offset: int


def file_cursors(r: Reader, owner: str, source: str) -> dict[str, str]:
    """Path -> cursor JSON of every file of `source` ingested for `owner`."""
    rows = r.tuples(
        "SELECT path, cursor FROM transcript_files WHERE owner = :o AND source = :s", {"o": owner, "s": source}
    )
    return {str(path): str(cursor) for path, cursor in rows}


def files(r: Reader, owner: str, source: str) -> dict[str, tuple[str, str]]:
    """Path -> (cursor JSON, counters JSON) of every file of `source` ingested for `owner`."""
    rows = r.tuples(
        "SELECT path, cursor, stats FROM transcript_files WHERE owner = :o AND source = :s", {"o": owner, "s": source}
    )
    return {str(path): (str(cursor), str(stats)) for path, cursor, stats in rows}


def save_file(
    w: Writer, owner: str, source: str, path: str, cursor: str, stats: dict[str, Any], problem: str | None, now: int
) -> None:
    w.execute(
        "INSERT INTO transcript_files (owner, source, path, cursor, stats, problem, updated_at) "
        "VALUES (:o, :s, :p, :c, :st, :pr, :n) ON CONFLICT (owner, path) DO UPDATE SET source = :s, cursor = :c, "
        "stats = :st, problem = :pr, updated_at = :n",
        {"o": owner, "s": source, "p": path, "c": cursor, "st": json.dumps(stats), "pr": problem, "n": now},
    )


def file_stats(r: Reader, owner: str, source: str) -> list[dict[str, Any]]:
    rows = r.tuples("SELECT stats FROM transcript_files WHERE owner = :o AND source = :s", {"o": owner, "s": source})
    return [json.loads(stats) for (stats,) in rows]


def upsert_message(w: Writer, owner: str, m: StoredMessage, revises: bool, now: int) -> tuple[int, bool] | None:
    """Store `m` unless its key is held with the same content; other content under a held key replaces it.
    Returns (row id, whether the row is new), or None when nothing was written."""
    return upsert_messages(w, owner, [(m, revises)], now)[0]


def upsert_messages(
    w: Writer, owner: str, batch: Sequence[tuple[StoredMessage, bool]], now: int
) -> list[tuple[int, bool] | None]:
    """`upsert_message` for each of a batch, in order: the new rows inserted together, then each held key
    (or one met earlier in the batch) compared and rewritten in the batch's order."""
    if w.dialect == "sqlite":
        return _upsert_sqlite(w, owner, batch, now)
    values = [_values(owner, m, now) for m, _ in batch]
    inserted = w.insert_many(  # one pipeline
        "INSERT INTO transcript_messages (owner, source, session_id, key, role, text, tools, at, cwd, project, "
        "model, format, path, offset, ingested_at) VALUES (:o, :src, :sid, :k, :role, :t, :tools, :at, :cwd, "
        ":proj, :model, :fmt, :path, :off, :now) ON CONFLICT (owner, source, key) DO NOTHING RETURNING id",
        values,
    )
    return [
        (new_id, True) if new_id else _rewrite(w, m, revises, v)
        for (m, revises), v, new_id in zip(batch, values, inserted, strict=True)
    ]


def _upsert_sqlite(
    w: Writer, owner: str, batch: Sequence[tuple[StoredMessage, bool]], now: int
) -> list[tuple[int, bool] | None]:
    """The messages under keys neither held nor met earlier in the batch (nearly all of a backfill) go in by
    one prepared statement, their ids assigned in order under the write lock, as SQLite would."""
    held: set[tuple[str, str]] = set()
    for source in {m.source for m, _ in batch}:
        keys = json.dumps([m.key for m, _ in batch if m.source == source])
        found = w.tuples(
            "SELECT key FROM transcript_messages WHERE owner = :o AND source = :s AND key IN "
            "(SELECT value FROM json_each(:k))",
            {"o": owner, "s": source, "k": keys},
        )
        held.update((source, str(key)) for (key,) in found)
    fresh: list[int] = []
    later: list[int] = []
    seen: set[tuple[str, str]] = set()
    for n, (m, _) in enumerate(batch):
        key = (m.source, m.key)
        (later if key in held or key in seen else fresh).append(n)
        seen.add(key)
    results: list[tuple[int, bool] | None] = [None] * len(batch)
    first = int(w.scalar("SELECT COALESCE(MAX(id), 0) + 1 FROM transcript_messages"))
    rows = []
    for offset, n in enumerate(fresh):
        results[n] = (first + offset, True)
        rows.append(_values(owner, batch[n][0], now) | {"id": first + offset})
    w.execute_many(
        "INSERT INTO transcript_messages (id, owner, source, session_id, key, role, text, tools, at, cwd, project, "
        "model, format, path, offset, ingested_at) VALUES (:id, :o, :src, :sid, :k, :role, :t, :tools, :at, :cwd, "
        ":proj, :model, :fmt, :path, :off, :now)",
        rows,
    )
    for n in later:
        m, revises = batch[n]
        values = _values(owner, m, now)
        results[n] = _rewrite(w, m, revises, values)
    return results


def _values(owner: str, m: StoredMessage, now: int) -> dict[str, Any]:
    return {
        "o": owner,
        "src": m.source,
        "sid": m.session_id,
        "k": m.key,
        "role": m.role,
        "t": m.text,
        "tools": m.tools,
        "at": m.at,
        "cwd": m.cwd,
        "proj": m.project,
        "model": m.model,
        "fmt": m.format,
        "path": m.path,
        "off": m.offset,
        "now": now,
    }


def _rewrite(w: Writer, m: StoredMessage, revises: bool, values: dict[str, Any]) -> tuple[int, bool] | None:
    """A held key: rewritten when its content differs (see `upsert_message`)."""
    found = w.one(
        "SELECT id, role, text, tools FROM transcript_messages WHERE owner = :o AND source = :src AND key = :k", values
    )
    if found is None or (found["text"] == m.text and found["tools"] == m.tools):
        return None
    # A held key with other content is the client's rewrite of that record, flagged or not (a whole-file
    # session re-read from its start has lost the memory that flags it). An erased one stays erased unless
    # the client revised it since.
    if found["role"] == ERASED_ROLE and not revises:
        return None
    w.execute(
        "UPDATE transcript_messages SET session_id = :sid, role = :role, text = :t, tools = :tools, at = :at, "
        "cwd = :cwd, project = :proj, model = :model, format = :fmt, path = :path, offset = :off, "
        "ingested_at = :now WHERE id = :id",
        values | {"id": found["id"]},
    )
    return int(found["id"]), False


def save_last_pass(w: Writer, owner: str, source: str, stats: dict[str, Any], now: int) -> None:
    w.execute(
        "INSERT INTO transcript_sources (owner, source, last_pass, updated_at) VALUES (:o, :s, :l, :n) "
        "ON CONFLICT (owner, source) DO UPDATE SET last_pass = :l, updated_at = :n",
        {"o": owner, "s": source, "l": json.dumps(stats), "n": now},
    )


def last_passes(r: Reader, owner: str) -> dict[str, dict[str, Any]]:
    rows = r.tuples("SELECT source, last_pass FROM transcript_sources WHERE owner = :o", {"o": owner})
    return {str(source): json.loads(stats) for source, stats in rows}


_COVERED: dict[tuple[str, str], tuple[tuple[int, ...], list[Row]]] = {}  # (store, owner): (marks, coverage)
_COVERED_KEPT = 64


def coverage(r: Reader, owner: str) -> list[Row]:
    """Per source: messages, sessions, files and the covered time span (epoch ms) of `owner`'s transcripts.
    Counting reads every one of the owner's messages (95 ms at 40k), so the answer is kept per process until
    a message or file is added or a document removed (erasure: the search generation moves)."""
    files = "MAX(rowid)" if r.dialect == "sqlite" else "COUNT(*)"  # PostgreSQL has no row number: files only grow
    marks = tuple(
        int(v or 0)
        for v in r.tuples(
            f"SELECT (SELECT MAX(id) FROM transcript_messages), (SELECT {files} FROM transcript_files), "
            "(SELECT value FROM search_generation)"
        )[0]
    )
    key = (_database(r), owner)
    kept = _COVERED.get(key)
    if kept is not None and kept[0] == marks:
        return [dict(row) for row in kept[1]]
    found = _coverage(r, owner)
    if len(_COVERED) >= _COVERED_KEPT:
        _COVERED.pop(next(iter(_COVERED)))
    _COVERED[key] = (marks, found)
    return [dict(row) for row in found]


def _database(r: Reader) -> str:
    """Which store `r` reads: the SQLite file, or the PostgreSQL server and database."""
    if r.dialect == "sqlite":
        return str(r.scalar("SELECT file FROM pragma_database_list WHERE seq = 0"))
    return str(r.scalar("SELECT concat_ws(':', inet_server_addr(), inet_server_port(), current_database())"))


def _coverage(r: Reader, owner: str) -> list[Row]:
    rows = r.rows(
        "SELECT source, COUNT(*) AS messages, COUNT(DISTINCT session_id) AS sessions, MIN(at) AS first_at, "
        "MAX(at) AS last_at FROM transcript_messages WHERE owner = :o AND role != :erased "
        "GROUP BY source ORDER BY source",
        {"o": owner, "erased": ERASED_ROLE},
    )
    files = dict(
        r.tuples("SELECT source, COUNT(*) FROM transcript_files WHERE owner = :o GROUP BY source", {"o": owner})
    )
    by_source = {row["source"]: dict(row) | {"files": int(files.get(row["source"], 0))} for row in rows}
    for source, count in files.items():
        by_source.setdefault(
            source,
            {"source": source, "messages": 0, "sessions": 0, "first_at": None, "last_at": None, "files": int(count)},
        )
    return [by_source[s] for s in sorted(by_source)]


def spawned_client_sessions(r: Reader, since: int) -> set[str]:
    """The agent CLIs' own session ids of threadloom's spawned children since `since`: the ids their hooks
    reported (`client_session` in a `client.*` event) from inside a child (`spawned_by`, its hook saw
    THREADLOOM_PARENT_SESSION) or for a threadloom session that has a parent."""
    rows = r.tuples(
        "SELECT e.detail FROM events e LEFT JOIN sessions s ON s.id = e.session_id WHERE e.kind LIKE 'client.%' "
        "AND e.at >= :since AND (s.parent_id IS NOT NULL OR e.detail LIKE '%\"spawned_by\":%')",
        {"since": since},
    )
    found: set[str] = set()
    for (detail,) in rows:
        try:
            value = json.loads(detail).get("client_session")
        except (ValueError, AttributeError):
            continue
        if isinstance(value, str) and value:
            found.add(value)
    return found
