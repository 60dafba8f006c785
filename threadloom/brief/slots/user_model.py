"""The user model's validated claims (threadloom/usermodel/): how this user works, as evidence has shown it.
Hypotheses, observed, low-confidence and disputed claims stay out: only what the agent should apply by
default. Full scope: the most confident; query scope: those that share words with the query. Either way only
claims the egress policy lets reach this session's vendor; the rest are counted for the brief's one line."""

from __future__ import annotations

import re
from typing import Final

from threadloom.brief.fence import one_line
from threadloom.brief.model import Ask, Item, Section, Slot
from threadloom.search.query import analyse
from threadloom.usermodel import UserModel
from threadloom.usermodel.model import Claim

LIMIT = 8
ITEM_CHARS = 200
STEM: Final = 5  # "testing" and "tests" meet at "testi"/"tests": a shared 5-letter start is the same word here
_CJK: Final = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")


def _words(text: str) -> set[str]:
    """A text's content words, cut to STEM letters; a run of CJK characters as its character pairs (no
    spaces between words there)."""
    out: set[str] = set()
    for term in analyse(text).terms:
        if _CJK.search(term):
            out.update(term[i : i + 2] for i in range(max(1, len(term) - 1)))
        else:
            out.add(term[:STEM])
    return out


def relevant(claims: list[Claim], query: str) -> list[Claim]:
    """The claims that share words with the query (its domain counts as a word), most shared first."""
    asked = _words(query)
    scored = [(len(asked & (_words(c.text) | {c.domain[:STEM]})), c) for c in claims]
    return [c for n, c in sorted(scored, key=lambda x: -x[0]) if n > 0]  # sorted is stable: confidence next


def build(ask: Ask) -> Section | None:
    model = UserModel(ask.runtime.store, egress=ask.runtime.settings.egress)
    found, held = model.validated_for(ask.provenance)
    if ask.scope == "query":  # what was withheld is counted among what the query would have shown
        found, held = relevant(found, ask.query or ""), relevant(held, ask.query or "")
    items = tuple(
        Item(f"- [{c.domain}] {one_line(c.text, ITEM_CHARS)} ({c.id}, {c.confidence:.2f})", f"claim:{c.id}")
        for c in found[:LIMIT]
    )
    if not items and not held:
        return None
    return Section(
        title="about the user (validated)",
        items=items,
        get_with="user_synthesis() (toolset user_model)",
        withheld=(("claims", len(held)),) if held else (),
    )


SLOT = Slot("user_model", priority=45, build=build, order=62, scopes=frozenset({"full", "query"}))
