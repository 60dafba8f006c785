"""Every statement on m022's tables (store/migrations_style.py). Each one names the owner: a user's habits,
profile and revisions are theirs alone, and nothing here reads or changes another user's rows."""

from __future__ import annotations

import json
from typing import Any

from threadloom.store.base import Reader, Writer
from threadloom.style.model import (
    ACTIVE_IDLE_MS,
    ARCHIVED_TTL_MS,
    CANDIDATE_TTL_MS,
    CAPSULE_HABITS,
    CAPSULE_PROFILE,
    GATE_OBSERVATIONS,
    GATE_SESSIONS,
    KEEP_REVISIONS,
    Habit,
    Observation,
    Preference,
    habit_id,
)

_HABIT_COLUMNS = "id, kind, text, locale, status, pinned, seen, sessions, example, vendor, origin, first_at, last_at"


def state(r: Reader, owner: str) -> dict[str, Any]:
    row = r.one("SELECT learning, revision, digest, languages FROM style_state WHERE owner = :o", {"o": owner})
    if row is None:
        return {"learning": True, "revision": 0, "digest": "", "languages": {}}
    return {
        "learning": bool(row["learning"]),
        "revision": int(row["revision"]),
        "digest": row["digest"],
        "languages": json.loads(row["languages"]),
    }


def ensure_state(w: Writer, owner: str, now: int) -> None:
    w.execute(
        "INSERT INTO style_state (owner, updated_at) VALUES (:o, :n) ON CONFLICT (owner) DO NOTHING",
        {"o": owner, "n": now},
    )


def set_learning(w: Writer, owner: str, on: bool, now: int) -> None:
    ensure_state(w, owner, now)
    w.execute(
        "UPDATE style_state SET learning = :l, updated_at = :n WHERE owner = :o", {"o": owner, "l": int(on), "n": now}
    )


def add_language_votes(w: Writer, owner: str, votes: dict[str, int], now: int) -> None:
    if not votes:
        return
    ensure_state(w, owner, now)
    current: dict[str, int] = json.loads(
        w.scalar("SELECT languages FROM style_state WHERE owner = :o", {"o": owner}) or "{}"
    )
    for lang, n in votes.items():
        current[lang] = current.get(lang, 0) + n
    w.execute(
        "UPDATE style_state SET languages = :l, updated_at = :n WHERE owner = :o",
        {"o": owner, "l": json.dumps(current, sort_keys=True), "n": now},
    )


def observe(w: Writer, owner: str, obs: Observation, count: int = 1) -> str | None:
    """Count `count` sightings of a habit in one session; the habit's status afterwards, or None when nothing
    was counted (a forgotten habit, or a hint already counted in that session). Three statements: this runs
    for every habit of every message."""
    hid = habit_id(owner, obs.kind, obs.key)
    row = w.one(
        "INSERT INTO style_habits (id, owner, kind, key, text, locale, origin, example, vendor, first_at, last_at) "
        "VALUES (:id, :o, :k, :key, :t, :loc, :orig, :ex, :v, :at, :at) "
        "ON CONFLICT (owner, kind, key) DO UPDATE SET last_at = style_habits.last_at "
        "RETURNING status, pinned, seen, sessions",
        {"id": hid, "o": owner, "k": obs.kind, "key": obs.key, "t": obs.text, "loc": obs.locale, "orig": obs.origin,
         "ex": obs.example, "v": obs.vendor, "at": obs.at},
    )  # fmt: skip
    if row is None or row["status"] == "forgotten":
        return None
    hinted = int(obs.origin == "hint")
    # `before` is the session's count before this one: 0 for a session new to the habit. No row back: a hint
    # this session had already given.
    sighted = w.one(
        "INSERT INTO style_observations (habit_id, owner, session, seen, hinted, first_at, last_at) "
        "VALUES (:h, :o, :s, :n, :hinted, :at, :at) ON CONFLICT (habit_id, session) DO UPDATE SET "
        "seen = style_observations.seen + :n, hinted = MAX(style_observations.hinted, :hinted), "
        "last_at = MAX(style_observations.last_at, :at) "
        "WHERE NOT (:hinted = 1 AND style_observations.hinted = 1) RETURNING seen - :n AS before",
        {"h": hid, "o": owner, "s": obs.session, "n": count, "hinted": hinted, "at": obs.at},
    )
    if sighted is None:
        return None
    seen, sessions = int(row["seen"]) + count, int(row["sessions"]) + int(sighted["before"] == 0)
    status = row["status"]
    if status != "active" and (
        bool(row["pinned"]) or (seen >= GATE_OBSERVATIONS and gate_sessions(w, hid) >= GATE_SESSIONS)
    ):
        status = "active"
    w.execute(
        "UPDATE style_habits SET seen = :seen, sessions = :ss, status = :st, last_at = MAX(last_at, :at), "
        "example = COALESCE(example, :ex), activated_at = CASE WHEN :st = 'active' AND status != 'active' "
        "THEN :at ELSE activated_at END WHERE id = :id",
        {"seen": seen, "ss": sessions, "st": status, "at": obs.at, "ex": obs.example, "id": hid},
    )
    return str(status)


