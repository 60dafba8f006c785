"""The `erasure` group (opt-in): `forget`, the one destructive tool. Opt-in because it is destructive and
the default surface is held to 3,000 tokens; a dry run is its default, so a first call only lists."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from pydantic import Field, StrictBool

from threadloom.erasure.learning import LearningFiles
from threadloom.erasure.service import DEFAULT_SAMPLE, MAX_NAME, MAX_SAMPLE, MAX_TEXT, Eraser
from threadloom.learning.library import Library
from threadloom.server.connection import caller
from threadloom.server.toolsets import Time, ToolDef
from threadloom.store.erasure import Selector

Kind = Literal["transcripts", "memories", "notes", "claims", "style", "learning"]
Source = Literal["claude-code", "claude", "codex", "gemini", "copilot", "cursor", "other"]


async def forget(
    ctx: Context,
    session: Annotated[str | None, Field(max_length=MAX_NAME, description="The agent session's id.")] = None,
    project: Annotated[str | None, Field(max_length=MAX_NAME, description="The repository path.")] = None,
    source: Annotated[Source | None, Field(description="The agent CLI.")] = None,
    since: Annotated[Time, Field(description="Written at or after.")] = None,
    until: Annotated[Time, Field(description="Written before.")] = None,
    text: Annotated[str | None, Field(max_length=MAX_TEXT, description="Containing this text (3+ chars).")] = None,
    kinds: Annotated[list[Kind] | None, Field(max_length=6, description="Default: transcripts.")] = None,
    # Strict: only a JSON false erases (pydantic would read "no", "off" or 0 as false).
    dry_run: Annotated[StrictBool, Field(description="List only; false erases.")] = True,
    sample: Annotated[int, Field(ge=0, le=MAX_SAMPLE, description="Rows shown per kind.")] = DEFAULT_SAMPLE,
) -> dict[str, Any]:
    """Erase your own conversations, memories, notes, claims about you, style memory or learning data for
    good when the user asks to forget them: selectors combine (AND), at least one is required. First call
    lists what would go (dry_run); then dry_run=false removes the text, its index and vectors, and compacts the store
    (on PostgreSQL: VACUUM, and compaction.kept_by_postgresql says what the server still keeps).

    Returns {dry_run, would_erase: {kind: {count, sample}}, total} or {erased, compaction, backups}.
    """
    runtime, prov = await caller(ctx)
    sel = Selector(session, project, source, since, until, text)
    owner = prov.viewer().user
    chosen = tuple(kinds) if kinds is not None else ("transcripts",)
    egress = (runtime.settings.egress, prov.vendor)
    learning = LearningFiles.of(Library(runtime), runtime.settings.layout.home)
    return await runtime.call(Eraser(runtime.store, learning).forget, owner, sel, chosen, dry_run, sample, egress)


FORGET_TOOLS: tuple[ToolDef, ...] = (
    ToolDef(forget, "erasure", "Forget (erase)", read_only=False, destructive=True, idempotent=True),
)
