"""Recording recalls off the read's path, and reinforcing what was recalled later.

A recall is a read: it changes no memory. Unless `read_only`, it appends to the journal (the events table,
which every tool call writes anyway) a `memory.recalled` event naming what it returned. The reinforcement
(reactivation count, last time, decay score) is the memory lifecycle's: `apply_recalls`, run at the start
of every maintenance pass (memory/maintenance.py; the `memory_maintain` tool) and by the serving process
every REINFORCE_INTERVAL_S, applies the recall events since a cursor kept in the store (job_cursors), the
cursor advancing in the same transaction, so a recall counts exactly once per memory however often it runs.
It counts a recall only on the memories its user may still see. Reinforcement touches only columns no search
depends on (migration m018_reactivation_generation), so it leaves the kept candidates alone.

The events themselves are written in batches, one transaction a batch, off the reply's path: every
FLUSH_INTERVAL_S seconds (the runtime's background job), or as soon as FLUSH_AFTER recalls wait (on a thread
of the queue's own; the reply never waits for it). `deferred=False` writes each at once (a one-shot process).

What this guarantees. At least once while the process lives: a batch whose write fails (busy, disk full)
goes back to the front of the queue and is written with the next one. A crash loses what was queued since
the last flush, at most FLUSH_INTERVAL_S seconds or FLUSH_AFTER recalls: those memories look idle a little
longer to the decay score and the journal misses their `memory.recalled` events; no memory, edge or answer
is lost. A journaled recall is never lost: the cursor moves only with the rows it counted. The queue is
bounded (MAX_PENDING recalls, the oldest dropped first, logged) so a disk that stays full cannot grow it
without end.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final

from threadloom.errors import StoreFull, ThreadloomError
from threadloom.identity import Provenance
from threadloom.memory import scoring
from threadloom.search.model import Viewer
from threadloom.sessions import record_event
from threadloom.store import documents, jobs, memories
from threadloom.store.base import Store, Writer

FLUSH_INTERVAL_S: Final = 2.0
FLUSH_AFTER: Final = 64
MAX_PENDING: Final = 10_000
REINFORCE_INTERVAL_S: Final = 60.0
CURSOR: Final = "memory.recalls"
EVENT: Final = "memory.recalled"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Recall:
    prov: Provenance
    refs: tuple[str, ...]


class Reactivations:
    """The recalls not yet journaled. `deferred=False` journals each one at once, inside `record` (a one-shot
    process such as the CLI, and tests that read the journal straight after a recall)."""

    def __init__(
        self,
        store: Store,
        *,
        deferred: bool = True,
        flush_after: int = FLUSH_AFTER,
        max_pending: int = MAX_PENDING,
    ) -> None:
        self._store = store
        self.deferred = deferred
        self._flush_after = flush_after
        self._max_pending = max_pending
        self._queue: list[Recall] = []
        self._lock = threading.Lock()
        self._flushing = threading.Lock()
        self._flusher: ThreadPoolExecutor | None = None
        self.failing: str | None = None  # why the last write failed, until one succeeds

    def record(self, refs: Sequence[str], prov: Provenance) -> bool:
        """Journal a recall of `refs`; False when it could not be (only when not deferred: a full disk)."""
        recall = Recall(prov, tuple(refs))
        if not self.deferred:
            try:
                self._store.write(lambda w: _journal(w, [recall]))
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
            return len(self._queue)

    def flush(self) -> int:
        """Journal every waiting recall in one transaction; how many. On failure they wait for the next flush."""
        with self._flushing:
            with self._lock:
                batch, self._queue = self._queue, []
            if not batch:
                return 0
            try:
                self._store.write(lambda w: _journal(w, batch))
            except ThreadloomError as exc:
                with self._lock:
                    self._queue = batch + self._queue
                    self._trim()
                self.failing = exc.message
                raise
            self.failing = None
            return len(batch)

    def close(self) -> None:
        """Journal what waits (a process ending cleanly loses nothing) and stop the flushing thread."""
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


def _journal(w: Writer, batch: Sequence[Recall]) -> None:
    """One `memory.recalled` event a recall: every ref it returned, and whose eyes it read with."""
    for recall in batch:
        viewer = recall.prov.viewer()
        detail = {"refs": list(recall.refs), "user": viewer.user, "org": viewer.org}
        record_event(w, recall.prov, EVENT, detail, bookkeeping=True)


def apply_recalls(w: Writer, config: scoring.ScoringConfig, now: int, limit: int = 2_000) -> int:
    """Reinforce the memories recalled in up to `limit` recall events after the cursor, and move the cursor
    past them in this transaction; how many events. Each event counts once on each memory its user may
    still see (a memory since deleted, or hidden from them, is not counted)."""
    after = jobs.cursor(w, CURSOR)
    rows = w.rows(
        "SELECT id, at, project, detail FROM events WHERE id > :after AND kind = :kind ORDER BY id LIMIT :n",
        {"after": after, "kind": EVENT, "n": limit},
    )
    counts: dict[str, int] = {}
    last: dict[str, int] = {}
    for row in rows:
        detail: dict[str, Any] = json.loads(row["detail"])
        refs, user = detail.get("refs"), detail.get("user")
        if not isinstance(refs, list) or not isinstance(user, str) or not user:
            continue  # not a recall this contract wrote (an event older than the cursor's table)
        viewer = Viewer(user, row["project"], str(detail.get("org") or user))
        for ref in memories.get_many(w, [str(ref) for ref in refs], viewer):
            counts[ref] = counts.get(ref, 0) + 1
            last[ref] = max(last.get(ref, 0), int(row["at"]))
    # Inside BEGIN IMMEDIATE no event can be added meanwhile: a short page read the journal to its end. With
    # nothing recalled, the cursor moves only past many other events (no write a tick, a bounded scan).
    end = int(rows[-1]["id"]) if len(rows) == limit else int(w.scalar("SELECT coalesce(max(id), 0) FROM events"))
    if end > after and (rows or end - after >= 10 * limit):
        jobs.set_cursor(w, CURSOR, end)
    found = memories.get_many(w, list(counts))
    degrees = memories.degrees(w, list(found))
    for ref, memory in found.items():
        recalls = memory.reactivation_count + counts[ref]
        at = max(memory.last_reactivated_at, last[ref])
        score = scoring.breakdown(config, at, degrees.get(ref, 0), recalls, now).score
        status = scoring.lifecycle_status(config, score)
        memories.update(w, ref, last_reactivated_at=at, reactivation_count=recalls, decay_score=score, status=status)
        documents.set_status(w, "memory", ref, "superseded" if memory.superseded_by else "active")
    return len(rows)
