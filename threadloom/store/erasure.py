"""Erasure in the store: every statement `threadloom/erasure/` runs to find and remove one user's text.

What a kind covers (always only rows whose owner is the caller):

- `transcripts`: `transcript_messages` rows. An erased row stays as a tombstone (role `erased`, text,
  tools, cwd, model and project emptied; owner, source, key, session id, time, file and offset kept) so
  that a re-read of its file (replaced, truncated, a damaged cursor) finds the key held and writes
  nothing (`store/transcripts.upsert_message` keeps a held key unless the client revised that message).
- `memories`: `memories` rows (their entities and edges go by ON DELETE CASCADE; a memory one of them
  superseded is made current again) and the caller's pruned memories waiting in `memory_archive`.
- `notes`: `thread_notes` rows the caller wrote (notes and verbatim quotes).
- `claims`: the user model's claims, their evidence and tier history (store/erasure_claims.py); `style`:
  style habits, their sightings, the interaction profile and the capsule's snapshots (store/erasure_style.py).
- `learning`: candidates, concepts, insights, the loop-written skills and lessons planned by
  erasure/learning.py, and their snapshot and trash copies (store/erasure_learning.py). Forgetting
  transcripts or notes drops the candidates quoted from them and the entries planned from those.
  Kinds kept in other modules are listed in `OTHER_KINDS`, each an `Erasable` (its own count and erase).

Each removed row's search document goes through `documents.remove` (FTS5 rows by the external-content
delete trigger, vectors by ON DELETE CASCADE, term counts decremented); a term no document uses any
more is dropped from `document_terms`, and the FTS5 index is merged (`optimize`) so the segments that
still held the deleted terms are rewritten without them. Those three (`PRAGMA secure_delete`, FTS5
commands, `compact`'s VACUUM) are SQLite's; on PostgreSQL a document's terms are a `tsvector` column of its
row and go with it, and `erase` names the tables it changed for the VACUUM after the commit
(store/postgres_vacuum.py, which also says what PostgreSQL keeps).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import apsw

from threadloom.errors import StoreBusy, StoreError
from threadloom.memory.model import memory_document
from threadloom.store import documents
from threadloom.store import erasure_learning as learning
from threadloom.store.base import Reader, Writer
from threadloom.store.erasure_claims import CLAIMS, Erasable, drop_derived
from threadloom.store.erasure_learning_entries import LearningPlan, drop_entries
from threadloom.store.erasure_style import STYLE, drop_examples
from threadloom.store.memories import to_memory

OTHER_KINDS: Final[dict[str, Erasable]] = {CLAIMS.name: CLAIMS, STYLE.name: STYLE}
KINDS: Final = ("transcripts", "memories", "notes", *OTHER_KINDS, "learning")
ERASED_ROLE: Final = "erased"
SAMPLE_CHARS: Final = 80
CHUNK: Final = 500
TOUCHED: Final = "tables_touched"  # PostgreSQL: erase's answer also names the tables to vacuum
_SAME_SOURCE: Final = {"claude": "claude-code", "claude-code": "claude"}  # the one name that differs
_QUOTED: Final = {"transcripts": "message", "notes": "note"}  # a candidate's source, by the kind it quotes


@dataclass(frozen=True)
class Selector:
    """Which rows of the owner's: every given condition must hold (AND). Times are epoch ms."""

    session: str | None = None
    project: str | None = None
    source: str | None = None
    since: int | None = None
    until: int | None = None
    text: str | None = None

    def empty(self) -> bool:
        return all(v is None for v in (self.session, self.project, self.source, self.since, self.until, self.text))


@dataclass(frozen=True)
class _Table:
    table: str
    session: str
    project: str
    source: str
    at: str
    texts: tuple[str, ...]
    live: str  # rows not erased already
    preview: str


_TABLES: Final = {
    "transcripts": _Table(
        "transcript_messages", "session_id", "project", "source", "at", ("text", "tools"),
        f"role <> '{ERASED_ROLE}'", "text",
    ),
    "memories": _Table(
        "memories", "session_id", "project", "vendor", "created_at", ("content", "COALESCE(summary, '')"), "1 = 1",
        "content",
    ),
    "notes": _Table("thread_notes", "session_id", "repo", "vendor", "created_at", ("text",), "1 = 1", "text"),
}  # fmt: skip


