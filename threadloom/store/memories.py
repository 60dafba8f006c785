"""The memory graph in SQLite: memories, their entities, typed edges, the prune archive and
job leases. Plain SQL both dialects accept where it costs nothing; the service sees rows.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from threadloom.memory.model import Edge, Memory
from threadloom.search.model import MemoryScope, Viewer
from threadloom.store.base import Reader, Row, Writer
from threadloom.store.sql import placeholders
from threadloom.store.visibility import memory_scope_sql, seen_by, visibility_sql

_CHUNK = 400


def to_memory(row: Row) -> Memory:
    return Memory(
        id=row["id"],
        content=row["content"],
        summary=row["summary"],
        category=row["category"],
        kind=row["kind"],
        entities=tuple(json.loads(row["entities"])),
        project=row["project"],
        visibility=row["visibility"],
        owner=row["owner"],
        status=row["status"],
        pinned=bool(row["pinned"]),
        core_key=row["core_key"],
        core_priority=row["core_priority"],
        session_id=row["session_id"],
        vendor=row["vendor"],
        origin=row["origin"],
        created_at=int(row["created_at"]),
        last_reactivated_at=int(row["last_reactivated_at"]),
        reactivation_count=int(row["reactivation_count"]),
        valid_from=int(row["valid_from"]),
        valid_to=row["valid_to"],
        superseded_by=row["superseded_by"],
        decay_score=float(row["decay_score"]),
        org=row["org"] or row["owner"],
    )


def to_edge(row: Row) -> Edge:
    return Edge(
        source=row["source"],
        target=row["target"],
        type=row["type"],
        weight=float(row["weight"]),
        made_by=row["made_by"],
        created_at=int(row["created_at"]),
        reason=row["reason"],
    )


# memories


def insert(w: Writer, values: dict[str, Any]) -> None:
    insert_many(w, [values])


def insert_many(w: Writer, rows: Sequence[dict[str, Any]]) -> None:
    """New memories and their entities: a statement per table for the whole batch (store/base.py)."""
    w.execute_many(
        "INSERT INTO memories (id, content, summary, category, kind, entities, project, visibility, owner, org, "
        "status, pinned, core_key, core_priority, session_id, vendor, origin, content_hash, request_key, created_at, "
        "last_reactivated_at, reactivation_count, valid_from, valid_to, superseded_by, decay_score, scored_at) "
        "VALUES (:id, :content, :summary, :category, :kind, :entities, :project, :visibility, :owner, :org, :status, "
        ":pinned, :core_key, :core_priority, :session_id, :vendor, :origin, :content_hash, :idempotency_key, "
        ":created_at, :created_at, 0, :valid_from, NULL, NULL, :decay_score, :created_at)",
        rows,
    )
    w.execute_many(
        "INSERT INTO memory_entities (memory_id, entity) VALUES (:id, :entity) ON CONFLICT DO NOTHING",
        [{"id": values["id"], "entity": entity} for values in rows for entity in json.loads(values["entities"])],
    )


def get(r: Reader, memory_id: str, viewer: Viewer | None = None) -> Memory | None:
    """The memory, if it exists and (given a viewer) that viewer may see it."""
    seen, params = seen_by(viewer)
    row = r.one(f"SELECT * FROM memories m WHERE m.id = :id AND {seen}", params | {"id": memory_id})
    return to_memory(row) if row else None


def get_many(r: Reader, ids: Sequence[str], viewer: Viewer | None = None) -> dict[str, Memory]:
    seen, seen_params = seen_by(viewer)
    found: dict[str, Memory] = {}
    for start in range(0, len(ids), _CHUNK):
        keys, params = placeholders("i", ids[start : start + _CHUNK])
        found.update(
            (row["id"], to_memory(row))
            for row in r.rows(f"SELECT * FROM memories m WHERE m.id IN ({keys}) AND {seen}", params | seen_params)
        )
    return found


def by_idempotency_key(r: Reader, owner: str, key: str) -> Memory | None:
    row = r.one("SELECT * FROM memories WHERE owner = :o AND request_key = :k", {"o": owner, "k": key})
    return to_memory(row) if row else None


def by_content(r: Reader, owner: str, project: str | None, digest: str) -> Memory | None:
    row = r.one(
        "SELECT * FROM memories WHERE owner = :o AND COALESCE(project, '') = :p AND content_hash = :h",
        {"o": owner, "p": project or "", "h": digest},
    )
    return to_memory(row) if row else None


def by_core_key(r: Reader, owner: str, project: str | None, key: str) -> Memory | None:
    row = r.one(
        "SELECT * FROM memories WHERE owner = :o AND COALESCE(project, '') = :p AND core_key = :k",
        {"o": owner, "p": project or "", "k": key},
    )
    return to_memory(row) if row else None


def listing(r: Reader, scope: MemoryScope, statuses: Sequence[str], limit: int, order: str) -> list[Memory]:
    """Memories passing `scope`, newest activity first (`order` is `active` or `created`)."""
    where, params = memory_scope_sql(scope)
    if statuses:
        keys, status_params = placeholders("s", list(statuses))
        where += f" AND m.status IN ({keys})"
        params |= status_params
    column = "m.last_reactivated_at" if order == "active" else "m.created_at"
    rows = r.rows(
        f"SELECT m.* FROM memories m WHERE {where} ORDER BY {column} DESC, m.id LIMIT :limit", params | {"limit": limit}
    )
    return [to_memory(row) for row in rows]


def kept_documents(r: Reader, scope: MemoryScope, cap: int = 500) -> dict[int, str]:
    """Document ids of the pinned or core memories in scope (recall injects the relevant ones)."""
    where, params = memory_scope_sql(scope)
    rows = r.tuples(
        "SELECT d.id, m.id FROM memories m INDEXED BY memories_kept CROSS JOIN documents d "
        "ON d.kind = 'memory' AND d.ref = m.id "
        f"WHERE (m.pinned = 1 OR m.core_key IS NOT NULL) AND {where} LIMIT :cap",
        params | {"cap": cap},
    )
    return {int(doc_id): str(ref) for doc_id, ref in rows}


def core(r: Reader, scope: MemoryScope, categories: Sequence[str]) -> list[Memory]:
    where, params = memory_scope_sql(scope)
    if categories:
        keys, cat_params = placeholders("c", list(categories))
        where += f" AND m.category IN ({keys})"
        params |= cat_params
    rows = r.rows(
        f"SELECT m.* FROM memories m WHERE m.core_key IS NOT NULL AND m.superseded_by IS NULL AND {where} "
        "ORDER BY m.core_priority DESC, m.core_key",
        params,
    )
    return [to_memory(row) for row in rows]


def core_candidates(
    r: Reader, scope: MemoryScope, owner: str, categories: Sequence[str], min_score: float
) -> list[Memory]:
    """`owner`'s memories of `categories` that scored enough to be offered as core."""
    if not categories:
        return []
    where, params = memory_scope_sql(scope)
    where += " AND m.owner = :c_owner"
    params["c_owner"] = owner
    keys, cat_params = placeholders("c", list(categories))
    rows = r.rows(
        f"SELECT m.* FROM memories m WHERE m.core_key IS NULL AND m.superseded_by IS NULL AND m.category IN ({keys}) "
        f"AND m.decay_score >= :min AND {where} ORDER BY m.decay_score DESC LIMIT 20",
        params | cat_params | {"min": min_score},
    )
    return [to_memory(row) for row in rows]


