"""The daemon's retention and compaction: every THREADLOOM_RETENTION_INTERVAL seconds (0: never) each kind's
rows past its window deleted (hygiene/retention.py), then the store compacted in short steps while sessions
keep writing (hygiene/compaction.py). Both are recorded in `job_runs` (`store.retention`, `store.compaction`),
which `threadloom stats` and the `health` tool show as background jobs: last run, duration, what changed.

As with the self-test (probe_job.py), the schedule is kept by the store: the next pass is due `interval` after
the last recorded one, never sooner than START_DELAY_S after the daemon starts (its first sessions come first).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Final

import anyio

from threadloom.clock import now_ms
from threadloom.daemon.probe_job import seconds_until_due
from threadloom.errors import StoreBusy, ThreadloomError
from threadloom.hygiene.compaction import Compaction
from threadloom.hygiene.retention import JOB, Retention, Windows
from threadloom.runtime import Runtime
from threadloom.store import jobs

log = logging.getLogger(__name__)
START_DELAY_S: Final = 300.0


def task_logs(runtime: Runtime) -> Path:
    return runtime.settings.home / "tasks"  # where coordination/spawn.py writes each child's files


def one_pass(retention: Retention, compaction: Compaction) -> dict[str, Any]:
    """Retention, then compaction; the store's figures (the daemon reads for no one user)."""
    kept = retention.run(None)
    compacted = compaction.run(convert=None, optimize=kept["deleted"]["transcripts"] > 0)
    return {"deleted": kept["deleted"], "task_files": kept["task_files_deleted"]} | {
        "compaction": {k: compacted.get(k) for k in ("freed_bytes", "steps", "longest_hold_ms", "seconds")}
    }


def last_pass_at(runtime: Runtime) -> int | None:
    last = runtime.store.read(lambda r: jobs.last_run(r, JOB))
    return None if last is None else int(last["finished_at"])


async def keep_store_small(runtime: Runtime) -> None:
    interval = runtime.settings.retention_interval
    if interval <= 0:
        return
    retention = Retention(runtime.store, task_logs(runtime), Windows.of(runtime.settings))
    compaction = Compaction(runtime.store)
    await anyio.sleep(min(START_DELAY_S, interval))
    while True:
        try:
            last = await runtime.call(last_pass_at, runtime)
        except ThreadloomError as exc:
            log.warning("retention schedule not readable: %s", exc.message)
            last = None
        await anyio.sleep(seconds_until_due(last, interval, now_ms()))
        try:
            log.info("retention: %s", await runtime.call(one_pass, retention, compaction))
        except StoreBusy:  # another node's pass: this machine's task files are still this node's to clear
            log.info("retention: another process holds the pass; task files swept here: %s",
                     await runtime.call(retention.sweep_files))  # fmt: skip
            await anyio.sleep(interval)
        except ThreadloomError as exc:
            log.warning("retention pass failed: %s", exc.message)
            await anyio.sleep(interval)  # not recorded as done, so the store would say it is still due
        except Exception:  # a defect in one pass must not take the daemon and every session down
            log.exception("retention pass failed")
            await anyio.sleep(interval)
