"""Live sessions the user may see (their own elsewhere, and their project's), other than this one."""

from __future__ import annotations

from threadloom.brief.fence import one_line
from threadloom.brief.model import Ask, Item, Section, Slot
from threadloom.clock import iso

LIMIT = 10


def build(ask: Ask) -> Section | None:
    found = [p for p in ask.runtime.presence.peers(ask.provenance) if p["id"] != ask.provenance.session_id]
    if not found:
        return None
    items = tuple(
        Item(
            f"- {p['id']} {p['vendor']} seen {iso(p['last_seen_at'])} in {one_line(str(p['cwd']), 160)}",
            f"peer:{p['id']}",
        )
        for p in found[:LIMIT]
    )
    notes = (f"{len(found) - LIMIT} more: peers() (toolset coordination)",) if len(found) > LIMIT else ()
    return Section(
        title="live peers (ids for signal_send to=)",
        items=items,
        # signal_send (default toolset) takes these ids, so the default session needs a way to the rest too
        get_with="brief(budget=4000), or peers() (toolset coordination)",
        notes=notes,
    )


SLOT = Slot("peers", priority=50, build=build, order=50, scopes=frozenset({"full", "query"}))
