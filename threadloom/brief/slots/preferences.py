"""The user's stated preferences (memories of kind `preference`): how they like the work done."""

from __future__ import annotations

from threadloom.brief.model import Ask, Section, Slot
from threadloom.brief.slots._kinds import items, of_kind

LIMIT = 5


def build(ask: Ask) -> Section | None:
    found = of_kind(ask, "preference", LIMIT)
    if not found:
        return None
    return Section(title="preferences", items=items(found), get_with='memory_recall(query="<topic> preference")')


SLOT = Slot("preferences", priority=35, build=build, order=65)
