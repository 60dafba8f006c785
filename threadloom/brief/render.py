"""Assembling the brief from its slots within a token budget.

Every slot builds its section; in query scope, items this session was already sent are left out. Then,
while the text is over the budget, the lowest-priority section loses items from its end (a section left
with none goes whole), and the brief ends saying what was dropped and which call gives it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from threadloom import tokens
from threadloom.brief import fence, now, sent
from threadloom.brief.model import (
    DEFAULT_BUDGET,
    MAX_BUDGET,
    MIN_BUDGET,
    SCOPES,
    Ask,
    Brief,
    Dropped,
    Item,
    Scope,
    Section,
    Slot,
)
from threadloom.brief.slots import registry
from threadloom.clock import now_ms
from threadloom.errors import InvalidInput, ThreadloomError
from threadloom.usermodel import egress

if TYPE_CHECKING:
    from threadloom.identity import Provenance
    from threadloom.runtime import Runtime

log = logging.getLogger(__name__)
MAX_REPEATED = 12  # ids listed per section in the "sent earlier" line
DROP_LINE_TOKENS = 20  # about what one line of the "dropped" list costs, before it is counted for real


@dataclass
class _Part:
    slot: Slot
    section: Section
    kept: list[Item] = field(default_factory=list)
    costs: list[int] = field(default_factory=list)  # tokens of each kept item's lines
    overhead: int = 0  # tokens of its heading, fence and notes
    spare: list[tuple[Item, int]] = field(default_factory=list)  # dropped items and their costs, last first
    dropped: int = 0
    dropped_tokens: int = 0

    @property
    def gone(self) -> bool:
        return not self.kept and (self.dropped > 0 or not self.section.notes)


def render_brief(
    runtime: Runtime,
    provenance: Provenance,
    *,
    scope: Scope = "full",
    query: str | None = None,
    budget: int = DEFAULT_BUDGET,
    session_id: str | None = None,
) -> Brief:
    """The brief for `provenance`'s user, project and session (`session_id`, when given, stands for the
    provenance's: the session whose briefs are tracked and whose inbox is read). Blocking: call it through
    `runtime.call`."""
    if scope not in SCOPES:
        raise InvalidInput(f"scope is one of {', '.join(SCOPES)}, not {scope!r}")
    if not MIN_BUDGET <= budget <= MAX_BUDGET:
        raise InvalidInput(f"budget is {MIN_BUDGET}-{MAX_BUDGET} tokens")
    if session_id:
        provenance = replace(provenance, session_id=session_id)
    provenance.viewer()  # read with a user's eyes: no user, no brief
    ask = Ask(runtime, provenance, scope, query, budget, now_ms())
    seen = (
        sent.already_sent(runtime.store, provenance.session_id) if scope == "query" and provenance.session_id else set()
    )
    repeated: dict[str, list[str]] = {}
    built = [(slot, _build(slot, ask)) for slot in registry() if scope in slot.scopes]
    parts = [_part(slot, section, seen, repeated) for slot, section in built]
    kept = [p for p in parts if p is not None]
    text, dropped, count = _fit(kept, _head(ask) + _withheld_line(ask, built) + _sent_line(repeated), budget)
    keys = {item.key for p in kept for item in p.kept if item.key}
    sent.record(runtime.store, provenance, keys, scope, count)
    return Brief(text=text, dropped=dropped, tokens=count, scope=scope, budget=budget)


def render_now(at_ms: int | None = None) -> str:
    """What a `now` read gives: the brief's table, then the one live line."""
    moment = now_ms() if at_ms is None else at_ms
    head, *rows = now.table(now.today_local(moment))
    return "\n".join(["## now", head, *rows, now.right_now(moment)]) + "\n"


def _build(slot: Slot, ask: Ask) -> Section | None:
    try:
        return slot.build(ask)
    except ThreadloomError as exc:  # one part failing (a busy store, ...) costs that part, not the brief
        note = f"unavailable: {fence.one_line(exc.message, 200)}"
    except Exception as exc:  # a slot's bug must not take the session's brief with it
        log.exception("brief slot %s failed", slot.name)
        note = f"unavailable: {type(exc).__name__} (logged)"
    return Section(slot.name, (), "", fenced=False, notes=(note,))


def _part(slot: Slot, section: Section | None, seen: set[str], repeated: dict[str, list[str]]) -> _Part | None:
    """The section's part, without the items this session already has (noted in `repeated`)."""
    if section is None:
        return None
    fresh = [item for item in section.items if not item.key or item.key not in seen]
    again = [item.key.split(":", 1)[1] for item in section.items if item.key and item.key in seen]
    if again:
        repeated[section.title.split(" (")[0]] = again
    if not fresh and (again or not section.notes):
        return None
    part = _Part(slot, section, fresh, [len(item.text) + 1 for item in fresh])  # in characters until _fit
    part.overhead = len("\n".join(_section_lines(replace(part, kept=[]))))
    return part


def _sent_line(repeated: dict[str, list[str]]) -> list[str]:
    if not repeated:
        return []
    shown = [f"{title}: {', '.join(keys[:MAX_REPEATED])}" + (" ..." if len(keys) > MAX_REPEATED else "")
             for title, keys in repeated.items()]  # fmt: skip
    return ["sent earlier this session, not repeated: " + "; ".join(shown)]


