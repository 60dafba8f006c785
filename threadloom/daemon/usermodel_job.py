"""The daemon's user-model observation: a miner pass every THREADLOOM_USERMODEL_INTERVAL seconds when
THREADLOOM_USERMODEL_MINE is on, then, when THREADLOOM_USERMODEL_VALIDATE is on too, a validator pass (one
child agent at most; see usermodel/validator.py). Both are off by default.

Single-flight across processes comes from the job lease each pass takes in the store (a `threadloom user
mine` beside the daemon finds it held and says so); the daemon only has to not overlap its own passes, which
one loop does. A failing pass is logged and the loop goes on: observation is never worth a daemon.
"""

from __future__ import annotations

import logging

import anyio

from threadloom.errors import ThreadloomError
from threadloom.runtime import Runtime
from threadloom.usermodel.miner import Miner, MineReport
from threadloom.usermodel.validator import Validator

log = logging.getLogger(__name__)
CATCH_UP_S = 1.0
FIRST_PASS_S = 30.0  # after start-up, so that a daemon started by a session's first call answers it first


class UserModelJob:
    def __init__(self, runtime: Runtime) -> None:
        s = runtime.settings
        self.runtime = runtime
        self.enabled = s.usermodel_mine
        self.interval = s.usermodel_interval
        self.miner = Miner(runtime.store, s.user, runtime.scrubber)
        self.validator = (
            Validator(runtime.store, s.home, runtime.spawner.config, s.user, agent=s.usermodel_agent,
                      egress=s.egress, scrubber=runtime.scrubber)
            if s.usermodel_validate
            else None
        )  # fmt: skip
        self.last: MineReport | None = None

    async def run(self) -> None:
        if not self.enabled:
            log.info("user-model observation is off (THREADLOOM_USERMODEL_MINE=false)")
            return
        if self.interval <= 0:
            log.info("user-model observation runs only by `threadloom user mine` (THREADLOOM_USERMODEL_INTERVAL=0)")
            return
        await anyio.sleep(min(FIRST_PASS_S, self.interval))
        while True:
            await self.one_pass()
            backlog = self.last is not None and self.last.left_over
            await anyio.sleep(CATCH_UP_S if backlog else self.interval)  # a backlog goes on at once

    async def one_pass(self) -> None:
        try:
            report = await self.runtime.call(self.miner.run)
        except ThreadloomError as exc:
            log.warning("user-model mining failed: %s", exc.message)
            return
        except Exception:  # a defect in one pass must not take the daemon and every session down
            log.exception("user-model mining failed")
            return
        self.last = report
        if report.busy:
            log.info("user-model mining: another process holds the lease; next pass in %.0f s", self.interval)
        elif report.statements:
            log.info(
                "user model: %d statement(s) in %d message(s) and %d memory(ies): %d proposed, %d supported, "
                "%d contradicted",
                report.statements, report.messages, report.memories, report.proposed, report.supported,
                report.contradicted,
            )  # fmt: skip
        if self.validator is None:
            return
        try:
            checked = await self.runtime.call(self.validator.run)
        except ThreadloomError as exc:
            log.warning("user-model validation failed: %s", exc.message)
            return
        except Exception:
            log.exception("user-model validation failed")
            return
        if checked.task is not None:
            log.info("user-model validator %s spawned for %d claim(s)", checked.task, len(checked.claims))
        elif checked.busy:
            log.info("user-model validator: %s", checked.busy)
