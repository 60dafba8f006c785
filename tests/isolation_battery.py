"""The calls of the isolation matrix: every tool, resource and prompt, as a user who is not alice.

Each call goes through a `Probe`, which checks its answer; `hidden=` names the value of alice's that the
caller must not be able to tell from a made-up one (what the caller may see, it may name: bob sees the
memories alice shares with her project, her sessions there and her threads).
"""

from __future__ import annotations

from typing import Any

from tests.isolation_probe import Probe
from tests.isolation_world import ALICE_SKILL, ALICE_THREAD, CORE_KEY, DUP_TEXT, IDEMPOTENCY_KEY, PRIVATE, SEARCH, Alice

EVERY_STATUS = ["active", "dormant", "fading"]


def no_error(data: dict[str, Any]) -> str | None:
    return f"failed: {data.get('error')}" if "error" in data else None


def created_anew(data: dict[str, Any]) -> str | None:
    if data.get("created") is not True or data.get("duplicate_of") or data.get("replayed"):
        return "was not stored as the caller's own new memory"
    return None


def owner_only(data: dict[str, Any]) -> str | None:
    return None if "only the owner" in str(data.get("error")) else "another user changed alice's shared memory"


def reaches_none_of(sessions: tuple[str, ...]) -> Any:
    def check(data: dict[str, Any]) -> str | None:
        return "reached alice's sessions" if set(data.get("delivered_to", [])) & set(sessions) else None

    return check


async def battery(p: Probe, alice: Alice, elsewhere: bool, first: bool) -> None:
    """Everything, as one wrong user; `elsewhere`: in another project than alice's; `first`: the user's first
    battery (later ones meet the user's own copy of alice's text, key and core key)."""
    mine = (await p.tool("memory_store", {"content": f"{p.label} notes on how the gateway retries"}))["id"]
    if elsewhere:
        await p.tool("thread_project", {"action": "create", "title": "Garden"})
    await memories(p, alice, elsewhere, first, mine)
    await threads(p, alice, elsewhere)
    await coordination(p, alice, elsewhere)
    await later_groups(p, alice)
    await views(p, alice, elsewhere)


async def later_groups(p: Probe, alice: Alice) -> None:
    """The brief, transcripts, erasure and the user model: alice's claim is hers alone, whatever the project."""
    for scope in ("full", "query", "now"):
        await p.tool("brief", {"scope": scope, "query": SEARCH, "budget": 8000})
    await p.tool("dialog_search", {"query": SEARCH, "limit": 50})
    await p.tool("dialog_read", {"session": alice.sessions[0]})
    await p.tool("dialog_day", {})
    await p.tool("forget", {"text": SEARCH, "kinds": ["transcripts", "memories", "notes", "learning"]})
    await p.tool("forget", {"text": PRIVATE["keyed"], "kinds": ["memories", "notes"], "dry_run": False})
    await p.tool("forget", {"text": SEARCH, "kinds": ["learning"], "dry_run": False})  # alice's skill holds it
    await p.tool("user_claim", {"text": f"{p.label} likes short answers", "domain": "communication"})
    await p.tool("user_claim", {"supersedes": alice.claim_id, "text": "rewritten"}, hidden=alice.claim_id)
    await p.tool("user_evidence", {"claim_id": alice.claim_id, "ref": "I agree"}, hidden=alice.claim_id)
    await p.tool("user_review", {"claim_id": alice.claim_id}, hidden=alice.claim_id)
    await p.tool("user_review", {})
    await p.tool("user_synthesis", {})
    await personal_and_learning(p, alice)


