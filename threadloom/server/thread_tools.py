"""Thread tools. `threads` (default) covers a session: context, create, summary, note, status,
project. `threads_admin` (opt-in) adds merge, rebase and delete.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Final, Literal

from mcp.server.mcpserver import Context
from pydantic import Field

from threadloom.errors import InvalidInput
from threadloom.server.connection import caller
from threadloom.server.toolsets import RequestKey, ToolDef
from threadloom.threads.agent_files import write_instruction_files
from threadloom.threads.model import (
    MAX_PATH_CHARS,
    MAX_PATHS,
    MAX_REASON_CHARS,
    MAX_SUMMARY_CHARS,
    MAX_SYSTEM_CONTEXT_CHARS,
    MAX_TITLE,
    Thread,
)
from threadloom.threads.notes import MAX_NOTE_CHARS
from threadloom.threads.service import repo_of
from threadloom.threads.tree import CHARS_PER_TOKEN, DEFAULT_MAX_TOKENS

ID_CHARS: Final = 64  # a thread or project id: its file name
ThreadId = Annotated[
    str | None,
    Field(max_length=ID_CHARS, description="Default: your active thread."),
]


def _brief(t: Thread) -> dict[str, Any]:
    return {"id": t.id, "title": t.title, "parent": t.parent, "status": t.status, "branch": t.branch}


async def thread_context(
    ctx: Context,
    thread_id: Annotated[str | None, Field(max_length=ID_CHARS, description="Read this thread's (no switch).")] = None,
    max_tokens: Annotated[
        int | None,
        Field(ge=100, le=100_000, description=f"Budget (default {DEFAULT_MAX_TOKENS:,}); ancestors are cut first."),
    ] = None,
) -> dict[str, Any]:
    """Pick up your thread: its summary with its ancestors' decisions and constraints. Call it at the
    start or after the context was cleared; not to search (memory_recall). To move to another thread:
    thread_status(status="active", thread_id=...). Returns {context (Markdown), threads, tree, caveats}.
    """
    runtime, prov = await caller(ctx)
    budget = max_tokens or DEFAULT_MAX_TOKENS
    inner = budget - _RESERVE - budget // 20  # the context's share: the rest pays for the JSON around it
    assembled = await runtime.call(runtime.threads.context, prov, inner, thread_id)
    near = await runtime.call(runtime.threads.outline, prov, thread_id)  # bounded: not the whole tree
    await runtime.call(runtime.threads.record_context_load, prov, assembled)
    view: dict[str, Any] = {
        "context": assembled.text,
        "tokens": assembled.tokens,
        "threads": list(assembled.threads),
        "left_out": list(assembled.left_out),
        "tree": "",
        "problems": [],
        "caveats": list(assembled.caveats),
    }
    room = budget * CHARS_PER_TOKEN - _size(view)
    view["tree"], view["problems"], cut = _fit(near.text, list(near.problems), room)
    view["caveats"] += cut
    return view


_RESERVE: Final = 40  # tokens: the keys, ids and escapes of thread_context's JSON
_TREE_CUT: Final = "the tree or its problems were cut to fit max_tokens: threadloom://tree has them all"


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False))


def _fit(tree: str, problems: list[dict[str, Any]], room: int) -> tuple[str, list[dict[str, Any]], list[str]]:
    """The tree's first lines and the first problems that fit in `room` characters of JSON."""
    if _size(tree) + _size(problems) <= room:
        return tree, problems, []
    room -= _size(_TREE_CUT) + 2
    lines: list[str] = []
    used = 2 + 2  # the tree's quotes, the empty list's brackets
    for line in tree.split("\n"):
        cost = _size(line) + 2  # its quotes stand for the escaped line end
        if used + cost > room:
            break
        lines.append(line)
        used += cost
    kept = []
    for problem in problems:
        cost = _size(problem) + 2
        if used + cost > room:
            break
        kept.append(problem)
        used += cost
    return "\n".join(lines), kept, [_TREE_CUT]


