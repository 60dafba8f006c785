"""alice's data on a team server, for the isolation matrix over accounts (tests/test_isolation_team.py).

The same canaries as tests/isolation_world.py, planted through `serve --http --accounts` in acme's project
shop: memories of every visibility and kind, a claim, a style habit, a concept, an insight and signals between
her two sessions. Threads, quotes and tasks are not on a team server (thread files stay in the laptops'
repositories, served by `serve --remote`), so they are not planted here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp import Client

from tests.isolation_world import CORE_KEY, DUP_TEXT, IDEMPOTENCY_KEY, PRIVATE, PROJECT, SEARCH, Alice, age, call


async def plant_team(a1: Client, a2: Client, alice: Alice, db: Path) -> None:
    await call(a2, "peers", {})

    async def store(what: str, text: str, **kw: Any) -> str:
        memory_id = str((await call(a1, "memory_store", {"content": text, **kw}))["id"])
        (alice.shared_ids if kw.get("visibility") in ("project", "org") else alice.private_ids)[what] = memory_id
        return memory_id

    first = await store("first", f"{SEARCH} the gateway retries three times {PROJECT['first']}", visibility="project")
    await store("keyed", f"{SEARCH} private plan {PRIVATE['keyed']}", idempotency_key=IDEMPOTENCY_KEY)
    core = await call(a1, "memory_core", {"key": CORE_KEY, "content": f"{SEARCH} deploys {PRIVATE['core']}"})
    alice.private_ids["core"] = core["changed"]["id"]
    linked = await store(
        "linked", f"{SEARCH} the hidden cause {PRIVATE['linked']}", related=[{"id": first, "type": "refines"}]
    )
    second = {"visibility": "project", "related": [{"id": linked, "type": "caused_by"}]}
    await store("second", f"{SEARCH} retries back off {PROJECT['second']}", **second)
    third = await store("third", f"{SEARCH} the build uses make {PROJECT['third']}", visibility="project")
    await store("superseding", f"{SEARCH} the build moves to bazel {PRIVATE['superseding']}")
    shared = await store("shared_fix", f"{SEARCH} the build moves to bazel {PROJECT['third']}", visibility="project")
    await call(a1, "memory_amend", {"memory_id": third, "by": shared, "reason": "moving"})
    await store("org", f"{SEARCH} acme prefers tabs {PROJECT['thread']}", visibility="org")  # acme's members' only
    await store("pinned", f"{SEARCH} pinned secret {PRIVATE['pinned']}", pinned=True)
    await store("dup", DUP_TEXT)
    pruned = await store("pruned", f"{PRIVATE['pruned']} zebra crossing lunch")
    age(db, pruned)
    report = await call(a1, "memory_maintain", {"dry_run": False})
    assert report["pruned_ids"] == [pruned], report

    claim = {"text": f"{SEARCH} prefers {PRIVATE['claim']}", "domain": "style", "statement": f"I like {SEARCH}"}
    alice.claim_id = str((await call(a1, "user_claim", claim))["claim"]["id"])
    hint = {"kind": "catchphrase", "text": PRIVATE["habit"], "example": f"{PRIVATE['habit']} then"}
    await call(a1, "style_hint", {"hints": [hint]})
    await call(a2, "style_hint", {"hints": [hint]})
    habits = await call(a1, "style", {"view": "habits"})
    alice.habit_id = next(h["id"] for h in habits["habits"] if PRIVATE["habit"] in str(h))
    await call(a1, "concept_note", {"text": f"{SEARCH} retries hide {PRIVATE['concept']}"})
    alice.insight_id = int((await call(a1, "insight", {"action": "distill", "text": PRIVATE["insight"]}))["id"])
    await call(a1, "signal_send", {"to": alice.sessions[1], "text": f"{SEARCH} {PRIVATE['whisper']}"})
    asked = await call(a1, "signal_send", {"kind": "ask", "to": alice.sessions[1], "text": PRIVATE["ask"]})
    alice.ask_id = int(asked["id"])
    await call(a2, "signal_send", {"to": alice.sessions[0], "text": f"{SEARCH} {PRIVATE['reply']}"})
