"""Work in flight: this project's thread claims and the user's running spawned tasks."""

from __future__ import annotations

from threadloom.brief.fence import one_line
from threadloom.brief.model import Ask, Item, Section, Slot
from threadloom.clock import iso
from threadloom.errors import ThreadloomError

LIMIT = 20


def build(ask: Ask) -> Section | None:
    items: list[Item] = []
    try:
        claims = ask.runtime.hygiene.claims(ask.provenance)
    except ThreadloomError:  # no thread project here: no claims
        claims = []
    for c in claims[:LIMIT]:
        state = "live" if c["live"] else "gone"
        text = (
            f"- claim {c['thread']} by {c['session_id']} ({c['vendor'] or '?'}, {state}) since {iso(c['claimed_at'])}"
        )
        items.append(Item(one_line(text), f"claim:{c['thread']}:{c['session_id']}"))
    tasks = [
        t
        for t in ask.runtime.spawner.tasks(ask.provenance, all_sessions=True)
        if t["status"] in ("starting", "running")
    ]
    for t in tasks[:LIMIT]:
        role = f" {t['role']}" if t["role"] else ""
        text = f"- task {t['id']} {t['agent']}{role} {t['status']} since {iso(t['started_at'])}"
        items.append(Item(one_line(text), f"task:{t['id']}"))
    if not items:
        return None
    return Section(
        title="claims and running tasks",
        items=tuple(items),
        get_with="tasks() (toolset agents); thread_claim() (toolset threads_admin)",
    )


SLOT = Slot("work", priority=60, build=build, order=60, scopes=frozenset({"full", "query"}))
