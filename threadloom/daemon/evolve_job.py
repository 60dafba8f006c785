"""The daemon's reviewer loops (learning/reviewer.py, each an evolve job: learning/evolve.py): the candidate
reviewer (THREADLOOM_LEARN_REVIEW), the auto-review of finished threads (THREADLOOM_LEARN_AUTO_REVIEW) and the
shadow review of recent dialog (THREADLOOM_LEARN_SHADOW), all off by default. Each is tried every TICK_S;
a pass that is not due, or that another process holds, returns at once. A failing pass is logged and the
loop goes on: learning is never worth a daemon."""

from __future__ import annotations

import logging
from typing import Final

import anyio

from threadloom.errors import ThreadloomError
from threadloom.learning.evolve import EvolveJob
from threadloom.learning.reviewer import configured
from threadloom.runtime import Runtime

log = logging.getLogger(__name__)
TICK_S: Final = 30.0
FIRST_PASS_S: Final = 30.0  # after start-up, so that a daemon started by a session's first call answers it first


async def keep_reviewing(runtime: Runtime) -> None:
    s = runtime.settings
    jobs = [
        EvolveJob(runtime.store, s.home, runtime.spawner.config, s.user, loop, gather, agent=s.learn_agent,
                  scrubber=runtime.scrubber)
        for loop, gather, enabled in configured(s)
        if enabled
    ]  # fmt: skip
    if not jobs:
        log.info("learning reviewers are off (THREADLOOM_LEARN_REVIEW, _AUTO_REVIEW, _SHADOW)")
        return
    await anyio.sleep(FIRST_PASS_S)
    while True:
        for job in jobs:
            try:
                report = await runtime.call(job.run)
            except ThreadloomError as exc:
                log.warning("%s failed: %s", job.loop.name, exc.message)
                continue
            except Exception:  # a defect in one pass must not take the daemon and every session down
                log.exception("%s failed", job.loop.name)
                continue
            if report.did not in ("not due", "idle"):
                log.info("%s: %s", job.loop.name, report.as_dict())
        await anyio.sleep(TICK_S)
