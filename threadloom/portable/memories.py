"""Memories with their validity, supersession and the edges between them: `memories.jsonl`.

Only the caller's own memories leave (`owner`), and an edge only when both its ends are theirs. On import a
memory whose text the importer already has in that project (the store's own duplicate rule: owner, project,
content hash) is merged into that one; an id taken here by another memory gets a derived one; edges follow.
Usage counters (decay score) are this machine's and are recomputed, not carried.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from threadloom.errors import InvalidInput
from threadloom.memory.model import (
    EDGE_TYPES,
    LIFECYCLE,
    MAX_CONTENT_CHARS,
    MAX_ENTITIES,
    MAX_SUMMARY_CHARS,
    MEMORY_KINDS,
    VISIBILITIES,
    check_core_key,
    content_digest,
    memory_document,
)
from threadloom.portable import format as f
from threadloom.portable.registry import Context
from threadloom.search.engine import SearchEngine
from threadloom.store import memories
from threadloom.store.base import Reader, Row, Writer
from threadloom.store.roles import require_shared_write

_BATCH = 1000
_ID_RE = re.compile(r"^m_[0-9a-f]{16}$")  # memory/model.py's shape; another id is remade here
_ID_LIMIT = 64
_PATH_LIMIT = 4096


@dataclass(frozen=True)
class Item:
    where: str
    record: dict[str, Any]


def _memory_record(row: Row) -> dict[str, Any]:
    return {
        "type": "memory",
        "id": row["id"],
        "content": row["content"],
        "summary": row["summary"],
        "category": row["category"],
        "kind": row["kind"],
        "entities": json.loads(row["entities"]),
        "project": row["project"],
        "visibility": row["visibility"],
        "status": row["status"],
        "pinned": bool(row["pinned"]),
        "core_key": row["core_key"],
        "core_priority": row["core_priority"],
        "session_id": row["session_id"],
        "vendor": row["vendor"],
        "origin": row["origin"],
        "created_at": row["created_at"],
        "valid_from": row["valid_from"],
        "valid_to": row["valid_to"],
        "superseded_by": row["superseded_by"],
    }


class Memories:
    name = "memories"

    def export(self, r: Reader, user: str) -> Iterator[dict[str, Any]]:
        after = ""
        while True:  # keyset pages: a large store is never one list
            rows = r.rows(
                "SELECT * FROM memories WHERE owner = :u AND id > :after ORDER BY id LIMIT :n",
                {"u": user, "after": after, "n": _BATCH},
            )
            yield from (_memory_record(row) for row in rows)
            if len(rows) < _BATCH:
                break
            after = rows[-1]["id"]
        for row in r.rows(
            "SELECT e.* FROM memory_edges e JOIN memories s ON s.id = e.source JOIN memories t ON t.id = e.target "
            "WHERE s.owner = :u AND t.owner = :u ORDER BY e.source, e.target, e.type",
            {"u": user},
        ):
            yield {
                "type": "edge",
                "source": row["source"],
                "target": row["target"],
                "edge_type": row["type"],
                "weight": row["weight"],
                "made_by": row["made_by"],
                "reason": row["reason"],
                "session_id": row["session_id"],
                "created_at": row["created_at"],
            }

    def markdown(self, record: dict[str, Any]) -> str:
        if record["type"] != "memory":
            return ""
        state = "superseded" if record["superseded_by"] else record["status"]
        lines = [f"## {record['id']} · {record['kind']} · {state}", ""]
        if record["summary"]:
            lines.append(f"**{_inline(record['summary'])}**\n")
        lines.append(fenced(record["content"]))
        facts = [f"project: `{_inline(record['project'] or '-')}`", f"visibility: {record['visibility']}"]
        if record["entities"]:
            facts.append("entities: " + ", ".join(_inline(e) for e in record["entities"]))
        if record["superseded_by"]:
            facts.append(f"superseded by {record['superseded_by']}")
        return "\n".join(lines) + "\n" + " · ".join(facts) + "\n\n"

    def parse(self, line: f.Line) -> Item:
        rec, where = line.record, line.where
        kind = f.choice(rec, "type", where, ("memory", "edge"))
        if kind == "edge":
            f.text(rec, "source", where, _ID_LIMIT)
            f.text(rec, "target", where, _ID_LIMIT)
            f.choice(rec, "edge_type", where, EDGE_TYPES)
            f.number(rec, "weight", where, 0.0, 1.0)
            f.text(rec, "made_by", where, 100)
            f.text(rec, "reason", where, 2000, optional=True)
            f.text(rec, "session_id", where, 200, optional=True)
            f.integer(rec, "created_at", where)
            return Item(where, rec)
        f.text(rec, "id", where, _ID_LIMIT)
        f.text(rec, "content", where, MAX_CONTENT_CHARS)
        f.text(rec, "summary", where, MAX_SUMMARY_CHARS, optional=True)
        f.text(rec, "category", where, 100, optional=True)
        f.choice(rec, "kind", where, MEMORY_KINDS)
        f.strings(rec, "entities", where, MAX_ENTITIES, 200)
        f.text(rec, "project", where, _PATH_LIMIT, optional=True)
        f.choice(rec, "visibility", where, VISIBILITIES)
        f.choice(rec, "status", where, LIFECYCLE)
        f.boolean(rec, "pinned", where)
        if f.text(rec, "core_key", where, 80, optional=True) is not None:
            f.checked(check_core_key, rec["core_key"], where)
        f.integer(rec, "core_priority", where, optional=True, high=1000)
        f.text(rec, "session_id", where, 200, optional=True)
        f.text(rec, "vendor", where, 64)
        f.text(rec, "origin", where, 200)
        for key in ("created_at", "valid_from"):
            f.integer(rec, key, where)
        f.integer(rec, "valid_to", where, optional=True)
        f.text(rec, "superseded_by", where, _ID_LIMIT, optional=True)
        return Item(where, rec)

    def merge(self, r: Reader, w: Writer | None, ctx: Context, items: list[Item]) -> dict[str, int]:
        counts = {"memories_added": 0, "memories_merged": 0, "core_keys_dropped": 0, "edges_added": 0}
        counts["edges_present"] = 0
        planned: dict[tuple[str, str], str] = {}  # (project, hash) -> id, for duplicates inside the file
        cores: set[tuple[str, str]] = set()
        added: list[tuple[str, Item]] = []
        seen: set[str] = set()
        for item in (i for i in items if i.record["type"] == "memory"):
            rec = item.record
            if rec["id"] in seen:
                raise InvalidInput(f"{item.where}: memory id {rec['id']} appears twice in the file")
            seen.add(rec["id"])
            values = self._values(ctx, rec)
            require_shared_write(r, ctx.user, values["visibility"], values["project"], values["org"], "import")
            key = (values["project"] or "", values["content_hash"])
            local = planned.get(key) or r.scalar(
                "SELECT id FROM memories WHERE owner = :o AND COALESCE(project, '') = :p AND content_hash = :h",
                {"o": ctx.user, "p": key[0], "h": key[1]},
            )
            if local is not None:
                ctx.ids[rec["id"]] = str(local)
                counts["memories_merged"] += 1
                continue
            memory_id = rec["id"]
            if not _ID_RE.match(memory_id) or r.scalar("SELECT 1 FROM memories WHERE id = :i", {"i": memory_id}):
                memory_id = ctx.local_id("m_", rec["id"], values["content_hash"])
                if r.scalar("SELECT 1 FROM memories WHERE id = :i", {"i": memory_id}):
                    raise InvalidInput(f"{item.where}: memory id {rec['id']} collides here twice over; not imported")
            values["id"] = memory_id
            if values["core_key"] is not None:
                core = (key[0], values["core_key"])
                if core in cores or memories.by_core_key(r, ctx.user, values["project"], values["core_key"]):
                    values["core_key"] = values["core_priority"] = None
                    counts["core_keys_dropped"] += 1
                cores.add(core)
            planned[key] = ctx.ids[rec["id"]] = memory_id
            added.append((memory_id, item))
            counts["memories_added"] += 1
            if w is not None:
                memories.insert(w, values)
        for memory_id, item in added:
            rec = item.record
            successor = rec["superseded_by"] and self._end(r, ctx, item, rec["superseded_by"], "superseded_by")
            if w is not None and (rec["status"] != "active" or rec["valid_to"] is not None or successor):
                memories.update(w, memory_id, status=rec["status"], valid_to=rec["valid_to"], superseded_by=successor)
        if w is not None:  # indexed together: term counts once per distinct stem (SearchEngine.index_many)
            found = memories.get_many(w, [memory_id for memory_id, _ in added])
            SearchEngine.index_many(w, [memory_document(found[memory_id]) for memory_id, _ in added])
        for item in (i for i in items if i.record["type"] == "edge"):
            ends = [self._end(r, ctx, item, item.record[end]) for end in ("source", "target")]
            if ends[0] == ends[1]:
                continue  # two merged duplicates: an edge from a memory to itself means nothing
            exists = r.scalar(
                "SELECT 1 FROM memory_edges WHERE source = :s AND target = :t AND type = :y",
                {"s": ends[0], "t": ends[1], "y": item.record["edge_type"]},
            )
            counts["edges_present" if exists else "edges_added"] += 1
            if w is not None and not exists:
                self._insert_edge(w, ends, item.record)
        return counts

    def _values(self, ctx: Context, rec: dict[str, Any]) -> dict[str, Any]:
        content = ctx.scrubber.text(rec["content"])
        entities = list(dict.fromkeys(e.strip() for e in ctx.scrubber.texts(rec["entities"]) if e.strip()))
        return {
            "id": rec["id"],
            "content": content,
            "summary": ctx.scrubber.optional(rec["summary"]),
            "category": ctx.scrubber.optional(rec["category"]),
            "kind": rec["kind"],
            "entities": json.dumps(entities),
            "project": rec["project"],
            "visibility": rec["visibility"],
            "owner": ctx.user,  # imported items are the importer's, whoever wrote them elsewhere
            "org": ctx.org,
            "status": rec["status"],
            "pinned": int(rec["pinned"]),
            "core_key": rec["core_key"],
            "core_priority": rec["core_priority"] if rec["core_key"] is not None else None,
            "session_id": rec["session_id"],
            "vendor": rec["vendor"],
            "origin": rec["origin"],
            "content_hash": content_digest(content),
            "idempotency_key": None,
            "created_at": rec["created_at"],
            "valid_from": rec["valid_from"],
            "decay_score": 0.0,
        }

    def _end(self, r: Reader, ctx: Context, item: Item, foreign: str, field: str = "the edge") -> str:
        local = ctx.ids.get(foreign)
        if local is not None:
            return local
        if r.scalar("SELECT 1 FROM memories WHERE id = :i AND owner = :o", {"i": foreign, "o": ctx.user}):
            return foreign
        raise InvalidInput(
            f"{item.where}: {field} names memory {foreign[:64]!r}, which is in neither the file nor your store"
        )

    def _insert_edge(self, w: Writer, ends: list[str], rec: dict[str, Any]) -> None:
        w.execute(
            "INSERT INTO memory_edges (source, target, type, weight, made_by, reason, session_id, created_at) "
            "VALUES (:s, :t, :y, :weight, :by, :reason, :sid, :at)",
            {
                "s": ends[0],
                "t": ends[1],
                "y": rec["edge_type"],
                "weight": rec["weight"],
                "by": rec["made_by"],
                "reason": rec["reason"],
                "sid": rec["session_id"],
                "at": rec["created_at"],
            },
        )


def fenced(value: str) -> str:
    """Stored text as a code block no Markdown inside can close: the fence is longer than any backtick run."""
    longest = max((len(run) for run in re.findall(r"`+", value)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{value}\n{fence}\n"


def _inline(value: str) -> str:
    """Text on one line of Markdown, its markup characters escaped (an entity cannot open a link or a tag)."""
    return "".join("\\" + c if c in "\\`*_[]<>#|" else " " if c in "\r\n" else c for c in value)


MEMORIES = Memories()
