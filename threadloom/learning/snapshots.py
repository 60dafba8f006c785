"""Snapshots and trash of a user's skills and lessons, so no curation is beyond recall.

A snapshot is the user's whole library as it was (every row of `learning_entries`, every file of each
skill's canonical folder, as text) taken before any destructive act; the trash holds each deleted or
merged-away entry alone. Both are kept for THREADLOOM_LEARN_RETENTION_DAYS. `restore` puts back, exactly
as they were (the same bytes, the same provenance, pin and usage counts), every entry of a snapshot
(`s<id>`) or the one entry of a trash item (`t<id>`); entries made since the snapshot stay. A restore is
destructive too, so it takes a snapshot of its own first. Everything is per owner: another user's id is
"not found".

Files are written only inside the user's canonical skills folder (through `Repository`, which follows no
link out of it) and, for the copies, through the library's mirror (which touches only folders threadloom
made): a payload's paths are checked against a skill's shape before a byte is written.
"""

from __future__ import annotations

import json
import os
import re
from contextlib import suppress
from typing import Any, Final

from threadloom.clock import now_ms
from threadloom.errors import InvalidInput, NotFound
from threadloom.identity import check_user
from threadloom.learning.library import Library, _canonical
from threadloom.learning.skills import REFERENCES, SKILL_FILE, check_name, check_reference
from threadloom.store.base import Reader, Writer

DAY_MS: Final = 86_400_000
_COLUMNS: Final = (
    "kind", "name", "description", "body", "origin", "source", "pinned", "digest", "created_at", "updated_at",
    "viewed", "used", "last_viewed_at", "last_used_at",
)  # fmt: skip
_REF: Final = re.compile(r"([st])(\d{1,18})")
_LESSON: Final = re.compile(r"l_[0-9a-f]{12}")  # lessons.lesson_id


