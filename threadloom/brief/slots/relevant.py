"""What the store holds about the query: memory_recall's search over every kind, read-only."""

from __future__ import annotations

from typing import Any

from threadloom.brief.fence import one_line
from threadloom.brief.model import Ask, Item, Section, Slot

K = 8
ITEM_CHARS = 300


def _item(hit: dict[str, Any]) -> Item:
    kind = hit["kind"]
    if kind == "memory":
        core = ", core" if hit.get("is_core") else ""
        return Item(
            f"- {hit['id']} ({hit['status']}{core}): {one_line(hit['summary'], ITEM_CHARS)}", f"memory:{hit['id']}"
        )
    if kind == "thread":
        head = f"- thread {hit['id']} ({hit['status']}, project {hit['project']})"
        return Item(f"{head}: {one_line(hit['summary'], ITEM_CHARS)}", f"thread-summary:{hit['project']}/{hit['id']}")
    label = f"{kind} {hit['id']}" + (f" {hit['note_kind']}" if hit.get("note_kind") else "")
    where = f", thread {hit['thread']}" if hit.get("thread") else ""
    return Item(f"- {label}{where}: {one_line(hit['text'], ITEM_CHARS)}", f"{kind}:{hit['id']}")


def build(ask: Ask) -> Section | None:
    if not ask.query or not ask.query.strip():
        return None
    found = ask.runtime.recall.recall(ask.query, ask.provenance, K, "concise", read_only=True)
    held = found.get("withheld", {})  # quotes the egress policy kept back: the brief's own line says so
    caveats = [c for c in found["caveats"] if not held or not c.startswith("egress policy=")]
    return Section(
        title="relevant to the query",
        items=tuple(_item(hit) for hit in found["memories"]),
        get_with=f"memory_recall(query={one_line(ask.query, 80)!r})",
        notes=tuple(one_line(c, 300) for c in caveats) or (() if found["memories"] else ("nothing found",)),
        withheld=tuple(held.items()),
    )


SLOT = Slot("relevant", priority=85, build=build, order=25, scopes=frozenset({"full", "query"}))
