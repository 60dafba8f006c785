"""Ingested transcripts (m019), on request only (`export --with-transcripts`): `transcripts.jsonl`, one
message a line. A message's key is the agent CLI's own (unique within its source), so it means the same on
every machine: a message the importer holds under that key stays as it is here. Messages `forget` erased
are not exported (their tombstones stay where they were made). The file cursors are this machine's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from threadloom.errors import InvalidInput
from threadloom.ingest.convert import Prepared, document, search_text
from threadloom.portable import format as f
from threadloom.portable.memories import fenced
from threadloom.portable.registry import Context
from threadloom.search.engine import SearchEngine
from threadloom.search.model import Document
from threadloom.store.base import Reader, Writer
from threadloom.store.transcripts import ERASED_ROLE, StoredMessage

_COLUMNS = ("source", "session_id", "key", "role", "text", "tools", "at", "cwd", "project", "model", "format")
_COLUMNS_MORE = ("path", "offset")
_BATCH = 2000
_TEXT = 1_000_000


class Transcripts:
    name = "transcripts"

    def export(self, r: Reader, user: str) -> Iterator[dict[str, Any]]:
        after = ("", "")
        while True:
            rows = r.rows(
                f"SELECT {', '.join((*_COLUMNS, *_COLUMNS_MORE))} FROM transcript_messages WHERE owner = :u "
                "AND role <> :erased AND (source, key) > (:s, :k) ORDER BY source, key LIMIT :n",
                {"u": user, "erased": ERASED_ROLE, "s": after[0], "k": after[1], "n": _BATCH},
            )
            for row in rows:
                record = {c: row[c] for c in (*_COLUMNS, *_COLUMNS_MORE)}
                yield record | {"tools": json.loads(row["tools"])}
            if len(rows) < _BATCH:
                break
            after = (rows[-1]["source"], rows[-1]["key"])

    def markdown(self, record: dict[str, Any]) -> str:
        return f"## {record['source']} {record['session_id']} · {record['role']}\n\n{fenced(record['text'])}\n"

    def parse(self, line: f.Line) -> f.Line:
        rec, where = line.record, line.where
        for key in ("source", "format"):
            f.text(rec, key, where, 64)
        for key in ("session_id", "key"):
            f.text(rec, key, where, 400)
        f.text(rec, "role", where, 32)
        if rec["role"] == ERASED_ROLE:
            raise InvalidInput(f"{where}: an erased message is not imported")
        if f.text(rec, "text", where, _TEXT, optional=True) is None:
            raise InvalidInput(f"{where}: text must be a string")
        for key in ("cwd", "project", "model"):
            f.text(rec, key, where, 4096, optional=True)
        f.text(rec, "path", where, 4096)
        f.integer(rec, "offset", where, high=2**62)
        f.integer(rec, "at", where, optional=True)
        tools = f.records(rec, "tools", where, 1000)
        if len(json.dumps(tools)) > _TEXT or any(not isinstance(t.get("name"), str) for t in tools):
            raise InvalidInput(f"{where}: tools must be at most {_TEXT:,} characters of calls, each with a name")
        return line

    def merge(self, r: Reader, w: Writer | None, ctx: Context, items: list[f.Line]) -> dict[str, int]:
        counts = {"messages_added": 0, "messages_present": 0}
        planned: set[tuple[str, str]] = set()
        docs: list[Document] = []
        for item in items:
            rec = item.record
            key = (rec["source"], rec["key"])
            present = key in planned or r.scalar(
                "SELECT 1 FROM transcript_messages WHERE owner = :o AND source = :s AND key = :k",
                {"o": ctx.user, "s": key[0], "k": key[1]},
            )
            planned.add(key)
            counts["messages_present" if present else "messages_added"] += 1
            if w is None or present:
                continue
            tools = [{k: ctx.scrubber.text(v) if isinstance(v, str) else v for k, v in t.items()} for t in rec["tools"]]
            fields = {c: rec[c] for c in (*_COLUMNS, *_COLUMNS_MORE)}
            m = StoredMessage(**(fields | {"text": ctx.scrubber.text(rec["text"]), "tools": json.dumps(tools)}))
            row_id = w.insert(
                "INSERT INTO transcript_messages (owner, source, session_id, key, role, text, tools, at, cwd, project, "
                "model, format, path, offset, ingested_at) VALUES (:o, :source, :session_id, :key, :role, :text, "
                ":tools, :at, :cwd, :project, :model, :format, :path, :offset, :now)",
                {**m.__dict__, "o": ctx.user, "now": ctx.now},
            )
            doc = document(row_id, Prepared.with_body(m, False, search_text(m.text, tools)))
            if doc is not None:
                docs.append(doc)
        if w is not None and docs:
            SearchEngine.index_many(w, docs)
        return counts


TRANSCRIPTS = Transcripts()
