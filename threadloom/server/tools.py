"""Tool functions. Each one: resolve the connection, call one service method, render.

The SDK builds each tool's schema from its signature and docstring, so the
docstring is the documentation an agent reads: say what it does, every argument,
and the shape of the result.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from pydantic import Field

from threadloom.daemon.guard import report_for
from threadloom.errors import InvalidInput
from threadloom.learning.reviewer import configured
from threadloom.runtime import Runtime
from threadloom.search.embedders import search_report
from threadloom.server.connection import connection_of
from threadloom.server.toolsets import ToolDef
from threadloom.sessions import SessionInfo
from threadloom.status import versions


async def status(
    ctx: Context,
    recent_events: Annotated[
        int, Field(ge=0, le=100, description="Also this many latest events of your sessions.")
    ] = 0,
) -> dict[str, Any]:
    """threadloom's health: store, session, server, search mode. Call it when a tool fails oddly or
    to see which store and session you are in; not at every start (the brief has what you need).
    """
    conn = connection_of(ctx.request_context)
    store_wide = conn.store_wide  # this request's: read before another request of the session can change it
    info = await conn.ensure_session(ctx.request_context)
    return await status_report(conn.runtime, info, recent_events, store_wide=store_wide)


async def status_report(
    runtime: Runtime, info: SessionInfo | None, recent_events: int = 0, *, store_wide: bool = True
) -> dict[str, Any]:
    """The status tool's JSON. Without `store_wide` (a team server's account, not a server administrator) no
    figure counts other users' rows: the store's counts are the caller's own, and the live connections, the
    search index's coverage and the learning pass's outcome (every user's messages) are left out."""
    if store_wide:
        store = await runtime.call(runtime.status.store_status)
    elif info is None:
        raise InvalidInput("status without the store's figures is the caller's own: it needs the caller's session")
    else:
        store = await runtime.call(runtime.status.own_status, info.user)
    session = None
    if info is not None:
        session = {
            "id": info.id,
            "user": info.user,
            "vendor": info.vendor,
            "project": info.project,
            "transport": info.transport,
            "client": info.client_name,
        }
    report = {
        "store": store.as_dict(),
        "session": session,
        "server": {
            "mode": runtime.mode,
            "pid": runtime.pid,
            "uptime_s": round(runtime.uptime_s, 1),
            "connections": len(runtime.live),
            "guard": report_for(runtime),  # the daemon's memory guard; None in any other process
        },
        "search": search_report(runtime.settings, runtime.embedder)
        | {"embedder": runtime.embedder_state(), "vectors": await runtime.call(runtime.search.coverage)},
        "versions": versions(runtime.store),
        "unread_signals": await runtime.call(runtime.signals.unread_count, info.provenance()) if info else None,
        "transcripts": await runtime.call(runtime.status.transcripts, info.user, runtime.settings.ingest)
        if info
        else None,
        "learning": await runtime.call(
            runtime.status.learning,
            info.user,
            runtime.settings.learn_extract,
            runtime.settings.learn_extract_interval,
            [(loop, on) for loop, _, on in configured(runtime.settings)],
        )
        if info
        else None,
    } | (
        {"events": await runtime.call(runtime.status.recent_events, info.user, recent_events)}
        if recent_events and info is not None
        else {}
    )
    return report if store_wide else _own_only(report)


def _own_only(report: dict[str, Any]) -> dict[str, Any]:
    report["server"].pop("connections", None)
    report["search"].pop("vectors", None)
    last_pass = (report.get("learning") or {}).get("extract", {}).get("last_pass")
    if last_pass is not None:
        last_pass.pop("did", None)
    return report


TOOLS: tuple[ToolDef, ...] = (
    ToolDef(status, group="core", title="threadloom status", read_only=True, destructive=False, idempotent=True),
)
