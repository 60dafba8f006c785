"""Thread notes and the user's verbatim quotes (`thread_notes`): `notes.jsonl`.

Exported: the rows the caller wrote (owner). A note has no id that means anything on another machine, so
its key is what it is: repository, project, thread, kind, when and its text; a row with that key is not
imported twice. A note consolidation merged into another (`superseded_by`) names its survivor by a digest of
that key, since the survivor shares its repository, project, thread and kind; it is imported superseded and out
of the search index, as consolidation left it. The thread files themselves live in the repository and travel
with it through git.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

from threadloom.errors import InvalidInput
from threadloom.portable import format as f
from threadloom.portable.memories import fenced
from threadloom.portable.registry import Context
from threadloom.search.model import Document
from threadloom.store import documents
from threadloom.store.base import Reader, Writer
from threadloom.threads.model import check_thread_id
from threadloom.threads.notes import MAX_NOTE_CHARS, NOTE_KINDS

_KINDS = (*NOTE_KINDS, "quote")
_COLUMNS = ("kind", "repo", "project", "thread", "text", "session_id", "vendor", "created_at")
_PLACE = ("repo", "project", "thread", "kind")


def note_key(rec: dict[str, Any]) -> str:
    """A note's identity across machines: a digest of its place, its time and its text."""
    fields = [rec["repo"], rec["project"], rec["thread"], rec["kind"], rec["created_at"], rec["text"]]
    return hashlib.sha256(json.dumps(fields, ensure_ascii=False).encode()).hexdigest()


class Notes:
    name = "notes"

    def export(self, r: Reader, user: str) -> Iterator[dict[str, Any]]:
        survivors = {
            int(row["id"]): note_key(row)
            for row in r.rows(
                f"SELECT s.id, {', '.join('s.' + c for c in _COLUMNS)} FROM thread_notes s WHERE s.owner = :u "
                "AND s.id IN (SELECT n.superseded_by FROM thread_notes n WHERE n.owner = :u)",
                {"u": user},
            )
        }
        for row in r.rows(
            f"SELECT {', '.join(_COLUMNS)}, superseded_by FROM thread_notes WHERE owner = :u "
            "ORDER BY created_at, kind, repo, project, COALESCE(thread, ''), text",
            {"u": user},
        ):
            record = {column: row[column] for column in _COLUMNS}
            if row["superseded_by"] is not None and int(row["superseded_by"]) in survivors:
                record["superseded_by"] = survivors[int(row["superseded_by"])]
            yield record

    def markdown(self, record: dict[str, Any]) -> str:
        place = f"{record['project']}/{record['thread'] or '(project)'}"
        return f"## {record['kind']} · {place}\n\n{fenced(record['text'])}\n"

    def parse(self, line: f.Line) -> f.Line:
        rec, where = line.record, line.where
        f.choice(rec, "kind", where, _KINDS)
        f.text(rec, "repo", where, 4096)
        f.text(rec, "project", where, 4096)
        if f.text(rec, "thread", where, 64, optional=True) is not None:
            f.checked(check_thread_id, rec["thread"], where)
        f.text(rec, "text", where, MAX_NOTE_CHARS)
        f.text(rec, "session_id", where, 200, optional=True)
        f.text(rec, "vendor", where, 64)
        f.integer(rec, "created_at", where)
        f.text(rec, "superseded_by", where, 64, optional=True)
        return line

    def merge(self, r: Reader, w: Writer | None, ctx: Context, items: list[f.Line]) -> dict[str, int]:
        counts = {"notes_added": 0, "notes_present": 0}
        planned: set[tuple[Any, ...]] = set()
        for item in items:
            rec = dict(item.record, text=ctx.scrubber.text(item.record["text"]))
            key = tuple(rec[c] for c in ("repo", "project", "thread", "kind", "created_at", "text"))
            present = key in planned or r.scalar(
                "SELECT 1 FROM thread_notes WHERE owner = :owner AND repo = :repo AND project = :project "
                "AND COALESCE(thread, '') = COALESCE(:thread, '') AND kind = :kind AND created_at = :created_at "
                "AND text = :text",
                {"owner": ctx.user, **{c: rec[c] for c in _COLUMNS if c not in ("session_id", "vendor")}},
            )
            planned.add(key)
            counts["notes_present" if present else "notes_added"] += 1
            if w is not None and not present:
                self._insert(w, ctx, rec)
        self._supersede(r, w, ctx, items)
        return counts

    def _supersede(self, r: Reader, w: Writer | None, ctx: Context, items: list[f.Line]) -> None:
        """Point each imported merged note at its survivor, found by key among this user's notes in its
        place (the file's own notes are there by now, or planned in a dry run)."""
        in_file = {note_key(dict(i.record, text=ctx.scrubber.text(i.record["text"]))) for i in items}
        for item in items:
            wanted = item.record.get("superseded_by")
            if not wanted:
                continue
            rec = dict(item.record, text=ctx.scrubber.text(item.record["text"]))
            rows = r.rows(
                f"SELECT id, {', '.join(_COLUMNS)} FROM thread_notes WHERE owner = :owner AND repo = :repo "
                "AND project = :project AND COALESCE(thread, '') = COALESCE(:thread, '') AND kind = :kind",
                {"owner": ctx.user, **{c: rec[c] for c in _PLACE}},
            )
            ids = {note_key(row): int(row["id"]) for row in rows}
            if wanted not in ids and (w is not None or wanted not in in_file):
                raise InvalidInput(f"{item.where}: superseded_by names no note in its thread in this file or store")
            if w is None or wanted not in ids:
                continue
            merged = ids.get(note_key(rec))
            if merged is not None and merged != ids[wanted]:
                w.execute(
                    "UPDATE thread_notes SET superseded_by = :s WHERE id = :m AND superseded_by IS NULL",
                    {"s": ids[wanted], "m": merged},
                )
                documents.remove(w, "quote" if rec["kind"] == "quote" else "note", str(merged))

    def _insert(self, w: Writer, ctx: Context, rec: dict[str, Any]) -> None:
        note_id = w.insert(
            "INSERT INTO thread_notes (repo, project, thread, kind, text, session_id, vendor, owner, created_at) "
            "VALUES (:repo, :project, :thread, :kind, :text, :session_id, :vendor, :owner, :created_at)",
            {**{c: rec[c] for c in _COLUMNS}, "owner": ctx.user},
        )
        # As threads/notes.py indexes a note: the repository as the document's project.
        documents.upsert(
            w,
            Document(
                kind="quote" if rec["kind"] == "quote" else "note",
                ref=str(note_id),
                body=rec["text"],
                project=rec["repo"],
                thread=f"{rec['project']}/{rec['thread']}" if rec["thread"] else None,
                source=rec["kind"],
                occurred_at=rec["created_at"],
            ),
            ctx.now,
        )


NOTES = Notes()
