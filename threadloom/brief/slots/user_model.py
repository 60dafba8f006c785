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
MAX_WORDS: Final = 48  # a 2,000-character query in Chinese is one term of ~2,000 character pairs
STEM: Final = 5  # "testing" and "tests" meet at "testi"/"tests": a shared 5-letter start is the same word here
_CJK: Final = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")


def words(query: str) -> list[str]:
    """The query's content words as the claims are searched for them: cut to STEM letters (at least 3), a run
    of CJK characters as its character pairs (no spaces between words there)."""
    out: dict[str, None] = {}  # in the query's order, so the cut keeps its start
    for term in analyse(query).terms:
        if _CJK.search(term):
            out.update(dict.fromkeys(term[i : i + 2] for i in range(max(1, len(term) - 1))))
        elif len(term) >= 3:
            out[term[:STEM]] = None
    return list(out)[:MAX_WORDS]


def ranked(claims: list[Claim], asked: list[str]) -> list[Claim]:
    """Most query words first (a claim's domain counts as a word); sorted is stable: confidence next."""
    return sorted(claims, key=lambda c: -sum(1 for w in asked if w in c.text.lower() or c.domain.startswith(w)))


def build(ask: Ask) -> Section | None:
    model = UserModel(ask.runtime.store, egress=ask.runtime.settings.egress)
    if ask.scope == "query":  # claims that share a word with the query; what was withheld counted among those
        asked = words(ask.query or "")
        if not asked:
            return None
        found, held = model.validated_for(ask.provenance, containing=asked)
        found = ranked(found, asked)
    else:
        found, held = model.validated_for(ask.provenance, LIMIT)
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
        withheld=(("claims", held),) if held else (),
    )


SLOT = Slot("user_model", priority=45, build=build, order=62, scopes=frozenset({"full", "query"}))