def gate_sessions(r: Reader, hid: str) -> int:
    """The sessions the gate counts: those of one channel, transcripts or hints. A host's hint and the
    transcript of the same conversation carry different session keys, so counting both would let one
    conversation pass the gate alone."""
    row = r.one(
        "SELECT COALESCE(SUM(hinted), 0) AS hinted, COUNT(*) AS rows FROM style_observations WHERE habit_id = :h",
        {"h": hid},
    )
    if row is None:
        return 0
    hinted = int(row["hinted"])
    return max(hinted, int(row["rows"]) - hinted)


def habits(r: Reader, owner: str, statuses: tuple[str, ...], limit: int) -> list[Habit]:
    marks = ", ".join(f":s{i}" for i in range(len(statuses)))
    params: dict[str, Any] = {f"s{i}": s for i, s in enumerate(statuses)} | {"o": owner, "lim": limit}
    rows = r.rows(
        f"SELECT {_HABIT_COLUMNS} FROM style_habits WHERE owner = :o AND status IN ({marks}) "
        "ORDER BY pinned DESC, seen DESC, last_at DESC, id LIMIT :lim",
        params,
    )
    return [Habit.of(dict(row)) for row in rows]


def capsule_habits(r: Reader, owner: str) -> list[Habit]:
    return habits(r, owner, ("active",), CAPSULE_HABITS)


def habit(r: Reader, owner: str, hid: str) -> Habit | None:
    row = r.one(
        f"SELECT {_HABIT_COLUMNS} FROM style_habits WHERE owner = :o AND id = :id AND status != 'forgotten'",
        {"o": owner, "id": hid},
    )
    return None if row is None else Habit.of(dict(row))


def set_pinned(w: Writer, owner: str, hid: str, pinned: bool, now: int) -> int:
    """Pinning is the user's own choice: it makes the habit active at once, and cleanup never takes it."""
    status = "'active'" if pinned else "status"
    return w.execute(
        f"UPDATE style_habits SET pinned = :p, status = {status}, last_at = MAX(last_at, :n) "
        "WHERE owner = :o AND id = :id AND status != 'forgotten'",
        {"p": int(pinned), "o": owner, "id": hid, "n": now},
    )


def forget(w: Writer, owner: str, hid: str) -> int:
    """The habit goes at once: its sightings, text and example; its key stays so learning skips it."""
    changed = w.execute(
        "UPDATE style_habits SET status = 'forgotten', text = '', example = NULL, pinned = 0, seen = 0, "
        "sessions = 0 WHERE owner = :o AND id = :id AND status != 'forgotten'",
        {"o": owner, "id": hid},
    )
    if changed:
        w.execute("DELETE FROM style_observations WHERE owner = :o AND habit_id = :id", {"o": owner, "id": hid})
    return changed