async def thread_create(
    ctx: Context,
    title: Annotated[str, Field(max_length=MAX_TITLE, description="The topic or question.")],
    parent: Annotated[str | None, Field(max_length=ID_CHARS, description="Default: the active thread.")] = None,
    idempotency_key: RequestKey = None,
) -> dict[str, Any]:
    """Start a thread for a new topic, under the active one, and work in it. Not for a step of the
    current topic (thread_note).

    Returns {id, title, parent, status, branch}.
    """
    runtime, prov = await caller(ctx)
    return _brief(await runtime.call(runtime.threads.create, prov, title, parent))


async def thread_summary(
    ctx: Context,
    text: Annotated[
        str,
        Field(
            max_length=MAX_SUMMARY_CHARS,
            description="Markdown: the whole summary (## sections) or one section's text.",
        ),
    ],
    section: Annotated[
        str | None,
        Field(max_length=40, description="Decisions, Constraints, State, Open questions or Next steps."),
    ] = None,
    replace: Annotated[bool, Field(description="Replace the section, not add to it.")] = False,
    paths: Annotated[
        list[Annotated[str, Field(max_length=MAX_PATH_CHARS)]] | None,
        Field(max_length=MAX_PATHS, description="Repository files or folders it describes."),
    ] = None,
    thread_id: ThreadId = None,
    idempotency_key: RequestKey = None,
) -> dict[str, Any]:
    """Record what was decided and where things stand, short, in the thread file committed with the
    code. Update it when something is decided; not for every step (thread_note).
    """
    runtime, prov = await caller(ctx)
    thread = await runtime.call(runtime.threads.update_summary, prov, text, section, replace, paths, thread_id)
    return _brief(thread) | {"sections": list(thread.summary.sections)}


async def thread_note(
    ctx: Context,
    text: Annotated[str, Field(max_length=MAX_NOTE_CHARS, description="The note, or the user's exact words.")],
    kind: Annotated[
        Literal["move", "failed", "insight", "open_q", "decision"], Field(description="What the note records.")
    ] = "move",
    quote: Annotated[bool, Field(description="text quotes the user verbatim.")] = False,
    project_wide: Annotated[bool, Field(description="quote: for the project, not a thread.")] = False,
    thread_id: ThreadId = None,
    idempotency_key: RequestKey = None,
) -> dict[str, Any]:
    """Leave a note as you go (a move, a failed attempt, an insight, an open question) or the user's
    words (quote); reopens an idle thread. A conclusion goes in thread_summary, a lasting fact in
    memory_store.
    """
    runtime, prov = await caller(ctx)
    if quote:
        note = await runtime.call(runtime.notes.add_quote, prov, text, thread_id, project_wide)
        return {"note": note.as_dict(), "reopened": False}
    return await runtime.call(runtime.notes.add_note, prov, text, kind, thread_id)


async def thread_status(
    ctx: Context,
    status: Annotated[
        Literal["active", "idle", "done", "abandoned"], Field(description="active: reopen it and work in it.")
    ],
    reason: Annotated[
        str | None, Field(max_length=MAX_REASON_CHARS, description="The outcome, or why; joins Decisions.")
    ] = None,
    thread_id: ThreadId = None,
) -> dict[str, Any]:
    """Finish a thread (done, or abandoned), park it (idle), or move to it (active: reopened and your
    thread). Call done when a topic is finished.
    """
    runtime, prov = await caller(ctx)
    if status == "active" and thread_id is not None:  # a switch; an active thread (a teammate's too) is not rewritten
        thread = await runtime.call(runtime.threads.thread, prov, thread_id)
        if thread.status != "active" or reason:
            thread = await runtime.call(runtime.threads.set_status, prov, status, reason, thread_id)
        await runtime.call(runtime.threads.switch, prov, thread.id, 100)
        return _brief(thread)
    return _brief(await runtime.call(runtime.threads.set_status, prov, status, reason, thread_id))


