"""The active thread's context, as `thread_context` assembles it (the threads service, never the files)."""

from __future__ import annotations

import hashlib

from threadloom.brief.fence import one_line, quoted
from threadloom.brief.model import Ask, Item, Section, Slot
from threadloom.errors import ThreadloomError

SHARE = 0.4  # of the brief's budget, asked of the threads service (which cuts its own text to fit)
MIN_TOKENS = 100


def build(ask: Ask) -> Section:
    try:
        context = ask.runtime.threads.context(ask.provenance, max(MIN_TOKENS, int(ask.budget * SHARE)))
    except ThreadloomError as exc:  # no project in this repository, a broken thread file, ...
        return Section("thread context", (), "thread_context()", notes=(one_line(exc.message, 300),))
    digest = hashlib.sha256(context.text.encode()).hexdigest()[:12]
    active = context.threads[0] if context.threads else "?"
    return Section(
        title=f"thread context (active: {active})",
        items=(Item(quoted(context.text), f"thread:{active}@{digest}"),),
        get_with="thread_context()",
        notes=tuple(one_line(c, 400) for c in context.caveats),
    )


SLOT = Slot("thread", priority=80, build=build, order=30, scopes=frozenset({"full", "query"}))