def cleanup(w: Writer, owner: str, now: int) -> dict[str, int]:
    """The TTL rules; pinned habits are never touched."""
    params = {"o": owner, "c": now - CANDIDATE_TTL_MS, "a": now - ACTIVE_IDLE_MS, "x": now - ARCHIVED_TTL_MS}
    gone = (
        "owner = :o AND pinned = 0 AND ((status = 'candidate' AND last_at < :c) "
        "OR (status = 'archived' AND last_at < :x))"
    )
    w.execute(f"DELETE FROM style_observations WHERE habit_id IN (SELECT id FROM style_habits WHERE {gone})", params)
    removed = w.execute(f"DELETE FROM style_habits WHERE {gone}", params)
    archived = w.execute(
        "UPDATE style_habits SET status = 'archived' WHERE owner = :o AND pinned = 0 AND status = 'active' "
        "AND last_at < :a",
        params,
    )
    return {"removed": removed, "archived": archived}


def profile(r: Reader, owner: str, limit: int = CAPSULE_PROFILE) -> list[Preference]:
    rows = r.rows(
        "SELECT id, key, text, origin, vendor, created_at FROM style_profile WHERE owner = :o "
        "ORDER BY created_at, id LIMIT :lim",
        {"o": owner, "lim": limit},
    )
    return [Preference.of(dict(row)) for row in rows]


def add_preference(w: Writer, owner: str, pref: Preference) -> bool:
    return (
        w.execute(
            "INSERT INTO style_profile (id, owner, key, text, origin, vendor, created_at) "
            "VALUES (:id, :o, :k, :t, :orig, :v, :at) ON CONFLICT (owner, key) DO NOTHING",
            {
                "id": pref.id,
                "o": owner,
                "k": pref.key,
                "t": pref.text,
                "orig": pref.origin,
                "v": pref.vendor,
                "at": pref.created_at,
            },
        )
        > 0
    )


def remove_preference(w: Writer, owner: str, pid: str) -> int:
    return w.execute("DELETE FROM style_profile WHERE owner = :o AND id = :id", {"o": owner, "id": pid})


def set_revision(w: Writer, owner: str, revision: int, digest: str, content: str, now: int) -> None:
    w.execute(
        "UPDATE style_state SET revision = :r, digest = :d, updated_at = :n WHERE owner = :o",
        {"o": owner, "r": revision, "d": digest, "n": now},
    )
    w.execute(
        "INSERT INTO style_revisions (owner, revision, content, at) VALUES (:o, :r, :c, :n)",
        {"o": owner, "r": revision, "c": content, "n": now},
    )
    w.execute(
        "DELETE FROM style_revisions WHERE owner = :o AND revision <= :r", {"o": owner, "r": revision - KEEP_REVISIONS}
    )


def snapshot(r: Reader, owner: str, revision: int) -> str | None:
    value = r.scalar(
        "SELECT content FROM style_revisions WHERE owner = :o AND revision = :r", {"o": owner, "r": revision}
    )
    return None if value is None else str(value)


def counts(r: Reader, owner: str) -> dict[str, int]:
    rows = r.tuples(
        "SELECT status, COUNT(*), SUM(pinned) FROM style_habits WHERE owner = :o GROUP BY status", {"o": owner}
    )
    found = {str(s): int(n) for s, n, _ in rows}
    found["pinned"] = sum(int(p or 0) for _, _, p in rows)
    found["profile"] = int(r.scalar("SELECT COUNT(*) FROM style_profile WHERE owner = :o", {"o": owner}) or 0)
    found["sessions"] = int(
        r.scalar("SELECT COUNT(DISTINCT session) FROM style_observations WHERE owner = :o", {"o": owner}) or 0
    )
    return found
