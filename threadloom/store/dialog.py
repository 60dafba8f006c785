"""Reads of ingested transcripts for dialog search, paging and day summaries (the tables are m019's,
described in `store/transcripts.py`, which holds every write).

Every statement here names its owner: a transcript message is its owner's alone
(`visibility.transcripts_sql`), so a row of another user never leaves the database and an id of
one reads exactly like an id that does not exist. A session's order is (time, id): a message the
client wrote without a time sorts first (as SQLite orders NULL), and ids keep the file's order among equal
times: the order of the session index, so a page walks the index and stops.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from threadloom.store.base import Reader, Row
from threadloom.store.sql import placeholders
from threadloom.store.transcripts import ERASED_ROLE

COLUMNS = "t.id, t.source, t.session_id, t.role, t.text, t.tools, t.at, t.project, t.cwd, t.model"
# A message `forget` erased stays as a tombstone (store/erasure.py): never a turn of any read here.
LIVE = f"t.role <> '{ERASED_ROLE}'"


def sources(r: Reader, owner: str) -> list[str]:
    """The transcript sources `owner` has files of (a handful: lets the session index be used)."""
    rows = r.tuples("SELECT DISTINCT source FROM transcript_files WHERE owner = :o", {"o": owner})
    return sorted(str(s) for (s,) in rows)


def messages(r: Reader, owner: str, ids: Sequence[int]) -> dict[int, Row]:
    if not ids:
        return {}
    rows = r.rows(
        f"SELECT {COLUMNS} FROM json_each(:ids) j CROSS JOIN transcript_messages t ON t.id = CAST(j.value AS INTEGER) "
        f"WHERE t.owner = :o AND {LIVE}",
        {"ids": json.dumps(list(ids)), "o": owner},
    )
    return {int(row["id"]): row for row in rows}


def _session_sql(owner: str, source: str, session_id: str) -> tuple[str, dict[str, Any]]:
    return (
        f"t.owner = :o AND t.source = :src AND t.session_id = :sid AND {LIVE}",
        {"o": owner, "src": source, "sid": session_id},
    )


def before(r: Reader, owner: str, source: str, session_id: str, at: int | None, id_: int, n: int) -> list[Row]:
    """Up to `n` messages of the session just before (at, id), oldest first. Ordered as the session index
    is (a message without a time first), so the read walks the index back and stops after `n`."""
    where, params = _session_sql(owner, source, session_id)
    earlier = "((t.at, t.id) < (:at, :id) OR t.at IS NULL)" if at is not None else "(t.at IS NULL AND t.id < :id)"
    rows = r.rows(
        f"SELECT {COLUMNS} FROM transcript_messages t WHERE {where} AND {earlier} "
        "ORDER BY t.at DESC, t.id DESC LIMIT :n",
        params | {"at": at, "id": id_, "n": n},
    )
    return rows[::-1]


def after(r: Reader, owner: str, source: str, session_id: str, at: int | None, id_: int, n: int) -> list[Row]:
    """Up to `n` messages of the session just after (at, id), oldest first."""
    where, params = _session_sql(owner, source, session_id)
    later = "(t.at, t.id) > (:at, :id)" if at is not None else "(t.at IS NOT NULL OR t.id > :id)"
    return r.rows(
        f"SELECT {COLUMNS} FROM transcript_messages t WHERE {where} AND {later} ORDER BY t.at, t.id LIMIT :n",
        params | {"at": at, "id": id_, "n": n},
    )


def session_start(r: Reader, owner: str, session_id: str, known: Sequence[str]) -> Row | None:
    """The first message of `owner`'s session `session_id` in any of the `known` sources."""
    if not known:
        return None
    keys, named = placeholders("src", known)
    return r.one(
        f"SELECT {COLUMNS} FROM transcript_messages t WHERE t.owner = :o AND t.source IN ({keys}) "
        f"AND t.session_id = :sid AND {LIVE} ORDER BY t.at, t.id LIMIT 1",
        named | {"o": owner, "sid": session_id},
    )


