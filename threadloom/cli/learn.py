"""`threadloom learn extract|candidates|accept|reject|review|run`: run the extract pass (or a reviewer
loop's pass) now, and review its candidates by hand (accepting one writes a skill or a lesson, with edits if
given; its paraphrases go with it), one at a time with `review`. A skill accepted here is mirrored into this
user's CLI skills folders."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from threadloom.cli.app import err, out, settings
from threadloom.errors import InvalidInput, ThreadloomError
from threadloom.learning.candidates import Candidates, into_library
from threadloom.learning.curator_review import CURATE_REVIEW
from threadloom.learning.curator_review import gather as curator_findings
from threadloom.learning.evolve import EvolveJob
from threadloom.learning.harvest import Extractor, learning_status
from threadloom.learning.library import Library
from threadloom.learning.reviewer import configured
from threadloom.runtime import Runtime, open_runtime

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
        write = into_library(Library(runtime, client_home=Path.home()))
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


LOOPS = ("review", "auto-review", "shadow", "curate-review")


@learn_app.command("run")
def run_loop(
    loop: Annotated[str, typer.Argument(help=f"One of {', '.join(LOOPS)}.")],
    force: Annotated[
        bool, typer.Option("--force", help="Ignore the loop's interval (never its lease or budget).")
    ] = False,
) -> None:
    """Run one pass of a reviewer loop now, as the daemon would (whether or not its schedule is on): gather
    what is new, spawn its child (learn_agent; custom needs THREADLOOM_SPAWN_COMMAND). Single-flight with the
    daemon and every other process: a pass another holds is `busy`, one recorded within the interval `not due`."""
    if loop not in LOOPS:
        raise InvalidInput(f"loop is one of {', '.join(LOOPS)}, not {loop[:40]!r}")
    runtime = open_runtime(settings(), "cli")
    s = runtime.settings
    try:
        chosen = {lp.name: (lp, gather) for lp, gather, _ in configured(s)}
        chosen[CURATE_REVIEW.name] = (replace(CURATE_REVIEW, daily_tokens=s.learn_daily_tokens), curator_findings)
        name = {"review": "learning.review", "auto-review": "learning.auto_review", "shadow": "learning.shadow",
                "curate-review": CURATE_REVIEW.name}[loop]  # fmt: skip
        picked, gather = chosen[name]
        job = EvolveJob(runtime.store, s.home, runtime.spawner.config, s.user, picked, gather, agent=s.learn_agent,
                        scrubber=runtime.scrubber)  # fmt: skip
        report = job.run(force=force)
    finally:
        runtime.close()
    out.print_json(json.dumps(report.as_dict()))


REVIEW_KEYS = "l lesson, s skill, e edit first, r reject, n next, q quit"


@learn_app.command("review")
def review(
    limit: Annotated[int, typer.Option(min=1, max=100, help="At most this many candidates, newest first.")] = 20,
) -> None:
    """Go through your pending candidates one at a time: accept one as a lesson or a skill (edited first if
    you like), reject it, or pass. Accepting or rejecting one decides its paraphrases with it."""
    runtime = open_runtime(settings(), "cli")
    user = runtime.settings.user
    done = {"accepted": 0, "rejected": 0, "passed": 0}
    try:
        queue = Candidates(runtime.store)
        shown = queue.listing(user, "pending", limit)["candidates"]
        if not shown:
            out.print("no pending candidates")
            return
        for c in shown:
            if queue.get(user, int(c["id"]))["status"] != "pending":  # decided with a paraphrase of it
                continue
            size = c.get("cluster_size")
            out.print(f"\n[bold]{c['id']}[/bold] {c['kind']} ({c['locale'] or '-'}, {c['source']})"
                      + (f", {size} paraphrases" if size else ""))  # fmt: skip
            out.print(escape(c["text"]), highlight=False)
            outcome = _decide(runtime, queue, user, c)
            if outcome == "quit":
                break
            done[outcome] += 1
    finally:
        runtime.close()
    out.print(", ".join(f"{k} {v}" for k, v in done.items()))


def _decide(runtime: Runtime, queue: Candidates, user: str, c: dict[str, object]) -> str:
    """One candidate's decision from the keyboard: accepted, rejected, passed or quit."""
    while True:
        key = typer.prompt(REVIEW_KEYS, default="n").strip().lower()[:1]
        if key == "q":
            return "quit"
        if key == "n":
            return "passed"
        if key == "r":
            reason = typer.prompt("why (optional)", default="", show_default=False)
            queue.reject(user, [int(str(c["id"]))], reason)
            return "rejected"
        if key not in ("l", "s", "e"):
            continue
        text = typer.prompt("text", default=str(c["text"])) if key == "e" else None
        into = key if key != "e" else typer.prompt("as l lesson or s skill", default="l").strip().lower()[:1]
        name = description = None
        if into == "s":
            name = typer.prompt("skill name (lowercase letters, digits, dashes)")
            description = typer.prompt("what it does and when to use it")
        try:
            written = queue.accept(
                user, int(str(c["id"])), into_library(Library(runtime, client_home=Path.home())),
                "skill" if into == "s" else "lesson", name, description, text, "person",
            )["written"]  # fmt: skip
        except ThreadloomError as exc:  # a bad name, a screen refusal: said, and asked again
            err.print(f"not accepted: {exc.message}")
            continue
        out.print(f"accepted as {written['kind']} {written['name']} at {written['path']}")
        return "accepted"
