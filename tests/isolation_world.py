"""The victim of the isolation matrix: alice, who plants private data with canary words through the real daemon.

Every canary is a word nobody else ever sends; `PRIVATE` ones no other user may see, `PROJECT` ones only
the people of alice's project (bob) may.
"""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp import Client

from tests.helpers import wait_for
from threadloom.clock import now_ms

SEARCH = "orchidvault"  # in every planted text, so the other users' searches match them
FAKE_AGENT = f"{sys.executable} {Path(__file__).parent / 'fake_agent.py'}"
# Settings of the one daemon (the first bridge starts it with its environment, per-session keys removed).
DAEMON_ENV = {
    "THREADLOOM_SPAWN_COMMAND": FAKE_AGENT,
    "THREADLOOM_SPAWN_MAX_CHILDREN": "16",
    "THREADLOOM_SPAWN_GRACE_S": "1",
    "THREADLOOM_MAINTENANCE_INTERVAL": "0",
}
TOOLSET = "full,coordination,agents"
PRIVATE = {
    w: f"canary{w}"
    for w in (
        "keyed", "core", "linked", "superseding", "org", "pruned", "pinned", "quote", "projectquote",
        "whisper", "ask", "reply", "task", "tasksignal", "tournament", "claim", "habit", "concept", "insight",
        "candidate", "skill", "lesson", "trashed",
    )
}  # fmt: skip
PROJECT = {w: f"sharedmark{w}" for w in ("first", "second", "third", "thread", "note")}
IDEMPOTENCY_KEY = "alice-plan-2027"
CORE_KEY = "deploy.window"
DUP_TEXT = "the quarterly numbers go to the board on the third of february"
ALICE_THREAD = "checkout-flow"
ALICE_SKILL = "deploy-checklist"
DAY_MS = 86_400_000


@dataclass
class Alice:
    repo: Path
    sessions: tuple[str, str] = ("alice-sess-1", "alice-sess-2")
    private_ids: dict[str, str] = field(default_factory=dict)  # what -> memory id
    shared_ids: dict[str, str] = field(default_factory=dict)
    task_ids: list[str] = field(default_factory=list)
    tournament: str = ""
    ask_id: int = 0
    project: str = "shop"
    claim_id: str = ""
    habit_id: str = ""
    insight_id: int = 0
    candidate_id: int = 0
    snapshot: str = ""
    trash: str = ""


