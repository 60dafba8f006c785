"""The `user_model` group (opt-in): evidence-backed claims about how the user works. `user_claim` states
or supersedes a claim, `user_evidence` adds a source for or against one, `user_review` shows one claim's
evidence and tier history (or lists every claim), `user_synthesis` what is known, grouped by domain.
Opt-in because the default surface is held to 3,000 tokens; the brief shows validated claims anyway."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from pydantic import Field

from threadloom.errors import InvalidInput
from threadloom.runtime import Runtime
from threadloom.server.connection import caller
from threadloom.server.toolsets import RequestKey, Time, ToolDef
from threadloom.usermodel import UserModel
from threadloom.usermodel.model import SOURCES

ClaimId = Annotated[str, Field(description="A claim id, e.g. uc_0123456789abcdef.")]
Domain = Annotated[
    str | None,
    Field(description="style, values, workflow, technical, communication, context, skills, other, or a new word."),
]
Origin = Annotated[
    Literal["user", "automated"], Field(description="user: their own words; automated: inferred (counts half).")
]
Source = Literal["message", "memory", "note", "statement"]
assert set(Source.__args__) == set(SOURCES)  # type: ignore[attr-defined]


def _model(runtime: Runtime) -> UserModel:
    # Tools the agent calls are a path to its model like the brief: the egress policy applies to them too.
    return UserModel(runtime.store, runtime.scrubber, runtime.settings.egress)


async def user_claim(
    ctx: Context,
    text: Annotated[str | None, Field(description="One sentence about the user (<= 500 characters).")] = None,
    domain: Domain = None,
    statement: Annotated[str | None, Field(description="The user's words that back it (one support).")] = None,
    supersedes: Annotated[str | None, Field(description="Replace this claim of theirs (kept, closed).")] = None,
    by: Annotated[str | None, Field(description="With supersedes: an existing claim instead of text.")] = None,
    origin: Origin = "user",
    valid_from: Annotated[Time, Field(description="Since when it holds; default now.")] = None,
    idempotency_key: RequestKey = None,
) -> dict[str, Any]:
    """Record how the user works or likes to be worked with (a stated or observed habit, value,
    preference), as a hypothesis that evidence then confirms; or supersede an outdated claim. Not for
    project facts (memory_store).

    Returns {claim: {id, domain, text, tier, confidence, band, ...}, transitions, superseded?}.
    """
    runtime, prov = await caller(ctx)
    model = _model(runtime)
    if supersedes is not None:
        return await runtime.call(
            model.supersede, prov, supersedes, text, domain, by=by, statement=statement, origin=origin,
            valid_from=valid_from,
        )  # fmt: skip
    if by is not None:
        raise InvalidInput("by names the claim that replaces the one in supersedes; give supersedes too")
    return await runtime.call(
        model.claim, prov, text or "", domain, statement=statement, origin=origin, valid_from=valid_from
    )


async def user_evidence(
    ctx: Context,
    claim_id: ClaimId,
    ref: Annotated[str, Field(description="The statement's words, or the message, memory or note id.")],
    source: Annotated[Source, Field(description="What ref is.")] = "statement",
    kind: Annotated[Literal["support", "contradict"], Field(description="For or against.")] = "support",
    weight: Annotated[float, Field(description="How strongly it bears on the claim, (0, 1].")] = 1.0,
    origin: Origin = "user",
) -> dict[str, Any]:
    """Add evidence for or against a claim about the user when they confirm or contradict it; it moves
    the claim's confidence and tier (hypothesis -> observed -> validated, or disputed).

    Returns {claim, transitions, evidence, counted} (counted=false: that source was already counted).
    """
    runtime, prov = await caller(ctx)
    model = _model(runtime)
    return await runtime.call(model.add_evidence, prov, claim_id, kind, source, ref, weight, origin)


async def user_review(
    ctx: Context,
    claim_id: Annotated[str | None, Field(description="One claim; omit to list them all.")] = None,
    as_of: Annotated[Time, Field(description="As it stood then.")] = None,
    domain: Domain = None,
) -> dict[str, Any]:
    """Inspect a claim about the user: its evidence, tier history and what it superseded; without
    claim_id, every current claim, hypotheses and disputed ones included.

    Returns {claim, held_then, evidence, evidence_total, history, supersedes_chain} or {claims}.
    """
    runtime, prov = await caller(ctx)
    model = _model(runtime)
    if claim_id is not None:
        return await runtime.call(model.review, prov, claim_id, as_of)
    return await runtime.call(model.claims, prov, as_of, domain)


async def user_synthesis(
    ctx: Context,
    as_of: Annotated[Time, Field(description="What was believed then.")] = None,
    domain: Domain = None,
) -> dict[str, Any]:
    """What is known of how the user works, grouped by domain: observed and validated claims, leaving
    out hypotheses, low-confidence and disputed ones. Read it before adapting to the user.

    Returns {domains: {domain: [{id, text, tier, confidence}]}, left_out}.
    """
    runtime, prov = await caller(ctx)
    return await runtime.call(_model(runtime).synthesis, prov, as_of, domain)


USER_MODEL_TOOLS: tuple[ToolDef, ...] = (
    ToolDef(
        user_claim,
        "user_model",
        "Claim about the user",
        read_only=False,
        destructive=False,
        idempotent=False,
        keyed=True,
    ),
    # Idempotent: a source already counted for a claim is not counted again.
    ToolDef(user_evidence, "user_model", "Evidence on a claim", read_only=False, destructive=False, idempotent=True),
    ToolDef(user_review, "user_model", "Review claims", read_only=True, destructive=False, idempotent=True),
    ToolDef(
        user_synthesis, "user_model", "What is known of the user", read_only=True, destructive=False, idempotent=True
    ),
)
