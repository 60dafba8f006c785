"""The user model's validated claims (threadloom/usermodel/): how this user works, as evidence has shown it.
Hypotheses, observed, low-confidence and disputed claims stay out: only what the agent should apply by
default."""

from __future__ import annotations

from threadloom.brief.fence import one_line
from threadloom.brief.model import Ask, Item, Section, Slot
from threadloom.usermodel import UserModel

LIMIT = 8
ITEM_CHARS = 200


def build(ask: Ask) -> Section | None:
    found = UserModel(ask.runtime.store).validated(ask.provenance.viewer(), LIMIT)
    if not found:
        return None
    items = tuple(
        Item(f"- [{c.domain}] {one_line(c.text, ITEM_CHARS)} ({c.id}, {c.confidence:.2f})", f"claim:{c.id}")
        for c in found
    )
    return Section(title="about the user (validated)", items=items, get_with="user_synthesis() (toolset user_model)")


SLOT = Slot("user_model", priority=45, build=build, order=62)
