"""`threadloom learn curate|snapshots|restore|insights`: run the curator over your skills and lessons now (or
only see what it would do), list the snapshots and trash it keeps, put back a snapshot or a trashed entry,
and list or export your insights. A person's commands: the curator itself still acts as a loop (it cannot
change what a person wrote or pinned); restore may put back anything of yours, after a snapshot of its own."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from threadloom.cli.app import out, settings
from threadloom.learning.curator import for_runtime
from threadloom.learning.insights import Insights
from threadloom.learning.library import Library
from threadloom.learning.snapshots import Snapshots
from threadloom.runtime import Runtime, open_runtime

AsJson = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def _with_runtime(fn: Any) -> Any:
    runtime = open_runtime(settings(), "cli")
    try:
        return fn(runtime, Library(runtime, client_home=Path.home()))
    finally:
        runtime.close()


def curate(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Audit and report; change nothing.")] = False,
    as_json: AsJson = False,
) -> None:
    """Review every skill and lesson of yours: verdicts (keep, repair, merge, split, deprecate, delete, human
    review), merges and deletes within the delete budget after a snapshot, a dated report under the home.
    Runs whatever THREADLOOM_LEARN_CURATE says (that setting is the schedule's)."""

    def act(rt: Runtime, lib: Library) -> dict[str, Any]:
        return for_runtime(rt, lib).run(rt.settings.user, dry_run)

    report = _with_runtime(act)
    if as_json:
        out.print_json(json.dumps(report))
    elif report.get("busy"):
        out.print("another curator pass of yours is running; try again when it ends")
    else:
        table = Table("kind", "name", "verdict", "why", "done")
        for v in report["verdicts"]:
            if v["verdict"] != "keep":
                verdict = v["verdict"] + (f" into {v['into']}" if v.get("into") else "")
                table.add_row(
                    v["kind"], escape(v["name"]), verdict, escape("; ".join(v["reasons"])), v.get("action", "")
                )
        out.print(table)
        out.print("verdicts: " + (", ".join(f"{k} {n}" for k, n in sorted(report["counts"].items())) or "none"))
        if not dry_run:
            out.print("done: " + (", ".join(f"{k} {n}" for k, n in report["done"].items() if n) or "nothing"))
            if report["snapshot"]:
                out.print(f"snapshot taken first: {report['snapshot']} (threadloom learn restore {report['snapshot']})")
            out.print(f"report: {escape(report['report'])}")
    if report.get("busy"):
        raise typer.Exit(1)


def snapshots(as_json: AsJson = False) -> None:
    """Your snapshots and trashed entries still within their retention (THREADLOOM_LEARN_RETENTION_DAYS)."""
    listed = _with_runtime(lambda rt, lib: Snapshots(lib, rt.settings.learn_retention_days).listing(rt.settings.user))
    if as_json:
        out.print_json(json.dumps(listed))
        return
    table = Table("id", "what", "entries / why", "taken")
    for s in listed["snapshots"]:
        table.add_row(s["id"], escape(s["reason"]), str(s["entries"]), _when(s["created_at"]))
    for t in listed["trash"]:
        table.add_row(t["id"], f"{t['kind']} {escape(t['name'])}", escape(t["why"]), _when(t["deleted_at"]))
    out.print(table)


def restore(
    ref: Annotated[str, typer.Argument(help="A snapshot (s12) or a trash item (t7), from `learn snapshots`.")],
    as_json: AsJson = False,
) -> None:
    """Put back every entry of a snapshot, or one trashed entry, exactly as it was (files, provenance, pin
    and usage); entries made since stay. A snapshot of the present is taken first."""
    result = _with_runtime(
        lambda rt, lib: Snapshots(lib, rt.settings.learn_retention_days).restore(rt.settings.user, ref)
    )
    if as_json:
        out.print_json(json.dumps(result))
        return
    names = ", ".join(f"{r['kind']} {r['name']}" for r in result["restored"]) or "nothing (all as it was)"
    out.print(f"restored: {escape(names)}; the state before: {result['snapshot_before']}")


def insights(
    export: Annotated[bool, typer.Option("--export", help="Export what passed the vote threshold now.")] = False,
    limit: Annotated[int, typer.Option(min=1, max=200)] = 20,
    as_json: AsJson = False,
) -> None:
    """Your insights by net votes; with --export, write those past THREADLOOM_LEARN_INSIGHT_VOTES (once each)."""

    def act(rt: Runtime, _: Library) -> dict[str, Any]:
        s = rt.settings
        ins = Insights(rt.store, s.layout.home / "insights", s.learn_insight_votes, rt.scrubber)
        done = ins.export(s.user) if export else None
        return {"insights": ins.listing(s.user, limit), "export": done}

    result = _with_runtime(act)
    if as_json:
        out.print_json(json.dumps(result))
        return
    table = Table("id", "text", "up", "down", "exported")
    for i in result["insights"]:
        table.add_row(
            str(i["id"]), escape(i["text"][:120]), str(i["up"]), str(i["down"]), "yes" if i["exported_at"] else ""
        )
    out.print(table)
    if result["export"] is not None:
        out.print(f"exported {result['export']['exported']} to {escape(result['export']['path'])}")


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")


def register(app: typer.Typer) -> None:
    """Add these commands to `threadloom learn`."""
    app.command("curate")(curate)
    app.command("snapshots")(snapshots)
    app.command("restore")(restore)
    app.command("insights")(insights)
