"""The daemon's consolidation pass (consolidate/service.py): every THREADLOOM_CONSOLIDATE_INTERVAL seconds (0:
never) over every user's memories, notes and quotes, each user's apart; the daemon user's repositories' stale
threads; the claims and tasks of gone sessions. A dry run that only reports unless THREADLOOM_CONSOLIDATE_APPLY
is set. Each pass is recorded in `job_runs` as `consolidate`, which `threadloom stats` and the `health` tool show
(when it last ran, how long, what it did or would do).

The schedule is kept by the store, as the self-test's is (probe_job.py): a daemon that retired and came back
runs it when the interval since the last recorded pass has passed, not sooner than START_DELAY_S after start.
"""

from __future__ import annotations

import logging
from typing import Final

import anyio

from threadloom.clock import now_ms
from threadloom.consolidate.service import JOB, Options, for_runtime, thread_repositories
from threadloom.daemon.probe_job import seconds_until_due
from threadloom.errors import ThreadloomError
from threadloom.identity import Provenance
from threadloom.runtime import Runtime
from threadloom.store import jobs

log = logging.getLogger(__name__)
START_DELAY_S: Final = 300.0
MODEL_WAIT_S: Final = 120.0


async def keep_consolidating(runtime: Runtime) -> None:
    s = runtime.settings
    if s.consolidate_interval <= 0:
        return
    await anyio.sleep(min(START_DELAY_S, s.consolidate_interval))
    consolidator = for_runtime(runtime)
    while True:
        try:
            last = await runtime.call(lambda: runtime.store.read(lambda r: jobs.last_run(r, JOB)))
        except ThreadloomError as exc:
            log.warning("consolidation schedule not readable: %s", exc.message)
            last = None
        await anyio.sleep(seconds_until_due(last["started_at"] if last else None, s.consolidate_interval, now_ms()))
        try:
            runtime.start_embedder()  # the cosine needs the model; without it, words alone decide
            await runtime.call(runtime.embedder.get, MODEL_WAIT_S)
            repos = await runtime.call(thread_repositories, runtime.store, s.user)
            threads = tuple(
                Provenance(None, "other", repo, origin="job:consolidate", user=s.user, author=s.author)
                for repo in repos
            )
            options = Options(apply=s.consolidate_apply, threads=threads, keep_sessions=tuple(runtime.live))
            report = await runtime.call(consolidator.run, options)
        except ThreadloomError as exc:
            log.warning("consolidation failed: %s", exc.message)
            await anyio.sleep(s.consolidate_interval)
            continue
        except Exception:  # a defect in one pass must not take the daemon and every session down
            log.exception("consolidation failed")
            await anyio.sleep(s.consolidate_interval)
            continue
        counts = report.get("merged") or report.get("would_merge") or {}
        log.info(
            "consolidation (%s): %s, %d near-misses, released %s",
            "applied" if s.consolidate_apply else "dry run",
            counts,
            report.get("near_miss_count", 0),
            report.get("released", {}),
        )