def update(w: Writer, memory_id: str, **changes: Any) -> None:
    sets = ", ".join(f"{column} = :{column}" for column in changes)
    w.execute(f"UPDATE memories SET {sets} WHERE id = :id", changes | {"id": memory_id})


def delete(w: Writer, memory_id: str) -> bool:
    return w.execute("DELETE FROM memories WHERE id = :id", {"id": memory_id}) > 0


# edges


def insert_edge(w: Writer, edge: Edge, session_id: str | None) -> None:
    w.execute(
        "INSERT INTO memory_edges (source, target, type, weight, made_by, reason, session_id, created_at) "
        "VALUES (:source, :target, :type, :weight, :made_by, :reason, :sid, :at)",
        {
            "source": edge.source,
            "target": edge.target,
            "type": edge.type,
            "weight": edge.weight,
            "made_by": edge.made_by,
            "reason": edge.reason,
            "sid": session_id,
            "at": edge.created_at,
        },
    )


def edges_touching(r: Reader, ids: Sequence[str], types: Sequence[str] = ()) -> list[Edge]:
    """Edges with either end in `ids`, optionally of some types only."""
    found: dict[tuple[str, str, str], Edge] = {}
    type_sql, type_params = "", dict[str, Any]()
    if types:
        keys, type_params = placeholders("t", list(types))
        type_sql = f" AND type IN ({keys})"
    for start in range(0, len(ids), _CHUNK):
        keys, params = placeholders("i", ids[start : start + _CHUNK])
        for column in ("source", "target"):
            for row in r.rows(f"SELECT * FROM memory_edges WHERE {column} IN ({keys}){type_sql}", params | type_params):
                edge = to_edge(row)
                found[(edge.source, edge.target, edge.type)] = edge
    return sorted(found.values(), key=lambda e: (e.created_at, e.source, e.target, e.type))


