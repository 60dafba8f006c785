"""One pass over a source's files, the counters it leaves, and the alarms they raise.

The counters are what catches a client that changed its format under us: files keep arriving and
records keep being read, but no message (or no turn of one role) is recognised any more.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from threadloom.transcripts.model import Cursor, ParseResult
from threadloom.transcripts.reader import BUDGET
from threadloom.transcripts.source import Source

UNKNOWN = ("unknown_record", "unknown_shape")
ALARM_FLOOR = 20  # below this many records or messages, a ratio says nothing


@dataclass
class SourceStats:
    source: str
    files_seen: int = 0
    files_read: int = 0  # files that had new complete records
    records: int = 0
    messages: int = 0
    by_role: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    problems: Counter[str] = field(default_factory=Counter)

    def add(self, result: ParseResult) -> None:
        self.files_read += 1 if result.records else 0
        self.records += result.records
        self.messages += len(result.messages)
        self.by_role.update(message.role for message in result.messages)
        self.skipped.update(result.skipped)
        self.problems.update(problem.reason for problem in result.problems)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {key: dict(getattr(self, key)) for key in ("by_role", "skipped", "problems")}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> SourceStats:
        def counter(key: str) -> Counter[str]:
            return Counter({str(k): int(v) for k, v in (raw.get(key) or {}).items()})

        return cls(
            source=str(raw["source"]),
            files_seen=int(raw.get("files_seen", 0)),
            files_read=int(raw.get("files_read", 0)),
            records=int(raw.get("records", 0)),
            messages=int(raw.get("messages", 0)),
            by_role=counter("by_role"),
            skipped=counter("skipped"),
            problems=counter("problems"),
        )


@dataclass(frozen=True)
class Alarm:
    source: str
    message: str


def alarms(stats: Iterable[SourceStats]) -> list[Alarm]:
    """What a user must be told about: a source that reads records but recognises nothing, mostly
    unknown shapes, or turns of one role only. Empty when all is well."""
    found: list[Alarm] = []
    for s in stats:
        unknown = sum(s.skipped.get(reason, 0) for reason in UNKNOWN)
        if s.files_seen and s.records and not s.messages:
            found.append(
                Alarm(
                    s.source,
                    f"{s.source}: {s.records} records in {s.files_read} of {s.files_seen} files and no message "
                    "recognised: its transcript format may have changed",
                )
            )
        elif unknown >= ALARM_FLOOR and unknown * 2 > s.records:
            found.append(Alarm(s.source, f"{s.source}: {unknown} of {s.records} records have a shape not recognised"))
        if s.messages >= ALARM_FLOOR:
            for role in ("user", "assistant"):
                if not s.by_role.get(role):
                    said = f"{s.messages} messages and none from the {role}"
                    found.append(Alarm(s.source, f"{s.source}: {said}: a turn format may have changed"))
    return found


def scan(
    source: Source,
    home: Path,
    cursors: Mapping[str, Cursor],
    stats: SourceStats,
    *,
    env: Mapping[str, str] | None = None,
    modified_since_ms: int | None = None,
    budget: int = BUDGET,
) -> Iterator[tuple[Path, ParseResult]]:
    """Every file of `source` read from its cursor to its end, in budget-sized results; the caller
    persists each result's messages, then its cursor (in that order, so a crash re-reads, never skips).
    `modified_since_ms` leaves out files last written before then (a backfill's `--since`)."""
    for path in source.discover(home, env):
        if modified_since_ms is not None:
            try:
                if path.stat().st_mtime_ns // 1_000_000 < modified_since_ms:
                    continue
            except OSError:
                pass  # vanished: parse reports it
        stats.files_seen += 1
        cursor = cursors.get(str(path))
        while True:
            result = source.parse(path, cursor, budget=budget)
            stats.add(result)
            yield path, result
            if result.cursor is None or not result.more:
                break
            cursor = result.cursor
