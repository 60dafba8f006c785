"""The daemon's scheduled self-test: every THREADLOOM_PROBE_INTERVAL seconds (0: never) a probe run in a
scratch store (server/probe_driver.py), its outcome per category recorded in the user's store, so that
`threadloom stats` and the `health` tool show reliability over time.

The schedule is kept by the store, not the process: a daemon that retires after 15 idle minutes and comes
back would otherwise never reach a 6-hour mark. The next run is due `interval` after the last recorded one,
never sooner than START_DELAY_S (or the interval, when shorter) after the daemon starts: its first
sessions come first.
"""

from __future__ import annotations

import logging
from typing import Final

import anyio

from threadloom.clock import now_ms
from threadloom.errors import ThreadloomError
from threadloom.health import reliability
from threadloom.runtime import Runtime
from threadloom.server.probe_driver import run_probe, summary_line

log = logging.getLogger(__name__)
START_DELAY_S: Final = 120.0


def seconds_until_due(last_at: int | None, interval: float, now: int) -> float:
    """How long to wait before the next run: none recorded yet, or the interval since the last has passed,
    is due now."""
    if last_at is None:
        return 0.0
    return max(0.0, (last_at + interval * 1000 - now) / 1000)


async def keep_probing(runtime: Runtime) -> None:
    interval = runtime.settings.probe_interval
    if interval <= 0:
        return
    await anyio.sleep(min(START_DELAY_S, interval))
    while True:
        try:
            last = await runtime.call(reliability.last_run_at, runtime.store)
        except ThreadloomError as exc:
            log.warning("self-test schedule not readable: %s", exc.message)
            last = None
        await anyio.sleep(seconds_until_due(last, interval, now_ms()))
        run = await run_probe(runtime.settings)
        try:
            await runtime.call(reliability.record, runtime.store, run.run_id, run.outcomes, "daemon")
        except ThreadloomError as exc:
            log.warning("self-test result not recorded: %s", exc.message)
            await anyio.sleep(interval)  # not recorded, so the store would say it is still due
        (log.info if run.ok else log.warning)("%s (%.1f s)", summary_line(run), run.seconds)
