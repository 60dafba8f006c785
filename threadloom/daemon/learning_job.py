"""The daemon's extract pass (learning/harvest.py): every THREADLOOM_LEARN_EXTRACT_INTERVAL seconds once
THREADLOOM_LEARN_EXTRACT is on (off by default, like every learning loop), at once again while a backlog
remains. Single-flight across processes by the `learning.extract` lease: a pass another process holds is
skipped, not waited for."""

from __future__ import annotations

import logging
from typing import Final

import anyio

from threadloom.errors import ThreadloomError
from threadloom.learning.harvest import Extractor
from threadloom.runtime import Runtime

log = logging.getLogger(__name__)
CATCH_UP_S: Final = 1.0  # between passes while a backlog remains


async def keep_extracting(runtime: Runtime) -> None:
    s = runtime.settings
    if not s.learn_extract or s.learn_extract_interval <= 0:
        log.info("learning extract is off (THREADLOOM_LEARN_EXTRACT=false)")
        return
    # The search engine's embedder once a session loaded it: paraphrases cluster by cosine, else by words.
    extractor = Extractor(runtime.store, runtime.scrubber, lambda: runtime.search.embedder)
    while True:
        more = False
        try:
            report = await runtime.call(extractor.run)
            more = report.more and not report.busy
            if report.queued:
                log.info("learning extract: %s", report.as_dict())
        except ThreadloomError as exc:
            log.warning("learning extract failed: %s", exc.message)
        except Exception:  # a defect in one pass must not take the daemon and every session down
            log.exception("learning extract failed")
        await anyio.sleep(CATCH_UP_S if more else s.learn_extract_interval)
