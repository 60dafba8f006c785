"""`threadloom style ...`: your style memory from the terminal: the capsule (`show`), every habit with its
id (`habits`), a learning pass now (`learn`), and the controls (`pin`, `unpin`, `forget`, `pause`,
`resume`, `profile-set`, `profile-clear`), exactly as the `style` and `style_manage` tools give them."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from threadloom.cli.session import run_in_session
from threadloom.identity import Provenance
from threadloom.runtime import Runtime
from threadloom.store import jobs
from threadloom.style import Learner, StyleMemory

style_app = typer.Typer(help="Your style memory: how you write and like to work (see `style show`).")


def _manage(action: str, target: str | None = None) -> None:
    def act(rt: Runtime, prov: Provenance) -> Any:
        return StyleMemory(rt.store, rt.scrubber).manage(prov, action, target)

    run_in_session(act)


@style_app.command()
def show(
    revision: Annotated[int | None, typer.Option(help="The revision you hold: ack or delta.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="The whole answer, score included.")] = False,
) -> None:
    """The capsule an agent of yours is given (under THREADLOOM_EGRESS for this terminal's vendor)."""

    def act(rt: Runtime, prov: Provenance) -> Any:
        found = StyleMemory(rt.store, rt.scrubber).view(prov, revision, rt.settings.egress)
        if as_json:
            return found
        text = found.get("text", f"{found['mode']} (revision {found['revision']})")
        return f"{text}\n{found['withheld']}" if found.get("withheld") else text  # the agent learns it exists

    run_in_session(act, as_json=as_json)


@style_app.command()
def habits(
    status: Annotated[str | None, typer.Option(help="candidate, active or archived.")] = None,
) -> None:
    """Every habit learned, with its id, status, sightings and sessions (under THREADLOOM_EGRESS, like `show`)."""
    run_in_session(lambda rt, prov: StyleMemory(rt.store, rt.scrubber).habits(prov, rt.settings.egress, status, 500))


@style_app.command()
def learn() -> None:
    """Learn from the user messages ingested since the last pass now (the daemon does it after each transcript poll)."""
    run_in_session(lambda rt, _prov: Learner(rt.store, rt.scrubber).run(jobs.holder_id()).as_dict())


@style_app.command()
def pin(habit_id: str) -> None:
    """Keep a habit active and out of every cleanup."""
    _manage("pin", habit_id)


@style_app.command()
def unpin(habit_id: str) -> None:
    """Let cleanup archive a habit again once unused."""
    _manage("unpin", habit_id)


@style_app.command()
def forget(habit_id: str) -> None:
    """Erase a habit now; learning will not pick it up again."""
    _manage("forget", habit_id)


@style_app.command()
def pause() -> None:
    """Stop learning (the capsule stays as it is)."""
    _manage("pause")


@style_app.command()
def resume() -> None:
    """Learn again from new messages."""
    _manage("resume")


@style_app.command("profile-set")
def profile_set(text: str) -> None:
    """Add how you like an agent to work with you, e.g. "conclusions first"."""
    _manage("profile_set", text)


@style_app.command("profile-clear")
def profile_clear(profile_id: str) -> None:
    """Remove a profile item (its id is in `style show --json`)."""
    _manage("profile_clear", profile_id)