def session_count(r: Reader, owner: str, source: str, session_id: str) -> int:
    where, params = _session_sql(owner, source, session_id)
    return int(r.scalar(f"SELECT COUNT(*) FROM transcript_messages t WHERE {where}", params))


def session_erased(r: Reader, owner: str, source: str, session_id: str) -> int:
    """How many of the session's messages `forget` erased (their tombstones)."""
    return int(
        r.scalar(
            "SELECT COUNT(*) FROM transcript_messages t WHERE t.owner = :o AND t.source = :src "
            f"AND t.session_id = :sid AND NOT {LIVE}",
            {"o": owner, "src": source, "sid": session_id},
        )
    )


def sessions_between(r: Reader, owner: str, since: int, until: int, project: str | None) -> list[Row]:
    """Per session with messages in [since, until): its source, project, first and last time, counts."""
    scope = "AND t.project = :p" if project is not None else ""
    return r.rows(
        "SELECT t.source, t.session_id, MAX(t.project) AS project, MIN(t.at) AS first_at, MAX(t.at) AS last_at, "
        "COUNT(*) AS messages, SUM(CASE WHEN t.role = 'user' THEN 1 ELSE 0 END) AS user_messages "
        "FROM transcript_messages t "
        f"WHERE t.owner = :o AND t.at >= :since AND t.at < :until AND {LIVE} {scope} "
        "GROUP BY t.source, t.session_id ORDER BY first_at, t.session_id",
        {"o": owner, "since": since, "until": until, "p": project},
    )


def said_between(r: Reader, owner: str, source: str, session_id: str, since: int, until: int, limit: int) -> list[Row]:
    """The user's messages of a session in [since, until), oldest first: what they asked for."""
    where, params = _session_sql(owner, source, session_id)
    return r.rows(
        f"SELECT {COLUMNS} FROM transcript_messages t WHERE {where} AND t.role = 'user' AND t.at >= :since "
        "AND t.at < :until AND length(trim(t.text)) > 0 ORDER BY t.at, t.id LIMIT :n",
        params | {"since": since, "until": until, "n": limit},
    )


def notes_between(r: Reader, owner: str, since: int, until: int, project: str | None) -> list[Row]:
    """Thread notes `owner` wrote in [since, until) (decisions, moves, insights, ...)."""
    scope = "AND n.repo = :p" if project is not None else ""
    return r.rows(
        "SELECT n.id, n.project, n.thread, n.kind, n.text, n.vendor, n.created_at AS at FROM thread_notes n "
        f"WHERE n.owner = :o AND n.created_at >= :since AND n.created_at < :until {scope} "
        "ORDER BY n.created_at, n.id LIMIT 500",
        {"o": owner, "since": since, "until": until, "p": project},
    )


def memories_between(r: Reader, owner: str, since: int, until: int, project: str | None) -> list[Row]:
    """Memories `owner` stored in [since, until)."""
    scope = "AND m.project = :p" if project is not None else ""
    return r.rows(
        "SELECT m.id, m.kind, COALESCE(m.summary, m.content) AS text, m.project, m.created_at AS at FROM memories m "
        f"WHERE m.owner = :o AND m.created_at >= :since AND m.created_at < :until {scope} "
        "ORDER BY m.created_at, m.id LIMIT 500",
        {"o": owner, "since": since, "until": until, "p": project},
    )


def span(r: Reader, owner: str) -> tuple[int | None, int | None]:
    """The first and last time of `owner`'s transcripts (epoch ms), None when there are none: two walks of
    the time index (MIN and MAX in one statement would scan every row of the owner)."""
    edge = (
        "SELECT t.at FROM transcript_messages t WHERE t.owner = :o AND t.at IS NOT NULL "
        f"AND {LIVE} ORDER BY t.at {{}} LIMIT 1"
    )
    first = r.scalar(edge.format("ASC"), {"o": owner})
    last = r.scalar(edge.format("DESC"), {"o": owner})
    return first, last
