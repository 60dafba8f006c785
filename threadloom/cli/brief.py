"""`threadloom brief`: the session brief (or the now table) from the terminal, for this repository and user,
exactly as the `brief` tool, the `threadloom://brief` resource and the session-start hook give it."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import typer

from threadloom.brief import DEFAULT_BUDGET, MAX_BUDGET, MIN_BUDGET, render_brief, render_now
from threadloom.cli.app import out
from threadloom.cli.session import run_in_session
from threadloom.identity import Provenance
from threadloom.runtime import Runtime


def brief(
    scope: Annotated[
        Literal["full", "query", "now"], typer.Option(help="full, query (what is new plus --query's hits) or now.")
    ] = "full",
    query: Annotated[str | None, typer.Option(help="With --scope query: what to find memories about.")] = None,
    budget: Annotated[int, typer.Option(min=MIN_BUDGET, max=MAX_BUDGET, help="In tokens.")] = DEFAULT_BUDGET,
    as_json: Annotated[bool, typer.Option("--json", help="Also its size and what the budget left out.")] = False,
) -> None:
    """Print the brief a session of yours starts with here."""
    out.soft_wrap = True  # the brief's lines are its structure: never wrapped to the terminal's width
    if scope == "now":
        run_in_session(lambda _rt, _prov: {"scope": "now", "text": render_now()} if as_json else render_now(), as_json)
        return

    def act(rt: Runtime, prov: Provenance) -> Any:
        made = render_brief(rt, prov, scope=scope, query=query, budget=budget)
        return made.as_dict() if as_json else made.text

    run_in_session(act, as_json=as_json)
