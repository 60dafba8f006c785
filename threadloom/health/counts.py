"""How much of each kind a user has, and how much came in over the last 1, 7 and 30 days.

Every count is of the caller's own rows (their memories, notes, quotes, transcripts, claims, tasks; the
signals, sessions and journal of their sessions), never another user's: one user's figures say nothing
of what another stores. What a user may see of others' (a project memory, a project note) is not counted
here; it is theirs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from threadloom.store.base import Reader

DAY_MS: Final = 86_400_000
GROWTH_DAYS: Final = (1, 7, 30)


@dataclass(frozen=True)
class Kind:
    name: str
    source: str  # FROM ... WHERE, with :u the user
    at: str  # the column that says when a row came in


KINDS: Final = (
    Kind("memories", "memories m WHERE m.owner = :u", "m.created_at"),
    Kind("notes", "thread_notes n WHERE n.owner = :u AND n.kind <> 'quote'", "n.created_at"),
    Kind("quotes", "thread_notes n WHERE n.owner = :u AND n.kind = 'quote'", "n.created_at"),
    Kind("signals_sent", "signals g JOIN sessions s ON s.id = g.sender WHERE s.user = :u", "g.created_at"),
    Kind("transcript_messages", "transcript_messages t WHERE t.owner = :u", "t.ingested_at"),
    Kind("claims", "user_claims c WHERE c.owner = :u", "c.created_at"),
    Kind("sessions", "sessions s WHERE s.user = :u", "s.started_at"),
    Kind("tasks", "tasks k WHERE k.owner = :u", "k.started_at"),
    Kind("journal_events", "events e JOIN sessions s ON s.id = e.session_id WHERE s.user = :u", "e.at"),
)


def counts(r: Reader, user: str, now: int) -> dict[str, dict[str, int]]:
    """{kind: {total, 1d, 7d, 30d}} of `user`'s own rows; memories also say how many are current."""
    params: dict[str, Any] = {"u": user} | {f"d{d}": now - d * DAY_MS for d in GROWTH_DAYS}
    found: dict[str, dict[str, int]] = {}
    for kind in KINDS:
        growth = ", ".join(
            f"COALESCE(SUM(CASE WHEN {kind.at} >= :d{d} THEN 1 ELSE 0 END), 0) AS g{d}" for d in GROWTH_DAYS
        )
        row = r.one(f"SELECT COUNT(*) AS total, {growth} FROM {kind.source}", params)
        assert row is not None
        found[kind.name] = {"total": int(row["total"])} | {f"{d}d": int(row[f"g{d}"]) for d in GROWTH_DAYS}
    current = r.scalar("SELECT COUNT(*) FROM memories m WHERE m.owner = :u AND m.superseded_by IS NULL", {"u": user})
    found["memories"]["current"] = int(current or 0)
    return found