class Snapshots:
    def __init__(self, library: Library, retention_days: float = 30.0) -> None:
        self.library = library
        self.store = library.store
        self.retention_ms = int(retention_days * DAY_MS)

    # taking

    def take(self, owner: str, reason: str) -> int:
        """Snapshot `owner`'s whole library; its id."""
        owner = check_user(owner, "the owner")
        with self.library._locked(owner):
            entries = self._capture(owner)
        now = now_ms()
        payload = json.dumps({"entries": entries}, ensure_ascii=False)
        return self.store.write(
            lambda w: w.insert(
                "INSERT INTO learning_snapshots (owner, reason, payload, entries, created_at, expires_at) "
                "VALUES (:o, :r, :p, :n, :now, :exp)",
                {"o": owner, "r": reason[:200], "p": payload, "n": len(entries), "now": now,
                 "exp": now + self.retention_ms},
            )
        )  # fmt: skip

    def trash(self, owner: str, kind: str, name: str, why: str, snapshot_id: int | None) -> dict[str, Any]:
        """Delete one entry as a learning loop (so never a protected one), keeping it whole in the trash."""
        owner = check_user(owner, "the owner")
        with self.library._locked(owner):
            captured = [e for e in self._capture(owner) if e["kind"] == kind and e["name"] == name]
        if not captured:
            raise NotFound(f"no {kind} named {name[:80]!r}")
        now = now_ms()
        trash_id = self.store.write(
            lambda w: w.insert(
                "INSERT INTO learning_trash (owner, kind, name, why, snapshot_id, payload, deleted_at, expires_at) "
                "VALUES (:o, :k, :n, :why, :s, :p, :now, :exp)",
                {"o": owner, "k": kind, "n": name, "why": why[:200], "s": snapshot_id,
                 "p": json.dumps(captured[0], ensure_ascii=False), "now": now, "exp": now + self.retention_ms},
            )
        )  # fmt: skip
        try:
            self.library.delete(owner, name, kind, origin="loop")
        except BaseException:
            self.store.write(lambda w: w.execute("DELETE FROM learning_trash WHERE id = :i", {"i": trash_id}))
            raise
        return {"kind": kind, "name": name, "trash": f"t{trash_id}"}

    # reading

    def listing(self, owner: str) -> dict[str, Any]:
        """`owner`'s snapshots and trash, newest first, within their retention."""
        owner = check_user(owner, "the owner")
        now = now_ms()

        def read(r: Reader) -> dict[str, Any]:
            snaps = r.rows(
                "SELECT id, reason, entries, created_at, expires_at FROM learning_snapshots "
                "WHERE owner = :o AND expires_at > :now ORDER BY id DESC",
                {"o": owner, "now": now},
            )
            trash = r.rows(
                "SELECT id, kind, name, why, snapshot_id, deleted_at, expires_at FROM learning_trash "
                "WHERE owner = :o AND expires_at > :now ORDER BY id DESC",
                {"o": owner, "now": now},
            )
            return {
                "snapshots": [{"id": f"s{s['id']}", **{k: s[k] for k in s if k != "id"}} for s in snaps],
                "trash": [
                    {"id": f"t{t['id']}", **{k: t[k] for k in t if k not in ("id", "snapshot_id")},
                     "snapshot": f"s{t['snapshot_id']}" if t["snapshot_id"] else None}
                    for t in trash
                ],
            }  # fmt: skip

        return self.store.read(read)

    # restoring

    def restore(self, owner: str, ref: str) -> dict[str, Any]:
        """Put back every entry of snapshot `s<id>`, or the entry of trash item `t<id>`, as it was."""
        owner = check_user(owner, "the owner")
        match = _REF.fullmatch(ref.strip()) if isinstance(ref, str) else None
        if match is None:
            raise InvalidInput(f"restore takes a snapshot (s12) or a trash item (t7), not {str(ref)[:40]!r}")
        table = "learning_snapshots" if match[1] == "s" else "learning_trash"
        row = self.store.read(
            lambda r: r.one(
                f"SELECT payload, expires_at FROM {table} WHERE id = :i AND owner = :o",
                {"i": int(match[2]), "o": owner},
            )
        )
        if row is None:
            raise NotFound(f"no snapshot or trash item {ref!r}")
        if int(row["expires_at"]) <= now_ms():
            raise NotFound(f"{ref} is past its retention and is no longer kept")
        data = json.loads(row["payload"])
        wanted = data["entries"] if match[1] == "s" else [data]
        for entry in wanted:  # every payload checked before the first byte is written
            _check_entry(entry)
        before = self.take(owner, f"before restoring {ref}")
        restored: list[dict[str, str]] = []
        unchanged = 0
        with self.library._locked(owner):
            current = {(e["kind"], e["name"]): e for e in self._capture(owner)}
            for entry in wanted:
                if current.get((entry["kind"], entry["name"])) == entry:
                    unchanged += 1
                    continue
                self._put_back(owner, entry, current.get((entry["kind"], entry["name"])))
                restored.append({"kind": entry["kind"], "name": entry["name"]})
            if any(e["kind"] == "lesson" for e in wanted):
                self.library._render_lessons(owner)
        if match[1] == "t":
            self.store.write(lambda w: w.execute("DELETE FROM learning_trash WHERE id = :i", {"i": int(match[2])}))
        return {"restored": restored, "unchanged": unchanged, "snapshot_before": f"s{before}"}

    def purge(self, owner: str) -> int:
        """Drop `owner`'s snapshots and trash past their retention; how many."""
        now = now_ms()

        def tx(w: Writer) -> int:
            params = {"o": owner, "n": now}
            n = w.execute("DELETE FROM learning_snapshots WHERE owner = :o AND expires_at <= :n", params)
            return n + w.execute("DELETE FROM learning_trash WHERE owner = :o AND expires_at <= :n", params)

        return self.store.write(tx)

    # the mechanism

    def _capture(self, owner: str) -> list[dict[str, Any]]:
        """Every entry of `owner` whole; call under the library's lock."""
        rows = self.store.read(
            lambda r: r.rows(
                f"SELECT {', '.join(_COLUMNS)} FROM learning_entries WHERE owner = :o ORDER BY kind, name",
                {"o": owner},
            )
        )
        repo = self.library._skills_repo(owner)
        out: list[dict[str, Any]] = []
        for row in rows:
            entry = {c: row[c] for c in _COLUMNS}
            if row["kind"] == "skill":
                try:
                    entry["files"] = _canonical(repo, row["name"]) or {}
                except InvalidInput:  # a file made unreadable by hand: the rest of the library is still kept
                    entry["files"] = {}
            out.append(entry)
        return out

    def _put_back(self, owner: str, entry: dict[str, Any], now_there: dict[str, Any] | None) -> None:
        name = entry["name"]
        if entry["kind"] == "skill":
            repo = self.library._skills_repo(owner)
            files: dict[str, str] = entry["files"]
            for path, text in files.items():
                repo.write_text(f"{name}/{path}", text)
            for path in sorted(set((now_there or {}).get("files", {})) - set(files)):
                repo.delete(f"{name}/{path}")
            if not any(p.startswith(f"{REFERENCES}/") for p in files):
                with suppress(OSError):
                    os.rmdir(repo.root / name / REFERENCES)
        cols = ", ".join(_COLUMNS)
        values = ", ".join(f":{c}" for c in _COLUMNS)
        updates = ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS if c not in ("kind", "name"))
        params = {c: entry[c] for c in _COLUMNS} | {"owner": owner}
        self.store.write(
            lambda w: w.execute(
                f"INSERT INTO learning_entries (owner, {cols}) VALUES (:owner, {values}) "
                f"ON CONFLICT (owner, kind, name) DO UPDATE SET {updates}",
                params,
            )
        )
        self.store.write(
            lambda w: w.execute(
                "DELETE FROM learning_curation WHERE owner = :o AND kind = :k AND name = :n",
                {"o": owner, "k": entry["kind"], "n": name},
            )
        )
        if entry["kind"] == "skill" and self.library.mirror is not None:
            self.library.mirror.sync(owner, name, entry["files"])


def _check_entry(entry: Any) -> None:
    """A payload's entry has the shape threadloom writes: a skill's name and file paths can only land in its
    own folder."""
    if not isinstance(entry, dict) or entry.get("kind") not in ("skill", "lesson") or not set(_COLUMNS) <= set(entry):
        raise InvalidInput("the snapshot holds an entry threadloom did not write; nothing was restored")
    if entry["kind"] == "lesson" and not _LESSON.fullmatch(str(entry["name"])):
        raise InvalidInput("the snapshot holds a lesson threadloom did not name; nothing was restored")
    if entry["kind"] == "skill":
        check_name(entry["name"])
        files = entry.get("files")
        if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
            raise InvalidInput(f"the snapshot's skill {entry['name']} has no files; nothing was restored")
        for path in files:
            if path != SKILL_FILE:
                prefix, _, ref = str(path).partition("/")
                if prefix != REFERENCES:
                    raise InvalidInput(f"the snapshot lists {str(path)[:80]!r}, not a skill's file")
                check_reference(ref)
