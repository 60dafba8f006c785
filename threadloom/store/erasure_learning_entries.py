"""The skills and lessons `forget` erases, in the store: their rows, curation states and every copy of them in the
snapshots and the trash (store/erasure_learning.py's `learning` kind and forgetting transcripts or notes both
end here), and the plan erasure/learning.py hands over. A snapshot left with no entry goes whole."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from threadloom.store.base import Reader, Writer
from threadloom.store.sql import placeholders

CHUNK: Final = 500
EntryKey = tuple[str, str]  # (kind, name)


@dataclass(frozen=True)
class LearningPlan:
    """What erasure/learning.py decided before the transaction, under the owner's library lock: the
    loop-written entries to erase, and the candidates the selector picks (their entries are among them)."""

    entries: tuple[EntryKey, ...] = ()
    candidates: tuple[int, ...] = ()
    text: str | None = None  # the selector's text: snapshot and trash copies holding it go too
    quoted: tuple[int, ...] = ()  # candidates quoted from the transcripts or notes being forgotten


def lower_ascii(text: str) -> str:
    """As SQLite's lower(): ASCII letters only, so what Python matches is what the SQL matches."""
    return "".join(c.lower() if c.isascii() else c for c in text)


def chunks(items: Sequence[Any]) -> list[Sequence[Any]]:
    return [items[i : i + CHUNK] for i in range(0, len(items), CHUNK)]


def delete(w: Writer, table: str, ids: Sequence[int], column: str = "id") -> int:
    gone = 0
    for chunk in chunks(list(ids)):
        keys, named = placeholders("k", list(chunk))
        gone += w.execute(f"DELETE FROM {table} WHERE {column} IN ({keys})", named)
    return gone


def _holds(entry: Any, text: str | None, keys: set[EntryKey], sources: set[str]) -> bool:
    """Whether a snapshot's or the trash's copy of an entry is one to erase."""
    if not isinstance(entry, dict):
        return False
    if (str(entry.get("kind")), str(entry.get("name"))) in keys or str(entry.get("source")) in sources:
        return True
    if text is None:
        return False
    files = entry.get("files")
    parts = [entry.get(k) for k in ("name", "description", "body")] + list(
        files.values() if isinstance(files, dict) else []
    )
    needle = lower_ascii(text)
    return any(isinstance(p, str) and needle in lower_ascii(p) for p in parts)


def snapshot_copies(r: Reader, owner: str, plan: LearningPlan) -> tuple[dict[int, list[Any]], list[int], int]:
    """Snapshots to rewrite (id -> the entries left), trash items to delete, and how many copies go."""
    keys, sources = set(plan.entries), {f"candidate:{i}" for i in (*plan.candidates, *plan.quoted)}
    rewrite: dict[int, list[Any]] = {}
    dropped = 0
    for snap_id, payload in r.tuples("SELECT id, payload FROM learning_snapshots WHERE owner = :o", {"o": owner}):
        try:
            entries = json.loads(payload).get("entries", [])
        except (ValueError, AttributeError):
            continue
        kept = [e for e in entries if not _holds(e, plan.text, keys, sources)]
        if len(kept) != len(entries):
            rewrite[int(snap_id)] = kept
            dropped += len(entries) - len(kept)
    trash: list[int] = []
    for trash_id, payload in r.tuples("SELECT id, payload FROM learning_trash WHERE owner = :o", {"o": owner}):
        try:
            entry = json.loads(payload)
        except ValueError:
            continue
        if _holds(entry, plan.text, keys, sources):
            trash.append(int(trash_id))
    return rewrite, trash, dropped


def entry_rows(r: Reader, owner: str, keys: Iterable[EntryKey]) -> list[EntryKey]:
    present: list[EntryKey] = []
    for kind, name in sorted(keys):
        if r.one("SELECT 1 FROM learning_entries WHERE owner = :o AND kind = :k AND name = :n",
                 {"o": owner, "k": kind, "n": name}) is not None:  # fmt: skip
            present.append((kind, name))
    return present


def drop_entries(w: Writer, owner: str, plan: LearningPlan) -> dict[str, int]:
    """The planned entries' rows and curation states, and every snapshot or trash copy to erase."""
    entries = entry_rows(w, owner, plan.entries)
    for kind, name in entries:
        params = {"o": owner, "k": kind, "n": name}
        w.execute("DELETE FROM learning_entries WHERE owner = :o AND kind = :k AND name = :n", params)
        w.execute("DELETE FROM learning_curation WHERE owner = :o AND kind = :k AND name = :n", params)
    rewrite, trash, copies = snapshot_copies(w, owner, plan)
    for snap_id, kept in rewrite.items():
        if kept:
            w.execute(
                "UPDATE learning_snapshots SET payload = :p, entries = :n WHERE id = :i",
                {"p": json.dumps({"entries": kept}, ensure_ascii=False), "n": len(kept), "i": snap_id},
            )
        else:
            w.execute("DELETE FROM learning_snapshots WHERE id = :i", {"i": snap_id})
    delete(w, "learning_trash", trash)
    return {
        "skills": sum(k == "skill" for k, _ in entries),
        "lessons": sum(k == "lesson" for k, _ in entries),
        "snapshot_copies": copies,
        "trash": len(trash),
    }
