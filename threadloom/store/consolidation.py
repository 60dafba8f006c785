"""Consolidation's SQL (m028): what it compares, the moves a merge makes, and the record of each merge.

Plain SQL of the subset SQLite and PostgreSQL share, through the store seam.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from threadloom.memory.model import Edge
from threadloom.store.base import Reader, Row, Writer


def current_memories(r: Reader, owner: str | None) -> list[Row]:
    """Every memory not superseded (of `owner`, or of everyone for a job), with what decides who sees it."""
    where = "WHERE m.superseded_by IS NULL" + (" AND m.owner = :o" if owner is not None else "")
    return r.rows(
        "SELECT m.id, m.content, m.owner, COALESCE(m.org, m.owner) AS org, m.visibility, "
        "COALESCE(m.project, '') AS project, m.pinned, m.core_key, m.created_at, m.reactivation_count "
        f"FROM memories m {where} ORDER BY m.id",
        {"o": owner} if owner is not None else {},
    )


def edge_counts(r: Reader, owner: str | None) -> dict[str, int]:
    """Edges touching each memory (of `owner`), either direction."""
    mine = " AND m.owner = :o" if owner is not None else ""
    counts: dict[str, int] = {}
    for column in ("source", "target"):
        for ref, n in r.tuples(
            f"SELECT e.{column}, COUNT(*) FROM memory_edges e JOIN memories m ON m.id = e.{column} "
            f"WHERE m.superseded_by IS NULL{mine} GROUP BY e.{column}",
            {"o": owner} if owner is not None else {},
        ):
            counts[str(ref)] = counts.get(str(ref), 0) + int(n)
    return counts


def current_notes(r: Reader, owner: str | None) -> list[Row]:
    """Every note and quote not superseded, with its owner (a row written before owners were kept has
    none: it is never merged, being nobody's for certain)."""
    where = "WHERE n.superseded_by IS NULL AND n.owner IS NOT NULL" + (" AND n.owner = :o" if owner else "")
    return r.rows(
        "SELECT n.id, n.repo, n.project, COALESCE(n.thread, '') AS thread, n.kind, n.text, n.owner, n.session_id, "
        f"n.vendor, n.created_at FROM thread_notes n {where} ORDER BY n.id",
        {"o": owner} if owner else {},
    )


def note(r: Reader, note_id: int) -> Row | None:
    return r.one(
        "SELECT id, repo, project, thread, kind, text, owner, session_id, vendor, created_at, superseded_by "
        "FROM thread_notes WHERE id = :i",
        {"i": note_id},
    )


def supersede_note(w: Writer, merged: int, survivor: int) -> None:
    """The merged note points at its survivor, and so does every note merged into it before."""
    w.execute("UPDATE thread_notes SET superseded_by = :s WHERE id = :m", {"s": survivor, "m": merged})
    w.execute("UPDATE thread_notes SET superseded_by = :s WHERE superseded_by = :m", {"s": survivor, "m": merged})


def move_edge(w: Writer, old: Edge, new: Edge) -> None:
    """`old` becomes `new` (one end moved to the survivor); when the survivor already has that edge, it
    keeps the stronger weight and `old` goes."""
    key = {"s": old.source, "t": old.target, "y": old.type}
    found = w.one(
        "SELECT weight FROM memory_edges WHERE source = :s AND target = :t AND type = :y",
        {"s": new.source, "t": new.target, "y": new.type},
    )
    if found is None:
        w.execute(
            "UPDATE memory_edges SET source = :ns, target = :nt WHERE source = :s AND target = :t AND type = :y",
            key | {"ns": new.source, "nt": new.target},
        )
        return
    if float(found["weight"]) < old.weight:
        w.execute(
            "UPDATE memory_edges SET weight = :w WHERE source = :s AND target = :t AND type = :y",
            {"w": old.weight, "s": new.source, "t": new.target, "y": new.type},
        )
    drop_edge(w, old)


def drop_edge(w: Writer, edge: Edge) -> None:
    w.execute(
        "DELETE FROM memory_edges WHERE source = :s AND target = :t AND type = :y",
        {"s": edge.source, "t": edge.target, "y": edge.type},
    )


def repoint_superseded(w: Writer, merged: str, survivor: str) -> None:
    """What the merged memory had corrected is now corrected by its survivor."""
    w.execute("UPDATE memories SET superseded_by = :s WHERE superseded_by = :m", {"s": survivor, "m": merged})


def add_entities(w: Writer, memory_id: str, entities: Sequence[str]) -> None:
    for entity in entities:
        if not w.one(
            "SELECT 1 AS x FROM memory_entities WHERE memory_id = :i AND entity = :e", {"i": memory_id, "e": entity}
        ):
            w.execute("INSERT INTO memory_entities (memory_id, entity) VALUES (:i, :e)", {"i": memory_id, "e": entity})


def record(w: Writer, kind: str, survivor: str, merged: str, owner: str, similarity: float | None, words: float,
           why: str, source: dict[str, Any], edges: Sequence[Edge], now: int) -> None:  # fmt: skip
    w.execute(
        "INSERT INTO consolidation_merges (kind, survivor, merged, owner, similarity, words, why, source, edges, "
        "merged_at) VALUES (:k, :s, :m, :o, :sim, :w, :why, :src, :e, :at)",
        {
            "k": kind,
            "s": survivor,
            "m": merged,
            "o": owner,
            "sim": similarity,
            "w": words,
            "why": why,
            "src": json.dumps(source, separators=(",", ":")),
            "e": json.dumps([e.as_dict() for e in edges], separators=(",", ":")),
            "at": now,
        },
    )
    # Earlier merges into the one merged now belong to the survivor, so its sources are one lookup.
    w.execute(
        "UPDATE consolidation_merges SET survivor = :s WHERE kind = :k AND survivor = :m",
        {"s": survivor, "k": kind, "m": merged},
    )


def merges_into(r: Reader, kind: str, survivor: str) -> list[dict[str, Any]]:
    """Everything merged into `survivor`, oldest merge first: each with its similarity, why, provenance and
    the edges it brought."""
    rows = r.rows(
        "SELECT merged, similarity, words, why, source, edges, merged_at FROM consolidation_merges "
        "WHERE kind = :k AND survivor = :s ORDER BY id",
        {"k": kind, "s": survivor},
    )
    return [dict(row) | {"source": json.loads(row["source"]), "edges": json.loads(row["edges"])} for row in rows]


def merge_of(r: Reader, kind: str, merged: str) -> dict[str, Any] | None:
    """How `merged` was merged, if it was: into what (now), with what similarity and why."""
    row = r.one(
        "SELECT survivor, similarity, words, why, merged_at FROM consolidation_merges WHERE kind = :k AND merged = :m",
        {"k": kind, "m": merged},
    )
    return dict(row) if row else None
