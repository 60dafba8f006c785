"""How usable a user's style memory is: readiness (enough active habits and preferences to shape replies),
drift (active habits the user has not shown for a month) and over-imitation risk (a capsule made mostly of
emoji, emoticons, dialect and pet phrases, which an agent parrots badly), each 0-1, with what to do."""

from __future__ import annotations

from typing import Any

from threadloom.store.base import Reader
from threadloom.style import rows
from threadloom.style.model import FLASHY, STALE_MS

READY_AT = 5  # active habits plus profile items that make a capsule worth applying


def score(r: Reader, owner: str, now: int) -> dict[str, Any]:
    counts = rows.counts(r, owner)
    shown = rows.capsule_habits(r, owner)
    active, profile = counts.get("active", 0), counts["profile"]
    readiness = min(1.0, (active + profile) / READY_AT)
    stale = sum(1 for h in shown if not h.pinned and now - h.last_at > STALE_MS)
    drift = stale / len(shown) if shown else 0.0
    flashy = sum(1 for h in shown if h.kind in FLASHY)
    # The share of flashy habits, weighed down while there are only one or two of them.
    over = (flashy / len(shown)) * min(1.0, flashy / 3) if shown else 0.0
    advice: list[str] = []
    if readiness < 0.4:
        advice.append("still learning: a habit needs 2 sightings in 2 sessions; reply in a neutral register")
    if drift >= 0.3:
        advice.append(f"{stale} active habit(s) unseen for 30 days: review them (style view=habits)")
    if over >= 0.5:
        advice.append("mostly emoji/dialect/pet phrases: use at most one per reply, none in serious answers")
    return {
        "readiness": round(readiness, 2),
        "drift": round(drift, 2),
        "over_imitation": round(over, 2),
        "counts": {k: counts.get(k, 0) for k in ("active", "candidate", "archived", "pinned", "profile", "sessions")},
        "advice": advice,
    }
