"""`threadloom learn extract|candidates|accept|reject`: run the extract pass now, and review its candidates
by hand (accepting one writes a skill or a lesson, with edits if given; its paraphrases go with it)."""

from __future__ import annotations

import json
import time
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from threadloom.cli.app import out, settings
from threadloom.learning.candidates import Candidates, into_library
from threadloom.learning.harvest import Extractor, learning_status
from threadloom.learning.library import Library
from threadloom.runtime import open_runtime

learn_app = typer.Typer(help="Learning loops: extract candidates, review them into skills and lessons.")
WAIT_S = 0.5  # between tries while another process's pass holds the lease
MAX_PASSES = 10_000


@learn_app.command("extract")
def extract(
    batch: Annotated[int, typer.Option(min=1, max=50_000, help="Messages (and notes) per pass.")] = 2_000,
    as_json: Annotated[bool, typer.Option("--json", help="Print the totals as JSON.")] = False,
) -> None:
    """Harvest decision- and rule-shaped sentences from the ingested transcripts and thread notes not read
    yet, until none are left. Runs whatever THREADLOOM_LEARN_EXTRACT says (that setting is the daemon's
    schedule); safe beside the daemon: one pass at a time per home."""
    runtime = open_runtime(settings(), "cli")
    totals = {"passes": 0, "messages": 0, "notes": 0, "queued": 0, "clustered": 0, "waited_s": 0.0}
    try:
        extractor = Extractor(runtime.store, runtime.scrubber, lambda: runtime.search.embedder)
        for _ in range(MAX_PASSES):
            report = extractor.run(batch)
            if report.busy:
                totals["waited_s"] += WAIT_S
                time.sleep(WAIT_S)
                continue
            totals["passes"] += 1
            totals["messages"] += report.messages
            totals["notes"] += report.notes
            totals["queued"] += report.queued
            totals["clustered"] += report.clustered
            if not report.more:
                break
        status = learning_status(runtime.store, runtime.settings.user, runtime.settings.learn_extract, 0)
    finally:
        runtime.close()
    if as_json:
        out.print_json(json.dumps({"extract": totals, "candidates": status["candidates"]}))
        return
    out.print(
        f"read {totals['messages']:,} message(s) and {totals['notes']:,} note(s); queued {totals['queued']:,} "
        f"candidate(s), {totals['clustered']:,} into an existing cluster"
    )
    out.print("your candidates: " + (", ".join(f"{k} {v}" for k, v in status["candidates"].items()) or "none"))


@learn_app.command("candidates")
def candidates(
    status: Annotated[str, typer.Option(help="pending, accepted, rejected or merged.")] = "pending",
    limit: Annotated[int, typer.Option(min=1, max=100)] = 20,
    before: Annotated[int | None, typer.Option(help="Only ids below this (the next page).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print them as JSON.")] = False,
) -> None:
    """Your candidates, newest first, with their source (message:<id> or note:<id>) and cluster size."""
    runtime = open_runtime(settings(), "cli")
    try:
        found = Candidates(runtime.store).listing(runtime.settings.user, status, limit, before)
    finally:
        runtime.close()
    if as_json:
        out.print_json(json.dumps(found))
        return
    table = Table("id", "kind", "locale", "text", "source", "cluster")
    for c in found["candidates"]:
        size = c.get("cluster_size")
        cluster = f"{c['cluster']} ({size})" if size else ""
        table.add_row(str(c["id"]), c["kind"], c["locale"], escape(c["text"]), c["source"], cluster)
    out.print(table)


@learn_app.command("accept")
def accept(
    candidate: Annotated[int, typer.Argument(help="The candidate's id.")],
    into: Annotated[str, typer.Option("--as", help="skill or lesson.")] = "lesson",
    name: Annotated[str | None, typer.Option(help="The skill's name (letters, digits, dashes).")] = None,
    description: Annotated[str | None, typer.Option(help="The skill's description.")] = None,
    text: Annotated[str | None, typer.Option(help="Your edit of the text, written instead of it.")] = None,
    only: Annotated[bool, typer.Option("--only", help="Leave its paraphrases pending.")] = False,
) -> None:
    """Write a candidate (or your edit of it) as a skill or a lesson; its pending paraphrases are merged."""
    runtime = open_runtime(settings(), "cli")
    try:
        write = into_library(Library(runtime))
        done = Candidates(runtime.store).accept(
            runtime.settings.user, candidate, write, into, name, description, text, "person", not only
        )
    finally:
        runtime.close()
    written = done["written"]
    where = f" at {written['path']}" if "path" in written else ""
    out.print(f"accepted {candidate} as {into} {written.get('name')}{where}")
    if done["merged"]:
        out.print(f"merged with it: {', '.join(map(str, done['merged']))}")


@learn_app.command("reject")
def reject(
    ids: Annotated[list[int], typer.Argument(help="Candidate ids.")],
    reason: Annotated[str, typer.Option(help="Why, kept with the decision.")] = "",
    only: Annotated[bool, typer.Option("--only", help="Leave their paraphrases pending.")] = False,
) -> None:
    """Reject candidates (and, unless --only, their pending paraphrases)."""
    runtime = open_runtime(settings(), "cli")
    try:
        done = Candidates(runtime.store).reject(runtime.settings.user, ids, reason, not only)
    finally:
        runtime.close()
    out.print(f"rejected: {', '.join(map(str, done['rejected'])) or 'none'}")
    for skipped in done["skipped"]:
        out.print(f"[yellow]{skipped['id']}: {skipped['why']}[/yellow]")
    if done["skipped"] and not done["rejected"]:
        raise typer.Exit(1)
