"""Who is here: this session, its live peers, and what they wrote since this session last looked."""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any, Final

from threadloom.agents import VENDORS
from threadloom.clock import now_ms
from threadloom.errors import InvalidInput
from threadloom.identity import Provenance
from threadloom.sessions import record_event
from threadloom.store.base import Store, Writer
from threadloom.store.sql import placeholders
from threadloom.store.visibility import project_member_sql, session_seen_sql, signal_seen_sql, visibility_sql

HEARTBEAT_S: Final = 60.0  # a serving process touches each of its connected sessions this often
# Present: not ended and heard from within three heartbeats (and half of one more, for a busy store or a
# slow loop). A session past this is gone (its daemon or agent was killed): it is no peer, gets no
# signals, holds no claims, and the next sweep ends it (`session.expired`).
LIVENESS_MS: Final = int(3.5 * HEARTBEAT_S * 1000)

LIFECYCLE_KINDS: Final = ("session.started", "session.resumed", "session.ended", "session.expired")
# Journal kinds that are noise to a peer: every tool call, and session bookkeeping.
EDGE_COUNTS: Final = ("edges", "auto_links")  # in a memory event's detail
QUIET_KINDS: Final = ("tool.call", "session.started", "session.resumed", "session.ended", "thread.context")


def present_since(now: int | None = None) -> int:
    """The oldest last-seen time of a present session."""
    return (now if now is not None else now_ms()) - LIVENESS_MS


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
        readable, params = readable_signals_sql(prov)
        unread = self._store.read(
            lambda r: r.scalar(
                "SELECT count(*) FROM signal_deliveries d JOIN signals s ON s.id = d.signal_id "
                f"WHERE d.recipient = :me AND d.read_at IS NULL AND {readable}",
                params | {"me": me},
            )
        )
        return {"session": row, "unread_signals": int(unread)}

    def peers(self, prov: Provenance, window_s: float = 900, this_project: bool = False) -> list[dict[str, Any]]:
        """Present sessions (see LIVENESS_MS) seen within `window_s`, newest first; this one is marked. Only
        sessions the caller may see: their own user's, and those of the people in their project."""
        if not 1 <= window_s <= 7 * 86_400:
            raise InvalidInput("window_s is 1 second to 7 days")
        where = " AND project = :p" if this_project else ""
        seen, params = session_seen_sql(prov.viewer())
        rows = self._store.read(
            lambda r: r.rows(
                "SELECT id, vendor, project, cwd, pid, parent_id, started_at, last_seen_at FROM sessions s "
                f"WHERE ended_at IS NULL AND last_seen_at >= :since AND last_seen_at >= :present{where} AND {seen} "
                "ORDER BY last_seen_at DESC LIMIT 200",
                params | {"since": now_ms() - int(window_s * 1000), "present": present_since(), "p": prov.project},
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
        # Another user's events: their thread work in this project, and memories shared with the caller (an amend's
        # corrected memory too: its id and reason are in the event). Anyone's, the caller's own included, only from
        # projects the caller may see now (an organisation's, as its member).
        old = "json_extract(e.detail, '$.old')"
        shown = (
            f"{project_member_sql('e.project', ':s_user')} "
            f"AND EXISTS (SELECT 1 FROM sessions s WHERE s.id = e.session_id AND {seen_session}) "
            "AND (EXISTS (SELECT 1 FROM sessions s WHERE s.id = e.session_id AND s.user = :s_user) "
            "OR e.kind LIKE 'thread.%' OR (e.kind LIKE 'memory.%' AND EXISTS (SELECT 1 FROM memories m WHERE "
            f"m.id = COALESCE(json_extract(e.detail, '$.id'), json_extract(e.detail, '$.new')) AND {seen_memory}) "
            f"AND ({old} IS NULL OR EXISTS (SELECT 1 FROM memories m WHERE m.id = {old} AND {seen_memory}))))"
        )

        def read(w: Writer) -> dict[str, Any]:
            cursor = w.scalar("SELECT event_id FROM session_cursors WHERE session_id = :me", {"me": me})
            if cursor is None:  # a new session starts from when it began, not from the beginning of time
                started = w.scalar("SELECT started_at FROM sessions WHERE id = :me", {"me": me}) or now_ms()
                cursor = w.scalar("SELECT COALESCE(max(id), 0) FROM events WHERE at < :t", {"t": started})
            rows = w.rows(
                "SELECT e.id, e.at, e.kind, e.session_id, e.vendor, e.project, e.detail, "
                "EXISTS (SELECT 1 FROM sessions s WHERE s.id = e.session_id AND s.user = :s_user) AS own FROM events e "
                f"WHERE e.id > :cursor AND e.session_id <> :me AND {shown} "
                f"AND e.kind NOT IN ({', '.join(':' + k for k in quiet)}) ORDER BY e.id LIMIT :limit",
                {"cursor": cursor, "me": me, "limit": limit} | quiet | session_params | memory_params,
            )
            items = [dict(row) | {"detail": json.loads(row["detail"])} for row in rows]
            for item in items:  # no event id: it counts every user's events, its steps how busy the others are
                del item["id"]
                if not item.pop("own"):  # another's memory's edges may end at memories the caller cannot see
                    item["detail"] = {k: v for k, v in item["detail"].items() if k not in EDGE_COUNTS}
            newest = w.scalar("SELECT COALESCE(max(id), 0) FROM events")
            if not peek:
                last = rows[-1]["id"] if len(rows) == limit else newest
                w.execute(
                    "INSERT INTO session_cursors (session_id, event_id) VALUES (:me, :e) "
                    "ON CONFLICT (session_id) DO UPDATE SET event_id = :e",
                    {"me": me, "e": last},
                )
            return {"events": items, "more": len(items) == limit, "advanced": not peek}

        return self._store.write(read) if not peek else self._store.read(read)  # type: ignore[arg-type]

    def expire_absent(self, keep: Collection[str] = (), now: int | None = None) -> list[str]:
        """End the sessions unheard of past the liveness bound (a killed daemon or agent never closes its
        sessions), each with a `session.expired` event; `keep`: sessions the caller knows are connected.
        Idempotent, and a pass that finds nobody only reads. Returns the ids ended."""
        now = now if now is not None else now_ms()
        find = "SELECT id, vendor, project, last_seen_at FROM sessions WHERE ended_at IS NULL AND last_seen_at < :since"
        params = {"since": present_since(now)}
        if not any(row["id"] not in keep for row in self._store.read(lambda r: r.rows(find, params))):
            return []

        def tx(w: Writer) -> list[str]:
            gone = [row for row in w.rows(find, params) if row["id"] not in keep]
            for row in gone:
                w.execute("UPDATE sessions SET ended_at = :now WHERE id = :id AND ended_at IS NULL",
                          {"now": now, "id": row["id"]})  # fmt: skip
                silent_s = (now - int(row["last_seen_at"])) // 1000
                record_event(w, _lifecycle(row), "session.expired", {"silent_s": silent_s})
            return [str(row["id"]) for row in gone]

        return self._store.write(tx)

    def heartbeat(self, session_ids: Collection[str]) -> list[str]:
        """Touch the sessions connected to this process. One that was expired while still connected (the
        machine slept past the bound) is resumed; one that closed is not. Returns the ids resumed."""
        if not session_ids:
            return []
        keys, named = placeholders("s", list(session_ids))
        kinds, kind_params = placeholders("k", LIFECYCLE_KINDS)

        def tx(w: Writer) -> list[str]:
            w.execute(f"UPDATE sessions SET last_seen_at = :now WHERE id IN ({keys})", named | {"now": now_ms()})
            resumed = []
            for row in w.rows(f"SELECT id, vendor, project FROM sessions WHERE id IN ({keys}) AND ended_at IS NOT NULL",
                              named):  # fmt: skip
                last = w.scalar(
                    f"SELECT kind FROM events WHERE session_id = :id AND kind IN ({kinds}) ORDER BY id DESC LIMIT 1",
                    kind_params | {"id": row["id"]},
                )
                if last == "session.expired":
                    w.execute("UPDATE sessions SET ended_at = NULL WHERE id = :id", {"id": row["id"]})
                    record_event(w, _lifecycle(row), "session.resumed", {"after": "expiry"})
                    resumed.append(str(row["id"]))
            return resumed

        return self._store.write(tx)


def readable_signals_sql(prov: Provenance, alias: str = "s") -> tuple[str, dict[str, Any]]:
    """`signal_seen_sql` for the caller; a session of no user belongs to no organisation and keeps its inbox."""
    return signal_seen_sql(prov.viewer(), alias) if prov.user else ("1 = 1", {})


def _lifecycle(row: Any) -> Provenance:
    """Who a liveness event is about: the session itself, recorded by the liveness job."""
    vendor = row["vendor"] if row["vendor"] in VENDORS else "other"
    return Provenance(session_id=str(row["id"]), vendor=vendor, project=row["project"], origin="job:liveness")
