"""Style memory (m022): the user's habits and interaction profile: `style.jsonl`. A habit's id is derived
from its owner, kind and key, so an import makes the importer's own id and never collides; a habit or a
preference the importer already has (same kind and key) stays as it is here, a forgotten one included (the
user's choice to forget travels with the export: it stays unlearnt). Text passes the same guard as a hint
(`style/guard.refusal`) and the scrubber. The per-session sightings the gate counts are this machine's and
stay; after an import the capsule is refreshed as after any style write."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from threadloom.errors import InvalidInput
from threadloom.portable import format as f
from threadloom.portable.registry import Context
from threadloom.store.base import Reader, Writer
from threadloom.style import capsule, rows
from threadloom.style.guard import refusal
from threadloom.style.model import (
    EXAMPLE_CHARS,
    HABIT_CHARS,
    KINDS,
    PROFILE_CHARS,
    STATUSES,
    Preference,
    habit_id,
    profile_id,
)

_HABIT = ("kind", "key", "text", "locale", "origin", "status", "pinned", "seen", "sessions", "example", "vendor")
_HABIT_TIMES = ("first_at", "last_at", "activated_at")
_PROFILE = ("key", "text", "origin", "vendor", "created_at")
_PROFILE_KEY = re.compile(r"^[a-z][a-z0-9_:]{0,63}$")


class Style:
    name = "style"

    def export(self, r: Reader, user: str) -> Iterator[dict[str, Any]]:
        for row in r.rows("SELECT * FROM style_habits WHERE owner = :u ORDER BY kind, key", {"u": user}):
            yield {"type": "habit", **{c: row[c] for c in (*_HABIT, *_HABIT_TIMES)}, "pinned": bool(row["pinned"])}
        for row in r.rows("SELECT * FROM style_profile WHERE owner = :u ORDER BY key", {"u": user}):
            yield {"type": "profile", **{c: row[c] for c in _PROFILE}}

    def markdown(self, record: dict[str, Any]) -> str:
        text = " ".join(str(record["text"]).split()).replace("<", "&lt;") or "(forgotten)"
        if record["type"] == "profile":
            return f"- profile: {text}\n"
        return f"- {record['kind']} ({record['status']}, seen {record['seen']}): {text}\n"

    def parse(self, line: f.Line) -> f.Line:
        rec, where = line.record, line.where
        if f.choice(rec, "type", where, ("habit", "profile")) == "profile":
            if not _PROFILE_KEY.match(f.text(rec, "key", where, 64)):
                raise InvalidInput(f"{where}: key is a preference's name or custom:<hex>")
            self._guarded(rec, "text", where, PROFILE_CHARS, empty=False)
            f.text(rec, "origin", where, 32)
            f.text(rec, "vendor", where, 64)
            f.integer(rec, "created_at", where)
            return line
        f.choice(rec, "kind", where, KINDS)
        f.text(rec, "key", where, 4 * HABIT_CHARS)
        status = f.choice(rec, "status", where, STATUSES)
        self._guarded(rec, "text", where, 4 * HABIT_CHARS, empty=status == "forgotten")
        if rec.get("example") is not None:
            self._guarded(rec, "example", where, 4 * EXAMPLE_CHARS, empty=True)
        f.text(rec, "locale", where, 16, optional=True)
        if rec.get("locale") is None:
            raise InvalidInput(f"{where}: locale must be a string")
        f.text(rec, "origin", where, 32)
        f.text(rec, "vendor", where, 64)
        f.boolean(rec, "pinned", where)
        for key in ("seen", "sessions"):
            f.integer(rec, key, where, high=10**9)
        for key in ("first_at", "last_at"):
            f.integer(rec, key, where)
        f.integer(rec, "activated_at", where, optional=True)
        return line

    def _guarded(self, rec: dict[str, Any], key: str, where: str, limit: int, *, empty: bool) -> None:
        value = f.text(rec, key, where, limit, optional=empty)
        if value is None:
            raise InvalidInput(f"{where}: {key} must be a string")
        what = refusal(value)
        if what is not None:
            raise InvalidInput(f"{where}: {key} refused, it would store {what}")

    def merge(self, r: Reader, w: Writer | None, ctx: Context, items: list[f.Line]) -> dict[str, int]:
        counts = {"style_added": 0, "style_present": 0}
        planned: set[tuple[str, str, str]] = set()
        for item in items:
            rec = item.record
            kind = rec["kind"] if rec["type"] == "habit" else "profile"
            key = (rec["type"], kind, rec["key"])
            table, where = (
                ("style_habits", "kind = :k AND key = :key")
                if rec["type"] == "habit"
                else ("style_profile", "key = :key")
            )
            present = key in planned or r.scalar(
                f"SELECT 1 FROM {table} WHERE owner = :o AND {where}", {"o": ctx.user, "k": kind, "key": rec["key"]}
            )
            planned.add(key)
            counts["style_present" if present else "style_added"] += 1
            if w is not None and not present:
                self._insert(w, ctx, rec)
        if w is not None and counts["style_added"]:
            capsule.refresh(w, ctx.user, ctx.now)
        return counts

    def _insert(self, w: Writer, ctx: Context, rec: dict[str, Any]) -> None:
        text = ctx.scrubber.text(rec["text"])
        if rec["type"] == "profile":
            pid = profile_id(ctx.user, rec["key"])
            rows.add_preference(
                w, ctx.user, Preference(pid, rec["key"], text, rec["origin"], rec["vendor"], rec["created_at"])
            )
            return
        values = {c: rec[c] for c in (*_HABIT, *_HABIT_TIMES)} | {"text": text, "pinned": int(rec["pinned"])}
        values["example"] = ctx.scrubber.optional(rec["example"])
        columns = (*_HABIT, *_HABIT_TIMES)
        w.execute(
            f"INSERT INTO style_habits (id, owner, {', '.join(columns)}) "
            f"VALUES (:id, :owner, {', '.join(':' + c for c in columns)})",
            values | {"id": habit_id(ctx.user, rec["kind"], rec["key"]), "owner": ctx.user},
        )


STYLE = Style()
