"""What a pass did, and what `status` and `doctor` say about transcripts: counts and the covered time span
per source, and the alarms (a source that yields files but no message, mostly unknown shapes, one role
only), computed over the last pass that read anything (else over every file's counters)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from threadloom.store import transcripts as tables
from threadloom.store.base import Reader, Store
from threadloom.transcripts import SourceStats, alarms

MAX_NOTES = 50  # problems kept per pass report; the counters keep the rest


@dataclass
class SourcePass:
    messages_added: int = 0
    messages_revised: int = 0
    messages_excluded: int = 0
    unchanged_files: int = 0
    excluded_files: int = 0
    pending_files: int = 0  # read up to the pass's byte budget; the next pass goes on
    failed_files: int = 0


@dataclass
class PassReport:
    sources: dict[str, SourcePass] = field(default_factory=dict)
    problems: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    stats: dict[str, dict[str, Any]] = field(default_factory=dict)  # this pass's counters per source
    busy: bool = False  # another ingester held the lease, or the store stayed busy: nothing more written
    seconds: float = 0.0

    def source(self, name: str) -> SourcePass:
        return self.sources.setdefault(name, SourcePass())

    def problem(self, path: str, reason: str, detail: str) -> None:
        if len(self.problems) < MAX_NOTES:
            self.problems.append({"path": path, "reason": reason, "detail": detail})

    def note(self, text: str) -> None:
        if len(self.notes) < MAX_NOTES:
            self.notes.append(text)

    @property
    def added(self) -> int:
        return sum(s.messages_added for s in self.sources.values())

    def alarms(self) -> list[str]:
        return [a.message for a in alarms(SourceStats.from_dict(raw) for raw in self.stats.values())]

    def as_dict(self) -> dict[str, Any]:
        return {
            "sources": {name: vars(s) for name, s in self.sources.items()},
            "problems": self.problems,
            "notes": self.notes,
            "alarms": self.alarms(),
            "busy": self.busy,
            "seconds": round(self.seconds, 3),
        }


def _iso(ms: int | None) -> str | None:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds") if ms is not None else None


def _merged(source: str, raws: list[dict[str, Any]]) -> SourceStats:
    total = SourceStats(source)
    for raw in raws:
        one = SourceStats.from_dict({**raw, "source": source})
        total.files_seen += 1
        total.files_read += 1 if one.records else 0
        total.records += one.records
        total.messages += one.messages
        total.by_role.update(one.by_role)
        total.skipped.update(one.skipped)
        total.problems.update(one.problems)
    return total


def transcript_status(store: Store, owner: str, enabled: bool = True) -> dict[str, Any]:
    """`owner`'s transcripts: per source messages, sessions, files, the covered span and problems; the
    alarms; whether ingest is on. Nothing of another user's is read."""

    def read(r: Reader) -> dict[str, Any]:
        covered = tables.coverage(r, owner)
        passes = tables.last_passes(r, owner)
        per_source = []
        found: list[str] = []
        for row in covered:
            files = tables.file_stats(r, owner, row["source"])
            merged = _merged(row["source"], files)
            # The last pass that read anything says how the source reads now (a format changed under a long
            # history, or fixed since); every file's counters only when there is none.
            now = SourceStats.from_dict(passes[row["source"]]) if row["source"] in passes else merged
            found += [a.message for a in alarms([now])]
            per_source.append(
                {
                    "source": row["source"],
                    "messages": int(row["messages"]),
                    "sessions": int(row["sessions"]),
                    "files": int(row["files"]),
                    "first": _iso(row["first_at"]),
                    "last": _iso(row["last_at"]),
                    "skipped_records": sum(merged.skipped.values()),
                    "problems": dict(merged.problems),
                }
            )
        firsts = [row["first_at"] for row in covered if row["first_at"] is not None]
        lasts = [row["last_at"] for row in covered if row["last_at"] is not None]
        span = {"first": _iso(min(firsts)), "last": _iso(max(lasts))} if firsts else None
        return {"enabled": enabled, "sources": per_source, "span": span, "alarms": found}

    return store.read(read)
