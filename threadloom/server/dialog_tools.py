"""The `transcripts` group (opt-in): what was said in the agent CLIs' conversations, ingested from their
transcript files. `dialog_search` finds messages, `dialog_read` pages through a session, `dialog_day`
tells what happened on a day. Opt-in because the default surface is held to 3,000 tokens; memory_recall
reaches transcripts too (kinds=["transcript"])."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from pydantic import Field

from threadloom.dialog.day import DEFAULT_BUDGET, MAX_BUDGET, MIN_BUDGET, DaySummary
from threadloom.dialog.model import MAX_PAGE, MAX_WINDOW, ROLES, DialogFilters
from threadloom.dialog.read import DialogReader
from threadloom.dialog.search import MAX_HITS, DialogSearch
from threadloom.server.connection import caller
from threadloom.server.toolsets import Time, ToolDef
from threadloom.transcripts import sources

Vendor = Literal["claude-code", "codex", "gemini", "copilot"]
Role = Literal["user", "assistant", "tool"]
assert set(Vendor.__args__) == {s.name for s in sources()}  # type: ignore[attr-defined]
assert set(Role.__args__) == set(ROLES)  # type: ignore[attr-defined]
Project = Annotated[str | None, Field(max_length=4096, description="Only this repository path (as hits show it).")]


async def dialog_search(
    ctx: Context,
    query: Annotated[str, Field(max_length=20_000, description="What was said, in plain words.")],
    vendors: Annotated[list[Vendor] | None, Field(max_length=8, description="Only these agent CLIs.")] = None,
    project: Project = None,
    session: Annotated[str | None, Field(max_length=200, description="Only this session.")] = None,
    roles: Annotated[list[Role] | None, Field(max_length=3, description="Only these speakers.")] = None,
    since: Annotated[Time, Field(description="Said at or after.")] = None,
    until: Annotated[Time, Field(description="Said before.")] = None,
    limit: Annotated[int, Field(ge=1, le=MAX_HITS, description="Hits.")] = 10,
    window: Annotated[int, Field(ge=0, le=MAX_WINDOW, description="Turns shown before and after each hit.")] = 1,
) -> dict[str, Any]:
    """Search your own agent conversations (every CLI's transcripts) for what was said, when you need
    the words themselves; filters apply before ranking. Not for stored decisions (memory_recall).

    Returns {hits: [{id, session, vendor, project, role, at, text, score, before, after}], caveats, signals}.
    """
    runtime, prov = await caller(ctx)
    filters = DialogFilters(tuple(vendors or ()), project, session, tuple(roles or ()), since, until)
    return await runtime.call(DialogSearch(runtime.store, runtime.search).search, query, prov, filters, limit, window)


async def dialog_read(
    ctx: Context,
    message: Annotated[int | None, Field(ge=1, le=2**62, description="Around this message id.")] = None,
    session: Annotated[str | None, Field(max_length=200, description="Or: from this session's start.")] = None,
    cursor: Annotated[str | None, Field(max_length=40, description="Or: a page's more_before/more_after.")] = None,
    before: Annotated[int, Field(ge=0, le=MAX_PAGE, description="Messages before.")] = 3,
    after: Annotated[int, Field(ge=0, le=MAX_PAGE, description="Messages after.")] = 3,
) -> dict[str, Any]:
    """Read a conversation around a message dialog_search found (or from a session's start), a page at
    a time; pass more_before or more_after back as cursor to go on.

    Returns {session, vendor, project, messages: [{id, role, at, text}], total, more_before, more_after}.
    """
    runtime, prov = await caller(ctx)
    return await runtime.call(DialogReader(runtime.store).read, prov, message, session, before, after, cursor)


async def dialog_day(
    ctx: Context,
    day: Annotated[Time, Field(description="The day (a date) or the range's start; default today.")] = None,
    until: Annotated[Time, Field(description="End of the range; default the day's end.")] = None,
    project: Project = None,
    budget_tokens: Annotated[int, Field(ge=MIN_BUDGET, le=MAX_BUDGET, description="Size of text.")] = DEFAULT_BUDGET,
) -> dict[str, Any]:
    """What happened on a day or a range (up to 31 days): sessions, projects, threads, notes and
    memories written, what was asked; detail or outline to fit budget_tokens, cut with where to resume.

    Returns {from_at, until_at, items, density, text, tokens, caveats, resume_from_at?}.
    """
    runtime, prov = await caller(ctx)
    day_summary = DaySummary(runtime.store, runtime.settings.egress)
    return await runtime.call(day_summary.summary, prov, day, until, project, budget_tokens)


DIALOG_TOOLS: tuple[ToolDef, ...] = (
    ToolDef(dialog_search, "transcripts", "Search conversations", read_only=True, destructive=False, idempotent=True),
    ToolDef(dialog_read, "transcripts", "Read a conversation", read_only=True, destructive=False, idempotent=True),
    ToolDef(dialog_day, "transcripts", "What happened on a day", read_only=True, destructive=False, idempotent=True),
)
