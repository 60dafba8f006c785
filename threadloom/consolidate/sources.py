"""Where a survivor came from: its own provenance and that of everything merged into it; and, asked of a
merged memory, into what it was merged and why. Only for a memory the caller may see (a merged memory has
its survivor's owner and audience, so whoever sees one may see the other)."""

from __future__ import annotations

from typing import Any

from threadloom.errors import NotFound
from threadloom.identity import Provenance
from threadloom.memory.model import check_id
from threadloom.store import consolidation, memories
from threadloom.store.base import Reader, Store


def sources_of(store: Store, memory_id: str, prov: Provenance) -> dict[str, Any]:
    check_id(memory_id)
    viewer = prov.viewer()

    def read(r: Reader) -> dict[str, Any]:
        memory = memories.get(r, memory_id, viewer)
        if memory is None:
            raise NotFound(f"no memory {memory_id}")
        own = {
            "session": memory.session_id,
            "vendor": memory.vendor,
            "origin": memory.origin,
            "created_at": memory.created_at,
        }
        merged = consolidation.merges_into(r, "memory", memory.id)
        return {
            "id": memory.id,
            "superseded_by": memory.superseded_by,
            "merged_into": consolidation.merge_of(r, "memory", memory.id),
            "sources": [own] + [m["source"] | {"memory": m["merged"]} for m in merged],
            "merged": merged,
        }

    return store.read(read)