async def personal_and_learning(p: Probe, alice: Alice) -> None:
    """Style memory, learning, curation and health: alice's habit, candidate, skill, lesson, snapshot, concept and
    insight are hers alone (her skill's name and candidate's id answer as made-up ones do)."""
    await p.tool("style", {"view": "habits"})
    await p.tool("style", {"view": "capsule", "revision": 1})
    await p.tool("style_hint", {"hints": [{"kind": "catchphrase", "text": f"{p.label} says hey"}]})
    for action in ("pin", "unpin", "forget", "profile_clear"):
        await p.tool("style_manage", {"action": action, "target": alice.habit_id}, hidden=alice.habit_id)
    await p.tool("learning_candidates", {"status": "pending", "limit": 50})
    for candidate in (1, 2, 3):
        await p.tool("learning_accept", {"id": candidate, "into": "lesson"})
        await p.tool("learning_reject", {"ids": [candidate]})
    cid = alice.candidate_id
    for into in ("lesson", "skill", "patch", "note", "quote"):
        args = {"id": cid, "into": into, "name": ALICE_SKILL, "text": "bob's rule", "description": "d"}
        await p.tool("learning_accept", args, hidden=cid)
    await p.tool("learning_accept", {"into": "patch", "name": ALICE_SKILL, "text": "x"}, hidden=ALICE_SKILL)
    await p.tool("learning_reject", {"ids": [cid]}, hidden=cid)
    for kind in ("skill", "lesson"):
        await p.tool("skill_list", {"kind": kind})
        await p.tool("skill_show", {"kind": kind, "name": ALICE_SKILL}, hidden=ALICE_SKILL)
        await p.tool("skill_used", {"kind": kind, "name": ALICE_SKILL}, hidden=ALICE_SKILL)
        await p.tool("skill_pin", {"kind": kind, "name": ALICE_SKILL}, hidden=ALICE_SKILL)
    await p.tool("concept_note", {"text": f"{SEARCH} retries hide things"})
    await p.tool("insight", {"action": "vote", "id": alice.insight_id, "vote": "down"})
    await p.tool("insight", {"action": "distill", "text": f"{p.label} thinks small"})
    await p.tool("curate_report", {})
    await p.tool("health", {"window_days": 30}, journal=True)  # lists their own calls and errors


async def memories(p: Probe, alice: Alice, elsewhere: bool, first: bool, mine: str) -> None:
    fresh = created_anew if first else None
    await p.tool("memory_store", {"content": DUP_TEXT}, expect=fresh)
    await p.tool("memory_store", {"content": f"{p.label} plan", "idempotency_key": IDEMPOTENCY_KEY}, expect=fresh)
    await p.tool("memory_store", {"content": f"{SEARCH} private plan now cancelled", "entities": ["zeppelin"]})
    hidden = alice.private_ids | (alice.shared_ids if elsewhere else {})
    for m in hidden.values():
        await p.tool("memory_explain", {"memory_id": m}, hidden=m)
        await p.tool("memory_traverse", {"memory_id": m, "depth": 5}, hidden=m)
        await p.tool("memory_amend", {"memory_id": m, "content": "rewritten"}, hidden=m)
        await p.tool("memory_amend", {"memory_id": mine, "by": m}, hidden=m)
        await p.tool("memory_pin", {"memory_id": m, "pinned": False}, hidden=m)
        await p.tool("memory_promote", {"memory_id": m, "visibility": "org"}, hidden=m)
        await p.tool("memory_link", {"source": mine, "target": m, "type": "related_to"}, hidden=m)
        await p.tool("memory_link", {"source": m, "target": mine, "type": "refines"}, hidden=m)
        await p.tool("memory_core", {"key": "stolen.key", "memory_id": m}, hidden=m)
        await p.tool("memory_store", {"content": "x", "related": [{"id": m, "type": "refines"}]}, hidden=m)
        await p.tool("memory_maintain", {"restore": m}, hidden=m)
        await p.tool("memory_delete", {"memory_id": m}, hidden=m)
    for m in () if elsewhere else alice.shared_ids.values():
        await p.tool("memory_explain", {"memory_id": m})
        await p.tool("memory_traverse", {"memory_id": m, "depth": 5})
        await p.tool("memory_amend", {"memory_id": m, "content": "rewritten"}, expect=owner_only)
        await p.tool("memory_pin", {"memory_id": m}, expect=owner_only)
        await p.tool("memory_promote", {"memory_id": m, "visibility": "org"}, expect=owner_only)
        await p.tool("memory_link", {"source": m, "target": mine, "type": "refines"}, expect=owner_only)
        await p.tool("memory_delete", {"memory_id": m}, expect=owner_only)
        await p.tool("memory_link", {"source": mine, "target": m, "type": "related_to"})
    await p.tool("memory_core", {"key": CORE_KEY, "remove": True}, hidden=CORE_KEY if first else None)
    await p.tool("memory_core", {"key": CORE_KEY, "content": f"{p.label} deploys on fridays"}, expect=no_error)
    await p.tool("memory_core", {})
    for query in (SEARCH, f"{SEARCH} {PRIVATE['keyed']} {PRIVATE['org']}", DUP_TEXT, "tabs deploys bazel gateway"):
        await p.tool("memory_recall", {"query": query, "limit": 50, "read_only": True})
        await p.tool("memory_recall", {"query": query, "limit": 50, "all_projects": True})
        await p.tool("memory_search", {"query": query, "limit": 200, "all_projects": True})
    for wide in (False, True):
        listing = {"query": "", "limit": 200, "all_projects": wide}
        await p.tool("memory_search", listing | {"active_since": 0})
        await p.tool("memory_search", listing | {"statuses": EVERY_STATUS})
        await p.tool("memory_search", listing | {"entity": "zeppelin"})
    await p.tool("memory_recall", {"query": SEARCH, "as_of": 0, "verbosity": "concise"})
    await p.tool("memory_stats", {})
    await p.tool("memory_preferences", {"auto": ["ops"], "approval": [], "excluded": []})
    await p.tool("memory_maintain", {})
    await p.tool("memory_maintain", {"dry_run": False})


