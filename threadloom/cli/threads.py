"""`threadloom thread ...`: the project's threads from the terminal, in the repository holding the
working directory (the nearest folder up with `.git`), or THREADLOOM_ROOT's. Sessions from the
terminal are named `cli`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Annotated, Any

import typer

from threadloom.cli.session import run_in_session
from threadloom.identity import Provenance
from threadloom.runtime import Runtime
from threadloom.sessions import SessionInfo

thread_app = typer.Typer(help="Projects and threads of this repository.", no_args_is_help=True)


def _recorded(act: Callable[[Runtime, Provenance], Any]) -> Callable[[Runtime, Provenance], Any]:
    """Run `act` as a recorded session of this user (opened, then ended), so the project and thread it
    moves to count as this user's for their next sessions here (`threads/position.py`), and a session
    id of another user's is refused."""

    def recorded(rt: Runtime, prov: Provenance) -> Any:
        info = SessionInfo(
            id=prov.session_id or "cli",
            vendor=prov.vendor,
            transport="cli",
            project=prov.project,
            cwd=os.getcwd(),
            pid=os.getpid(),
            client_name="threadloom-cli",
            user=prov.user,
            author=prov.author,
            org=prov.org,
        )
        rt.sessions.open(info)
        try:
            return act(rt, prov)
        finally:
            rt.sessions.close(info)

    return recorded


@thread_app.command("project")
def project(
    title: Annotated[str | None, typer.Option("--create", help="Create a project with this title.")] = None,
    system_context: Annotated[str, typer.Option(help="With --create: standing instructions.")] = "",
    team: Annotated[bool, typer.Option(help="With --create: team mode (ownership rules).")] = False,
    switch: Annotated[
        str | None,
        typer.Option("--switch", help="Work in this project (by id); new sessions of yours here start in it."),
    ] = None,
) -> None:
    """List this repository's projects, create one (with its root thread), or switch to one."""
    if title is not None and switch is not None:
        raise typer.BadParameter("--create and --switch do not go together")

    def act(rt: Runtime, prov: Provenance) -> Any:
        if title is not None:  # an empty title is refused by the service, not taken for no --create at all
            rt.threads.create_project(prov, title, system_context, "team" if team else "solo")
        if switch is not None:
            rt.threads.switch_project(prov, switch)
        return rt.threads.projects(prov)

    run_in_session(_recorded(act) if title is not None or switch is not None else act)


@thread_app.command("tree")
def tree() -> None:
    """The thread tree, with statuses, branches and the active thread; then any file that could not
    be read (broken by hand, or a link out of the repository) and why."""

    def act(rt: Runtime, prov: Provenance) -> str:
        found = rt.threads.tree(prov)
        return "\n".join([found["tree"], *[f"! {p['path']}: {p['error']}" for p in found["problems"]]])

    run_in_session(act, as_json=False)


@thread_app.command("context")
def context(
    thread_id: Annotated[str | None, typer.Argument(help="Switch to this thread first.")] = None,
    max_tokens: Annotated[int | None, typer.Option(help="Budget; the farthest ancestors go first.")] = None,
) -> None:
    """Print the assembled context of the active thread (or of THREAD_ID, switching to it)."""

    def act(rt: Runtime, prov: Provenance) -> str:
        assembled = (
            rt.threads.switch(prov, thread_id, max_tokens) if thread_id else rt.threads.context(prov, max_tokens)
        )
        return assembled.text

    run_in_session(_recorded(act) if thread_id else act, as_json=False)


@thread_app.command("create")
def create(title: str, parent: Annotated[str | None, typer.Option(help="Default: the active thread.")] = None) -> None:
    """Start a child thread and make it the active one."""
    run_in_session(_recorded(lambda rt, prov: rt.threads.create(prov, title, parent).__dict__ | {"summary": None}))


@thread_app.command("summary")
def summary(
    text: str,
    section: Annotated[str | None, typer.Option(help="One section; default: the whole summary.")] = None,
    replace: Annotated[bool, typer.Option(help="Replace the section instead of adding to it.")] = False,
    path: Annotated[list[str] | None, typer.Option(help="A watched path; repeatable.")] = None,
    thread_id: Annotated[str | None, typer.Option("--thread")] = None,
) -> None:
    """Update the active thread's summary (or one section)."""
    run_in_session(
        _recorded(
            lambda rt, prov: rt.threads.update_summary(prov, text, section, replace, path, thread_id).summary.sections
        )
    )


@thread_app.command("status")
def status(
    new_status: Annotated[str, typer.Argument(metavar="STATUS", help="active, idle, done or abandoned.")],
    reason: Annotated[str | None, typer.Option(help="Why; joins the Decisions when finishing.")] = None,
    thread_id: Annotated[str | None, typer.Option("--thread")] = None,
) -> None:
    """Finish, park or reopen a thread."""
    run_in_session(
        _recorded(
            lambda rt, prov: {"id": rt.threads.set_status(prov, new_status, reason, thread_id).id, "status": new_status}
        )
    )


@thread_app.command("note")
def note(
    text: str,
    kind: Annotated[str, typer.Option(help="move, failed, insight, open_q or decision.")] = "move",
    thread_id: Annotated[str | None, typer.Option("--thread")] = None,
) -> None:
    """Add a note to a thread (kept in the store, not in git)."""
    run_in_session(lambda rt, prov: rt.notes.add_note(prov, text, kind, thread_id))


@thread_app.command("janitor")
def janitor(apply: Annotated[bool, typer.Option("--apply", help="Apply (default: dry run).")] = False) -> None:
    """Propose idling or closing neglected threads."""
    run_in_session(lambda rt, prov: rt.hygiene.janitor(prov, apply))
