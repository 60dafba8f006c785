"""The brief as a tool (`brief`), a resource (`threadloom://brief`) and the "now" table
(`brief(scope="now")`, `threadloom://now`): one renderer, threadloom/brief, so all give the same text."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from mcp.server.mcpserver import Context
from pydantic import Field

from threadloom.brief import DEFAULT_BUDGET, MAX_BUDGET, MIN_BUDGET, render_brief, render_now
from threadloom.server.connection import caller
from threadloom.server.thread_views import _reported
from threadloom.server.toolsets import ToolDef

if TYPE_CHECKING:
    from threadloom.server.app import ThreadloomServer


async def brief(
    ctx: Context,
    scope: Annotated[
        Literal["full", "query", "now"],
        Field(description="full: session start; query: mid-session, only what changed plus what query finds; now"),
    ] = "full",
    query: Annotated[str | None, Field(max_length=2000, description="What you are about to work on.")] = None,
    budget: Annotated[int, Field(ge=MIN_BUDGET, le=MAX_BUDGET, description="Tokens.")] = DEFAULT_BUDGET,
) -> dict[str, Any]:
    """What this session should know: core memory, the active thread, inbox, peers, claims, dates to copy.
    Call at the start if no brief was injected; later use scope=query instead of repeating it.

    Returns {scope, text, tokens, budget, dropped: [{section, items, tokens, get_with}]}; now: {scope, text}.
    """
    if scope == "now":
        return {"scope": "now", "text": render_now()}
    runtime, prov = await caller(ctx)
    made = await runtime.call(render_brief, runtime, prov, scope=scope, query=query, budget=budget)
    return made.as_dict()


def add_brief_views(server: ThreadloomServer) -> None:
    @server.resource(
        "threadloom://brief{?budget}",
        name="brief",
        title="Session brief",
        description="The brief tool's text (scope full): what this session should know at its start.",
        mime_type="text/markdown",
    )
    async def brief_resource(ctx: Context, budget: str = "") -> str:
        runtime, prov = await caller(ctx)
        tokens = int(budget) if budget.isdigit() and len(budget) < 6 else DEFAULT_BUDGET
        with _reported():
            made = await runtime.call(render_brief, runtime, prov, budget=min(max(tokens, MIN_BUDGET), MAX_BUDGET))
        return made.text

    @server.resource(
        "threadloom://now",
        name="now",
        title="Dates to copy",
        description="Today, yesterday, the last 7 days, this and last week and month: ISO dates and epoch ms.",
        mime_type="text/plain",
    )
    def now_resource() -> str:
        return render_now()


BRIEF_TOOLS: tuple[ToolDef, ...] = (
    ToolDef(brief, group="core", title="Session brief", read_only=True, destructive=False, idempotent=True),
)
