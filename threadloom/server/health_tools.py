"""The `ops` group (opt-in): `health`, threadloom's vital signs for the person who runs it. Opt-in because an
agent at work rarely needs it, and the default surface is held to 3,000 tokens."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from pydantic import Field

from threadloom.daemon.guard import report_for
from threadloom.health.stats import MAX_WINDOW_DAYS, HealthOptions, HealthService
from threadloom.server.connection import caller, connection_of
from threadloom.server.toolsets import ToolDef


async def health(
    ctx: Context,
    window_days: Annotated[int, Field(ge=1, le=MAX_WINDOW_DAYS, description="Days of tool calls.")] = 7,
) -> dict[str, Any]:
    """threadloom's vital signs when the user asks how it is doing: your counts and growth per kind, store
    size, index freshness, tool latency and errors, background jobs, ingest, self-test reliability.
    """
    store_wide = connection_of(ctx.request_context).store_wide  # a team server's account: its own figures alone
    runtime, prov = await caller(ctx)
    loaded = runtime.embedder.get()
    options = HealthOptions(window_days, loaded.fingerprint if loaded else None, runtime.settings.ingest, store_wide)
    report = await runtime.call(HealthService(runtime.store).report, prov.viewer().user, options)
    guard = report_for(runtime)  # the daemon's memory guard: its resident memory, cap, model unloaded or not
    return report | ({"daemon_guard": guard} if guard is not None else {})


HEALTH_TOOLS: tuple[ToolDef, ...] = (
    ToolDef(health, "ops", "threadloom health", read_only=True, destructive=False, idempotent=True),
)
