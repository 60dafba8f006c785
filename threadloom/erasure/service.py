"""`forget`: one service behind the tool and the CLI.

A dry run (the default of both surfaces) counts what the selector picks per kind, with a short sample,
and changes nothing. A real run removes it in one transaction (store/erasure.py says what each kind
covers), then compacts the database file so the erased bytes are gone from it and from its write-ahead
log (on PostgreSQL: VACUUM of the tables the erasure changed, store/postgres_vacuum.py, which says what the
server still keeps). Only the caller's own rows are ever read, counted or removed: another user's rows are invisible
here, counts included (another user's replay record holding an erased shared memory goes too, uncounted).
What the engine keeps in memory needs nothing more: every search reads its
candidates' rows and float vectors back from SQLite, so an erased document never surfaces, and the
kept candidate sets are dropped when the store's search generation moves (the deletes move it); the
per-process sign codes are bits of vectors, not text.

Backups are copies this cannot reach: a file written by `threadloom backup create` and the
`threadloom.db.pre-restore-*` copies a restore keeps beside the store still hold what they held.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any, Final

from threadloom.agents import VENDORS
from threadloom.erasure.learning import TOUCHED, LearningFiles, Planned
from threadloom.errors import InvalidInput
from threadloom.store import erasure
from threadloom.store.base import Store, Writer
from threadloom.store.erasure import KINDS, Selector
from threadloom.store.sqlite import SqliteStore
from threadloom.usermodel.egress import allows, withheld_line

# A transcript's source is its reader (claude-code, ...), a memory's or note's the agent's vendor (claude, ...).
SOURCES: Final = ("claude-code", *VENDORS)
MIN_TEXT: Final = 3  # a shorter text matches nearly everything: name a session or project instead
MAX_TEXT: Final = 1_000
MAX_NAME: Final = 4_096
DEFAULT_SAMPLE: Final = 5
MAX_SAMPLE: Final = 50
BACKUPS_NOTE: Final = (
    "backups are not touched: a copy written by `threadloom backup create` (wherever you put it) and the "
    "threadloom.db.pre-restore-* files a restore keeps beside the store still hold what they held; delete "
    "them (or forget in a restored copy and back it up again) to erase the text there too"
)
PG_BACKUPS_NOTE: Final = (
    "backups are not touched: a pg_dump archive written by `threadloom backup create`, the server's base backups, "
    "archived WAL and replicas' copies of it still hold what they held until they expire; restore an archive into a "
    "new database, forget there and dump it again, or delete it, to erase the text there too"
)


def check(sel: Selector, kinds: Sequence[str], sample: int) -> tuple[str, ...]:
    """The kinds to act on, after refusing what no forget may run with."""
    if sel.empty():
        raise InvalidInput(
            "forget needs a selector (session, project, source, since/until or text): without one it would "
            "erase everything you have; nothing was erased"
        )
    if not kinds:
        raise InvalidInput(f"kinds: name at least one of {', '.join(KINDS)}")
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise InvalidInput(f"kinds: {unknown[0]!r} is not one of {', '.join(KINDS)}")
    for name, value in (("session", sel.session), ("project", sel.project), ("source", sel.source)):
        if value is not None and not 1 <= len(value) <= MAX_NAME:
            raise InvalidInput(f"{name}: 1-{MAX_NAME:,} characters")
    if sel.source is not None and sel.source not in SOURCES:  # else it matches nothing, and says "0 rows"
        raise InvalidInput(f"source: {sel.source[:40]!r} is not one of {', '.join(SOURCES)}")
    if sel.text is not None and not MIN_TEXT <= len(sel.text.strip()) <= MAX_TEXT:
        raise InvalidInput(f"text: {MIN_TEXT}-{MAX_TEXT:,} characters (a shorter text would match nearly everything)")
    if sel.since is not None and sel.until is not None and sel.since >= sel.until:
        raise InvalidInput("since must be before until")
    if not 0 <= sample <= MAX_SAMPLE:
        raise InvalidInput(f"sample: 0-{MAX_SAMPLE}")
    return tuple(dict.fromkeys(kinds))


class Eraser:
    def __init__(self, store: Store, learning: LearningFiles | None = None) -> None:
        """`learning`: the learning loops' files (skills, their copies, lessons, exports); without it their
        rows are erased but no skill or lesson is."""
        self._store = store
        self._learning = learning
        # The file to compact after an erasure: SQLite is the one backend with a file of its own.
        self._database: Path | None = store.path if isinstance(store, SqliteStore) else None

    def forget(
        self, owner: str, sel: Selector, kinds: Sequence[str] = ("transcripts",), dry_run: bool = True,
        sample: int = DEFAULT_SAMPLE, egress: tuple[str, str] = ("all", "other"),
    ) -> dict[str, Any]:  # fmt: skip
        """`egress`: the policy and the reader's vendor; a dry run's sample is read by a model too."""
        chosen = check(sel, kinds, sample)
        if self._learning is None or not set(TOUCHED) & set(chosen):
            return self._forget(owner, sel, chosen, dry_run, sample, egress, None)
        with self._learning.locked(owner):  # no skill or lesson changes between the plan and the erasure
            planned = self._learning.plan(owner, sel, chosen)
            return self._forget(owner, sel, chosen, dry_run, sample, egress, planned)

    def _forget(
        self, owner: str, sel: Selector, chosen: tuple[str, ...], dry_run: bool, sample: int,
        egress: tuple[str, str], planned: Planned | None,
    ) -> dict[str, Any]:  # fmt: skip
        plan = planned.plan if planned is not None else None
        if dry_run:
            found = self._store.read(lambda r: {k: erasure.matching(r, k, owner, sel, sample, plan) for k in chosen})
            if planned is not None and self._learning is not None:
                _learning_preview(found, planned, self._learning.preview(owner, planned, sel))
            withheld = _withhold(found, *egress)
            # every count a kind gives (rows, archived memories, a claim's evidence, profile entries), not samples
            total = sum(v for f in found.values() for v in f.values() if isinstance(v, int))
            return {
                "dry_run": True,
                "would_erase": found,
                "total": total,
                "next": "nothing matched" if total == 0 else "run again with dry_run false (CLI: --yes) to erase",
            } | ({"withheld": withheld} if withheld else {})
        erased = self._store.write(partial(_erase, kinds=chosen, owner=owner, sel=sel, plan=plan))
        result: dict[str, Any] = {"dry_run": False, "erased": erased}
        if planned is not None and self._learning is not None:
            result["learning_files"] = self._learning.apply(owner, planned, sel)
            if planned.kept:
                result["kept_protected"] = planned.kept
        touched: list[str] = erased.pop(erasure.TOUCHED, [])
        anything = any(isinstance(v, int) and v for v in erased.values())
        if self._database is not None and anything:
            result["compaction"] = erasure.compact(self._database)
        elif self._database is not None:  # a VACUUM rewrites the whole file and holds every writer meanwhile
            result["compaction_skipped"] = "nothing was erased, so the file was not rewritten"
        elif self._store.dialect == "postgresql":  # and what an earlier erasure left unvacuumed (killed, say)
            from threadloom.store.postgres import PostgresStore
            from threadloom.store.postgres_vacuum import KEPT, pending, vacuum

            assert isinstance(self._store, PostgresStore)
            tables = sorted(set(touched) | set(pending(self._store)))
            if tables:
                result["compaction"] = vacuum(self._store, tables) | {"kept_by_postgresql": KEPT}
        note = PG_BACKUPS_NOTE if self._store.dialect == "postgresql" else BACKUPS_NOTE
        result["backups"] = {"note": note, "beside_store": self._kept_copies()}
        return result

    def _kept_copies(self) -> list[str]:
        if self._database is None:
            return []
        return sorted(str(p) for p in self._database.parent.glob(f"{self._database.name}.pre-restore-*"))


def _erase(w: Writer, **how: Any) -> dict[str, Any]:
    """The erasure's transaction; on PostgreSQL it also marks the tables it changed for VACUUM."""
    erased = erasure.erase(w, **how)
    if w.dialect == "postgresql":
        from threadloom.store.postgres_vacuum import mark_pending

        mark_pending(w, erased.get(erasure.TOUCHED, []))
    return erased


