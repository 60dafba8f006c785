"""Lessons learnt (memories of kind `lesson`), most active first."""

from __future__ import annotations

from threadloom.brief.model import Ask, Section, Slot
from threadloom.brief.slots._kinds import items, of_kind

LIMIT = 5


def build(ask: Ask) -> Section | None:
    found = of_kind(ask, "lesson", LIMIT)
    if not found:
        return None
    return Section(title="lessons", items=items(found), get_with='memory_recall(query="<topic> lesson")')


SLOT = Slot("lessons", priority=30, build=build, order=70)
