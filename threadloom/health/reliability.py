"""Probe results over time: each run's outcome per category recorded in the user's store (`probe_results`,
m025), and read back as reliability: runs, passes and latency per category over 1, 7 and 30 days, and the
last failure. The results describe threadloom, not anyone's data (the probe runs in a scratch store), so
every user of a store reads the same figures."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, Final

from threadloom.clock import now_ms
from threadloom.health.probes import CATEGORIES, MAX_ERROR_CHARS, Outcome
from threadloom.store.base import Reader, Store, Writer

DAY_MS: Final = 86_400_000
WINDOWS: Final = (1, 7, 30)  # days
TRIGGERS: Final = ("doctor", "daemon", "cli")


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-quantile (0-1) of `values` by nearest rank; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(q * len(ordered))))
    return ordered[rank - 1]


def record(store: Store, run_id: str, outcomes: Iterable[Outcome], trigger: str) -> None:
    """One row per category of one run, in one transaction."""
    rows = list(outcomes)
    at = now_ms()

    def tx(w: Writer) -> None:
        for o in rows:
            w.execute(
                "INSERT INTO probe_results (run_id, at, category, ok, ms, error, trigger) "
                "VALUES (:r, :at, :c, :ok, :ms, :e, :t)",
                {
                    "r": run_id,
                    "at": at,
                    "c": o.category,
                    "ok": int(o.ok),
                    "ms": round(o.ms, 2),
                    "e": (o.error or None) and o.error[:MAX_ERROR_CHARS],
                    "t": trigger,
                },
            )

    store.write(tx)


def last_run_at(store: Store) -> int | None:
    """When the latest probe run was recorded (epoch ms), or None before the first."""
    value = store.read(lambda r: r.scalar("SELECT MAX(at) FROM probe_results"))
    return int(value) if value is not None else None


def reliability(r: Reader, now: int) -> dict[str, Any]:
    """Per category: runs and passes per window, the pass rate and latency over 30 days, the last failure."""
    since = now - max(WINDOWS) * DAY_MS
    rows = r.rows(
        "SELECT category, at, ok, ms, error FROM probe_results WHERE at >= :since ORDER BY at",
        {"since": since},
    )
    last = r.one("SELECT run_id, at FROM probe_results ORDER BY id DESC LIMIT 1")
    per: dict[str, dict[str, Any]] = {}
    for category in [*CATEGORIES, *sorted({str(x["category"]) for x in rows} - set(CATEGORIES))]:
        mine = [x for x in rows if x["category"] == category]
        runs, passed = {}, {}
        for days in WINDOWS:
            inside = [x for x in mine if int(x["at"]) >= now - days * DAY_MS]
            runs[f"{days}d"], passed[f"{days}d"] = len(inside), sum(int(x["ok"]) for x in inside)
        failures = [x for x in mine if not x["ok"]]
        passed_ms = [float(x["ms"]) for x in mine if x["ok"]]
        per[category] = {
            "runs": runs,
            "passed": passed,
            "pass_rate_30d": round(sum(int(x["ok"]) for x in mine) / len(mine), 3) if mine else None,
            "p50_ms": _rounded(percentile(passed_ms, 0.5)),
            "p95_ms": _rounded(percentile(passed_ms, 0.95)),
            "last_failure": {"at": int(failures[-1]["at"]), "error": failures[-1]["error"]} if failures else None,
        }
    return {
        "last_run": {"run_id": last["run_id"], "at": int(last["at"])} if last else None,
        "categories": per,
    }


def _rounded(value: float | None) -> float | None:
    return round(value, 1) if value is not None else None
