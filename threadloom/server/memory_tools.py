"""Memory graph tools. `memory` (in the default toolset) covers a coding session: store, recall,
amend. `memory_graph` (opt-in) adds core, search, link, traverse, explain, stats, pin, promote,
delete, preferences, maintenance and restore.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from pydantic import BaseModel, Field

from threadloom.errors import InvalidInput
from threadloom.memory.model import EDGE_TYPES, Link, NewMemory
from threadloom.memory.recall import RECALL_KINDS, TRANSCRIPT, RecallFilters
from threadloom.server.connection import caller
from threadloom.server.toolsets import RequestKey, Time, ToolDef

MemoryId = Annotated[str, Field(description="A memory id, e.g. m_0123456789abcdef.")]
Categories = Annotated[list[Annotated[str, Field(min_length=1, max_length=64)]], Field(max_length=32)]
EdgeType = Literal[
    "caused_by",
    "supersedes",
    "contradicts",
    "refines",
    "depends_on",
    "related_to",
    "mentions",
    "elaborates",
    "derived_from",
]
assert set(EdgeType.__args__) == set(EDGE_TYPES)  # type: ignore[attr-defined]
Status = Literal["active", "dormant", "fading"]
Kind = Literal["memory", "note", "quote", "thread", "transcript"]
assert set(Kind.__args__) == {*RECALL_KINDS, TRANSCRIPT}  # type: ignore[attr-defined]


class Related(BaseModel):
    id: str = Field(description="A stored memory.")
    type: EdgeType = Field(description="new --type--> id")


def _filters(
    categories: list[str] | None,
    entity: str | None,
    statuses: list[Status] | None,
    created_since: int | None = None,
    active_since: int | None = None,
    all_projects: bool = False,
    kinds: list[Kind] | None = None,
) -> RecallFilters:
    return RecallFilters(
        kinds=tuple(kinds or RECALL_KINDS),
        categories=tuple(categories or ()),
        entity=entity,
        statuses=tuple(statuses or ()),
        created_since=created_since,
        active_since=active_since,
        all_projects=all_projects,
    )


async def memory_store(
    ctx: Context,
    content: Annotated[str, Field(description="The fact (<= 20,000 characters).")],
    summary: Annotated[str | None, Field(description="One-line gist.")] = None,
    category: Annotated[str | None, Field(description="Free-form, e.g. architecture.")] = None,
    kind: Annotated[
        Literal["fact", "decision", "preference", "event", "lesson", "procedure", "observation"],
        Field(description="What sort of memory."),
    ] = "fact",
    entities: Annotated[list[str] | None, Field(description="People, services, files it is about.")] = None,
    related: Annotated[list[Related] | None, Field(description="Edges to stored memories.")] = None,
    visibility: Annotated[
        Literal["private", "project", "org"], Field(description="You, this project, or your organisation.")
    ] = "private",
    idempotency_key: RequestKey = None,
    valid_from: Annotated[Time, Field(description="Since when it holds; default now.")] = None,
    pinned: Annotated[bool, Field(description="Never forget it.")] = False,
) -> dict[str, Any]:
    """Remember what a later session needs: a decision and why, a fix, a preference, a gotcha; one
    fact each. Not to correct a memory (memory_amend) or log progress (thread_note). If a returned
    possible_conflicts memory is outdated, memory_amend(memory_id=<it>, by=<new id>).
    """
    runtime, prov = await caller(ctx)
    new = NewMemory(
        content=content,
        summary=summary,
        category=category,
        kind=kind,
        entities=tuple(entities or ()),
        visibility=visibility,
        related=tuple(Link(r.id, r.type) for r in related or ()),
        idempotency_key=idempotency_key,
        valid_from=valid_from,
        pinned=pinned,
    )
    stored = await runtime.call(runtime.memory.store, new, prov)
    return stored.as_dict()


async def memory_recall(
    ctx: Context,
    query: Annotated[str, Field(description="What you want to know, in plain words.")],
    limit: Annotated[int, Field(ge=1, le=50, description="Hits.")] = 10,
    verbosity: Annotated[Literal["concise", "full"], Field(description="concise: ids and summaries.")] = "full",
    read_only: Annotated[bool, Field(description="Not journaled, so not counted as use.")] = False,
    as_of: Annotated[Time, Field(description="What held true then.")] = None,
    categories: Annotated[Categories | None, Field(description="Only these.")] = None,
    entity: Annotated[str | None, Field(description="Only about this.")] = None,
    statuses: Annotated[list[Status] | None, Field(description="Only these.")] = None,
    all_projects: Annotated[bool, Field(description="Not just this project.")] = False,
    kinds: Annotated[
        list[Kind] | None, Field(description="Only these; transcript (what was said) only if named, ranked lower.")
    ] = None,
) -> dict[str, Any]:
    """What earlier sessions stored or wrote on a topic (memories, thread notes, user quotes, thread
    summaries), best first; superseded_by names a memory's correction. Call it before you start on
    something; not to list by date (memory_search).
    """
    runtime, prov = await caller(ctx)
    return await runtime.call(
        runtime.recall.recall,
        query,
        prov,
        limit,
        verbosity,
        read_only,
        as_of,
        _filters(categories, entity, statuses, all_projects=all_projects, kinds=kinds),
    )


async def memory_amend(
    ctx: Context,
    memory_id: MemoryId,
    content: Annotated[str | None, Field(description="The corrected text.")] = None,
    by: Annotated[str | None, Field(description="Or: the stored memory that replaces it.")] = None,
    reason: Annotated[str | None, Field(description="Why it changed.")] = None,
    idempotency_key: RequestKey = None,
) -> dict[str, Any]:
    """Correct a wrong or outdated memory instead of storing a contradiction: the new version
    supersedes it (the old is kept, ranked down). Only its owner may; to dispute another's,
    memory_store yours with a contradicts edge.
    """
    runtime, prov = await caller(ctx)
    return await runtime.call(runtime.memory.amend, memory_id, prov, content, by, reason)


async def memory_core(
    ctx: Context,
    key: Annotated[str | None, Field(description="e.g. build.command; omit to list.")] = None,
    content: Annotated[str | None, Field(description="Set key to this.")] = None,
    priority: Annotated[int, Field(ge=0, le=100, description="Higher shows first.")] = 50,
    remove: Annotated[bool, Field(description="Take key out.")] = False,
    memory_id: Annotated[str | None, Field(description="Make this memory core under key.")] = None,
    idempotency_key: RequestKey = None,
) -> dict[str, Any]:
    """Core memory: the few standing facts every brief shows ('tests: make test'), not today's
    progress. Call it when the user gives a standing rule for every session. No arguments lists them;
    key + content sets, key + memory_id promotes a stored memory, key + remove takes one out.
    """
    runtime, prov = await caller(ctx)
    changed = None
    if key is not None:
        if remove:
            changed = await runtime.call(runtime.core.remove_core, key, prov)
        elif memory_id is not None:
            changed = await runtime.call(runtime.core.make_core, memory_id, key, priority, prov)
        elif content is not None:
            changed = await runtime.call(runtime.core.set_core, key, content, prov, priority)
        else:
            raise InvalidInput("with key, give content (set), memory_id (promote) or remove=true")
    listing = await runtime.call(runtime.recall.core_list, prov)
    return listing if changed is None else {"changed": changed.as_dict(), "core": listing["core"]}


# memory_graph: opt-in


async def memory_search(
    ctx: Context,
    query: Annotated[str, Field(description="Search text; empty lists by latest activity.")] = "",
    limit: Annotated[int, Field(ge=1, le=200, description="How many to return.")] = 20,
    categories: Annotated[Categories | None, Field(description="Only these categories.")] = None,
    entity: Annotated[str | None, Field(description="Only memories about this entity.")] = None,
    statuses: Annotated[list[Status] | None, Field(description="Only these lifecycle statuses.")] = None,
    created_since: Annotated[Time, Field(description="Stored since.")] = None,
    active_since: Annotated[Time, Field(description="Stored, recalled or reactivated since.")] = None,
    all_projects: Annotated[bool, Field(description="Every project, not just this one.")] = False,
) -> dict[str, Any]:
    """Find or list memories by filters, without reactivating them. With an empty query, answers
    "what is new or changed since T" (active_since) without knowing what to ask for. To answer a
    question, memory_recall ranks better.

    Returns {memories: [{...memory, score?}], mode: "search"|"enumerate", caveats: [...]}.
    """
    runtime, prov = await caller(ctx)
    filters = _filters(categories, entity, statuses, created_since, active_since, all_projects)
    return await runtime.call(runtime.recall.search, query, prov, filters, limit)


async def memory_link(
    ctx: Context,
    source: MemoryId,
    target: MemoryId,
    type: Annotated[EdgeType, Field(description="source --type--> target.")],
    reason: Annotated[str | None, Field(description="Why they are linked.")] = None,
    idempotency_key: RequestKey = None,
) -> dict[str, Any]:
    """Add a typed edge between two stored memories, when one explains, refines or depends on another
    (memory_store's related does it at store time). Cycles of caused_by, supersedes, depends_on,
    derived_from or refines are refused.

    Returns {edge: {source, target, type, weight, made_by, created_at, reason?}}.
    """
    runtime, prov = await caller(ctx)
    edge = await runtime.call(runtime.memory.link, source, target, type, prov, reason)
    return {"edge": edge.as_dict()}


async def memory_traverse(
    ctx: Context,
    memory_id: MemoryId,
    depth: Annotated[int, Field(ge=1, le=5, description="Hops to walk.")] = 2,
    edge_types: Annotated[list[EdgeType] | None, Field(description="Follow only these edge types.")] = None,
    direction: Annotated[Literal["out", "in", "both"], Field(description="Edge direction to follow.")] = "both",
) -> dict[str, Any]:
    """Walk the graph from a memory: every memory reachable within depth, and every edge among them.
    Call it to follow why a memory holds (causes, corrections); not to search (memory_recall).

    Returns {nodes: [{id, summary, status, activation, is_core, depth}], edges: [{source, target, type,
    weight, made_by, created_at}], caveats: [...]}.
    """
    runtime, prov = await caller(ctx)
    return await runtime.call(runtime.recall.traverse, memory_id, prov, depth, tuple(edge_types or ()), direction)


async def memory_explain(ctx: Context, memory_id: MemoryId) -> dict[str, Any]:
    """Why a memory scores what it does, and whether the maintenance pass would forget it now. Call it
    when a memory ranks or fades unexpectedly.

    Returns {id, summary, score: {decay_score, relevance, connectivity, reactivation, inputs: {idle_days,
    edges, recalls}}, status: {stored, by_score_now}, edges_by_type, superseded_by,
    would_be_forgotten_now, kept_because: [...], config}.
    """
    runtime, prov = await caller(ctx)
    return await runtime.call(runtime.recall.explain, memory_id, prov)


async def memory_stats(ctx: Context) -> dict[str, Any]:
    """Counts of the memory graph you can see (your memories and those shared with you); not to find
    memories (memory_recall).

    Returns {memories, by_status, by_category, pinned, core, superseded, mean_decay_score, edges,
    edges_by_type, edges_by_maker, archived, last_maintenance}.
    """
    runtime, prov = await caller(ctx)
    return await runtime.call(runtime.recall.stats, prov)


async def memory_pin(
    ctx: Context, memory_id: MemoryId, pinned: Annotated[bool, Field(description="false unpins.")] = True
) -> dict[str, Any]:
    """Pin one of your memories so it is never forgotten however rarely used (or unpin it). Returns
    the memory."""
    runtime, prov = await caller(ctx)
    return (await runtime.call(runtime.memory.pin, memory_id, pinned, prov)).as_dict()


async def memory_promote(
    ctx: Context,
    memory_id: MemoryId,
    visibility: Annotated[Literal["project", "org"], Field(description="The wider visibility.")],
) -> dict[str, Any]:
    """Widen who sees a memory (private -> project -> org) when others should know it; only its owner
    may. Returns the memory."""
    runtime, prov = await caller(ctx)
    return (await runtime.call(runtime.memory.promote, memory_id, visibility, prov)).as_dict()


async def memory_delete(ctx: Context, memory_id: MemoryId) -> dict[str, Any]:
    """Delete one of your memories and all its edges, for good: only for what must not be kept (a
    secret, a mistake). A correction is memory_amend.

    Returns {deleted, edges_deleted}.
    """
    runtime, prov = await caller(ctx)
    return await runtime.call(runtime.memory.delete, memory_id, prov)


async def memory_preferences(
    ctx: Context,
    auto: Annotated[list[str], Field(description="Categories whose well-used memories become core by themselves.")],
    approval: Annotated[list[str], Field(description="Categories whose candidates wait for approval.")],
    excluded: Annotated[list[str], Field(description="Categories never made core automatically.")],
) -> dict[str, Any]:
    """Set which memory categories become core memory, when the user says what belongs in every
    brief. Returns {auto, approval, excluded}."""
    runtime, prov = await caller(ctx)
    return await runtime.call(runtime.core.set_preferences, prov, auto, approval, excluded)


async def memory_maintain(
    ctx: Context,
    dry_run: Annotated[bool, Field(description="Report what would change, change nothing.")] = True,
    restore: Annotated[str | None, Field(description="Instead: restore this pruned memory id.")] = None,
    consolidate: Annotated[
        bool, Field(description="Instead: merge your near-duplicate memories, notes and quotes.")
    ] = False,
) -> dict[str, Any]:
    """Run the maintenance pass (rescore, lifecycle, prune into a 30-day archive) over your own memories,
    or restore one of your pruned memories. It runs by itself in the background over everyone's: call it
    to preview (the default dry run) or to restore. With consolidate, each set of
    your near-duplicates merges into one survivor keeping every edge and source, the rest superseded.

    Returns {dry_run, ran, scored, transitions, pruned, pruned_ids, promoted_to_core, archive_purged,
    skipped_reason}; with restore, the restored memory; with consolidate, {merges, near_misses, ...}.
    """
    runtime, prov = await caller(ctx)
    if consolidate:
        from threadloom.consolidate.service import Options, for_runtime

        options = Options(apply=not dry_run, owner=prov.viewer().user, release=False)
        report = await runtime.call(for_runtime(runtime).run, options)
        return report | {k: report[k][:SHOWN] for k in ("merges", "near_misses") if k in report}
    if restore is not None:
        return (await runtime.call(runtime.maintenance.restore, restore, prov)).as_dict()
    if not dry_run:
        await runtime.call(runtime.recall.reactivations.flush)  # the pass counts recalls made just now
    return (await runtime.call(runtime.maintenance.run, dry_run, None, prov.viewer())).as_dict()


SHOWN = 50  # merges and near-misses listed in a consolidation's reply (its counts are whole)

MEMORY_TOOLS: tuple[ToolDef, ...] = (
    ToolDef(memory_store, "memory", "Remember", read_only=False, destructive=False, idempotent=False),
    # Read-only: a recall changes no memory. It appends to the journal every tool call writes what it
    # returned; the maintenance pass later counts that as use (reactivation, memory/reactivation.py).
    # read_only=true skips even the journal entry.
    ToolDef(memory_recall, "memory", "Recall memories", read_only=True, destructive=False, idempotent=True),
    ToolDef(
        memory_amend, "memory", "Correct a memory", read_only=False, destructive=False, idempotent=False, keyed=True
    ),
    # Opt-in: the brief shows core memory, and well-used memories of chosen categories become core by
    # themselves; setting one by hand is rare enough not to be paid for in every session.
    ToolDef(
        memory_core, "memory_graph", "Core memory", read_only=False, destructive=False, idempotent=True, keyed=True
    ),
    ToolDef(memory_search, "memory_graph", "Search memories", read_only=True, destructive=False, idempotent=True),
    ToolDef(
        memory_link, "memory_graph", "Link memories", read_only=False, destructive=False, idempotent=False, keyed=True
    ),
    ToolDef(memory_traverse, "memory_graph", "Walk the graph", read_only=True, destructive=False, idempotent=True),
    ToolDef(memory_explain, "memory_graph", "Explain a score", read_only=True, destructive=False, idempotent=True),
    ToolDef(memory_stats, "memory_graph", "Memory stats", read_only=True, destructive=False, idempotent=True),
    ToolDef(memory_pin, "memory_graph", "Pin a memory", read_only=False, destructive=False, idempotent=True),
    ToolDef(memory_promote, "memory_graph", "Share a memory", read_only=False, destructive=False, idempotent=True),
    ToolDef(memory_delete, "memory_graph", "Delete a memory", read_only=False, destructive=True, idempotent=True),
    ToolDef(
        memory_preferences, "memory_graph", "Core preferences", read_only=False, destructive=False, idempotent=True
    ),
    ToolDef(memory_maintain, "memory_graph", "Memory maintenance", read_only=False, destructive=True, idempotent=False),
)
