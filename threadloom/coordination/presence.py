"""Who is here: this session, its live peers, and what they wrote since this session last looked."""

from __future__ import annotations

import json
from typing import Any, Final

from threadloom.clock import now_ms
from threadloom.errors import InvalidInput
from threadloom.identity import Provenance
from threadloom.store.base import Store, Writer
from threadloom.store.visibility import session_seen_sql, visibility_sql

# Journal kinds that are noise to a peer: every tool call, and session bookkeeping.
QUIET_KINDS: Final = ("tool.call", "session.started", "session.resumed", "session.ended", "thread.context")


class PresenceService:
    def __init__(self, store: Store) -> None:
        self._store = store

    def whoami(self, prov: Provenance) -> dict[str, Any]:
        me = prov.session_id or ""
        row = self._store.read(
            lambda r: r.one(
                "SELECT id, vendor, project, cwd, pid, parent_id, started_at, last_seen_at, transport "
                "FROM sessions WHERE id = :id",
                {"id": me},
            )
        )
        unread = self._store.read(
            lambda r: r.scalar(
                "SELECT count(*) FROM signal_deliveries WHERE recipient = :me AND read_at IS NULL", {"me": me}
            )
        )
        return {"session": row, "unread_signals": int(unread)}

    def peers(self, prov: Provenance, window_s: float = 900, this_project: bool = False) -> list[dict[str, Any]]:
        """Sessions seen within `window_s` and not ended, newest first; this one is marked. Only sessions
        the caller may see: their own user's, and those of the people in their project."""
        if not 1 <= window_s <= 7 * 86_400:
            raise InvalidInput("window_s is 1 second to 7 days")
        where = " AND project = :p" if this_project else ""
        seen, params = session_seen_sql(prov.viewer())
        rows = self._store.read(
            lambda r: r.rows(
                "SELECT id, vendor, project, cwd, pid, parent_id, started_at, last_seen_at FROM sessions s "
                f"WHERE ended_at IS NULL AND last_seen_at >= :since{where} AND {seen} "
                "ORDER BY last_seen_at DESC LIMIT 200",
                params | {"since": now_ms() - int(window_s * 1000), "p": prov.project},
            )
        )
        return [dict(row) | {"self": row["id"] == prov.session_id} for row in rows]

    def catch_up(self, prov: Provenance, peek: bool = False, limit: int = 100) -> dict[str, Any]:
        """What other sessions the caller may see wrote since this session's cursor; advances it unless
        `peek`. Of another user's events, only thread work and memories shared with the caller show."""
        if not 1 <= limit <= 500:
            raise InvalidInput("limit is 1-500")
        me = prov.session_id or ""
        quiet = {f"q{n}": kind for n, kind in enumerate(QUIET_KINDS)}
        viewer = prov.viewer()
        seen_session, session_params = session_seen_sql(viewer)
        seen_memory, memory_params = visibility_sql(viewer)
        # Another user's events: their thread work in this project, and memories shared with the caller.
        shown = (
            f"EXISTS (SELECT 1 FROM sessions s WHERE s.id = e.session_id AND {seen_session}) "
            "AND (EXISTS (SELECT 1 FROM sessions s WHERE s.id = e.session_id AND s.user = :s_user) "
            "OR e.kind LIKE 'thread.%' OR (e.kind LIKE 'memory.%' AND EXISTS (SELECT 1 FROM memories m WHERE "
            f"m.id = COALESCE(json_extract(e.detail, '$.id'), json_extract(e.detail, '$.new')) AND {seen_memory})))"
        )

        def read(w: Writer) -> dict[str, Any]:
            cursor = w.scalar("SELECT event_id FROM session_cursors WHERE session_id = :me", {"me": me})
            if cursor is None:  # a new session starts from when it began, not from the beginning of time
                started = w.scalar("SELECT started_at FROM sessions WHERE id = :me", {"me": me}) or now_ms()
                cursor = w.scalar("SELECT COALESCE(max(id), 0) FROM events WHERE at < :t", {"t": started})
            rows = w.rows(
                "SELECT e.id, e.at, e.kind, e.session_id, e.vendor, e.project, e.detail FROM events e "
                f"WHERE e.id > :cursor AND e.session_id <> :me AND {shown} "
                f"AND e.kind NOT IN ({', '.join(':' + k for k in quiet)}) ORDER BY e.id LIMIT :limit",
                {"cursor": cursor, "me": me, "limit": limit} | quiet | session_params | memory_params,
            )
            items = [dict(row) | {"detail": json.loads(row["detail"])} for row in rows]
            newest = w.scalar("SELECT COALESCE(max(id), 0) FROM events")
            if not peek:
                last = items[-1]["id"] if len(items) == limit else newest
                w.execute(
                    "INSERT INTO session_cursors (session_id, event_id) VALUES (:me, :e) "
                    "ON CONFLICT (session_id) DO UPDATE SET event_id = :e",
                    {"me": me, "e": last},
                )
            return {"events": items, "more": len(items) == limit, "advanced": not peek}

        return self._store.write(read) if not peek else self._store.read(read)  # type: ignore[arg-type]