def _where(t: _Table, owner: str, sel: Selector) -> tuple[str, dict[str, Any]]:
    clauses = ["owner = :owner", t.live]
    params: dict[str, Any] = {"owner": owner}
    for column, name, value in ((t.session, "session", sel.session), (t.project, "project", sel.project)):
        if value is not None:
            clauses.append(f"{column} = :{name}")
            params[name] = value
    if sel.source is not None:  # a transcript's source is its adapter, a memory's or note's the agent vendor
        clauses.append(f"{t.source} IN (:source, :source_alias)")
        params["source"] = sel.source
        params["source_alias"] = _SAME_SOURCE.get(sel.source, sel.source)
    if sel.since is not None:
        clauses.append(f"{t.at} >= :since")
        params["since"] = sel.since
    if sel.until is not None:
        clauses.append(f"{t.at} < :until")
        params["until"] = sel.until
    if sel.text is not None:  # a plain substring, ASCII letters case-blind; never a pattern
        clauses.append("(" + " OR ".join(f"instr(lower({c}), lower(:text)) > 0" for c in t.texts) + ")")
        params["text"] = sel.text
    return " AND ".join(clauses), params


def matching(
    r: Reader, kind: str, owner: str, sel: Selector, sample: int, plan: LearningPlan | None = None
) -> dict[str, Any]:
    """How many of `owner`'s rows of `kind` the selector picks, and the first few (id, session, at, text)."""
    if kind == "learning":
        return learning.matching(r, owner, sel, sample, plan or LearningPlan())
    if kind in OTHER_KINDS:
        return OTHER_KINDS[kind].matching(r, owner, sel, sample)
    t = _TABLES[kind]
    where, params = _where(t, owner, sel)
    count = int(r.scalar(f"SELECT COUNT(*) FROM {t.table} WHERE {where}", params))
    rows = r.rows(
        f"SELECT id, {t.session} AS session, {t.at} AS at, substr({t.preview}, 1, {SAMPLE_CHARS}) AS text "
        f"FROM {t.table} WHERE {where} ORDER BY {t.at}, id LIMIT :n",
        params | {"n": sample},
    )
    found: dict[str, Any] = {"count": count, "sample": rows}
    if kind in _QUOTED:  # the learning candidates quoted from them go with them
        quoted = learning.derived_candidate_ids(r, owner, _QUOTED[kind], _ids(r, kind, owner, sel))
        found["learning_candidates"] = len(quoted)
    if kind == "memories":
        found["archived"] = len(_archived(r, owner, sel))
    return found


def picked_ids(r: Reader, kind: str, owner: str, sel: Selector) -> list[Any]:
    """Ids of `owner`'s live rows of `kind` (transcripts, memories or notes) the selector picks."""
    return _ids(r, kind, owner, sel)


def _ids(r: Reader, kind: str, owner: str, sel: Selector) -> list[Any]:
    t = _TABLES[kind]
    where, params = _where(t, owner, sel)
    return [i for (i,) in r.tuples(f"SELECT id FROM {t.table} WHERE {where} ORDER BY id", params)]


def _archived(r: Reader, owner: str, sel: Selector) -> list[str]:
    """Ids of `owner`'s pruned memories (payload `{"memory": {...}}`) the selector picks."""
    rows = r.tuples("SELECT id, payload FROM memory_archive WHERE owner = :o", {"o": owner})
    picked: list[str] = []
    for memory_id, payload in rows:
        try:
            m = json.loads(payload).get("memory", {})
        except ValueError:
            m = {}
        if not isinstance(m, dict):
            m = {}
        at = m.get("created_at")
        text = f"{m.get('content') or ''}\n{m.get('summary') or ''}".lower()
        if (
            (sel.session is None or m.get("session_id") == sel.session)
            and (sel.project is None or m.get("project") == sel.project)
            and (sel.source is None or m.get("vendor") in (sel.source, _SAME_SOURCE.get(sel.source)))
            and (sel.since is None or (isinstance(at, int) and at >= sel.since))
            and (sel.until is None or (isinstance(at, int) and at < sel.until))
            and (sel.text is None or _lower_ascii(sel.text) in text)
        ):
            picked.append(str(memory_id))
    return picked


def _lower_ascii(text: str) -> str:
    """As SQLite's lower(): ASCII letters only, so the archive matches like the tables do."""
    return "".join(c.lower() if c.isascii() else c for c in text)


