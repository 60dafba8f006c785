"""Recording recalls off the read's path.

A recall counts as recalling what it returned (reactivation: count, last time, decay score), unless
`read_only`. Written inside the recall, that made every default recall a write: a transaction on the
reply's path, and a change to the memories table that moved the search generation, so the next search
re-read its kept candidates (about +4.5 ms a recall). So a serving process queues recalls in memory
and writes them in batches, one transaction a batch: every FLUSH_INTERVAL_S seconds (the runtime's
background job), or as soon as FLUSH_AFTER recalls wait (on a thread of the queue's own; the reply
never waits for it). Reactivation changes only columns no search depends on (migration
m018_reactivation_generation), so a flush leaves the kept candidates alone.

What this guarantees. At least once while the process lives: a batch whose write fails (busy, disk
full) goes back to the front of the queue and is written with the next one. A crash loses what was
queued since the last flush, at most FLUSH_INTERVAL_S seconds or FLUSH_AFTER recalls: those memories
look idle a little longer to the decay score and the journal misses their `memory.recalled` events;
no memory, edge or answer is lost. Until a batch is written, this process shows its own queued recalls
in what recall returns; another process sees them once written. The queue is bounded (MAX_PENDING
recalls, the oldest dropped first, logged) so a disk that stays full cannot grow it without end.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Final

from threadloom.clock import now_ms
from threadloom.errors import StoreFull, ThreadloomError
from threadloom.identity import Provenance
from threadloom.memory import scoring
from threadloom.memory.model import Memory
from threadloom.sessions import record_event
from threadloom.store import documents, memories
from threadloom.store.base import Reader, Store, Writer

FLUSH_INTERVAL_S: Final = 2.0
FLUSH_AFTER: Final = 64
MAX_PENDING: Final = 10_000
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Recall:
    prov: Provenance
    refs: tuple[str, ...]
    at: int


class Reactivations:
    """The recalls not yet written. `deferred=False` writes each one at once, inside `record` (a one-shot
    process such as the CLI, and tests that read the tables straight after a recall)."""

    def __init__(
        self,
        store: Store,
        config: scoring.ScoringConfig,
        *,
        deferred: bool = True,
        flush_after: int = FLUSH_AFTER,
        max_pending: int = MAX_PENDING,
    ) -> None:
        self._store = store
        self._config = config
        self.deferred = deferred
        self._flush_after = flush_after
        self._max_pending = max_pending
        self._queue: list[Recall] = []
        self._writing: list[Recall] = []  # taken from the queue, not yet committed: still shown
        self._lock = threading.Lock()
        self._flushing = threading.Lock()
        self._flusher: ThreadPoolExecutor | None = None
        self.failing: str | None = None  # why the last write failed, until one succeeds

    def record(self, refs: Sequence[str], prov: Provenance, at: int) -> bool:
        """Count a recall of `refs`; False when it could not be counted (only when not deferred: a full disk)."""
        recall = Recall(prov, tuple(refs), at)
        if not self.deferred:
            try:
                self._store.write(lambda w: self._write(w, [recall], now_ms()))
            except StoreFull:
                return False
            return True
        with self._lock:
            self._queue.append(recall)
            self._trim()
            due = len(self._queue) >= self._flush_after
        if due:
            self._flush_soon()
        return True

    def waiting(self) -> int:
        with self._lock:
            return len(self._queue) + len(self._writing)

    def shown(self, r: Reader, found: dict[str, Memory], now: int) -> dict[str, Memory]:
        """`found` as it stands once this process's waiting recalls are written (read your own recalls)."""
        with self._lock:
            waiting = [(recall.refs, recall.at) for recall in (*self._writing, *self._queue)]
        counts: dict[str, int] = {}
        last: dict[str, int] = {}
        for refs, at in waiting:
            for ref in refs:
                if ref in found:
                    counts[ref] = counts.get(ref, 0) + 1
                    last[ref] = max(last.get(ref, 0), at)
        if not counts:
            return found
        degrees = memories.degrees(r, list(counts))
        out = dict(found)
        for ref, count in counts.items():
            out[ref] = self._reactivated(found[ref], count, last[ref], degrees.get(ref, 0), now)
        return out

    def flush(self) -> int:
        """Write every waiting recall in one transaction; how many. On failure they wait for the next flush."""
        with self._flushing:
            with self._lock:
                batch, self._queue = self._queue, []
                self._writing = batch
            if not batch:
                return 0
            try:
                self._store.write(lambda w: self._write(w, batch, now_ms()))
            except ThreadloomError as exc:
                with self._lock:
                    self._queue = batch + self._queue
                    self._writing = []
                    self._trim()
                self.failing = exc.message
                raise
            with self._lock:
                self._writing = []
            self.failing = None
            return len(batch)

    def close(self) -> None:
        """Write what waits (a process ending cleanly loses nothing) and stop the flushing thread."""
        if self._flusher is not None:
            self._flusher.shutdown(wait=True)
            self._flusher = None
        try:
            self.flush()
        except ThreadloomError as exc:
            log.warning("recalls not recorded at exit (%d): %s", self.waiting(), exc.message)

    def _flush_soon(self) -> None:
        if self._flusher is None:
            with self._lock:
                if self._flusher is None:
                    self._flusher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="threadloom-reactivation")
        self._flusher.submit(self._flush_logged)

    def _flush_logged(self) -> None:
        try:
            self.flush()
        except ThreadloomError as exc:
            log.warning("recording recalls failed, kept for the next try: %s", exc.message)

    def _trim(self) -> None:
        extra = len(self._queue) - self._max_pending
        if extra > 0:
            del self._queue[:extra]
            log.warning("dropped %d unrecorded recall(s): the store has refused them for too long", extra)

    def _reactivated(self, memory: Memory, count: int, at: int, degree: int, now: int) -> Memory:
        recalls = memory.reactivation_count + count
        last = max(memory.last_reactivated_at, at)
        score = scoring.breakdown(self._config, last, degree, recalls, now).score
        return replace(
            memory,
            reactivation_count=recalls,
            last_reactivated_at=last,
            decay_score=score,
            status=scoring.lifecycle_status(self._config, score),
        )

    def _write(self, w: Writer, batch: Sequence[Recall], now: int) -> None:
        """Each recall counted on the memories its session may still see, every memory updated once."""
        counts: dict[str, int] = {}
        last: dict[str, int] = {}
        for recall in batch:
            for ref in memories.get_many(w, recall.refs, recall.prov.viewer()):
                counts[ref] = counts.get(ref, 0) + 1
                last[ref] = max(last.get(ref, 0), recall.at)
            detail = {"ids": list(recall.refs[:20]), "count": len(recall.refs)}
            record_event(w, recall.prov, "memory.recalled", detail, bookkeeping=True)
        found = memories.get_many(w, list(counts))
        degrees = memories.degrees(w, list(found))
        for ref, memory in found.items():
            updated = self._reactivated(memory, counts[ref], last[ref], degrees.get(ref, 0), now)
            memories.update(
                w,
                ref,
                last_reactivated_at=updated.last_reactivated_at,
                reactivation_count=updated.reactivation_count,
                decay_score=updated.decay_score,
                status=updated.status,
            )
            documents.set_status(w, "memory", ref, "superseded" if memory.superseded_by else "active")
