"""Skills and lessons in the opt-in `learning` group: list them, read one (counted as viewed), say one was
used, pin one. Writing and deleting stay with a person (`threadloom skills ...`) and the learning loops'
reviewed path (threadloom/learning/library.py), so no agent can unpin or remove what protects an entry."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from pydantic import Field

from threadloom.learning.library import Library
from threadloom.learning.skills import MAX_NAME
from threadloom.server.connection import caller
from threadloom.server.toolsets import ToolDef

Kind = Annotated[Literal["skill", "lesson"], Field(description="skill (SKILL.md) or lesson (a short rule).")]
Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME, description="A skill's name or a lesson's id.")]


async def skill_list(
    ctx: Context,
    kind: Annotated[Literal["skill", "lesson"] | None, Field(description="Only this kind.")] = None,
) -> dict[str, Any]:
    """List your skills and lessons (learned in past sessions) with what each is about.

    Returns {entries: [{kind, name, about, origin, pinned, viewed, used}]}.
    """
    runtime, prov = await caller(ctx)
    rows = await runtime.call(Library(runtime).listing, prov.viewer().user, kind)
    keep = ("kind", "name", "about", "origin", "pinned", "viewed", "used")
    return {"entries": [{k: row[k] for k in keep} for row in rows]}


async def skill_show(
    ctx: Context,
    name: Name,
    kind: Kind = "skill",
    reference: Annotated[
        str | None, Field(max_length=80, description="One of the skill's references/ files instead.")
    ] = None,
) -> dict[str, Any]:
    """Read one skill (its SKILL.md) or lesson in full before following it; counts as viewed.

    Returns {kind, name, text, references, origin, pinned, ...} or {name, reference, text}.
    """
    runtime, prov = await caller(ctx)
    library, owner = Library(runtime), prov.viewer().user
    if reference is not None:
        text = await runtime.call(library.reference, owner, name, reference)
        return {"name": name, "reference": reference, "text": text}
    return await runtime.call(library.show, owner, name, kind)


async def skill_used(ctx: Context, name: Name, kind: Kind = "skill") -> dict[str, Any]:
    """Say that you followed a skill or lesson in this task (use counts guide what is kept).

    Returns {kind, name, used}.
    """
    runtime, prov = await caller(ctx)
    return await runtime.call(Library(runtime).mark_used, prov.viewer().user, name, kind)


async def skill_pin(ctx: Context, name: Name, kind: Kind = "skill") -> dict[str, Any]:
    """Pin a skill or lesson the user wants kept as it is: no learning loop may then change or delete it.
    Only a person unpins (`threadloom skills unpin`).

    Returns {kind, name, pinned}.
    """
    runtime, prov = await caller(ctx)
    return await runtime.call(Library(runtime).pin, prov.viewer().user, name, kind, True, "loop")


SKILL_TOOLS: tuple[ToolDef, ...] = (
    ToolDef(skill_list, "learning", "List skills and lessons", read_only=True, destructive=False, idempotent=True),
    # Not read-only: it counts the view.
    ToolDef(skill_show, "learning", "Read a skill or lesson", read_only=False, destructive=False, idempotent=False),
    ToolDef(skill_used, "learning", "Mark a skill used", read_only=False, destructive=False, idempotent=False),
    ToolDef(skill_pin, "learning", "Pin a skill or lesson", read_only=False, destructive=False, idempotent=True),
)
