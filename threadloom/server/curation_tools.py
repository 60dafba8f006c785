"""The `learning` group's curation tools (opt-in): `concept_note` records a regularity seen (deduplicated,
confidence grows per distinct source), `insight` distils a short insight or votes on one (one vote per
session; past the threshold it is exported once), `curate_report` shows the curator's last pass and what a
pass would decide now (a dry run: it changes nothing). Running a real pass, restoring and exporting by hand
stay with a person (`threadloom learn curate|restore|insights`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from pydantic import Field

from threadloom.errors import InvalidInput
from threadloom.learning.concepts import MAX_SOURCE, MAX_TEXT, Concepts
from threadloom.learning.curator import curator_status, for_runtime
from threadloom.learning.insights import MAX_INSIGHT, Insights
from threadloom.learning.library import Library
from threadloom.runtime import Runtime
from threadloom.server.connection import connection_of
from threadloom.server.toolsets import ToolDef


async def concept_note(
    ctx: Context,
    text: Annotated[str, Field(min_length=1, max_length=MAX_TEXT, description="The regularity, one sentence.")],
    source: Annotated[str | None, Field(max_length=MAX_SOURCE, description="Where seen (default: here).")] = None,
) -> dict[str, Any]:
    """Note a regularity seen across work; the same one again adds a source and confidence.

    Returns {id, text, created, new_source, sources, confidence}.
    """
    conn = connection_of(ctx.request_context)
    info = await conn.ensure_session(ctx.request_context)
    rt = conn.runtime
    concepts = Concepts(rt.store, rt.scrubber, lambda: rt.search.embedder)
    return await rt.call(concepts.observe, info.user, text, source or f"session:{info.id}", info.id)


async def insight(
    ctx: Context,
    action: Annotated[Literal["distill", "vote"], Field(description="distill (needs text) or vote (needs id).")],
    text: Annotated[str | None, Field(max_length=MAX_INSIGHT, description="The insight, short.")] = None,
    id: Annotated[int | None, Field(ge=1, description="The insight voted on.")] = None,
    vote: Annotated[Literal["up", "down"], Field(description="Your vote.")] = "up",
) -> dict[str, Any]:
    """Distil a short insight, or vote on one (one vote per session).

    Returns distill {id, text, created}; vote {id, counted, up, down, exported}.
    """
    conn = connection_of(ctx.request_context)
    info = await conn.ensure_session(ctx.request_context)
    rt = conn.runtime
    insights = _insights(rt)
    if action == "distill":
        if text is None:
            raise InvalidInput("distill needs text")
        return await rt.call(insights.distill, info.user, text, info.id)
    if id is None:
        raise InvalidInput("vote needs the insight's id")
    return await rt.call(insights.vote, info.user, id, info.id, vote)


async def curate_report(ctx: Context) -> dict[str, Any]:
    """The curator's last pass over your skills and lessons and what a pass would decide now (changes nothing).

    Returns {enabled, last_pass, verdicts: [{kind, name, verdict, reasons, into?}] (all but keep), counts}.
    """
    conn = connection_of(ctx.request_context)
    info = await conn.ensure_session(ctx.request_context)
    rt = conn.runtime
    curator = for_runtime(rt, Library(rt))
    status = await rt.call(rt.store.read, lambda r: curator_status(r, info.user, rt.settings.learn_curate))
    now = await rt.call(curator.preview, info.user)
    return status | {"verdicts": [v for v in now["verdicts"] if v["verdict"] != "keep"], "counts": now["counts"]}


def _insights(rt: Runtime) -> Insights:
    s = rt.settings
    return Insights(rt.store, s.layout.home / "insights", s.learn_insight_votes, rt.scrubber)


CURATION_TOOLS: tuple[ToolDef, ...] = (
    ToolDef(concept_note, "learning", "Note a concept", read_only=False, destructive=False, idempotent=True),
    ToolDef(insight, "learning", "Distil or vote on an insight", read_only=False, destructive=False, idempotent=False),
    ToolDef(curate_report, "learning", "Curator report", read_only=True, destructive=False, idempotent=True),
)
