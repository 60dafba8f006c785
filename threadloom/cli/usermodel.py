"""`threadloom user mine [--dry-run]`: one pass of the user-model miner now (what it would propose, with
--dry-run); `threadloom user status`: whether observation is on, when the miner last ran and what it did."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any

import typer
from rich.markup import escape

from threadloom.cli.app import out, settings
from threadloom.config import Settings
from threadloom.runtime import open_settings_store
from threadloom.store.base import Store
from threadloom.usermodel.miner import Miner, MineReport, last_run
from threadloom.usermodel.validator import validator_command

user_app = typer.Typer(help="The user model: claims about how you work (see `user status`).", no_args_is_help=True)


def _store(s: Settings) -> Store:
    return open_settings_store(s)


@user_app.command()
def mine(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what it would propose; write nothing.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the pass's report as JSON.")] = False,
) -> None:
    """Read your messages and memories since the last pass for statements of a preference, habit or value,
    and propose them as hypotheses (or add evidence to the claims they match). Works whether or not
    THREADLOOM_USERMODEL_MINE is on (that setting is the daemon's schedule); one pass at a time per home."""
    s = settings()
    store = _store(s)
    try:
        miner = Miner(store, s.user)
        while True:  # a backlog in passes of MAX_ROWS; a dry run reads only the first (its cursor stays)
            report = miner.run(dry_run=dry_run)
            if as_json:
                out.print_json(json.dumps(report.as_dict()))
            else:
                _print(report)
            if dry_run or not report.left_over:
                break
    finally:
        store.close()


@user_app.command()
def status() -> None:
    """Whether observation and validation are on, and the miner's last pass: when, and what it did."""
    s = settings()
    out.print(
        f"observation: {'on' if s.usermodel_mine else 'off'} (THREADLOOM_USERMODEL_MINE), every "
        f"{s.usermodel_interval:g} s; validator: {'on' if s.usermodel_validate else 'off'} "
        f"(THREADLOOM_USERMODEL_VALIDATE)"
    )
    if s.usermodel_validate:
        command = validator_command(s.usermodel_agent, s.spawn_command)
        out.print(f"validator command: {escape(command) if command else '[red]none: set THREADLOOM_SPAWN_COMMAND'}")
    store = _store(s)
    try:
        run = last_run(store, s.user)
    finally:
        store.close()
    out.print(status_line(run))


def status_line(run: dict[str, Any] | None) -> str:
    """One line on the miner's last pass, for `user status` (and anything else that reports status)."""
    if run is None:
        return "miner: never ran"
    o = run["outcome"]
    when = datetime.fromtimestamp(run["finished_at"] / 1000).astimezone().strftime("%Y-%m-%d %H:%M")
    return (
        f"miner: last ran {when}: {o['messages']} message(s), {o['memories']} memory(ies), "
        f"{o['statements']} statement(s): {o['proposed']} proposed, {o['supported']} supported, "
        f"{o['contradicted']} contradicted"
    )


def _print(report: MineReport) -> None:
    if report.busy:
        out.print("another process is mining (the daemon's pass); try again in a minute")
        return
    verb = "would propose" if report.dry_run else "proposed"
    out.print(
        f"{report.messages} message(s) and {report.memories} memory(ies) read, {report.statements} statement(s): "
        f"{report.proposed} {verb}, {report.supported} supported, {report.contradicted} contradicted"
        + (f", {report.repeated} already counted" if report.repeated else "")
    )
    for sample in report.samples:
        out.print(f"  {sample['action']:12} {escape(sample['claim'])}  ({sample['source']} {sample['ref']})")