async def call(client: Client, name: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(name, args)
    assert not result.is_error, (name, args, result.structured_content)
    return dict(result.structured_content or {})


async def plant(a1: Client, a2: Client, alice: Alice, db: Path) -> None:
    """Alice's project (team mode), threads, notes and quotes, memories of every kind, signals and tasks."""
    await call(a2, "peers", {})
    await call(a1, "thread_project", {"action": "create", "title": "Shop", "mode": "team"})
    await call(a1, "thread_summary", {"text": f"- {SEARCH} postgres {PROJECT['thread']}", "section": "Decisions"})
    assert (await call(a1, "thread_create", {"title": "Checkout flow"}))["id"] == ALICE_THREAD
    await call(a1, "thread_note", {"text": f"{SEARCH} keys rotate {PROJECT['note']}", "kind": "insight"})
    await call(a1, "thread_note", {"text": f"{SEARCH} she said {PRIVATE['quote']}", "quote": True})
    quote = {"text": f"{SEARCH} {PRIVATE['projectquote']}", "quote": True, "project_wide": True}
    await call(a1, "thread_note", quote)
    await call(a1, "thread_claim", {"action": "claim", "thread_id": ALICE_THREAD})

    async def store(what: str, text: str, **kw: Any) -> str:
        memory_id = str((await call(a1, "memory_store", {"content": text, **kw}))["id"])
        (alice.shared_ids if kw.get("visibility") == "project" else alice.private_ids)[what] = memory_id
        return memory_id

    first = await store("first", f"{SEARCH} the gateway retries three times {PROJECT['first']}", visibility="project")
    await store("keyed", f"{SEARCH} private plan {PRIVATE['keyed']}", idempotency_key=IDEMPOTENCY_KEY)
    core = await call(a1, "memory_core", {"key": CORE_KEY, "content": f"{SEARCH} deploys {PRIVATE['core']}"})
    alice.private_ids["core"] = core["changed"]["id"]
    cause = f"{SEARCH} the hidden cause {PRIVATE['linked']}"
    linked = await store("linked", cause, related=[{"id": first, "type": "refines"}])
    await store(
        "second",
        f"{SEARCH} retries back off {PROJECT['second']}",
        visibility="project",
        related=[{"id": linked, "type": "caused_by"}],
    )
    third = await store("third", f"{SEARCH} the build uses make {PROJECT['third']}", visibility="project")
    superseding = await store("superseding", f"{SEARCH} the build moves to bazel {PRIVATE['superseding']}")
    hidden = await a1.call_tool("memory_amend", {"memory_id": third, "by": superseding, "reason": "moving"})
    assert hidden.is_error and "promote" in str(hidden.structured_content)  # a correction nobody else could see
    shared = await store("shared_fix", f"{SEARCH} the build moves to bazel {PROJECT['third']}", visibility="project")
    await call(a1, "memory_amend", {"memory_id": third, "by": shared, "reason": "moving"})
    await store("org", f"{SEARCH} alice prefers tabs {PRIVATE['org']}", visibility="org")
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
    await call(a2, "style_hint", {"hints": [hint]})  # a second session: the habit is active
    habits = await call(a1, "style", {"view": "habits"})
    alice.habit_id = next(h["id"] for h in habits["habits"] if PRIVATE["habit"] in str(h))
    await call(a1, "concept_note", {"text": f"{SEARCH} retries hide {PRIVATE['concept']}"})
    alice.insight_id = int((await call(a1, "insight", {"action": "distill", "text": PRIVATE["insight"]}))["id"])
    plant_learning(db, alice)
    await call(a1, "signal_send", {"to": alice.sessions[1], "text": f"{SEARCH} {PRIVATE['whisper']}"})
    asked = await call(a1, "signal_send", {"kind": "ask", "to": alice.sessions[1], "text": PRIVATE["ask"]})
    alice.ask_id = int(asked["id"])
    await call(a2, "signal_send", {"to": alice.sessions[0], "text": f"{SEARCH} {PRIVATE['reply']}"})
    task = await call(a1, "spawn", {"prompt": f"signal {PRIVATE['tasksignal']}\n{PRIVATE['task']}", "role": "tester"})
    tour = await call(
        a1,
        "tournament",
        {"prompt": f"sleep 0\n{PRIVATE['tournament']}", "roles": ["critic", "fan"], "wait_s": 0, "timeout_s": 60},
    )
    alice.task_ids = [task["id"], *(e["task"] for e in tour["entries"])]
    alice.tournament = tour["tournament"]
    wait_for(lambda: tasks_finished(db, "alice"), timeout=60, what="alice's tasks to finish")


def plant_learning(db: Path, alice: Alice) -> None:
    """Alice's candidate, loop-written skill, lesson, snapshot and trash item, written in this process with no
    CLI folder to copy into (the daemon's HOME is the machine's: a skill written through it would be copied
    into the real CLI skills folders)."""
    from threadloom.config import Settings
    from threadloom.learning import candidates as queue
    from threadloom.learning.library import Library
    from threadloom.learning.snapshots import Snapshots
    from threadloom.runtime import open_runtime

    rt = open_runtime(Settings(home=db.parent, embedder="none", ingest=False), "cli")
    try:
        text = f"{SEARCH} always ship on fridays {PRIVATE['candidate']}"
        found = queue.NewCandidate("alice", "rule", "en", text, "message", "0", 0, alice.sessions[0], None, None)
        written = rt.store.write(lambda w: queue.insert(w, found, None, None, now_ms()))
        assert written is not None
        alice.candidate_id = written
        lib = Library(rt)
        lib.write_skill("alice", ALICE_SKILL, "How alice deploys.", f"{SEARCH} {PRIVATE['skill']}", "loop", "c:1")
        lib.write_skill("alice", "alice-old", "Old.", f"{SEARCH} {PRIVATE['trashed']}", "loop", "c:2")
        lib.add_lesson("alice", f"{SEARCH} lesson {PRIVATE['lesson']}", "loop", "c:3")
        snapshots = Snapshots(lib)
        alice.snapshot = f"s{snapshots.take('alice', 'planted')}"
        alice.trash = str(snapshots.trash("alice", "skill", "alice-old", "planted", None)["trash"])
    finally:
        rt.close()


def age(db: Path, memory_id: str) -> None:
    """Make a memory look untouched for 400 days, alone in the graph, so the next pass prunes it."""
    from threadloom.store.sqlite import SqliteStore

    store = SqliteStore(db)
    long_ago = now_ms() - 400 * DAY_MS
    try:
        store.write(
            lambda w: (
                w.execute("DELETE FROM memory_edges WHERE source = :id OR target = :id", {"id": memory_id}),
                w.execute(
                    "UPDATE memories SET created_at = :t, last_reactivated_at = :t, valid_from = :t WHERE id = :id",
                    {"t": long_ago, "id": memory_id},
                ),
            )
        )
    finally:
        store.close()


def tasks_finished(db: Path, owner: str) -> bool:
    from threadloom.store.sqlite import SqliteStore

    store = SqliteStore(db)
    try:
        running = store.read(
            lambda r: r.scalar(
                "SELECT count(*) FROM tasks WHERE owner = :o AND status IN ('starting', 'running')", {"o": owner}
            )
        )
    finally:
        store.close()
    return int(running) == 0


def child_users(db: Path, task_ids: list[str]) -> dict[str, set[str]]:
    """The users the child agents of these tasks acted as (a child's sessions are named `<task>-<attempt>`)."""
    from threadloom.store.sqlite import SqliteStore

    store = SqliteStore(db)
    try:
        query = "SELECT user FROM sessions WHERE id LIKE :t"
        return {t: {u for (u,) in store.read(lambda r, t=t: r.tuples(query, {"t": f"{t}-%"}))} for t in task_ids}
    finally:
        store.close()


def tree_digest(repo: Path) -> dict[str, str]:
    """The repository's threadloom files, path -> sha256."""
    base = repo / ".threadloom"
    return {
        str(p.relative_to(repo)): hashlib.sha256(p.read_bytes()).hexdigest() for p in base.rglob("*") if p.is_file()
    }
