"""The daemon's retention job over a real runtime: it runs a pass (retention, then compaction) once due, both
recorded for `threadloom stats`; an interval of 0 turns it off."""

from __future__ import annotations

from pathlib import Path

import anyio

from tests import retention_world as rw
from threadloom.clock import now_ms
from threadloom.config import Settings
from threadloom.daemon import retention_job
from threadloom.health.journal import jobs
from threadloom.runtime import Runtime, open_runtime
from threadloom.store.base import Writer


def _runtime(tmp_path: Path, interval: float) -> Runtime:
    settings = Settings(home=tmp_path / "h", embedder="none", ingest=False, user="ana", retention_interval=interval)
    return open_runtime(settings, "cli")


def test_the_job_runs_a_pass_once_due_and_records_both_halves(tmp_path: Path) -> None:
    runtime = _runtime(tmp_path, 1.0)
    now = now_ms()

    def old(w: Writer) -> None:
        rw.session(w, "s-ana", "ana", now)
        rw.signal(w, "s-ana", "s-ben", now - 40 * rw.DAY, "an old whisper")
        rw.signal(w, "s-ana", "s-ben", now - 2 * rw.DAY, "a recent whisper")

    try:
        runtime.store.write(old)

        async def until_recorded() -> None:
            with anyio.fail_after(60):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(retention_job.keep_store_small, runtime)
                    while retention_job.last_pass_at(runtime) is None:
                        await anyio.sleep(0.05)
                    while "store.compaction" not in runtime.store.read(lambda r: jobs(r, "ana", now_ms())):
                        await anyio.sleep(0.05)
                    tg.cancel_scope.cancel()

        anyio.run(until_recorded)
        seen = runtime.store.read(lambda r: jobs(r, "ana", now_ms()))
        assert seen["store.retention"]["last"]["changed"]["deleted"] == 1
        assert "freed_bytes" in seen["store.compaction"]["last"]["changed"]
        assert runtime.store.read(lambda r: r.scalar("SELECT COUNT(*) FROM signals")) == 1
    finally:
        runtime.close()


def test_an_interval_of_zero_turns_the_job_off(tmp_path: Path) -> None:
    runtime = _runtime(tmp_path, 0)
    try:

        async def bounded() -> None:
            with anyio.fail_after(5):
                await retention_job.keep_store_small(runtime)  # returns at once instead of looping

        anyio.run(bounded)
        assert retention_job.last_pass_at(runtime) is None
    finally:
        runtime.close()
