"""The daemon's transcript ingest: a cheap poll every THREADLOOM_INGEST_INTERVAL seconds (an unchanged
file costs one `stat`), and an immediate pass for one client when its session-end hook arrives.

Why a poll and not file watching: the clients keep transcripts in deep, growing trees (a folder per
project or per day), which inotify would have to watch folder by folder, and a poll over a few thousand
files costs milliseconds (bench/ingest.py measures it). Each pass reads at most PASS_BYTES, and at most
FILE_BYTES from one file, so a 200 MB backfill never stalls the others or the daemon: the rest waits for
the next pass, which comes at once while one is pending.
"""

from __future__ import annotations

import logging
from typing import Final

import anyio

from threadloom.errors import ThreadloomError
from threadloom.ingest import IngestConfig, Ingester, PassReport
from threadloom.runtime import Runtime

log = logging.getLogger(__name__)
FILE_BYTES: Final = 16 << 20
PASS_BYTES: Final = 64 << 20
CATCH_UP_S: Final = 1.0  # between passes while files are left half read
VENDOR_SOURCES: Final = {"claude": "claude-code", "codex": "codex", "gemini": "gemini", "copilot": "copilot"}


class IngestJob:
    def __init__(self, runtime: Runtime) -> None:
        s = runtime.settings
        self.runtime = runtime
        self.ingester = Ingester(
            runtime.store, IngestConfig.of(s.user, s.ingest_exclude, s.ingest_children, s.scrub_secrets)
        )
        self.enabled = s.ingest
        self.interval = s.ingest_interval
        self._wake = anyio.Event()
        self._asked: set[str] = set()
        self.last: PassReport | None = None

    def request(self, vendor: str) -> None:
        """An immediate pass over the client of `vendor` (called from the event loop)."""
        source = VENDOR_SOURCES.get(vendor)
        if source is None or not self.enabled:
            return
        self._asked.add(source)
        self._wake.set()

    def stop(self) -> None:
        """The daemon retires: a pass under way ends after its current batch instead of its whole budget."""
        self.ingester.stop()

    async def run(self) -> None:
        if not self.enabled:
            log.info("transcript ingest is off (THREADLOOM_INGEST=false)")
            return
        only: list[str] | None = None  # the first pass looks at every source
        while True:
            if await self._pass(only):  # files left half read: go on soon, over every source
                await anyio.sleep(CATCH_UP_S)
                only = None
                continue
            with anyio.move_on_after(self.interval if self.interval > 0 else None):
                await self._wake.wait()
            self._wake = anyio.Event()
            only = sorted(self._asked) if self._asked else None  # a hook's client, else the interval's poll
            self._asked.clear()

    async def _pass(self, only: list[str] | None) -> bool:
        """One pass; whether files were left half read."""
        try:
            report = await self.runtime.call(self.ingester.run, only, None, FILE_BYTES, PASS_BYTES)
        except ThreadloomError as exc:
            log.warning("transcript ingest failed: %s", exc.message)
            return False
        except Exception:  # a defect in one pass must not take the daemon and every session down
            log.exception("transcript ingest failed")
            return False
        self.last = report
        if report.added or report.problems or report.notes:
            log.info(
                "transcripts: %d new message(s) in %.2f s; %s",
                report.added,
                report.seconds,
                {k: v for k, v in report.as_dict()["sources"].items() if any(v.values())},
            )
        for problem in report.problems:
            log.info("transcript %s: %s %s", problem["path"], problem["reason"], problem["detail"])
        for note in report.notes:  # another ingester (the CLI) holding the lease is expected, not a warning
            log.log(logging.INFO if report.busy else logging.WARNING, "transcript ingest: %s", note)
        for alarm in report.alarms():
            log.warning("transcript alarm: %s", alarm)
        return not report.busy and any(s.pending_files for s in report.sources.values())


_JOBS: dict[int, IngestJob] = {}  # the daemon's job, by id(runtime): what the hook op asks


def start(runtime: Runtime) -> IngestJob:
    job = IngestJob(runtime)
    _JOBS[id(runtime)] = job
    return job


def request_ingest(runtime: Runtime, vendor: str) -> None:
    """The session-end hook's trigger: a pass over that client's transcripts now (no-op outside the daemon)."""
    job = _JOBS.get(id(runtime))
    if job is not None:
        job.request(vendor)