def _withheld_line(ask: Ask, built: list[tuple[Slot, Section | None]]) -> list[str]:
    """One line for everything the egress policy kept from this reader's model, whichever sections held it."""
    counts: dict[str, int] = {}
    for _, section in built:
        for kind, n in section.withheld if section is not None else ():
            counts[kind] = counts.get(kind, 0) + n
    line = egress.withheld_line(ask.runtime.settings.egress, ask.provenance.vendor, counts)
    return [line] if line else []


def _head(ask: Ask) -> list[str]:
    project = fence.one_line(ask.provenance.project or "none", 200)
    return [f"# threadloom brief · {ask.scope} · user {ask.provenance.user} · project {project}", fence.LEGEND]


def _section_lines(part: _Part) -> list[str]:
    section = part.section
    lines = [f"## {section.title}" + (f" · {section.get_with}" if section.get_with else "")]
    body = [item.text for item in part.kept]
    if section.lead:
        lines.append(section.lead)
    if body:
        lines += fence.fenced(body) if section.fenced else body
    lines += [f"! {note}" for note in section.notes]
    return lines


def _compose(parts: list[_Part], head: list[str], dropped: list[Dropped], budget: int, short: bool = False) -> str:
    """The brief's text; `short`: the dropped list as one line, for budgets it alone would exceed."""
    lines = list(head)
    for part in parts:
        if not part.gone:
            lines += _section_lines(part)
    if dropped and short:
        lines.append(f"## left out to fit {budget} tokens: {', '.join(d.section for d in dropped)}; brief() has all")
    elif dropped:
        lines.append(f"## left out to fit {budget} tokens (items, their size): get them with")
        lines += [f"- {d.section} ({d.items}, ~{d.tokens} tokens): {d.get_with}" for d in dropped]
    return "\n".join(lines) + "\n"


def _dropped(parts: list[_Part]) -> list[Dropped]:
    return [
        Dropped(p.section.title, p.dropped, p.dropped_tokens, p.section.get_with or "brief()")
        for p in parts
        if p.dropped
    ]


def _drop_one(parts: list[_Part]) -> int | None:
    """Take the last item of the lowest-priority section that has one; about how many tokens that saves
    (the section's own lines too when it goes whole, less its line in the dropped list). None: nothing left."""
    for part in sorted(parts, key=lambda p: (p.slot.priority, -p.slot.order)):
        if part.kept:
            cost = part.costs.pop()
            part.spare.append((part.kept.pop(), cost))
            part.dropped += 1
            part.dropped_tokens += cost
            return cost + (part.overhead if part.gone else 0) - (DROP_LINE_TOKENS if part.dropped == 1 else 0)
    return None


def _fit(parts: list[_Part], head: list[str], budget: int) -> tuple[str, tuple[Dropped, ...], int]:
    """The text within the budget, what it left out, and its size in tokens."""
    parts.sort(key=lambda p: (p.slot.order, p.slot.name))
    text = _compose(parts, head, [], budget)
    estimate = tokens.count(text)
    if estimate <= budget:
        return text, (), estimate
    per_char = estimate / max(1, len(text))  # this brief's own ratio turns each part's characters into tokens
    for part in parts:
        part.costs = [int(chars * per_char) + 1 for chars in part.costs]
        part.overhead = int(part.overhead * per_char) + 1
    while estimate > budget:  # by the items' own counts first, then by counting the text itself
        freed = _drop_one(parts)
        if freed is None:
            break
        estimate -= freed
    while True:
        text = _compose(parts, head, _dropped(parts), budget)
        if tokens.count(text) <= budget:
            return _refill(parts, head, budget)
        if _drop_one(parts) is None:
            break
    dropped = _dropped(parts)  # all of it: even the list of what was dropped is over the budget
    text = _compose(parts, head, dropped, budget, short=True)
    if tokens.count(text) > budget:
        text = "\n".join([*head[:2], f"## left out everything to fit {budget} tokens: brief() has all"]) + "\n"
    return text, tuple(dropped), tokens.count(text)


def _refill(parts: list[_Part], head: list[str], budget: int) -> tuple[str, tuple[Dropped, ...], int]:
    """Estimates err on the safe side (a dropped list costs less than guessed): give back what fits,
    most important first, one item at a time."""
    text = _compose(parts, head, _dropped(parts), budget)
    count = tokens.count(text)
    for part in sorted(parts, key=lambda p: -p.slot.priority):
        while part.dropped and len(part.spare) > 0:
            item, cost = part.spare.pop()
            part.kept.append(item)
            part.costs.append(cost)
            part.dropped -= 1
            part.dropped_tokens -= cost
            trial = _compose(parts, head, _dropped(parts), budget)
            size = tokens.count(trial)
            if size > budget:
                part.spare.append((part.kept.pop(), part.costs.pop()))
                part.dropped += 1
                part.dropped_tokens += cost
                break
            text, count = trial, size
    return text, tuple(_dropped(parts)), count
