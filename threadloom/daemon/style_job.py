"""The daemon's style learning: a pass over new user messages of ingested transcripts (style/learn.py) at the
transcript poll's pace (THREADLOOM_INGEST_INTERVAL; every INTERVAL_S when that poll is off), single-flight
across processes by the `style.observe` lease. A pass with nothing new is one read. A user who paused
learning (`style_manage action=pause`) is skipped: that is the off switch, per user."""

from __future__ import annotations

import logging
from typing import Final

import anyio

from threadloom.errors import ThreadloomError
from threadloom.runtime import Runtime
from threadloom.store import jobs
from threadloom.style import Learner

log = logging.getLogger(__name__)
INTERVAL_S: Final = 60.0
CATCH_UP_S: Final = 1.0  # between passes while a backlog remains


async def keep_learning(runtime: Runtime) -> None:
    learner = Learner(runtime.store, runtime.scrubber)
    interval = runtime.settings.ingest_interval if runtime.settings.ingest_interval > 0 else INTERVAL_S
    holder = jobs.holder_id()
    while True:
        backlog = False
        try:
            report = await runtime.call(learner.run, holder)
            backlog = report.messages > 0 and not report.busy and report.messages % 500 == 0
            if report.observations or report.preferences or report.swept:
                log.info("style: %s", report.as_dict())
        except ThreadloomError as exc:
            log.warning("style learning failed: %s", exc.message)
        except Exception:  # a defect in one pass must not take the daemon and every session down
            log.exception("style learning failed")
        await anyio.sleep(CATCH_UP_S if backlog else interval)
