"""The "now" table (threadloom/brief/now.py), first in the brief: it changes once a day."""

from __future__ import annotations

from threadloom.brief import now
from threadloom.brief.model import Ask, Item, Section, Slot


def build(ask: Ask) -> Section:
    head, *rows = now.table(now.today_local(ask.now_ms))
    return Section(
        title="now",
        items=tuple(Item(row) for row in rows),
        get_with='brief(scope="now")',
        fenced=False,
        lead=head,
    )


SLOT = Slot("now", priority=40, build=build, order=10)