async def threads(p: Probe, alice: Alice, elsewhere: bool) -> None:
    thread = ALICE_THREAD if elsewhere else None  # alice's repository's threads are hidden from other repositories
    on_hers = {"thread_id": ALICE_THREAD}
    await p.tool("thread_project", {})
    switch = {"action": "switch", "project_id": alice.project}
    await p.tool("thread_project", switch, hidden=alice.project if elsewhere else None)
    await p.tool("thread_context", on_hers, hidden=thread)
    await p.tool("thread_create", {"title": "x", "parent": ALICE_THREAD}, hidden=thread)
    await p.tool("thread_create", {"title": f"{p.label} probe"})
    await p.tool("thread_context", {"max_tokens": 100})
    await p.tool("thread_context", {})
    await p.tool("thread_summary", {"text": "- own work", "section": "State"})
    await p.tool("thread_summary", on_hers | {"text": "- overwritten", "replace": True}, hidden=thread)
    await p.tool("thread_note", {"text": "own note"})
    await p.tool("thread_note", {"text": "own words", "quote": True, "project_wide": True})
    await p.tool("thread_note", on_hers | {"text": "a note"}, hidden=thread)
    await p.tool("thread_note", on_hers | {"text": "a quote", "quote": True}, hidden=thread)
    await p.tool("thread_status", on_hers | {"status": "abandoned", "reason": "x"}, hidden=thread)
    await p.tool("thread_claim", on_hers | {"action": "claim"}, hidden=thread)
    await p.tool("thread_claim", on_hers | {"action": "release"}, hidden=thread)
    await p.tool("thread_claim", {})
    await p.tool("thread_rebase", on_hers | {"new_parent": "main"}, hidden=thread)
    await p.tool("thread_merge", on_hers | {"parent_summary": "- merged"}, hidden=thread)
    await p.tool("thread_delete", on_hers, hidden=thread)
    await p.tool("thread_stats", {})
    for action in ("pickup", "compost", "janitor"):
        await p.tool("thread_janitor", {"action": action, "limit": 50})
    await p.tool("thread_janitor", {"action": "janitor", "apply": True})
    await p.tool("thread_init_files", {"targets": ["generic"]})


