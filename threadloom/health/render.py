"""A health report (stats.py) as plain text for a person: `threadloom stats`, `threadloom top` and its piped
form print this. Fixed-width columns, no colour, nothing but the report's own figures."""

from __future__ import annotations

from datetime import datetime
from typing import Any

GROWTH = ("1d", "7d", "30d")


def render(report: dict[str, Any]) -> str:
    parts = [
        _header(report),
        _counts(report["counts"]),
        _index(report["index"]),
        _tools(report["tool_calls"]),
        _jobs(report["jobs"]),
        _ingest(report["ingest"]),
        _probes(report["probes"]),
    ]
    return "\n\n".join(p for p in parts if p) + "\n"


def when(ms: int | None) -> str:
    if ms is None:
        return "never"
    return datetime.fromtimestamp(ms / 1000).astimezone().strftime("%Y-%m-%d %H:%M:%S")


def size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def _header(report: dict[str, Any]) -> str:
    b = report["store"]["bytes"]
    parts = "the database" if "database" in b else f"file {size(b['file'])}, wal {size(b['wal'])}, shm {size(b['shm'])}"
    return (
        f"threadloom health for {report['user']} at {when(report['at'])}\n"
        f"store {report['store']['path']}: {size(b['total'])} ({parts})"
    )


def _table(title: str, head: list[str], rows: list[list[str]]) -> str:
    if not rows:
        return f"{title}: none"
    widths = [max(len(str(x)) for x in column) for column in zip(head, *rows, strict=True)]
    lines = [title]
    for row in [head, *rows]:
        cells = [
            str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  " + "  ".join(cells).rstrip())
    return "\n".join(lines)


def _counts(counts: dict[str, dict[str, int]]) -> str:
    rows = [[kind, f"{c['total']:,}", *(f"+{c[g]:,}" for g in GROWTH)] for kind, c in counts.items()]
    return _table("yours, and new in the last 1/7/30 days", ["kind", "total", *GROWTH], rows)


def _index(index: dict[str, Any]) -> str:
    line = f"search index: {index['documents']:,} documents"
    if index["fingerprint"] is None:
        return line + ", no vectors (full-text only)"
    return line + f", {index['without_vectors']:,} without a current vector of {index['fingerprint']}"


def _tools(calls: dict[str, Any]) -> str:
    title = (
        f"tool calls, last {calls['window_days']} days: {calls['calls']:,} calls, {calls['errors']:,} errors, "
        f"p50 {calls['p50_ms']} ms, p95 {calls['p95_ms']} ms"
        + (f" (figures from the newest {calls['sampled']:,})" if calls["sampled"] < calls["calls"] else "")
    )
    rows = [
        [tool, f"{t['calls']:,}", f"{t['errors']:,}", f"{t['error_rate']:.1%}", f"{t['p50_ms']}", f"{t['p95_ms']}"]
        for tool, t in calls["tools"].items()
    ]
    return _table(title, ["tool", "calls", "errors", "rate", "p50 ms", "p95 ms"], rows) if rows else title


def _jobs(jobs: dict[str, Any]) -> str:
    rows = []
    for name, job in jobs.items():
        last = job["last"]
        changed = ", ".join(f"{k} {v}" for k, v in last["changed"].items() if v) or "nothing"
        fired = "/".join(str(job["fired"][g]) for g in GROWTH)
        rows.append([name, when(last["started_at"]), f"{last['duration_ms']:,}", fired, changed])
    return _table("background jobs (store-wide)", ["job", "last run", "ms", "fired 1/7/30d", "last changed"], rows)


def _ingest(ingest: dict[str, Any]) -> str:
    if not ingest["enabled"]:
        return "transcripts: ingest is off"
    rows = [
        [s["source"], f"{s['messages']:,}", f"{s['sessions']:,}", f"{s['files']:,}", s["last"] or "-"]
        for s in ingest["sources"]
    ]
    text = _table("transcripts ingested", ["source", "messages", "sessions", "files", "latest"], rows)
    return text + "".join(f"\n  alarm: {a}" for a in ingest["alarms"])


def _probes(probes: dict[str, Any]) -> str:
    last = probes["last_run"]
    title = "self-test (threadloom doctor --probe): " + (f"last run {when(last['at'])}" if last else "never run")
    rows = []
    for category, c in probes["categories"].items():
        rate = "-" if c["pass_rate_30d"] is None else f"{c['pass_rate_30d']:.0%}"
        passed = [f"{c['passed'][g]}/{c['runs'][g]}" for g in GROWTH]
        failure = c["last_failure"]
        note = f"failed {when(failure['at'])}: {failure['error']}" if failure else ""
        rows.append([category, *passed, rate, "-" if c["p50_ms"] is None else f"{c['p50_ms']}", note])
    head = ["category", *(f"passed {g}" for g in GROWTH), "rate", "p50 ms", "last failure"]
    return _table(title, head, rows)
