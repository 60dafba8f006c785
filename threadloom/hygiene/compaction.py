"""Compaction while servers keep serving: the full-text index merged and free pages given back in small steps,
each one short write transaction (store/compaction.py says how), with a pause after each so that a writer
waiting in another process gets the lock; then the write-ahead log truncated when no reader holds it.

A step's size adapts to keep each hold near TARGET_HOLD_MS. The report says how long the pass took, how many
steps, the longest and total time the write lock was held (what a writer beside it can wait at most, plus its
own busy-handler sleep), and the store file's figures before and after. A pass stops at its time budget; the
next one goes on where it stopped. Recorded in `job_runs` as `store.compaction`; single-flight with retention
by the `store.hygiene` lease. On PostgreSQL a pass is one VACUUM (ANALYZE) of every table (store/postgres_vacuum.py):
what it removed, what an older snapshot kept, the tables' bytes before and after.

`full` (`threadloom compact --full`) trades the short steps for a whole rewrite that gives the free space back
to the operating system: on SQLite one plain VACUUM of the file (writers wait for all of it), on PostgreSQL
VACUUM FULL of every table (each table locked ACCESS EXCLUSIVE while it is rewritten).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

from threadloom.clock import now_ms
from threadloom.errors import StoreBusy
from threadloom.hygiene.retention import LEASE, LEASE_MS, holder
from threadloom.store import jobs
from threadloom.store.base import Store, Writer
from threadloom.store.compaction import Compactor, Step, compactor_for

JOB: Final = "store.compaction"
TARGET_HOLD_MS: Final = 20.0
MIN_PAGES: Final = 16
MAX_PAGES: Final = 4_096
PAUSE_FACTOR: Final = 4.0  # pause after a step for this many times its hold: the lock is free >= 80% of the time
MIN_PAUSE_S: Final = 0.02
# Converting an older store rewrites it once under the write lock; by itself (the daemon) only when the file is
# small enough that the hold stays short (one VACUUM here rewrote about 40 MB a second).
AUTO_CONVERT_MAX_BYTES: Final = 64 << 20


@dataclass
class _Tally:
    steps: int = 0
    longest_ms: float = 0.0
    total_ms: float = 0.0
    pages: int = 0

    def add(self, step: Step) -> None:
        self.steps += 1
        self.longest_ms = max(self.longest_ms, step.held_ms)
        self.total_ms += step.held_ms
        self.pages += step.pages


class Compaction:
    def __init__(self, store: Store, compactor: Compactor | None = None) -> None:
        self._store = store
        self._compactor = compactor if compactor is not None else compactor_for(store)

    def run(
        self,
        *,
        convert: bool | None = None,
        budget_s: float = 300.0,
        take_lease: bool = True,
        optimize: bool = True,
        full: bool = False,
    ) -> dict[str, Any]:
        """One pass. `convert`: rewrite an older store once so it can be compacted in steps (None: only when it is
        small, as the daemon does; True: whatever its size, as `threadloom compact` does). `optimize`: merge the
        whole full-text index into one segment (what drops deleted rows' entries; it rewrites the index, so a
        daily pass asks for it only after deleting documents); otherwise only the merges FTS5 would make anyway.
        `full`: a whole rewrite instead (the module's docstring); no steps, no budget."""
        c = self._compactor
        if c is None and self._store.dialect != "postgresql":
            return {"ran": False, "reason": "this store's backend reclaims space by itself"}
        me = holder()
        if take_lease and not self._store.write(lambda w: jobs.acquire(w, LEASE, me, now_ms(), LEASE_MS)):
            raise StoreBusy("another process is running retention or compaction; try again when it is done")
        if c is None:
            return self._vacuum(me if take_lease else None, full)
        started, clock = now_ms(), time.monotonic()
        report: dict[str, Any] = {"ran": True, "before": c.sizes()}
        try:
            report |= self._whole(c) if full else self._pass(c, convert, optimize, clock + budget_s)
            report["freed_bytes"] = _on_disk(report["before"]) - _on_disk(report["after"])
        finally:
            outcome: dict[str, Any] = {k: report[k] for k in ("freed_bytes", "steps", "longest_hold_ms") if k in report}
            self._store.write(partial(_finish, started=started, holder=me if take_lease else None, outcome=outcome))
        return report | {"seconds": round(time.monotonic() - clock, 3)}

    def _vacuum(self, me: str | None, full: bool) -> dict[str, Any]:
        """PostgreSQL: VACUUM (ANALYZE) of every table, which readers and writers work beside (no step or budget:
        it takes no lock they wait for); autovacuum does the same on its own schedule."""
        from threadloom.store.postgres import PostgresStore
        from threadloom.store.postgres_vacuum import vacuum

        assert isinstance(self._store, PostgresStore)
        started, clock = now_ms(), time.monotonic()
        outcome: dict[str, Any] = {}
        try:
            done = vacuum(self._store, full=full)
            outcome = {"tables": len(done["vacuumed"]), "dead_rows_removed": done["dead_rows_removed"]}
        finally:
            self._store.write(partial(_finish, started=started, holder=me, outcome=outcome))
        return {
            "ran": True,
            "backend": "postgresql",
            "vacuum": {k: v for k, v in done.items() if k != "vacuumed"} | {"tables": len(done["vacuumed"])},
            "freed_bytes": int(done["bytes_before"]) - int(done["bytes_after"]),
            "seconds": round(time.monotonic() - clock, 3),
        }

    @staticmethod
    def _whole(c: Compactor) -> dict[str, Any]:
        """SQLite's plain VACUUM: the file rewritten whole in one write transaction, then the log emptied."""
        held = c.convert()
        checkpoint = c.checkpoint()
        hold_ms = round(held * 1000, 2)
        return {
            "full": True,
            "steps": 0,
            "longest_hold_ms": max(hold_ms, float(checkpoint["held_ms"])),
            "total_hold_ms": round(hold_ms + float(checkpoint["held_ms"]), 2),
            "checkpoint": checkpoint,
            "after": c.sizes(),
            "finished": True,
        }

    def _pass(self, c: Compactor, convert: bool | None, optimize: bool, deadline: float) -> dict[str, Any]:
        found: dict[str, Any] = {}
        if not c.ready():
            size = int(c.sizes()["file_bytes"])
            if convert is False or (convert is None and size > AUTO_CONVERT_MAX_BYTES):
                found["conversion"] = (
                    f"this store predates step-wise compaction; `threadloom compact` rewrites it once ({size:,} bytes: "
                    "writers wait for that rewrite), after which every pass runs in short steps"
                )
            else:
                found["converted_hold_s"] = round(c.convert(), 3)
        index, space = _Tally(), _Tally()
        start = {"first": optimize}  # a first step of -N starts an incremental optimize, the next ones continue it
        self._steps(lambda pages: c.index_step(pages, first=start.pop("first", False)), index, deadline)
        if c.ready():
            self._steps(c.space_step, space, deadline)
        checkpoint = c.checkpoint()
        after = c.sizes()
        found |= {
            "index_steps": index.steps,
            "space_steps": space.steps,
            "pages_freed": space.pages,
            "steps": index.steps + space.steps,
            "longest_hold_ms": round(max(index.longest_ms, space.longest_ms, float(checkpoint["held_ms"])), 2),
            "total_hold_ms": round(index.total_ms + space.total_ms + float(checkpoint["held_ms"]), 2),
            "checkpoint": checkpoint,
            "after": after,
            "finished": time.monotonic() < deadline,
        }
        return found

    @staticmethod
    def _steps(run: Callable[[int], Step], tally: _Tally, deadline: float) -> None:
        pages = MIN_PAGES * 4
        while time.monotonic() < deadline:
            step = run(pages)
            tally.add(step)
            if not step.worked:
                return
            if step.held_ms < TARGET_HOLD_MS / 2:
                pages = min(MAX_PAGES, pages * 2)
            elif step.held_ms > TARGET_HOLD_MS * 2:
                pages = max(MIN_PAGES, pages // 2)
            time.sleep(max(MIN_PAUSE_S, PAUSE_FACTOR * step.held_ms / 1000))


def _finish(w: Writer, started: int, holder: str | None, outcome: dict[str, Any]) -> None:
    jobs.record_run(w, JOB, started, now_ms(), False, outcome)
    if holder is not None:
        jobs.release(w, LEASE, holder)


def _on_disk(sizes: dict[str, Any]) -> int:
    return int(sizes["file_bytes"]) + int(sizes["wal_bytes"])
