"""`threadloom setup`: wire threadloom into every agent CLI on this machine (or take it out again)."""

from __future__ import annotations

import os
import shutil
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from threadloom.errors import InvalidInput

if TYPE_CHECKING:
    from threadloom.setup.runner import Report


def _executable() -> str:
    """This threadloom's console script: the one beside the running Python, else the one on PATH."""
    beside = Path(sys.executable).parent / "threadloom"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside.resolve())
    found = shutil.which("threadloom")
    if found:
        return str(Path(found).resolve())
    raise InvalidInput(f"cannot find the threadloom executable beside {sys.executable} or on PATH")


def setup(
    client: Annotated[
        list[str] | None,
        typer.Option("--client", help="Only this client (repeatable): claude, codex, gemini, vscode, cursor, copilot."),
    ] = None,
    project: Annotated[
        bool, typer.Option("--project", help="Write the repository's shared files (MCP, instructions), not your own.")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print a diff of every file it would change; change nothing.")
    ] = False,
    undo: Annotated[bool, typer.Option("--undo", help="Remove exactly what setup added.")] = False,
) -> None:
    """Register threadloom with the agent CLIs found here: the MCP server, the session hooks and the
    instruction file of each. Every file changed is backed up first, under <home>/setup/backups/."""
    from threadloom.home import default_home
    from threadloom.identity import project_root
    from threadloom.setup.clients import CLIENTS
    from threadloom.setup.manifest import Manifest
    from threadloom.setup.model import Context
    from threadloom.setup.runner import setup as run_setup
    from threadloom.setup.runner import undo as run_undo
    from threadloom.threads.repository import Repository

    unknown = [c for c in client or [] if c not in CLIENTS]
    if unknown:
        raise InvalidInput(f"unknown client {unknown[0]!r}; clients are {', '.join(CLIENTS)}")
    manifest = Manifest(default_home())
    with nullcontext() if dry_run else manifest.locked():
        if undo:
            report = run_undo(set(client or CLIENTS), manifest, dry_run)
        else:
            repo = None
            if project:
                repo = Repository(project_root(os.environ, [], os.getcwd())).root
            ctx = Context(Path.home(), _executable(), dict(os.environ), repo)
            names = list(dict.fromkeys(client)) if client else [n for n, c in CLIENTS.items() if c.present(ctx)]
            if not names:
                typer.echo("No agent CLI found (none on PATH, no config folder); name one with --client.")
                raise typer.Exit(0)
            report = run_setup(ctx, [CLIENTS[n].plan(ctx) for n in names], manifest, dry_run)
    _print(report, dry_run, undo)


def _print(report: Report, dry_run: bool, undo: bool) -> None:
    for row in report.rows:
        typer.echo(f"{row.client:<8} {row.what or 'file':<16} {row.status:<12} {row.path}".rstrip())
    for line in report.backups:
        typer.echo(f"backup   {line}")
    for diff in report.diffs:
        typer.echo(diff, nl=False)
    if not report.changed:
        typer.echo("Nothing to undo: no file holds what setup added." if undo else "Nothing to change: already set up.")
    elif dry_run:
        typer.echo("Dry run: nothing was changed.")
    if not undo and not dry_run and report.changed:
        for note in report.notes:
            typer.echo(f"note     {note}")
