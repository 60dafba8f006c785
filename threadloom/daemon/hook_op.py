"""The daemon's `hook` control op: what `threadloom hook ...` asks of the warm daemon.

It records the client's session event in the journal, acting for the hook's user in the hook's folder,
and at session start renders the brief. A hook is tied to the threadloom session of the same agent
conversation when one is known (`linked_session`): the session THREADLOOM_SESSION_ID names, else an open
session of this user and vendor whose agent process (the pid its bridge recorded) is an ancestor of the
hook process, else the session an earlier hook of the same client session was tied to (the journal).
"""

from __future__ import annotations

import json
from typing import Any, Final

from threadloom.agents import VENDORS
from threadloom.brief import render_brief
from threadloom.clock import now_ms
from threadloom.daemon.ingest_job import request_ingest
from threadloom.errors import ThreadloomError
from threadloom.identity import FOREGROUND, Identity, Provenance, detect_vendor, project_root
from threadloom.runtime import Runtime
from threadloom.server.connection import forwarded_env
from threadloom.sessions import SessionInfo
from threadloom.store import jobs
from threadloom.store.base import Reader, Row
from threadloom.store.sql import placeholders

EVENT_KINDS: Final = {
    "session-start": "client.session_started",
    "session-end": "client.session_ended",
    "pre-compact": "client.compacting",
}
MAX_ANCESTORS: Final = 8
JOURNAL_MS: Final = 7 * 24 * 3600 * 1000  # how far back an earlier hook of the same client session is looked for
_COLUMNS: Final = ("id", "vendor", "transport", "project", "cwd", "pid", "client_name", "origin", "parent_id", "user")
_SESSION_COLUMNS: Final = ", ".join((*_COLUMNS, "org", "ended_at"))
_JOINED_COLUMNS: Final = ", ".join(f"s.{c}" for c in (*_COLUMNS, "org", "ended_at"))


async def hook_op(runtime: Runtime, header: dict[str, Any]) -> dict[str, Any]:
    """`{ok, text, session}`: the brief to inject (None unless asked to render), and the tied session."""
    event = header.get("event")
    if event not in EVENT_KINDS:
        return {"ok": False, "error": f"unknown hook event {event!r}"}
    s = runtime.settings
    raw_env = header.get("env")
    env = forwarded_env({str(k): str(v) for k, v in raw_env.items()}) if isinstance(raw_env, dict) else {}
    try:
        who = Identity.of(env, s.user, s.author, s.org)
        cwd = _text(header, "cwd") or "/"
        project = str(project_root(env, [], cwd))
        vendor = header.get("vendor")
        vendor = vendor if vendor in VENDORS and vendor != "other" else detect_vendor(None, env)
        client_session = _text(header, "client_session")
        raw_pids = header.get("ancestors")
        pids = raw_pids if isinstance(raw_pids, list) else []
        ancestors = [p for p in pids if isinstance(p, int) and not isinstance(p, bool) and p > 1][:MAX_ANCESTORS]
        named = env.get("THREADLOOM_SESSION_ID")
        linked = await runtime.call(
            runtime.store.read,
            # At session start the journal has nothing to offer (and the hook is on the user's wait).
            lambda r: linked_session(
                r, who.user, str(vendor), named, ancestors, client_session if event != "session-start" else None
            ),
        )
        prov = Provenance(
            session_id=linked["id"] if linked else None,
            vendor=str(vendor),
            project=project,
            origin="hook",
            user=who.user,
            author=who.author,
            org=who.org,
        )
        detail: dict[str, Any] = {
            "client": _text(header, "client"),
            "client_session": client_session,
            "cwd": cwd,
            **{k: _text(header, k) for k in ("source", "reason", "trigger", "transcript") if _text(header, k)},
        }
        if env.get("THREADLOOM_PARENT_SESSION"):  # a spawned child's conversation (ingest may leave it out)
            detail["spawned_by"] = env["THREADLOOM_PARENT_SESSION"]
        if event == "session-end" and linked is not None:
            detail["ended"] = await _end(runtime, linked)
        await runtime.call(runtime.sessions.record, prov, EVENT_KINDS[event], detail)
        if event == "session-end":
            transcript_ingest_point(runtime, prov, detail.get("transcript"))
        text = None
        if event == "session-start" and header.get("render") is True:
            # Full scope after a compaction too (`source: compact`): the query scope leaves out what the session
            # was already sent, which is what the compaction just took out of its context.
            brief = await runtime.call(render_brief, runtime, prov, scope="full", session_id=prov.session_id)
            text = brief.text
    except ThreadloomError as exc:
        return {"ok": False, "error": exc.message}
    return {"ok": True, "text": text, "session": prov.session_id}


