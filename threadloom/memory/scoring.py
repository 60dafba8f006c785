"""Retention scoring and the lifecycle: decay_score = relevance × connectivity × reactivation.

The score is a retention weight, not a countdown: recalling a memory raises it, and a low
score only means resting. Worked numbers with the defaults (ARCHITECTURE.md has the table):

- stored today, no edges, never recalled: 1.0 × 0.3 × 0.5 = 0.15 (active)
- the same after 30 idle days: 0.5 × 0.3 × 0.5 = 0.075 (dormant); 60 days: 0.0375 (fading);
  150 days: 0.0047, below the forgetting threshold — pruned if nothing else protects it
- stored today with 3 edges, recalled 5 times: 1.0 × 0.705 × 0.794 = 0.56; after 150 days 0.018:
  fading, but never pruned while it has edges

Pruning needs all at once: a score under `forget_below`, no edges, not pinned, not core,
not shared (private), and idle (not stored, recalled or reactivated) for `min_idle_days`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

DAY_MS = 86_400_000


@dataclass(frozen=True)
class ScoringConfig:
    half_life_days: float = 30.0  # relevance halves for every this many idle days
    min_connectivity: float = 0.3  # connectivity of a memory with no edges
    degree_saturation: int = 10  # edges at which connectivity reaches 1
    min_reactivation: float = 0.5  # reactivation factor of a memory never recalled
    recall_saturation: int = 20  # recalls at which the reactivation factor reaches 1
    dormant_below: float = 0.1
    fading_below: float = 0.04
    forget_below: float = 0.01
    min_idle_days: float = 30.0
    core_promotion_score: float = 0.25  # an auto-core category's memory becomes core (approval: is offered) here
    archive_days: float = 30.0  # a pruned memory stays restorable this long (THREADLOOM_RETENTION_RESTORE_DAYS)


@dataclass(frozen=True)
class Breakdown:
    relevance: float
    connectivity: float
    reactivation: float
    idle_days: float
    degree: int
    recalls: int

    @property
    def score(self) -> float:
        return self.relevance * self.connectivity * self.reactivation

    def as_dict(self) -> dict[str, Any]:
        return {
            "decay_score": round(self.score, 6),
            "relevance": round(self.relevance, 6),
            "connectivity": round(self.connectivity, 6),
            "reactivation": round(self.reactivation, 6),
            "inputs": {"idle_days": round(self.idle_days, 2), "edges": self.degree, "recalls": self.recalls},
        }


def breakdown(config: ScoringConfig, last_active_ms: int, degree: int, recalls: int, now_ms: int) -> Breakdown:
    idle_days = max(0.0, (now_ms - last_active_ms) / DAY_MS)
    relevance = 0.5 ** (idle_days / config.half_life_days)
    connectivity = _saturating(config.min_connectivity, degree, config.degree_saturation)
    reactivation = _saturating(config.min_reactivation, recalls, config.recall_saturation)
    return Breakdown(relevance, connectivity, reactivation, idle_days, degree, recalls)


def _saturating(floor: float, count: int, saturation: int) -> float:
    """floor at 0, rising logarithmically to 1 at `saturation`: the first few links or recalls count most."""
    return min(1.0, floor + (1.0 - floor) * math.log1p(count) / math.log1p(saturation))


def lifecycle_status(config: ScoringConfig, score: float) -> str:
    if score < config.fading_below:
        return "fading"
    if score < config.dormant_below:
        return "dormant"
    return "active"


@dataclass(frozen=True)
class Protection:
    """Why a memory would or would not be pruned now; it is prunable only when `reasons` is empty."""

    reasons: tuple[str, ...]

    @property
    def prunable(self) -> bool:
        return not self.reasons


def protection(config: ScoringConfig, b: Breakdown, *, pinned: bool, core: bool, visibility: str) -> Protection:
    reasons = []
    if b.score >= config.forget_below:
        reasons.append(f"score {b.score:.4f} is not under the forgetting threshold {config.forget_below}")
    if b.degree:
        reasons.append(f"it has {b.degree} edge(s)")
    if pinned:
        reasons.append("it is pinned")
    if core:
        reasons.append("it is a core memory")
    if visibility != "private":
        reasons.append(f"it is shared ({visibility})")
    if b.idle_days < config.min_idle_days:
        reasons.append(f"idle {b.idle_days:.1f} days, under the {config.min_idle_days:g} required")
    return Protection(tuple(reasons))
