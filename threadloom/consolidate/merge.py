"""Applying one planned merge, in one short transaction, re-checked inside it: a memory or note changed,
superseded, deleted, re-shared or pinned since the plan was read is left alone and reported, so
consolidation can run while sessions write.

A merged memory is superseded by its survivor (a `supersedes` edge, `superseded_by`, its validity closed as
an amend closes it), leaves the search index (recall shows the survivor alone) and stays in the store for
`memory_explain`, `memory_traverse` and the merge record. Its edges move to the survivor, which also takes
its entities, its recalls and the earliest time the fact held; its provenance is kept in the merge record.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Final

from threadloom.consolidate.plan import Merge
from threadloom.errors import InvalidInput
from threadloom.identity import Provenance
from threadloom.memory import scoring
from threadloom.memory.model import ACYCLIC_TYPES, MAX_ENTITIES, Edge, Memory, memory_document
from threadloom.memory.service import rescore
from threadloom.sessions import record_event
from threadloom.store import consolidation, documents, memories
from threadloom.store.base import Writer

MADE_BY: Final = "job:consolidate"
JOB_PROV: Final = Provenance(session_id=None, vendor="other", project=None, origin=MADE_BY)


class Skip(InvalidInput):
    """This merge no longer holds; the transaction is rolled back and the rest go on."""


def merge_memory(w: Writer, m: Merge, config: scoring.ScoringConfig, now: int) -> dict[str, Any]:
    survivor, merged = memories.get(w, m.survivor), memories.get(w, m.merged)
    _check_memories(survivor, merged, m)
    assert survivor is not None and merged is not None
    moved: list[Edge] = []
    for edge in memories.edges_touching(w, [merged.id]):
        other = edge.target if edge.source == merged.id else edge.source
        if other == survivor.id:  # their auto-link, or any edge between the two: nothing to keep it between
            consolidation.drop_edge(w, edge)
            moved.append(edge)
            continue
        new = replace(
            edge,
            source=survivor.id if edge.source == merged.id else edge.source,
            target=survivor.id if edge.target == merged.id else edge.target,
        )
        if edge.type in ACYCLIC_TYPES and memories.reaches(w, new.target, new.source, (edge.type,)):
            raise Skip(f"{merged.id}'s {edge.type} edge to {other} would make a cycle at {survivor.id}")
        consolidation.move_edge(w, edge, new)
        moved.append(edge)
    consolidation.repoint_superseded(w, merged.id, survivor.id)
    why = f"duplicate: {m.verdict.why}"
    memories.insert_edge(w, Edge(survivor.id, merged.id, "supersedes", 1.0, MADE_BY, now, why), None)
    valid_from = min(survivor.valid_from, merged.valid_from)
    entities = list(dict.fromkeys((*survivor.entities, *merged.entities)))[:MAX_ENTITIES]
    memories.update(
        w,
        survivor.id,
        valid_from=valid_from,
        entities=json.dumps(entities),
        reactivation_count=survivor.reactivation_count + merged.reactivation_count,
        last_reactivated_at=max(survivor.last_reactivated_at, merged.last_reactivated_at),
    )
    consolidation.add_entities(w, survivor.id, entities)
    memories.update(w, merged.id, superseded_by=survivor.id, valid_to=max(valid_from, merged.valid_from))
    documents.remove(w, "memory", merged.id)
    rescore(w, config, merged.id, now)
    documents.upsert(w, memory_document(rescore(w, config, survivor.id, now)), now)
    source = {
        "session": merged.session_id,
        "vendor": merged.vendor,
        "origin": merged.origin,
        "created_at": merged.created_at,
        "valid_from": merged.valid_from,
        "content": merged.content,
    }
    consolidation.record(w, "memory", survivor.id, merged.id, merged.owner, m.verdict.cosine, m.verdict.words,
                         m.verdict.why, source, moved, now)  # fmt: skip
    record_event(w, JOB_PROV, "memory.merged", {"survivor": survivor.id, "merged": merged.id, "edges": len(moved)})
    return m.as_dict() | {"edges_moved": len(moved)}


def _check_memories(survivor: Memory | None, merged: Memory | None, m: Merge) -> None:
    if survivor is None or merged is None:
        raise Skip(f"{m.survivor if survivor is None else m.merged} was deleted meanwhile")
    if survivor.superseded_by or merged.superseded_by:
        raise Skip(f"{m.survivor if survivor.superseded_by else m.merged} was superseded meanwhile")
    if merged.content != m.merged_text or survivor.content != m.survivor_text:
        raise Skip(f"{m.merged} or {m.survivor} changed meanwhile")
    if (survivor.owner, survivor.org, survivor.visibility, survivor.project) != (
        merged.owner,
        merged.org,
        merged.visibility,
        merged.project,
    ):
        raise Skip(f"{m.merged} and {m.survivor} no longer have the same owner and audience")
    if merged.pinned or merged.is_core:
        raise Skip(f"{m.merged} was pinned meanwhile: never merged away")


def merge_note(w: Writer, m: Merge, now: int) -> dict[str, Any]:
    survivor, merged = consolidation.note(w, int(m.survivor)), consolidation.note(w, int(m.merged))
    if survivor is None or merged is None:
        raise Skip(f"note {m.survivor if survivor is None else m.merged} was erased meanwhile")
    if survivor["superseded_by"] is not None or merged["superseded_by"] is not None:
        raise Skip(f"note {m.merged} or {m.survivor} was merged meanwhile")
    if merged["text"] != m.merged_text or survivor["text"] != m.survivor_text:
        raise Skip(f"note {m.merged} or {m.survivor} changed meanwhile")
    place = ("repo", "project", "thread", "owner")
    if any(survivor[k] != merged[k] for k in place) or (survivor["kind"] == "quote") != (merged["kind"] == "quote"):
        raise Skip(f"notes {m.merged} and {m.survivor} are no longer in one place of one owner")
    consolidation.supersede_note(w, int(m.merged), int(m.survivor))
    documents.remove(w, "quote" if merged["kind"] == "quote" else "note", m.merged)
    source = {k: merged[k] for k in ("session_id", "vendor", "created_at", "kind", "text")}
    consolidation.record(w, m.kind, m.survivor, m.merged, str(merged["owner"]), m.verdict.cosine, m.verdict.words,
                         m.verdict.why, source, (), now)  # fmt: skip
    record_event(w, JOB_PROV, f"thread.{m.kind}_merged", {"survivor": int(m.survivor), "merged": int(m.merged)})
    return m.as_dict()
