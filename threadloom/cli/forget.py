"""`threadloom forget ...`: erase your own transcripts, memories, notes, claims, style memory or learning data
by session, project, source, time or text. It always shows what would go first; `--dry-run` stops there, otherwise it
asks before erasing (`--yes` skips the question; without a terminal it must be given)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from threadloom.cli.app import err, out, settings
from threadloom.clock import instant
from threadloom.erasure.learning import LearningFiles
from threadloom.erasure.service import DEFAULT_SAMPLE, Eraser
from threadloom.errors import InvalidInput
from threadloom.learning.library import Library
from threadloom.runtime import settings_store
from threadloom.store.erasure import KINDS, Selector


def forget(
    session: Annotated[str | None, typer.Option(help="An agent session's id.")] = None,
    project: Annotated[str | None, typer.Option(help="A repository path.")] = None,
    source: Annotated[str | None, typer.Option(help="An agent CLI: claude-code, codex, gemini, copilot.")] = None,
    since: Annotated[str | None, typer.Option(help="Written at or after (ISO date/date-time or epoch ms).")] = None,
    until: Annotated[str | None, typer.Option(help="Written before (ISO date/date-time or epoch ms).")] = None,
    text: Annotated[str | None, typer.Option(help="Containing this text (3+ characters).")] = None,
    kind: Annotated[
        list[str] | None, typer.Option(help=f"What to erase, repeatable: {', '.join(KINDS)} (default transcripts).")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only list what would go.")] = False,
    yes: Annotated[bool, typer.Option("--yes", help="Erase without asking.")] = False,
    sample: Annotated[int, typer.Option(help="Rows shown per kind.")] = DEFAULT_SAMPLE,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Erase your own data for good: the rows, their full-text index and vectors, and their bytes in the
    database file (backups you made keep their copy). On a PostgreSQL store the changed tables are vacuumed,
    and the output says what the server still keeps. Selectors combine; at least one is required."""
    s = settings()
    sel = Selector(session, project, source, instant(since, "--since"), instant(until, "--until"), text)
    kinds = tuple(kind) if kind else ("transcripts",)
    with settings_store(s) as store:
        library = Library.at(store, s.layout, Path.home())  # the copies in this user's CLI skills folders
        eraser = Eraser(store, LearningFiles.of(library, s.layout.home))
        plan = eraser.forget(s.user, sel, kinds, dry_run=True, sample=sample)
        _show(plan, as_json)
        if dry_run or plan["total"] == 0:
            return
        if not yes:
            if not sys.stdin.isatty():
                raise InvalidInput("not erasing without a terminal to confirm on: add --yes")
            if not typer.confirm(f"Erase these {plan['total']:,} rows for good?", default=False, err=True):
                err.print("nothing was erased")
                raise typer.Exit(1)
        _show(eraser.forget(s.user, sel, kinds, dry_run=False, sample=sample), as_json)


def _show(result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        out.print_json(json.dumps(result, default=str))
        return
    if result["dry_run"]:
        out.print(f"would erase {result['total']:,} rows:", markup=False)
        for name, found in result["would_erase"].items():
            extra = [(what, n) for what, n in found.items() if what != "count" and isinstance(n, int) and n]
            more = "".join(f" (+{n:,} {what})" for what, n in extra)  # archived memories, evidence, profile
            out.print(f"  {name}: {found['count']:,}{more}", markup=False)
            for row in found["sample"]:
                out.print(f"    [{row['session']}] {row['text']!r}", markup=False, highlight=False)
        return
    erased = ", ".join(f"{k} {v:,}" for k, v in result["erased"].items())
    out.print(f"erased: {erased}", markup=False)
    compaction = result.get("compaction")
    if compaction and "vacuumed" in compaction:  # PostgreSQL (store/postgres_vacuum.py)
        left = "" if compaction["complete"] else f" ({compaction['reason']})"
        out.print(
            f"vacuumed {len(compaction['vacuumed'])} tables: {compaction['dead_rows_removed']:,} old row versions "
            f"removed{left}",
            markup=False,
        )
        out.print(compaction["kept_by_postgresql"], markup=False)
    elif compaction:
        left = "" if compaction["complete"] else " (a reader kept the log: run forget again to empty it)"
        out.print(
            f"file compacted: {compaction['bytes_before']:,} -> {compaction['db_bytes']:,} bytes, "
            f"log {compaction['wal_bytes']:,} bytes{left}",
            markup=False,
        )
    out.print(result["backups"]["note"], markup=False)
    for path in result["backups"]["beside_store"]:
        out.print(f"  still holds the old data: {path}", markup=False)
