"""`threadloom export` and `threadloom import`: what you own, as files to keep, read or carry to another
store (threadloom/portable/)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer

from threadloom.cli.app import out, settings
from threadloom.learning.library import Library
from threadloom.portable.export import export_to
from threadloom.portable.format import MAX_FILE_BYTES
from threadloom.portable.importer import import_from
from threadloom.runtime import open_runtime

KINDS_HELP = "Only these kinds, repeatable: memories, notes, claims, style, skills, transcripts."


def export(
    out_dir: Annotated[
        Path | None, typer.Option("--out", help="A new or empty folder (default: threadloom-export-<date>).")
    ] = None,
    kinds: Annotated[list[str] | None, typer.Option("--kinds", help=KINDS_HELP)] = None,
    with_transcripts: Annotated[
        bool, typer.Option("--with-transcripts", help="Also the ingested agent conversations (large).")
    ] = False,
) -> None:
    """Export everything you (THREADLOOM_USER) own, as JSONL (one file per kind) plus Markdown to read.
    Another user's items are never in it."""
    s = settings()
    folder = out_dir or Path(f"threadloom-export-{time.strftime('%Y%m%d-%H%M%S')}")
    rt = open_runtime(s, "cli")
    try:
        done = export_to(rt.store, s.user, folder, kinds, Library(rt), with_transcripts)
    finally:
        rt.close()
    total = ", ".join(f"{name} {n:,}" for name, n in done.counts.items())
    out.print(f"exported for {s.user} into {done.folder}: {total}", markup=False, highlight=False)


def import_(
    path: Annotated[Path, typer.Argument(help="An export folder, or one <kind>.jsonl file of it.")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Check everything and count; write nothing.")] = False,
    max_bytes: Annotated[int, typer.Option("--max-bytes", min=1, help="Refuse a file larger than this.")] = (
        MAX_FILE_BYTES
    ),
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Merge an export into this store. Everything imported becomes yours (THREADLOOM_USER), whoever exported
    it; what you already have is not added twice, so importing again changes nothing. All or nothing."""
    s = settings()
    rt = open_runtime(s, "cli")
    try:
        done = import_from(
            rt.store, s.user, s.org, rt.scrubber, path, dry_run=dry_run, max_bytes=max_bytes, library=Library(rt)
        )
    finally:
        rt.close()
    if as_json:
        out.print_json(json.dumps(done.as_dict()))
        return
    verb = "would import" if dry_run else "imported"
    counts = ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in done.counts.items())
    out.print(f"{verb} as {s.user} from {', '.join(done.files)}: {counts}", markup=False, highlight=False)
