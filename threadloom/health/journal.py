"""What the journals say: tool calls (the server writes a `tool.call` event per call, with its tool, outcome
and milliseconds) as latency percentiles and error rates per tool, for the caller's own sessions; and the
background jobs' runs (`job_runs`): when each last ran, how long it took, what it changed, and how often
it fired against what it produced."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, Final

from threadloom.health.reliability import percentile
from threadloom.store.base import Reader

DAY_MS: Final = 86_400_000
MAX_CALLS: Final = 20_000  # the newest calls of a window that the per-tool figures are computed from
JOB_DAYS: Final = (1, 7, 30)


def tool_calls(r: Reader, user: str, since: int) -> dict[str, Any]:
    """Per tool over the calls of `user`'s sessions since `since`: calls, errors, error rate, p50/p95 ms,
    the latest error, busiest first; from the newest MAX_CALLS calls when there were more (a JSON parse per
    call: 100k of them took 3 s on a loaded 2-core machine, bench/health.py)."""
    where = "FROM events e JOIN sessions s ON s.id = e.session_id WHERE e.kind = 'tool.call' AND e.at >= :since "
    where += "AND s.user = :u"
    params = {"since": since, "u": user, "n": MAX_CALLS}
    total = int(r.scalar(f"SELECT COUNT(*) {where}", params) or 0)
    rows = r.tuples(f"SELECT e.detail {where} ORDER BY e.id DESC LIMIT :n", params)
    ms: dict[str, list[float]] = {}
    errors: Counter[str] = Counter()
    last_error: dict[str, str] = {}
    for (raw,) in rows:
        try:
            detail = json.loads(raw)
            took = float(detail.get("ms") or 0.0)
        except (ValueError, TypeError, AttributeError):  # not what the server journals: not a call to count
            continue
        tool = str(detail.get("tool", "?"))[:100]
        ms.setdefault(tool, []).append(took)
        if detail.get("ok") is False:
            errors[tool] += 1
            last_error.setdefault(tool, str(detail.get("error", ""))[:200])  # newest first
    per_tool = {
        tool: {
            "calls": len(times),
            "errors": errors[tool],
            "error_rate": round(errors[tool] / len(times), 3),
            "p50_ms": round(percentile(times, 0.5) or 0.0, 1),
            "p95_ms": round(percentile(times, 0.95) or 0.0, 1),
        }
        | ({"last_error": last_error[tool]} if tool in last_error else {})
        for tool, times in sorted(ms.items(), key=lambda item: (-len(item[1]), item[0]))
    }
    every = [t for times in ms.values() for t in times]
    return {
        "calls": total,
        "sampled": len(every),  # the newest calls, which the figures below come from (all of them up to MAX_CALLS)
        "errors": sum(errors.values()),
        "p50_ms": round(percentile(every, 0.5) or 0.0, 1),
        "p95_ms": round(percentile(every, 0.95) or 0.0, 1),
        "tools": per_tool,
    }


def jobs(r: Reader, user: str, now: int, *, store_wide: bool = True) -> dict[str, Any]:
    """Per background job: its last run (when, how long, dry or not, what it changed) and, for 1/7/30 days,
    how often it fired and what its runs changed in sum (the numbers of their outcomes). A job that acts for
    no user is the store's upkeep, reported whole like the store's size; a job run per user (named
    `<job>:<user>`, as the user-model miner's) is reported to that user alone, and without `store_wide` (a
    team server's account) only those."""
    since = now - max(JOB_DAYS) * DAY_MS
    every = [str(x["name"]) for x in r.rows("SELECT DISTINCT name FROM job_runs ORDER BY name")]
    names = [n for n in every if (":" not in n and store_wide) or (":" in n and n.split(":", 1)[1] == user)]
    found: dict[str, Any] = {}
    for name in names:
        last = r.one(
            "SELECT started_at, finished_at, dry_run, outcome FROM job_runs WHERE name = :n ORDER BY id DESC LIMIT 1",
            {"n": name},
        )
        assert last is not None
        runs = r.rows(
            "SELECT started_at, dry_run, outcome FROM job_runs WHERE name = :n AND started_at >= :s",
            {"n": name, "s": since},
        )
        fired: dict[str, int] = {}
        produced: dict[str, dict[str, int | float]] = {}
        for days in JOB_DAYS:
            inside = [x for x in runs if int(x["started_at"]) >= now - days * DAY_MS and not x["dry_run"]]
            fired[f"{days}d"] = len(inside)
            total: Counter[str] = Counter()
            for x in inside:
                total.update(changes(_outcome(x["outcome"])))
            produced[f"{days}d"] = dict(sorted(total.items()))
        found[name] = {
            "last": {
                "started_at": int(last["started_at"]),
                "duration_ms": int(last["finished_at"]) - int(last["started_at"]),
                "dry_run": bool(last["dry_run"]),
                "changed": changes(_outcome(last["outcome"])),
            },
            "fired": fired,
            "produced": produced,
        }
    return found


def changes(outcome: dict[str, Any]) -> dict[str, int | float]:
    """The numbers in an outcome (a count, or the sum of a map of counts): what a run changed."""
    found: dict[str, int | float] = {}
    for key, value in outcome.items():
        if isinstance(value, bool):
            continue
        if isinstance(value, int | float):
            found[key] = value
        elif (
            isinstance(value, dict)
            and value
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value.values())
        ):
            found[key] = sum(value.values())
    return found


def _outcome(raw: Any) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}
