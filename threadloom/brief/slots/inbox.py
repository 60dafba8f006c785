"""Unread signals for this session (read only: the inbox tool acknowledges them)."""

from __future__ import annotations

from threadloom.brief.fence import one_line
from threadloom.brief.model import Ask, Item, Section, Slot
from threadloom.clock import iso

LIMIT = 20
ITEM_CHARS = 300


def build(ask: Ask) -> Section | None:
    if not ask.provenance.session_id:
        return None
    box = ask.runtime.signals.inbox(ask.provenance, limit=LIMIT)
    unread = box["unread"]
    if not unread:
        return None
    items = tuple(
        Item(
            f"- #{s['id']} {s['kind']} from {s['sender']} at {iso(s['created_at'])}: {one_line(s['body'], ITEM_CHARS)}",
            f"signal:{s['id']}",
        )
        for s in unread
    )
    notes = (f"{box['unread_left']} more unread: signal_inbox()",) if box["unread_left"] else ()
    asked = any(s["kind"] == "ask" for s in unread)
    answer = ' · answer an ask: signal_send(kind="answer", reply_to=<#>)' if asked else ""
    return Section(title="unread signals", items=items, get_with="signal_inbox()" + answer, notes=notes)


SLOT = Slot("inbox", priority=70, build=build, order=40, scopes=frozenset({"full", "query"}))