def linked_session(
    r: Reader, user: str, vendor: str, named: str | None, ancestors: list[int], client_session: str | None
) -> Row | None:
    """The threadloom session of the hook's agent conversation, or None (see the module's docstring).
    Only `user`'s own sessions are considered: a hook never touches another user's session."""
    if named:
        row = r.one(f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE id = :id AND user = :u", {"id": named, "u": user})
        if row is not None:
            return row
    if ancestors:
        keys, params = placeholders("pid", ancestors)
        rows = r.rows(
            f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE user = :u AND ended_at IS NULL AND pid IN ({keys}) "
            "AND (machine IS NULL OR machine = :machine) ORDER BY last_seen_at DESC",  # a pid of this machine's
            {"u": user, "machine": jobs.node_id(), **params},
        )
        rows = [row for row in rows if vendor == "other" or row["vendor"] in (vendor, "other")]
        if rows:  # the nearest ancestor wins: the agent itself, not the shell it was started from
            return min(rows, key=lambda row: ancestors.index(row["pid"]))
    if client_session:
        # The detail is JSON with sorted keys and no spaces, as sessions.record_event writes it; the last
        # JOURNAL_DAYS of the journal only (events_at), not every tool call ever journaled.
        needle = json.dumps({"client_session": client_session}, separators=(",", ":"))[1:-1]
        pattern = "%" + needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        return r.one(
            f"SELECT {_JOINED_COLUMNS} FROM events e "
            "JOIN sessions s ON s.id = e.session_id WHERE e.kind = :kind AND s.user = :u "
            "AND e.at >= :since AND e.detail LIKE :pattern ESCAPE '\\' ORDER BY e.id DESC LIMIT 1",
            {"kind": EVENT_KINDS["session-start"], "u": user, "pattern": pattern, "since": now_ms() - JOURNAL_MS},
        )
    return None


async def _end(runtime: Runtime, row: Row) -> bool:
    """End the tied session, unless a connection of this daemon still serves it: that connection ends it
    when the agent closes it, and ending it under a live connection (Claude Code's /clear ends the client
    session but keeps its MCP server) would leave that connection serving an ended session."""
    if row["ended_at"] is not None or row["id"] in runtime.live:
        return False
    info = SessionInfo(
        id=row["id"],
        vendor=row["vendor"],
        transport=row["transport"],
        project=row["project"],
        cwd=row["cwd"],
        pid=row["pid"],
        client_name=row["client_name"],
        origin=row["origin"] or FOREGROUND,
        parent_id=row["parent_id"],
        user=row["user"] or "",
        org=row["org"] or "",
    )
    await runtime.call(runtime.sessions.close, info)
    return True


def transcript_ingest_point(runtime: Runtime, provenance: Provenance, transcript: object) -> None:
    """An immediate ingest pass over the ended session's client (daemon/ingest_job.py). The hook's
    `transcript` path is not trusted: the pass reads only what the client's own folder holds."""
    request_ingest(runtime, provenance.vendor)


def _text(header: dict[str, Any], key: str) -> str | None:
    value = header.get(key)
    return value if isinstance(value, str) and value else None
