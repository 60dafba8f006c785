"""Core memory: the few facts every session must know, highest priority first."""

from __future__ import annotations

from threadloom.brief.fence import one_line
from threadloom.brief.model import Ask, Item, Section, Slot

ITEM_CHARS = 400


def build(ask: Ask) -> Section | None:
    listed = ask.runtime.recall.core_list(ask.provenance)
    items = tuple(
        Item(f"- {c['key']} (p{c['priority']}, {c['id']}): {one_line(c['content'], ITEM_CHARS)}", f"memory:{c['id']}")
        for c in listed["core"]
    )
    waiting = len(listed["awaiting_approval"])
    notes = (f"{waiting} memory(ies) await approval as core: memory_core() (toolset memory_graph)",) if waiting else ()
    if not items and not notes:
        return None
    return Section(
        title="core memory",
        items=items,
        get_with="brief(budget=4000), or memory_core() (toolset memory_graph)",
        notes=notes,
    )


SLOT = Slot("core", priority=90, build=build, order=20)
