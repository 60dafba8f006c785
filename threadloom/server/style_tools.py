"""Style memory's tools, in the opt-in `user_model` group: `style_hint` passes what the host agent noticed
in the user's latest message, `style` gives the capsule (or ack / delta against a known revision), the score
and the habits, `style_manage` is the user's controls. Learning itself runs in the daemon (style/learn.py)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from pydantic import BaseModel, Field

from threadloom.errors import InvalidInput
from threadloom.identity import Provenance
from threadloom.runtime import Runtime
from threadloom.server.connection import caller, connection_of
from threadloom.server.toolsets import ToolDef
from threadloom.style import StyleMemory
from threadloom.style.model import KINDS, Kind

assert set(Kind.__args__) == set(KINDS)  # type: ignore[attr-defined]


class Hint(BaseModel):
    kind: Annotated[Kind, Field(description="What sort of habit.")]
    text: Annotated[str, Field(description="The habit in the user's words (<= 40 chars).")]
    example: Annotated[str | None, Field(description="The user's sentence showing it.")] = None


def _memory(runtime: Runtime) -> StyleMemory:
    return StyleMemory(runtime.store, runtime.scrubber)


async def _the_user(ctx: Context) -> tuple[Runtime, Provenance]:
    """The caller of a write, refused when it is an agent threadloom spawned: a child's "user" is the agent
    that prompted it (the user-model validator among them, which reads untrusted text), never the user."""
    conn = connection_of(ctx.request_context)
    info = await conn.ensure_session(ctx.request_context)
    if info.parent_id is not None:
        raise InvalidInput("a spawned agent cannot change the user's style memory; only the user's own sessions can")
    return conn.runtime, info.provenance()


async def style_hint(
    ctx: Context,
    hints: Annotated[list[Hint], Field(description="Habits of the user's latest message (<= 8).")] = [],  # noqa: B006
    profile: Annotated[
        list[str], Field(description="How they asked you to work, e.g. 'conclusions first' (<= 6).")
    ] = [],  # noqa: B006
) -> dict[str, Any]:
    """Pass a style habit (pet phrase, slang, emoji...) or collaboration preference the user just showed.
    Never names, addresses, health or personality labels (refused).

    Returns {observed: [{kind, text, status}], profile, revision}."""
    runtime, prov = await _the_user(ctx)
    given = [h.model_dump() for h in hints]
    return await runtime.call(_memory(runtime).hint, prov, given, profile)


async def style(
    ctx: Context,
    revision: Annotated[int | None, Field(description="The revision you hold: ack or delta.")] = None,
    view: Annotated[Literal["capsule", "habits"], Field(description="habits: all, with ids.")] = "capsule",
) -> dict[str, Any]:
    """How the user writes and likes to work: apply it lightly.

    Returns {mode: capsule|delta|ack, revision, language, text?, added?, removed?, score} or {habits}."""
    runtime, prov = await caller(ctx)
    memory, policy = _memory(runtime), runtime.settings.egress
    if view == "habits":
        return await runtime.call(memory.habits, prov, policy)
    return await runtime.call(memory.view, prov, revision, policy)


async def style_manage(
    ctx: Context,
    action: Annotated[
        Literal["pin", "unpin", "forget", "pause", "resume", "profile_set", "profile_clear"],
        Field(description="pause/resume learning; pin/unpin/forget a habit; set/clear a profile item."),
    ],
    target: Annotated[str | None, Field(description="A habit id (sh_...), a profile id (sp_...), or the text.")] = None,
) -> dict[str, Any]:
    """The user's controls over their style memory.

    Returns {action, revision, learning}."""
    runtime, prov = await _the_user(ctx)
    return await runtime.call(_memory(runtime).manage, prov, action, target)


STYLE_TOOLS: tuple[ToolDef, ...] = (
    # Idempotent: a hint repeated in one session is counted once.
    ToolDef(style_hint, "user_model", "Style hint", read_only=False, destructive=False, idempotent=True),
    ToolDef(style, "user_model", "Style capsule", read_only=True, destructive=False, idempotent=True),
    ToolDef(style_manage, "user_model", "Manage style memory", read_only=False, destructive=True, idempotent=True),
)