async def coordination(p: Probe, alice: Alice, elsewhere: bool) -> None:
    await p.tool("peers", {"window_s": 604_800})
    await p.tool("peers", {"all_projects": False})
    for to in (*alice.sessions, alice.sessions[0][:8]):
        await p.tool("signal_send", {"to": to, "text": "hello"}, hidden=to if elsewhere else None)
        await p.tool("signal_send", {"kind": "ask", "to": to, "text": "well?"}, hidden=to if elsewhere else None)
    for everywhere in (False, True):
        broadcast = {"kind": "broadcast", "text": "anyone?", "all_projects": everywhere}
        await p.tool("signal_send", broadcast, expect=reaches_none_of(alice.sessions) if elsewhere else None)
    for task in alice.task_ids[:1]:  # a team server runs no tasks: its sessions' projects are not folders
        await p.tool("signal_send", {"kind": "broadcast", "text": "tagged", "task_id": task}, hidden=task)
    await p.tool("signal_send", {"kind": "answer", "reply_to": alice.ask_id, "text": "yes"}, hidden=alice.ask_id)
    await p.tool("signal_inbox", {"include_read": True, "limit": 200})
    await p.tool("signal_inbox", {})
    await p.tool("catch_up", {"peek": True, "limit": 500})
    await p.tool("catch_up", {"limit": 500})
    await p.tool("status", {"recent_events": 100}, journal=True)
    await p.tool("status", {})

    await p.tool("spawn", {"prompt": "sleep 0", "role": "probe", "timeout_s": 30})
    await p.tool("tournament", {"prompt": "sleep 0", "roles": ["left", "right"], "timeout_s": 30, "wait_s": 0})
    for task_id in alice.task_ids:
        await p.tool("tasks", {"task_id": task_id, "log_lines": 500}, hidden=task_id)
    await p.tool("tasks", {"all_sessions": True})
    await p.tool("tasks", {})


async def views(p: Probe, alice: Alice, elsewhere: bool) -> None:
    """Every resource and prompt, then a check that every tool, resource and prompt listed was exercised."""
    thread = ALICE_THREAD if elsewhere else None
    resources = await p.client.list_resources()
    templates = await p.client.list_resource_templates()
    prompts = await p.client.list_prompts()
    tools = await p.client.list_tools()
    for what, listing in (("resources", resources), ("templates", templates), ("prompts", prompts), ("tools", tools)):
        p.listing(what, listing)
    for uri in (
        "threadloom://status",
        "threadloom://context",
        "threadloom://context?max_tokens=100",
        "threadloom://now",
    ):
        await p.resource(uri)
    for uri in ("threadloom://brief", "threadloom://brief?budget=8000"):
        await p.resource(uri)
    await p.resource("threadloom://tree")
    await p.resource(f"threadloom://tree?project={alice.project}", hidden=alice.project if elsewhere else None)
    await p.resource("threadloom://thread/main")
    await p.resource(f"threadloom://thread/{ALICE_THREAD}", hidden=thread)
    for name, args in (("help", {}), ("context", {}), ("tree", {}), ("create", {"title": "x"}), ("merge", {})):
        await p.prompt(name, args)
    await p.prompt("summary", {})
    await p.prompt("summary", {"text": "- x"})
    await p.prompt("switch", {"thread_id": ALICE_THREAD}, hidden=thread)

    missed = [t.name for t in tools.tools if t.name not in p.tools]
    missed += [str(r.uri) for r in resources.resources if str(r.uri) not in p.resources]
    missed += [t.uri_template for t in templates.resource_templates if not p.read_under(t.uri_template.split("{")[0])]
    missed += [q.name for q in prompts.prompts if q.name not in p.prompts]
    if missed:
        p.findings.append(f"{p.label} left out {missed}")
