"""The daemon's curator (learning/curator.py): once THREADLOOM_LEARN_CURATE is on (off by default, like every
learning loop), a pass a day over each user's skills and lessons. Checked every CHECK_S; the day is counted
from the last pass any process recorded, so a restart does not run it again, and each user's pass is
single-flight across processes by its lease."""

from __future__ import annotations

import logging
from typing import Final

import anyio

from threadloom.errors import ThreadloomError
from threadloom.learning.curator import for_runtime
from threadloom.learning.library import Library
from threadloom.runtime import Runtime

log = logging.getLogger(__name__)
CHECK_S: Final = 600.0


async def keep_curating(runtime: Runtime, check_s: float = CHECK_S) -> None:
    if not runtime.settings.learn_curate:
        log.info("learning curator is off (THREADLOOM_LEARN_CURATE=false)")
        return
    curator = for_runtime(runtime, Library(runtime))
    while True:
        try:
            for owner, report in (await runtime.call(curator.run_due)).items():
                if not report.get("busy"):
                    log.info("learning curator for %s: %s, done %s", owner, report["counts"], report["done"])
        except ThreadloomError as exc:
            log.warning("learning curator failed: %s", exc.message)
        except Exception:  # a defect in one pass must not take the daemon and every session down
            log.exception("learning curator failed")
        await anyio.sleep(check_s)
