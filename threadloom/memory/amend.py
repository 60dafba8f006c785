"""Amending a memory: its correction stored (or named) and the supersession recorded in ONE transaction.

They were two: the new memory committed, then the old one marked superseded. A process killed between them,
or a second transaction refused (the store busy, the old memory changed meanwhile), left both current, the
old never superseded; and the call's idempotency key, claimed by the first, made every retry answer
"replayed" without finishing the amend. Now the call happens whole or not at all.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from threadloom.clock import now_ms
from threadloom.errors import InvalidInput
from threadloom.identity import Provenance
from threadloom.memory.model import Edge, Memory, NewMemory, Stored, check_id, memory_document, seen_by_all_who_see
from threadloom.sessions import record_event
from threadloom.store import documents, memories, roles
from threadloom.store.base import Store, Writer

if TYPE_CHECKING:
    from threadloom.memory.service import MemoryService


def amend(
    service: MemoryService,
    store: Store,
    memory_id: str,
    prov: Provenance,
    content: str | None,
    by: str | None,
    reason: str | None,
) -> dict[str, Any]:
    from threadloom.memory.service import rescore

    check_id(memory_id)
    if (content is None) == (by is None):
        raise InvalidInput("give either content (a new memory) or by (an existing memory that replaces it)")
    if reason is not None and len(reason) > 1_000:
        raise InvalidInput("a reason is at most 1,000 characters")
    old, reason = service.owned(memory_id, prov, "amend"), service.scrubber.optional(reason)
    if old.superseded_by:
        raise InvalidInput(f"{memory_id} was already superseded by {old.superseded_by}; amend that one instead")
    named: Memory | None = None
    if by is not None:
        check_id(by)
        if by == memory_id:
            raise InvalidInput("a memory cannot supersede itself")
        named = service.get(by, prov)
        if not seen_by_all_who_see(named, old):
            raise InvalidInput(f"whoever sees {memory_id} must see its correction: promote {by} first")
        prepared = None
    else:
        assert content is not None
        new = NewMemory(
            content=content,
            category=old.category,
            kind=old.kind,
            entities=old.entities,
            visibility=old.visibility,  # type: ignore[arg-type]
            pinned=old.pinned,
        )
        prepared = service.prepare(new, replace(prov, project=old.project), not_linked_to=(memory_id,))
    now = now_ms()
    stored: list[Stored] = []

    def tx(w: Writer) -> dict[str, Any]:
        stored.clear()
        if named is not None:
            replacement = named
        else:
            assert prepared is not None
            stored.append(prepared if isinstance(prepared, Stored) else prepared.write(w))
            replacement = stored[0].memory
        if replacement.id == memory_id:
            raise InvalidInput("the new content is the same as the memory's: nothing to amend")
        if memories.reaches(w, memory_id, replacement.id, ("supersedes",)):
            raise InvalidInput(f"{memory_id} already supersedes {replacement.id}: that would make a cycle")
        current = memories.get(w, memory_id)
        if current is None or current.superseded_by:
            raise InvalidInput(f"{memory_id} changed meanwhile; look it up again")
        roles.require_write_of(w, prov.user, (current, replacement), "amend")  # the edge starts at `by`
        edge = Edge(replacement.id, memory_id, "supersedes", 1.0, "explicit", now, reason)
        if not memories.has_edge(w, edge.source, edge.target, edge.type):
            memories.insert_edge(w, edge, prov.session_id)
        changes: dict[str, Any] = {
            "superseded_by": replacement.id,
            "valid_to": max(replacement.valid_from, old.valid_from),
        }
        if old.core_key is not None:  # the core slot moves to the correction, which must be theirs too
            if replacement.owner != prov.user:
                raise InvalidInput(f"{memory_id} is core memory: only a memory of yours may replace it")
            changes |= {"core_key": None, "core_priority": None}
            memories.update(w, memory_id, **changes)
            memories.update(w, replacement.id, core_key=old.core_key, core_priority=old.core_priority, pinned=1)
        else:
            memories.update(w, memory_id, **changes)
        for mid in (memory_id, replacement.id):
            m = rescore(w, service.scoring, mid, now)
            documents.upsert(w, memory_document(m), now)
        record_event(w, prov, "memory.amended", {"old": memory_id, "new": replacement.id, "reason": reason})
        updated_old = memories.get(w, memory_id)
        updated_new = memories.get(w, replacement.id)
        assert updated_old is not None and updated_new is not None
        return {"old": updated_old.as_dict(), "new": updated_new.as_dict(), "edge": edge.as_dict()}

    result = store.write(tx)
    if stored and prepared is not None and not isinstance(prepared, Stored):
        service.embed_after(prepared, stored[0])
    return result
