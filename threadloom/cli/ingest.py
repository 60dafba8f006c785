"""`threadloom ingest [--source S] [--since DATE]`: read agent CLIs' transcripts into the store now, with a
progress bar; `threadloom ingest status`: what is held per source, the covered span, and the alarms."""

from __future__ import annotations

import json
import re
import time
from datetime import datetime, timedelta
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from threadloom.cli.app import out, settings
from threadloom.errors import InvalidInput
from threadloom.ingest import IngestConfig, Ingester, PassReport, transcript_status
from threadloom.runtime import open_settings_store
from threadloom.transcripts import sources

ingest_app = typer.Typer(invoke_without_command=True, help="Ingest agent CLIs' transcripts (see `ingest status`).")
WAIT_S = 0.5  # between tries while another ingester (the daemon's pass) holds the lease
MAX_WAIT_S = 600.0
_RELATIVE = re.compile(r"^(\d{1,5})([dhw])$")


def parse_since(value: str, now: datetime | None = None) -> int:
    """`--since`: a date or date-time (ISO 8601, local time unless it has an offset), or `7d`, `12h`, `2w`
    ago; epoch ms."""
    now = now or datetime.now().astimezone()
    text = value.strip()
    relative = _RELATIVE.match(text)
    if relative:
        amount, unit = int(relative.group(1)), relative.group(2)
        delta = {"d": timedelta(days=amount), "h": timedelta(hours=amount), "w": timedelta(weeks=amount)}[unit]
        try:
            return int((now - delta).timestamp() * 1000)
        except (OverflowError, ValueError):
            raise InvalidInput(f"--since {value!r} reaches before the year 1") from None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInput(f"--since {value!r} is not a date (2026-11-02, 2026-11-02T09:00) nor 7d/12h/2w") from None
    if when.tzinfo is None:
        when = when.astimezone()  # the user's local time
    return int(when.timestamp() * 1000)


@ingest_app.callback()
def ingest(
    ctx: typer.Context,
    source: Annotated[
        list[str] | None, typer.Option("--source", "-s", help="claude-code, codex, gemini or copilot; repeatable.")
    ] = None,
    since: Annotated[
        str | None, typer.Option(help="Only files written since: a date (2026-11-02), a date-time, or 7d/12h/2w.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the pass's report as JSON.")] = False,
) -> None:
    """Read every agent CLI's transcripts from where the last pass stopped (new files from the start):
    each message once, secrets scrubbed, excluded folders (THREADLOOM_INGEST_EXCLUDE) left out. Safe beside
    the daemon (one ingester at a time per home: this waits for a pass under way) and to stop at any time.
    Vectors are computed afterwards by the daemon's background job, or by `threadloom reindex`."""
    if ctx.invoked_subcommand is not None:
        return
    s = settings()
    since_ms = parse_since(since) if since else None  # what was asked is checked even while ingest is off
    known = [source.name for source in sources()]
    unknown = [name for name in source or [] if name not in known]
    if unknown:
        raise InvalidInput(f"unknown transcript source {unknown[0][:40]!r}; sources are {', '.join(known)}")
    if not s.ingest:
        out.print("transcript ingest is off (THREADLOOM_INGEST=false)")
        raise typer.Exit(0)
    store = open_settings_store(s)
    try:
        ingester = Ingester(store, IngestConfig.of(s.user, s.ingest_exclude, s.ingest_children, s.scrub_secrets))
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TimeRemainingColumn(),
            console=out,
            disable=as_json,  # stdout is the JSON's
        ) as progress:
            task = progress.add_task("ingesting", total=None)
            waited = 0.0
            while True:
                report = ingester.run(
                    source or None, since_ms, on_progress=lambda d, t: progress.update(task, completed=d, total=t)
                )
                if not report.busy or waited >= MAX_WAIT_S:
                    break
                progress.update(task, description="waiting for the daemon's pass")
                time.sleep(WAIT_S)
                waited += WAIT_S
        status = transcript_status(store, s.user)
    finally:
        store.close()
    if as_json:
        out.print_json(json.dumps({"pass": report.as_dict(), "status": status}))
    else:
        _show_pass(report)
        _show_status(status)
    if report.busy:
        out.print("[yellow]another ingest held the store; run again to finish[/yellow]")
        raise typer.Exit(1)


@ingest_app.command("status")
def status(as_json: Annotated[bool, typer.Option("--json", help="Print it as JSON.")] = False) -> None:
    """Messages, sessions and files per source, the span covered, problems, and the alarms (a source that
    yields files but no message: its format may have changed). Exits 1 when an alarm is raised."""
    s = settings()
    store = open_settings_store(s)
    try:
        found = transcript_status(store, s.user, s.ingest)
    finally:
        store.close()
    if as_json:
        out.print_json(json.dumps(found))
    else:
        _show_status(found)
    raise typer.Exit(1 if found["alarms"] else 0)


def _show_pass(report: PassReport) -> None:
    table = Table("source", "new", "revised", "excluded", "unchanged files", "problems")
    counted: dict[str, int] = {}
    for problem in report.problems:
        counted[problem["reason"]] = counted.get(problem["reason"], 0) + 1
    for name, side in report.sources.items():
        table.add_row(
            name,
            f"{side.messages_added:,}",
            f"{side.messages_revised:,}",
            f"{side.messages_excluded:,}" + (f" (+{side.excluded_files} files)" if side.excluded_files else ""),
            f"{side.unchanged_files:,}",
            str(side.failed_files) if side.failed_files else "",
        )
    out.print(table)
    if counted:
        out.print("skipped or damaged: " + ", ".join(f"{reason} {n}" for reason, n in sorted(counted.items())))
    out.print(f"{report.added:,} new message(s) in {report.seconds:.1f} s")


def _show_status(found: dict[str, Any]) -> None:
    table = Table("source", "messages", "sessions", "files", "first", "last")
    for row in found["sources"]:
        table.add_row(
            row["source"],
            f"{row['messages']:,}",
            f"{row['sessions']:,}",
            f"{row['files']:,}",
            (row["first"] or "")[:16],  # to the minute; the JSON has the seconds
            (row["last"] or "")[:16],
        )
    out.print(table)
    if found["span"]:
        out.print(f"covered: {found['span']['first']} to {found['span']['last']}")
    elif not found["sources"]:
        out.print("no transcripts ingested yet")
    for alarm in found["alarms"]:
        out.print(f"[red]alarm:[/red] {escape(alarm)}")
