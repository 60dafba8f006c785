"""The style capsule (threadloom/style/): how the user writes and likes to work, in their language, as the
egress policy lets this session's vendor see it; what it holds back is said in one line."""

from __future__ import annotations

from threadloom.brief.fence import one_line
from threadloom.brief.model import Ask, Item, Section, Slot
from threadloom.style import capsule
from threadloom.style.i18n import words

ITEM_CHARS = 160


def build(ask: Ask) -> Section | None:
    owner = ask.provenance.viewer().user
    revision, content = ask.runtime.store.read(lambda r: capsule.current(r, owner))
    if not content.entries:
        return None
    policy, reader = ask.runtime.settings.egress, ask.provenance.vendor
    view = capsule.View.of(content, policy, reader)
    items = tuple(
        Item(f"- {one_line(e.line(view.language), ITEM_CHARS)}", f"style:{e.key}:r{revision}") for e in view.entries
    )
    return Section(
        title=f"the user's style (r{revision}, {view.language})",
        items=items,
        get_with="style() (toolset user_model)",
        withheld=tuple(view.withheld.items()),  # the brief says it in its one egress line, with the claims
        lead=words(view.language)["header"],
    )


SLOT = Slot("style", priority=40, build=build, order=63)
