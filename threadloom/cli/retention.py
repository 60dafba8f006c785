"""`threadloom retention [--dry-run]` (each kind's rows past its window deleted, then the store compacted) and
`threadloom compact` (compaction alone). Both run while servers keep serving. Counts are yours
(THREADLOOM_USER); the windows, and so what goes, are the store's, alike for every user; file sizes are the
store's."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from threadloom.cli.app import err, out, settings
from threadloom.hygiene.compaction import Compaction
from threadloom.hygiene.retention import Retention, Windows
from threadloom.runtime import settings_store

AsJson = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def retention(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only count what would go.")] = False,
    no_compact: Annotated[bool, typer.Option("--no-compact", help="Delete, but leave the file as it is.")] = False,
    as_json: AsJson = False,
) -> None:
    """Delete what is past its window: transcripts, signals, the journal, finished tasks with their logs, and
    pruned memories' restore copies (THREADLOOM_RETENTION_*_DAYS), then compact the store. Servers keep
    serving meanwhile."""
    s = settings()
    with settings_store(s) as store:
        retention = Retention(store, s.home / "tasks", Windows.of(s))
        report = retention.run(s.user, dry_run=dry_run)
        if not dry_run and not no_compact:  # the index is rewritten only when search documents went
            optimize = retention.last_totals["transcripts"] > 0
            report["compaction"] = Compaction(store).run(convert=None, optimize=optimize)
    if as_json:
        out.print_json(json.dumps(report))
        return
    out.print(render_retention(report), markup=False, highlight=False, soft_wrap=True)


def compact(
    convert: Annotated[
        bool,
        typer.Option(
            "--convert/--no-convert",
            help="Rewrite a store made before step-wise compaction once (writers wait for that rewrite).",
        ),
    ] = True,
    budget: Annotated[float, typer.Option(min=1, max=86_400, help="Seconds the pass may take.")] = 600.0,
    full: Annotated[
        bool,
        typer.Option(
            "--full",
            help="Rewrite the whole store to give its free space back to the operating system, in one go (no "
            "steps, no budget). PostgreSQL: VACUUM FULL of every table, each locked ACCESS EXCLUSIVE while it is "
            "rewritten, so every read and write of it waits; needs free disk about the largest table's size. "
            "SQLite: one VACUUM of the file, every writer waits for all of it.",
        ),
    ] = False,
    as_json: AsJson = False,
) -> None:
    """Give the store's free space back and merge its full-text index, in short steps while servers keep
    serving; then empty the write-ahead log when no reader holds it. On PostgreSQL: VACUUM (ANALYZE), which
    readers and writers work beside; freed space is reused by new rows, and --full returns it."""
    s = settings()
    with settings_store(s) as store:
        if full:
            lock = "each table ACCESS EXCLUSIVE" if store.dialect == "postgresql" else "the whole file"
            err.print(f"compact --full: rewriting the store, {lock} locked meanwhile: reads and writes wait")
        try:
            report = Compaction(store).run(convert=convert, budget_s=budget, full=full)
        except KeyboardInterrupt:
            if not full:
                raise
            err.print("interrupted: the table being rewritten is left as it was, the ones before it are rewritten")
            raise typer.Exit(130) from None
    if as_json:
        out.print_json(json.dumps(report))
        return
    out.print(render_compaction(report), markup=False, highlight=False, soft_wrap=True)


def render_retention(report: dict[str, Any]) -> str:
    went = report.get("would_delete") or {k: {"rows": v} for k, v in report.get("deleted", {}).items()}
    after = report.get("after", {})
    lines = [("dry run: nothing deleted" if report["dry_run"] else "retention pass") + " (your rows; windows in days)"]
    lines.append(
        f"{'kind':<12} {'window':>7} {'rows':>10} {'text':>12} {'going' if report['dry_run'] else 'deleted':>9}"
    )
    for kind, days in report["windows_days"].items():
        before = report["before"][kind]
        tail = "" if not after else f"  -> {after[kind]['rows']:,} rows"
        lines.append(
            f"{kind:<12} {days:>7} {before['rows']:>10,} {before['chars']:>12,} {went.get(kind, {}).get('rows', 0):>9,}"
            + tail
        )
    files = report.get("task_files_deleted")
    if files:
        lines.append(f"task files deleted: {files['files']:,} ({files['bytes']:,} bytes)")
    if "compaction" in report:
        lines.append(render_compaction(report["compaction"]))
    return "\n".join(lines)


def render_compaction(report: dict[str, Any]) -> str:
    if not report.get("ran"):
        return f"compaction: not run ({report.get('reason', '')})"
    if report.get("backend") == "postgresql":
        v = report["vacuum"]
        full = bool(v.get("full"))
        return (
            f"compaction: VACUUM ({'FULL, ' if full else ''}ANALYZE) of {v['tables']} tables in {report['seconds']} s; "
            f"{v['dead_rows_removed']:,} dead row versions removed, {v['dead_rows_kept']:,} kept for older "
            f"transactions; tables {v['bytes_before']:,} -> {v['bytes_after']:,} bytes "
            + (
                "(rewritten: the space went back to the system)"
                if full
                else "(freed space is reused; --full returns it)"
            )
        )
    before, after = report["before"], report["after"]
    lines = [
        f"store file: {before['file_bytes']:,} -> {after['file_bytes']:,} bytes, log {before['wal_bytes']:,} -> "
        f"{after['wal_bytes']:,}, free {before['free_bytes']:,} -> {after['free_bytes']:,}",
        f"compaction: {report['steps']} steps in {report['seconds']} s; the write lock held "
        f"{report['longest_hold_ms']} ms at most, {report['total_hold_ms']} ms in all"
        + ("" if report.get("finished", True) else " (time budget reached: the next pass goes on)"),
    ]
    if report.get("full"):
        lines[1] = f"compaction: one VACUUM rewrote the file in {report['seconds']} s, writers held meanwhile"
    if "conversion" in report:
        lines.append(report["conversion"])
    if "converted_hold_s" in report:
        lines.append(f"converted for step-wise compaction: one rewrite held writers {report['converted_hold_s']} s")
    if not report["checkpoint"].get("truncated"):
        lines.append(f"log not emptied: {report['checkpoint'].get('reason', '')}")
    return "\n".join(lines)