async def thread_project(
    ctx: Context,
    action: Annotated[Literal["list", "create", "switch"], Field(description="What to do.")] = "list",
    title: Annotated[str | None, Field(max_length=MAX_TITLE, description="create: its title.")] = None,
    system_context: Annotated[
        str | None, Field(max_length=MAX_SYSTEM_CONTEXT_CHARS, description="create: standing instructions.")
    ] = None,
    mode: Annotated[Literal["solo", "team"], Field(description="create: team adds ownership rules.")] = "solo",
    project_id: Annotated[str | None, Field(max_length=ID_CHARS, description="switch: the project.")] = None,
    idempotency_key: RequestKey = None,
) -> dict[str, Any]:
    """List this repository's projects, create one (root thread `main`), or switch. Only needed when
    there is no project yet, or several.
    """
    runtime, prov = await caller(ctx)
    if action == "create":
        if not title:
            raise InvalidInput("create needs a title")
        await runtime.call(runtime.threads.create_project, prov, title, system_context or "", mode)
    elif action == "switch":
        if not project_id:
            raise InvalidInput("switch needs a project_id")
        await runtime.call(runtime.threads.switch_project, prov, project_id)
    return await runtime.call(runtime.threads.projects, prov)


async def thread_merge(
    ctx: Context,
    parent_summary: Annotated[
        str,
        Field(
            max_length=MAX_SUMMARY_CHARS, description="The parent's new summary, carrying this thread's conclusions."
        ),
    ],
    thread_id: ThreadId = None,
) -> dict[str, Any]:
    """Fold a finished thread into its parent, when its conclusions belong there: the parent's summary
    is replaced, the thread is done and the parent becomes this session's active thread; both are
    checked before either is written.
    Returns the parent {id, title, parent, status, branch}."""
    runtime, prov = await caller(ctx)
    return _brief(await runtime.call(runtime.threads.merge, prov, parent_summary, thread_id))


async def thread_rebase(
    ctx: Context,
    thread_id: Annotated[str, Field(max_length=ID_CHARS, description="The thread to move, with its descendants.")],
    new_parent: Annotated[str, Field(max_length=ID_CHARS, description="Its new parent (not itself or below it).")],
) -> dict[str, Any]:
    """Move a thread and its descendants under another parent, when it sits under the wrong one.
    Returns {id, title, parent, status, branch}."""
    runtime, prov = await caller(ctx)
    return _brief(await runtime.call(runtime.threads.rebase, prov, thread_id, new_parent))


async def thread_delete(
    ctx: Context,
    thread_id: Annotated[
        str, Field(max_length=ID_CHARS, description="The thread to delete, with all its descendants.")
    ],
) -> dict[str, Any]:
    """Delete a thread's file and its descendants' (git keeps the history): only for a thread made by
    mistake; a finished one is thread_status done. Returns {deleted: [ids]}."""
    runtime, prov = await caller(ctx)
    return {"deleted": await runtime.call(runtime.threads.delete, prov, thread_id)}


async def thread_init_files(
    ctx: Context,
    targets: Annotated[
        list[Literal["agents", "cursor", "generic"]] | None,
        Field(
            description="agents: AGENTS.md; cursor: .cursor/rules/threadloom.mdc; generic: .threadloom/instructions.md"
        ),
    ] = None,
) -> dict[str, Any]:
    """Write threadloom's instructions into files for agents that do not read MCP server instructions,
    inside a managed block that leaves the rest of each file alone; once per repository. Running it
    again changes nothing.

    Returns {files: [{path, action: created|updated|unchanged}]}.
    """
    _, prov = await caller(ctx)
    return {"files": write_instruction_files(repo_of(prov), list(targets or []))}