def _learning_preview(found: dict[str, Any], planned: Planned, files: dict[str, int]) -> None:
    """The dry run's learning figures: under `learning` when it is a chosen kind, else beside the transcripts
    or notes the entries were written from. Protected entries reached are listed, never counted as going."""
    home = found.get("learning") or found.get("transcripts") or found.get("notes")
    if home is None:
        return
    if "learning" not in found:
        home["skills"] = sum(k == "skill" for k, _ in planned.plan.entries)
        home["lessons"] = sum(k == "lesson" for k, _ in planned.plan.entries)
    home |= {k: v for k, v in files.items() if v}
    if planned.kept:
        home["kept_protected"] = planned.kept


PERSONAL: Final = {"claims": "claims", "style": "style habits"}  # kinds whose sample rows carry their vendor


def _withhold(found: dict[str, Any], policy: str, reader: str) -> str | None:
    """Blank the text of the sampled claims and habits the egress policy keeps from `reader` (their ids stay,
    so they can still be forgotten); the one withheld line, or None."""
    held: dict[str, int] = {}
    for kind, name in PERSONAL.items():
        for row in found.get(kind, {}).get("sample", []):
            if not allows(policy, str(row.pop("vendor", "other")), reader):
                row["text"] = None
                held[name] = held.get(name, 0) + 1
    return withheld_line(policy, reader, held)
