"""The daemon's curator (learning/curator.py): once THREADLOOM_LEARN_CURATE is on (off by default, like every
learning loop), a pass a day over each user's skills and lessons. Checked every CHECK_S; the day is counted
from the last pass any process recorded, so a restart does not run it again, and each user's pass is
single-flight across processes by its lease. With THREADLOOM_LEARN_CURATE_REVIEW also on, the daemon's user's
pass is followed by the spawned reviewer of its findings (learning/curator_review.py, an evolve job)."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Final

import anyio

from threadloom.errors import ThreadloomError
from threadloom.learning.curator import for_runtime
from threadloom.learning.curator_review import CURATE_REVIEW, gather
from threadloom.learning.evolve import EvolveJob
from threadloom.learning.library import Library
from threadloom.runtime import Runtime

log = logging.getLogger(__name__)
CHECK_S: Final = 600.0


async def keep_curating(runtime: Runtime, check_s: float = CHECK_S) -> None:
    s = runtime.settings
    if not s.learn_curate:
        log.info("learning curator is off (THREADLOOM_LEARN_CURATE=false)")
        return
    curator = for_runtime(runtime, Library(runtime))
    reviewer = None
    if s.learn_curate_review:
        loop = replace(CURATE_REVIEW, daily_tokens=s.learn_daily_tokens)
        reviewer = EvolveJob(runtime.store, s.home, runtime.spawner.config, s.user, loop, gather,
                             agent=s.learn_agent, scrubber=runtime.scrubber)  # fmt: skip
    while True:
        try:
            for owner, report in (await runtime.call(curator.run_due)).items():
                if not report.get("busy"):
                    log.info("learning curator for %s: %s, done %s", owner, report["counts"], report["done"])
            if reviewer is not None:
                reviewed = await runtime.call(reviewer.run)
                if reviewed.did not in ("not due", "idle"):
                    log.info("learning curator review: %s", reviewed.as_dict())
        except ThreadloomError as exc:
            log.warning("learning curator failed: %s", exc.message)
        except Exception:  # a defect in one pass must not take the daemon and every session down
            log.exception("learning curator failed")
        await anyio.sleep(check_s)
