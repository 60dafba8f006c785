"""Shared by the slots that show the user's memories of one kind (lessons, preferences)."""

from __future__ import annotations

from threadloom.brief.fence import one_line
from threadloom.brief.model import Ask, Item
from threadloom.memory.model import Memory
from threadloom.search.model import MemoryScope
from threadloom.store.base import Reader
from threadloom.store.memories import to_memory
from threadloom.store.visibility import memory_scope_sql

ITEM_CHARS = 300


def of_kind(ask: Ask, kind: str, limit: int) -> list[Memory]:
    """The caller's current (not superseded, not core: core memory has its own section) memories of `kind`
    in this project, most recently stored or recalled first (the order of an index: no sort of the table)."""
    scope = MemoryScope(viewer=ask.provenance.viewer(), project=ask.provenance.project, include_superseded=False)
    where, params = memory_scope_sql(scope)

    def read(r: Reader) -> list[Memory]:
        rows = r.rows(
            "SELECT m.* FROM memories m WHERE m.kind = :b_kind AND m.core_key IS NULL AND m.superseded_by IS NULL "
            f"AND {where} ORDER BY m.last_reactivated_at DESC LIMIT :b_limit",
            params | {"b_kind": kind, "b_limit": limit},
        )
        return [to_memory(row) for row in rows]

    return ask.runtime.store.read(read)


def items(found: list[Memory]) -> tuple[Item, ...]:
    return tuple(Item(f"- {m.id}: {one_line(m.summary or m.content, ITEM_CHARS)}", f"memory:{m.id}") for m in found)
