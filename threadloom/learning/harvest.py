"""The extract pass: ingested user turns and thread notes past the pass's cursors, through the heuristic
extractor (`extract.py`), into the candidate queue with their source and owner.

Cursors follow ingest order (the row ids of `transcript_messages` and `thread_notes`), not the time a message
was written, so a late backfill of old conversations is harvested exactly once: writes are serialised, so the
rows below a committed id never change under the cursor. The candidates and both cursors are written in one
transaction, which also checks the cursors did not move (a second guard beside the `learning.extract` lease
that makes the pass single-flight across processes); a sentence is queued at most once (UNIQUE per source).

Left out: the conversations of agents threadloom spawned (their client sessions as their hooks reported them,
and notes written by a session with a parent), every role but the user's (assistant turns and tool results),
and the noise `extract.py` drops inside a turn.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from threadloom.clock import now_ms
from threadloom.learning import candidates as queue
from threadloom.learning.clusters import Clusterer
from threadloom.learning.entries import MIRROR_JOB
from threadloom.learning.extract import MAX_SCANNED_CHARS, harvest
from threadloom.scrub import SCRUB, Scrubber
from threadloom.store import jobs
from threadloom.store.base import Reader, Row, Store, Writer
from threadloom.store.transcripts import spawned_client_sessions

if TYPE_CHECKING:
    from threadloom.search.embedder import Embedder

JOB: Final = "learning.extract"
MESSAGES: Final = "learning.extract.messages"  # job_cursors: the last transcript_messages id read
NOTES: Final = "learning.extract.notes"  # the last thread_notes id read
BATCH: Final = 2_000  # rows of each source per pass; a backlog drains over the next passes
LEASE_MS: Final = 10 * 60_000
CLUSTER_PEERS: Final = 500  # pending candidates per owner a new one is compared with


class _Moved(Exception):
    """Another process advanced the cursors since this pass read them."""


@dataclass
class ExtractReport:
    ran: bool = False
    busy: bool = False
    messages: int = 0
    notes: int = 0
    queued: int = 0
    clustered: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    more: bool = False  # rows past this batch wait for the next pass
    cursors: dict[str, int] = field(default_factory=dict)
    measure: str = "words"
    seconds: float = 0.0

    def skip(self, why: str, n: int = 1) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + n

    def as_dict(self) -> dict[str, Any]:
        return {
            "ran": self.ran,
            "busy": self.busy,
            "read": {"messages": self.messages, "notes": self.notes},
            "queued": self.queued,
            "clustered": self.clustered,
            "skipped": dict(sorted(self.skipped.items())),
            "more": self.more,
            "cursors": self.cursors,
            "similarity": self.measure,
            "seconds": round(self.seconds, 3),
        }


@dataclass(frozen=True)
class _Batch:
    messages: list[Row]
    notes: list[Row]
    children: frozenset[str]
    start: dict[str, int]


class Extractor:
    def __init__(
        self, store: Store, scrubber: Scrubber = SCRUB, embedder: Callable[[], Embedder | None] = lambda: None
    ) -> None:
        self._store = store
        self._scrubber = scrubber
        self._embedder = embedder
        self._holder = jobs.holder_id()

    def run(self, batch: int = BATCH) -> ExtractReport:
        """One pass over at most `batch` messages and `batch` notes; `busy` when another process holds it."""
        began = time.perf_counter()
        report = ExtractReport()
        now = now_ms()
        if not self._store.write(lambda w: jobs.acquire(w, JOB, self._holder, now, LEASE_MS)):
            report.busy = True
            return report
        try:
            self._pass(report, batch, now)
        except _Moved:
            report.busy = True
        finally:
            self._store.write(lambda w: jobs.release(w, JOB, self._holder))
        report.seconds = time.perf_counter() - began
        return report

    def _pass(self, report: ExtractReport, batch: int, now: int) -> None:
        b = self._store.read(lambda r: _read(r, batch))
        found: list[queue.NewCandidate] = []
        for row in b.messages:
            if row["session_id"] in b.children:
                report.skip("spawned children")
                continue
            if row["role"] != "user":
                report.skip("not the user's turn")
                continue
            found.extend(self._found(row, "message", str(row["text"]), report))
        for row in b.notes:
            if row["child"]:
                report.skip("spawned children")
                continue
            if not row["owner"]:
                report.skip("no owner")
                continue
            found.extend(self._found(row, "note", str(row["text"]), report))
        report.messages, report.notes = len(b.messages), len(b.notes)
        end = {
            MESSAGES: int(b.messages[-1]["id"]) if b.messages else b.start[MESSAGES],
            NOTES: int(b.notes[-1]["id"]) if b.notes else b.start[NOTES],
        }
        report.more = len(b.messages) >= batch or len(b.notes) >= batch
        clusterer = Clusterer(self._embedder())
        report.measure = clusterer.measure
        owners = sorted({c.owner for c in found})
        peers = self._store.read(lambda r: queue.pending_for_clustering(r, owners, CLUSTER_PEERS)) if found else []
        vectors, model = clusterer.vectors([c.text for c in found])
        matches = clusterer.assign([c.owner for c in found], [c.text for c in found], vectors, peers)

        def tx(w: Writer) -> tuple[int, int]:
            if any(jobs.cursor(w, name) != b.start[name] for name in (MESSAGES, NOTES)):
                raise _Moved
            queued = clustered = 0
            resolved: list[int | None] = []
            for c, vec, m in zip(found, vectors, matches, strict=True):
                cluster = m.cluster if m.batch_index is None else resolved[m.batch_index]
                new_id = queue.insert(w, _with_vector(c, vec, model), cluster, m.similarity, now)
                resolved.append(cluster if cluster is not None else new_id)
                if new_id is not None:
                    queued += 1
                    clustered += cluster is not None
            for name, position in end.items():
                jobs.set_cursor(w, name, position)
            outcome = {"read": report.messages + report.notes, "queued": queued, "skipped": dict(report.skipped)}
            jobs.record_run(w, JOB, now, now_ms(), False, outcome)
            return queued, clustered

        report.queued, report.clustered = self._store.write(tx)
        report.skip("already queued", len(found) - report.queued)
        report.cursors = end
        report.ran = True
        report.skipped = {k: v for k, v in report.skipped.items() if v}

    def _found(self, row: Row, source: str, text: str, report: ExtractReport) -> list[queue.NewCandidate]:
        if len(text) > MAX_SCANNED_CHARS:  # a paste: only its start is read for rules (extract.harvest)
            report.skip(f"read only the first {MAX_SCANNED_CHARS:,} characters")
        out = []
        for f in harvest(text):
            out.append(
                queue.NewCandidate(
                    owner=str(row["owner"]),
                    kind=f.kind,
                    locale=f.locale,
                    text=self._scrubber.text(f.text),
                    source=source,
                    source_ref=str(row["id"]),
                    span=f.span,
                    session_id=row["session_id"],
                    project=row["project"],
                    at=row["at"],
                )
            )
        if not out and source == "note" and row["kind"] == "decision":  # a decision note is one by declaration
            text = text.strip()
            if text and len(text) <= 1_000:
                out.append(
                    queue.NewCandidate(
                        str(row["owner"]), "decision", "", self._scrubber.text(text), source, str(row["id"]), 0,
                        row["session_id"], row["project"], row["at"],
                    )
                )  # fmt: skip
            else:
                report.skip("oversized")
        return out


def _read(r: Reader, batch: int) -> _Batch:
    start = {MESSAGES: jobs.cursor(r, MESSAGES), NOTES: jobs.cursor(r, NOTES)}
    messages = r.rows(
        # Only a user's turn is read for rules: the others' text (tool output, long answers) is not fetched.
        "SELECT id, owner, session_id, role, CASE WHEN role = 'user' THEN text ELSE '' END AS text, project, at "
        "FROM transcript_messages WHERE id > :c ORDER BY id LIMIT :n",
        {"c": start[MESSAGES], "n": batch},
    )
    notes = r.rows(
        "SELECT n.id, n.owner, n.session_id, n.kind, n.text, n.project, n.created_at AS at, "
        "(s.parent_id IS NOT NULL) AS child FROM thread_notes n LEFT JOIN sessions s ON s.id = n.session_id "
        "WHERE n.id > :c ORDER BY n.id LIMIT :n",
        {"c": start[NOTES], "n": batch},
    )
    children = frozenset(spawned_client_sessions(r, 0)) if messages else frozenset()
    return _Batch(messages, notes, children, start)


def _with_vector(c: queue.NewCandidate, vector: bytes | None, model: str | None) -> queue.NewCandidate:
    if vector is None:
        return c
    return queue.NewCandidate(
        c.owner, c.kind, c.locale, c.text, c.source, c.source_ref, c.span, c.session_id, c.project, c.at,
        vector, model,
    )  # fmt: skip


def learning_status(store: Store, user: str, enabled: bool, interval: float) -> dict[str, Any]:
    """For `status`: whether extract is on, when it last ran and what it did (job_runs: every process's
    passes; what it left out and why, a paste past what is read included), `user`'s candidates by status, and
    what the last mirroring of `user`'s skills met (a refused folder, a hand-edited or broken copy)."""

    def read(r: Reader) -> dict[str, Any]:
        last = jobs.last_run(r, JOB)
        mirror = jobs.last_run(r, MIRROR_JOB + user)
        return {
            "extract": {
                "enabled": enabled,
                "interval_s": interval,
                "last_pass": None if last is None else {"finished_at": last["finished_at"], "did": last["outcome"]},
            },
            "candidates": queue.counts(r, user),
        } | ({"skills_mirror": mirror["outcome"] | {"at": mirror["finished_at"]}} if mirror else {})

    return store.read(read)