def has_edge(r: Reader, source: str, target: str, edge_type: str) -> bool:
    return bool(
        r.scalar(
            "SELECT EXISTS (SELECT 1 FROM memory_edges WHERE source = :s AND target = :t AND type = :y)",
            {"s": source, "t": target, "y": edge_type},
        )
    )


def counted_edges_sql(m: str) -> str:
    """SQL: how many edges of the memories row `m` (an alias) count towards its score, `degree`. An edge counts
    when its other end is seen by everyone who sees the memory (memory/model.py's `seen_by_all_who_see`): a memory
    hidden from its viewers, its owner's private ones included, must not move the score they read (`activation`, a
    recall's ranking)."""
    same_project = f"o.visibility = 'project' AND COALESCE(o.project, '') = COALESCE({m}.project, '')"
    same_org = f"o.visibility = 'org' AND o.org = {m}.org"
    covers = (
        f"(CASE {m}.visibility WHEN 'org' THEN {same_org} WHEN 'project' THEN {same_project} "
        f"ELSE o.owner = {m}.owner OR ({same_project}) OR ({same_org}) END)"
    )

    def one_way(near: str, far: str) -> str:
        join = f"memory_edges e JOIN memories o ON o.id = e.{far}"
        return f"(SELECT count(*) FROM {join} WHERE e.{near} = {m}.id AND {covers})"

    return f"({one_way('source', 'target')} + {one_way('target', 'source')})"


def degree(r: Reader, memory_id: str) -> int:
    """The edges that count towards the memory's score (`counted_edges_sql`)."""
    return int(r.scalar(f"SELECT {counted_edges_sql('m')} FROM memories m WHERE m.id = :id", {"id": memory_id}) or 0)


def degrees(r: Reader, ids: Sequence[str]) -> dict[str, int]:
    """`degree` of each memory, in one query."""
    rows = r.tuples(
        f"SELECT m.id, {counted_edges_sql('m')} FROM memories m WHERE m.id IN (SELECT j.value FROM json_each(:ids) j)",
        {"ids": json.dumps(list(ids))},
    )
    return {str(ref): int(n) for ref, n in rows}


def causes(r: Reader, ids: Sequence[str], depth: int, viewer: Viewer) -> list[tuple[str, str, int]]:
    """(memory, cause, hops) along caused_by edges, up to `depth` hops, nearest first, through causes `viewer`
    may see only."""
    if not ids:
        return []
    seen, params = visibility_sql(viewer)
    rows = r.tuples(
        f"""WITH RECURSIVE chain(root, id, hops) AS (
               SELECT e.source, e.target, 1 FROM json_each(:ids) j
                   CROSS JOIN memory_edges e ON e.source = j.value AND e.type = 'caused_by'
                   JOIN memories m ON m.id = e.target WHERE {seen}
               UNION
               SELECT c.root, e.target, c.hops + 1 FROM chain c
                   JOIN memory_edges e ON e.source = c.id AND e.type = 'caused_by'
                   JOIN memories m ON m.id = e.target WHERE c.hops < :depth AND {seen})
           SELECT root, id, min(hops) AS hops FROM chain GROUP BY root, id ORDER BY root, hops, id""",
        params | {"ids": json.dumps(list(ids)), "depth": depth},
    )
    return [(str(root), str(cause), int(hops)) for root, cause, hops in rows]


def connected(r: Reader, a: str, b: str) -> bool:
    return bool(
        r.scalar(
            "SELECT EXISTS (SELECT 1 FROM memory_edges WHERE (source = :a AND target = :b) "
            "OR (source = :b AND target = :a))",
            {"a": a, "b": b},
        )
    )


def reaches(r: Reader, start: str, goal: str, types: Iterable[str]) -> bool:
    """Whether `goal` can be reached from `start` along outgoing edges of `types`."""
    keys, params = placeholders("t", list(types))
    return bool(
        r.scalar(
            f"""WITH RECURSIVE walk(id) AS (
                    SELECT :start UNION
                    SELECT e.target FROM memory_edges e JOIN walk ON e.source = walk.id WHERE e.type IN ({keys}))
                SELECT EXISTS (SELECT 1 FROM walk WHERE id = :goal)""",
            params | {"start": start, "goal": goal},
        )
    )