async def thread_claim(
    ctx: Context,
    action: Annotated[Literal["claim", "release", "list"], Field(description="What to do.")] = "list",
    thread_id: ThreadId = None,
) -> dict[str, Any]:
    """Claim a thread before working on it so peers in the same repository pick something else,
    release it, or list who holds what (with whether the holder's session is still live).

    Returns {claims: [{thread, session_id, claimed_at, vendor, live}]} after the action.
    """
    runtime, prov = await caller(ctx)
    if action == "claim":
        await runtime.call(runtime.hygiene.claim, prov, thread_id)
    elif action == "release":
        await runtime.call(runtime.hygiene.release, prov, thread_id)
    return {"claims": await runtime.call(runtime.hygiene.claims, prov)}


async def thread_janitor(
    ctx: Context,
    action: Annotated[
        Literal["pickup", "compost", "janitor"],
        Field(description="pickup: unclaimed threads, stalest first; compost: idle ones at random; janitor: proposals"),
    ] = "janitor",
    apply: Annotated[bool, Field(description="janitor: apply the proposals (default: dry run).")] = False,
    limit: Annotated[int, Field(ge=1, le=50, description="How many to list.")] = 5,
) -> dict[str, Any]:
    """Find work or tidy the tree: threads to pick up, idle threads to revisit, or the janitor's proposals
    (stale active -> idle, long idle -> done, empty -> abandoned), applied only with apply=true; in a
    team project a teammate's thread is skipped, with why.

    Returns {threads: [{id, title, status, updated_at, author, category?, propose?, why?, applied?, skipped?}]}.
    """
    runtime, prov = await caller(ctx)
    if action == "pickup":
        found = await runtime.call(runtime.hygiene.pickup, prov, limit)
    elif action == "compost":
        found = await runtime.call(runtime.hygiene.compost, prov, limit)
    else:
        found = await runtime.call(runtime.hygiene.janitor, prov, apply)
    return {"threads": found}


async def thread_stats(ctx: Context) -> dict[str, Any]:
    """Sizes: threads by status, summary tokens, and the context sessions loaded at their start. Call
    it to see whether contexts have grown too large.

    Returns {project, threads, by_status, broken_files, summary_tokens: {total, mean, max},
    context_loads: {count, mean_tokens, max_tokens}, conversation_tokens, caveats}.
    """
    runtime, prov = await caller(ctx)
    return await runtime.call(runtime.threads.stats, prov)


THREAD_TOOLS: tuple[ToolDef, ...] = (
    # Read-only: it switches nothing (thread_status active does); the load is journaled like every call.
    ToolDef(thread_context, "threads", "Project context", read_only=True, destructive=False, idempotent=True),
    ToolDef(thread_create, "threads", "New thread", read_only=False, destructive=False, idempotent=False, keyed=True),
    ToolDef(
        thread_summary, "threads", "Update a summary", read_only=False, destructive=False, idempotent=False, keyed=True
    ),
    ToolDef(thread_note, "threads", "Note or quote", read_only=False, destructive=False, idempotent=False, keyed=True),
    ToolDef(thread_status, "threads", "Thread status", read_only=False, destructive=False, idempotent=True),
    ToolDef(thread_project, "threads", "Projects", read_only=False, destructive=False, idempotent=False, keyed=True),
    ToolDef(thread_merge, "threads_admin", "Merge a thread", read_only=False, destructive=True, idempotent=False),
    ToolDef(thread_rebase, "threads_admin", "Move a thread", read_only=False, destructive=False, idempotent=True),
    ToolDef(thread_delete, "threads_admin", "Delete a thread", read_only=False, destructive=True, idempotent=True),
    ToolDef(thread_stats, "threads_admin", "Thread stats", read_only=True, destructive=False, idempotent=True),
    ToolDef(thread_claim, "threads_admin", "Thread claims", read_only=False, destructive=False, idempotent=True),
    ToolDef(thread_janitor, "threads_admin", "Thread hygiene", read_only=False, destructive=False, idempotent=False),
    ToolDef(
        thread_init_files, "threads_admin", "Instruction files", read_only=False, destructive=False, idempotent=True
    ),
)