def erase(
    w: Writer, kinds: Sequence[str], owner: str, sel: Selector, plan: LearningPlan | None = None
) -> dict[str, Any]:
    """Remove what `sel` picks of `owner`'s `kinds`, their search documents and the replay records that
    carry them, in the caller's transaction; counts of what went. `plan`: the learning entries to go."""
    sqlite = w.dialect == "sqlite"
    before = int(w.scalar("PRAGMA secure_delete")) if sqlite else 0
    if sqlite:  # freed cells and pages are zeroed as they are freed, in this transaction
        w.execute("PRAGMA secure_delete = ON")
    counts: dict[str, Any] = dict.fromkeys(kinds, 0)
    texts: list[str] = [] if sel.text is None else [_json_fragment(sel.text)]  # as JSON holds them
    memory_ids: list[str] = []
    docs = vectors = 0
    plan = plan or LearningPlan()
    for kind in kinds:
        if kind == "learning":
            gone, traces = learning.erase(w, owner, sel, plan)
            counts |= gone
            texts.extend(_json_fragment(t) for t in traces)
            continue
        if kind in OTHER_KINDS:
            gone, traces = OTHER_KINDS[kind].erase(w, owner, sel)
            counts |= gone
            texts.extend(_json_fragment(t) for t in traces)
            continue
        ids = _ids(w, kind, owner, sel)
        if kind == "memories":
            archived = _archived(w, owner, sel)
            for chunk in _chunks(archived):
                w.execute(f"DELETE FROM memory_archive WHERE id IN ({_keys(chunk)})", _named(chunk))
            counts["memories_archived"] = len(archived)
            memory_ids.extend(str(i) for i in ids + archived)
        if kind in ("transcripts", "notes"):  # the candidates quoted from them
            counts[f"learning_from_{kind}"], traces = learning.drop_derived(w, owner, _QUOTED[kind], ids)
            texts.extend(_json_fragment(t) for t in traces)
        if kind == "notes":
            texts.extend(_json_fragment(t[:100]) for (t,) in _texts(w, "thread_notes", "text", ids))
        if kind == "transcripts":
            texts.extend(_json_fragment(e) for e in drop_examples(w, owner, _sessions(w, ids)))
            counts["claims_derived"], traces = drop_derived(w, owner, ids)
            texts.extend(_json_fragment(t) for t in traces)
        doc_refs = _document_refs(w, kind, ids)
        vectors += _vector_count(w, doc_refs)
        for doc_kind, ref in doc_refs:
            docs += documents.remove(w, doc_kind, ref)
        _remove_rows(w, kind, ids)
        counts[kind] = len(ids)
    if (plan.entries or plan.quoted) and "learning" not in kinds:  # entries written from the candidates just dropped
        counts |= drop_entries(w, owner, plan)
    counts["documents"] = docs
    counts["vectors"] = vectors
    counts["replay_records"] = _drop_replays(w, owner, memory_ids + texts, memory_ids)
    counts["events"] = _blank_events(w, owner, texts)
    w.execute("DELETE FROM document_terms WHERE df <= 0 AND term <> ''")  # a term left behind names the text
    if not sqlite:  # a document's terms are a column of its row; VACUUM follows the commit (postgres_vacuum.py)
        counts[TOUCHED] = touched_tables(w)
        return counts
    if docs:
        w.execute("INSERT INTO documents_fts (documents_fts) VALUES ('optimize')")
    w.execute(f"PRAGMA secure_delete = {before}")  # the connection's later writes go back to the usual cost
    return counts


def touched_tables(r: Reader) -> list[str]:
    """PostgreSQL: tables this transaction deleted or updated rows of, cascades and triggers' included."""
    rows = r.tuples(
        "SELECT relname FROM pg_stat_xact_user_tables WHERE schemaname = current_schema() "
        "AND n_tup_del + n_tup_upd > 0 ORDER BY relname"
    )
    return [str(name) for (name,) in rows]


def _sessions(r: Reader, ids: list[Any]) -> set[str]:
    """The erased messages' sessions, as style learning names them ("<source>:<session id>")."""
    found: set[str] = set()
    for chunk in _chunks(ids):
        sql = f"SELECT DISTINCT source || ':' || session_id FROM transcript_messages WHERE id IN ({_keys(chunk)})"
        found.update(s for (s,) in r.tuples(sql, _named(chunk)))
    return found


def _document_refs(r: Reader, kind: str, ids: list[Any]) -> list[tuple[str, str]]:
    if kind == "transcripts":
        return [("transcript", str(i)) for i in ids]
    if kind == "memories":
        return [("memory", str(i)) for i in ids]
    refs: list[tuple[str, str]] = []
    for chunk in _chunks(ids):
        rows = r.tuples(f"SELECT id, kind FROM thread_notes WHERE id IN ({_keys(chunk)})", _named(chunk))
        refs.extend(("quote" if k == "quote" else "note", str(i)) for i, k in rows)
    return refs


def _vector_count(r: Reader, refs: list[tuple[str, str]]) -> int:
    total = 0
    for chunk in _chunks(refs):
        total += int(
            r.scalar(
                "SELECT COUNT(*) FROM json_each(:refs) j CROSS JOIN documents d "
                "ON d.kind = json_extract(j.value, '$[0]') AND d.ref = json_extract(j.value, '$[1]') "
                "CROSS JOIN document_vectors v ON v.doc_id = d.id",
                {"refs": json.dumps(chunk)},
            )
        )
    return total


