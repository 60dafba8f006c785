"""`threadloom stats` (the health report once), `threadloom top` (the same, refreshed in place), and the
self-test run for `threadloom doctor --probe`."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Annotated

import anyio
import typer
from rich.live import Live
from rich.text import Text

from threadloom.cli.app import out, settings
from threadloom.config import Settings
from threadloom.health import reliability
from threadloom.health.render import render
from threadloom.health.stats import MAX_WINDOW_DAYS, HealthOptions, HealthService
from threadloom.runtime import settings_store

if TYPE_CHECKING:
    from threadloom.server.probe_driver import ProbeRun

WindowDays = Annotated[
    int, typer.Option("--days", min=1, max=MAX_WINDOW_DAYS, help="Days of tool calls for latency and errors.")
]


def stats(
    days: WindowDays = 7,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """How threadloom is doing: your counts and growth per kind (1/7/30 days), the store's size, the search
    index's freshness, tool-call latency (p50/p95) and errors per tool, background jobs, transcript ingest,
    and the self-test's reliability. Counts are yours (THREADLOOM_USER); sizes and jobs are the store's."""
    s = settings()
    with settings_store(s) as store:
        report = HealthService(store).report(s.user, HealthOptions(days, None, s.ingest))
    if as_json:
        out.print_json(json.dumps(report))
    else:
        out.print(render(report), markup=False, highlight=False, soft_wrap=True, end="")


def top(
    days: WindowDays = 7,
    interval: Annotated[float, typer.Option(min=0.2, max=3600, help="Seconds between refreshes.")] = 2.0,
) -> None:
    """`threadloom stats`, refreshed in place until Ctrl-C; printed once when the output is not a terminal."""
    s = settings()
    with settings_store(s) as store:
        service = HealthService(store)
        options = HealthOptions(days, None, s.ingest)
        if not out.is_terminal:
            out.print(render(service.report(s.user, options)), markup=False, highlight=False, soft_wrap=True, end="")
            return
        with Live(Text(render(service.report(s.user, options))), console=out, screen=True, auto_refresh=False) as live:
            try:
                while True:
                    time.sleep(interval)
                    live.update(Text(render(service.report(s.user, options))), refresh=True)
            except KeyboardInterrupt:
                pass


def run_and_record(s: Settings, trigger: str) -> ProbeRun:
    """One self-test run in a scratch store, its outcome recorded in the user's store."""
    from threadloom.server.probe_driver import run_probe  # the whole server: only when a probe runs

    run = anyio.run(run_probe, s)
    with settings_store(s) as store:
        reliability.record(store, run.run_id, run.outcomes, trigger)
    return run