def _remove_rows(w: Writer, kind: str, ids: list[Any]) -> None:
    for chunk in _chunks(ids):
        keys, named = _keys(chunk), _named(chunk)
        if kind == "transcripts":
            w.execute(
                f"UPDATE transcript_messages SET role = '{ERASED_ROLE}', text = '', tools = '[]', cwd = NULL, "
                f"model = NULL, project = NULL WHERE id IN ({keys})",
                named,
            )
        elif kind == "memories":
            # A memory an erased one superseded holds again (as MemoryService.delete does).
            revived = w.tuples(f"SELECT id FROM memories WHERE superseded_by IN ({keys})", named)
            w.execute(
                f"UPDATE memories SET superseded_by = NULL, valid_to = NULL WHERE superseded_by IN ({keys})", named
            )
            w.execute(f"DELETE FROM memories WHERE id IN ({keys})", named)
            for (memory_id,) in revived:
                row = w.one("SELECT * FROM memories WHERE id = :id", {"id": memory_id})
                if row is not None:
                    documents.upsert(w, memory_document(to_memory(row)), int(row["created_at"]))
        else:
            w.execute(f"DELETE FROM thread_notes WHERE id IN ({keys})", named)


def _texts(r: Reader, table: str, column: str, ids: list[Any]) -> list[tuple[str]]:
    found: list[tuple[str]] = []
    for chunk in _chunks(ids):
        found.extend(r.tuples(f"SELECT {column} FROM {table} WHERE id IN ({_keys(chunk)})", _named(chunk)))
    return found


def _json_fragment(text: str) -> str:
    """`text` as it appears inside a JSON string written by json.dumps (replay records are)."""
    return json.dumps(text)[1:-1]


def _drop_replays(w: Writer, owner: str, fragments: list[str], memory_ids: list[str]) -> int:
    """Delete the idempotency replay records (threadloom/requests.py) whose kept result carries what went, counting
    `owner`'s: theirs holding one of `fragments` (an erased memory's id, a note's text, the text selector), and
    anyone's holding an erased memory's id (another user's amend `by` a shared memory keeps its text)."""
    wanted, gone = [_lower_ascii(f) for f in fragments if f], 0
    sql = "SELECT owner, tool, key, result FROM tool_requests WHERE result IS NOT NULL AND (:all = 1 OR owner = :o)"
    for who, tool, key, result in w.tuples(sql, {"all": int(bool(memory_ids)), "o": owner}):
        if any(f in _lower_ascii(result) for f in (wanted if who == owner else memory_ids)):
            where = {"o": who, "t": tool, "k": key}
            dropped = w.execute("DELETE FROM tool_requests WHERE owner = :o AND tool = :t AND key = :k", where)
            gone += dropped if who == owner else 0
    return gone


def _blank_events(w: Writer, owner: str, fragments: list[str]) -> int:
    """Empty the detail of the events of `owner`'s sessions that carry erased text (a correction's reason)."""
    blanked = 0
    for fragment in (f for f in fragments if f):
        blanked += w.execute(
            "UPDATE events SET detail = '{\"erased\":true}' WHERE instr(lower(detail), lower(:f)) > 0 "
            "AND session_id IN (SELECT id FROM sessions WHERE user = :o)",
            {"f": fragment, "o": owner},
        )
    return blanked


def _chunks(items: Sequence[Any]) -> list[Sequence[Any]]:
    return [items[i : i + CHUNK] for i in range(0, len(items), CHUNK)]


def _keys(chunk: Sequence[Any]) -> str:
    return ", ".join(f":i{n}" for n in range(len(chunk)))


def _named(chunk: Sequence[Any]) -> dict[str, Any]:
    return {f"i{n}": v for n, v in enumerate(chunk)}


def compact(path: Path, busy_timeout_ms: int = 10_000) -> dict[str, Any]:
    """Make the file hold only live data: fold the write-ahead log into the database and empty it,
    rebuild the database (VACUUM: every page rewritten, the file cut to its new size), and empty the log
    again. `complete` is False when a reader of another process kept the log from being emptied (its
    frames may still hold erased text until the next checkpoint; run `forget` again or stop the servers)."""
    wal = path.with_name(path.name + "-wal")
    before = path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READWRITE)
    try:
        conn.set_busy_timeout(busy_timeout_ms)
        conn.execute("PRAGMA secure_delete = ON")
        busy = int(next(iter(conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")))[0])
        conn.execute("VACUUM")
        busy += int(next(iter(conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")))[0])
    except apsw.BusyError:
        raise StoreBusy("the store stayed busy while compacting; the rows are erased, run forget again") from None
    except apsw.Error as exc:
        raise StoreError(
            f"compacting {path} failed: {exc}; the rows are erased, the file may still hold them"
        ) from None
    finally:
        conn.close()
    wal_bytes = wal.stat().st_size if wal.exists() else 0
    return {
        "bytes_before": before,
        "db_bytes": path.stat().st_size,
        "wal_bytes": wal_bytes,
        "complete": busy == 0 and wal_bytes == 0,
    }
