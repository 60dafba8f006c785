"""The maintenance pass: apply the recalls journaled since the last one (memory/reactivation.py), rescore
every memory, move it along the lifecycle, prune what nothing protects (into an archive restorable for
THREADLOOM_RETENTION_RESTORE_DAYS, 30 by default), purge the archive, and promote memories of auto-core
categories. Single-flight across processes through a lease in the store.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final

from threadloom.clock import now_ms
from threadloom.errors import NotFound
from threadloom.identity import Provenance
from threadloom.memory import scoring
from threadloom.memory.model import Memory, check_id, memory_document
from threadloom.memory.reactivation import apply_recalls
from threadloom.memory.service import rescore
from threadloom.search.model import Viewer
from threadloom.sessions import record_event
from threadloom.store import documents, jobs, memories, memory_upkeep
from threadloom.store.base import Store, Writer

JOB: Final = "memory.maintenance"
LEASE_MS: Final = 10 * 60_000  # a holder that died frees the lease after this long
PAGE: Final = 2_000
log = logging.getLogger(__name__)


@dataclass
class PassReport:
    dry_run: bool
    ran: bool = True
    scored: int = 0
    transitions: dict[str, int] = field(default_factory=dict)
    pruned: list[str] = field(default_factory=list)
    promoted: list[str] = field(default_factory=list)
    purged: int = 0
    skipped_reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "ran": self.ran,
            "scored": self.scored,
            "transitions": self.transitions,
            "pruned": self.pruned if self.dry_run else len(self.pruned),
            "pruned_ids": self.pruned[:50],
            "promoted_to_core": self.promoted,
            "archive_purged": self.purged,
            "skipped_reason": self.skipped_reason,
        }


class Maintenance:
    def __init__(self, store: Store, config: scoring.ScoringConfig) -> None:
        self._store = store
        self.config = config
        self.holder = jobs.holder_id()

    def run(self, dry_run: bool = False, now: int | None = None, viewer: Viewer | None = None) -> PassReport:
        """One pass over every user's memories (the serving process's own job, with no viewer), or over
        `viewer`'s own alone: another user's memories wait for the store's pass, which its operator may have
        turned off (`THREADLOOM_MAINTENANCE_INTERVAL=0`). Such a pass is recorded as `memory.maintenance:<user>`,
        so it never puts the store's pass off."""
        now = now if now is not None else now_ms()
        job = JOB if viewer is None else f"{JOB}:{viewer.user}"
        report = PassReport(dry_run=dry_run)
        if not dry_run and not self._store.write(lambda w: jobs.acquire(w, JOB, self.holder, now_ms(), LEASE_MS)):
            report.ran = False
            report.skipped_reason = "another process is running the maintenance pass"
            return report
        started = now_ms()
        try:
            if not dry_run:
                self.apply_recalls()  # what was recalled is not idle: before any score or prune is decided
            prefs = self._store.read(memory_upkeep.auto_categories)
            after = ""
            while True:
                page = self._store.read(partial(memory_upkeep.scoring_inputs, after=after, limit=PAGE, viewer=viewer))
                if not page:
                    break
                after = str(page[-1][0])
                plan = self._plan(page, now, prefs, report)
                if not dry_run and plan:
                    self._store.write(partial(self._apply, plan=plan, now=now))
            if not dry_run:
                report.purged = self._store.write(
                    lambda w: memory_upkeep.purge_archive(
                        w, int(now - self.config.archive_days * scoring.DAY_MS), viewer.user if viewer else None
                    )
                )
        finally:
            if not dry_run:
                outcome = report.as_dict()

                def finish(w: Writer) -> None:
                    jobs.record_run(w, job, started, now_ms(), dry_run, outcome)
                    detail = {k: outcome[k] for k in ("scored", "pruned", "transitions")} if viewer is None else {}
                    record_event(w, _job_provenance(), JOB, detail)
                    jobs.release(w, JOB, self.holder)

                self._store.write(finish)
        return report

    def apply_recalls(self) -> int:
        """Reinforce every memory recalled since the cursor, a page of events a transaction; how many events."""
        applied = 0
        while True:
            done = self._store.write(lambda w: apply_recalls(w, self.config, now_ms(), PAGE))
            applied += done
            if done < PAGE:
                return applied

    def _plan(
        self, page: list[tuple[Any, ...]], now: int, auto: dict[tuple[str, str], set[str]], report: PassReport
    ) -> list[tuple[str, str, float, str | None]]:
        """(id, action, score, new status) per memory that changes: action is update, prune or promote.
        The report hears only of memories its reader may see (`seen`)."""
        plan: list[tuple[str, str, float, str | None]] = []
        for row in page:
            memory_id, last_active, recalls, degree, pinned, core, visibility, status, old_score, category = row[:10]
            owner, project, seen = row[10:]
            report.scored += bool(seen)
            b = scoring.breakdown(self.config, int(last_active), int(degree), int(recalls), now)
            new_status = scoring.lifecycle_status(self.config, b.score)
            kept = scoring.protection(self.config, b, pinned=bool(pinned), core=bool(core), visibility=visibility)
            if kept.prunable:
                if seen:
                    report.pruned.append(memory_id)
                    report.transitions[f"{status}->pruned"] = report.transitions.get(f"{status}->pruned", 0) + 1
                plan.append((memory_id, "prune", b.score, "pruned"))
                continue
            promotable = category in auto.get((owner, project), ())
            if promotable and not core and b.score >= self.config.core_promotion_score:
                if seen:
                    report.promoted.append(memory_id)
                plan.append((memory_id, "promote", b.score, new_status))
                continue
            if new_status != status and seen:
                report.transitions[f"{status}->{new_status}"] = report.transitions.get(f"{status}->{new_status}", 0) + 1
            if new_status != status or abs(b.score - float(old_score)) > 1e-9:
                plan.append((memory_id, "update", b.score, new_status))
        return plan

    def _apply(self, w: Writer, plan: list[tuple[str, str, float, str | None]], now: int) -> None:
        apply_recalls(w, self.config, now_ms(), PAGE)  # recalls journaled since the plan was read
        for memory_id, action, score, status in plan:
            if action == "prune":
                self._prune(w, memory_id, now)
                continue
            changes: dict[str, Any] = {"decay_score": score, "status": status, "scored_at": now}
            if action == "promote":
                changes |= {"core_key": f"auto.{memory_id}", "core_priority": 10, "pinned": 1}
            memories.update(w, memory_id, **changes)
            superseded = w.scalar("SELECT superseded_by IS NOT NULL FROM memories WHERE id = :id", {"id": memory_id})
            documents.set_status(w, "memory", memory_id, "superseded" if superseded else str(status))

    def restore(self, memory_id: str, prov: Provenance) -> Memory:
        """Bring back a memory a pass pruned, within the restore window (`archive_days`)."""
        check_id(memory_id)
        now = now_ms()

        owner = prov.viewer().user

        def tx(w: Writer) -> Memory:
            found = memory_upkeep.archived(w, memory_id, owner)
            if found is None:
                raise NotFound(
                    f"{memory_id} is not in the prune archive (restorable for {self.config.archive_days:g} days)"
                )
            payload, _ = found
            memory_upkeep.restore_row(w, payload["memory"] | {"status": "active", "last_reactivated_at": now})
            memory_upkeep.unarchive(w, memory_id)
            memory = rescore(w, self.config, memory_id, now)
            documents.upsert(w, memory_document(memory), now)
            record_event(w, prov, "memory.restored", {"id": memory_id})
            return memory

        return self._store.write(tx)

    def _prune(self, w: Writer, memory_id: str, now: int) -> None:
        row = memory_upkeep.raw_row(w, memory_id)
        if row is None:
            return
        if memories.degree(w, memory_id):  # linked since the plan was made: no longer prunable
            return
        if now - int(row["last_reactivated_at"]) < self.config.min_idle_days * scoring.DAY_MS:
            return  # recalled since the plan was made
        memory_upkeep.archive(w, memory_id, {"memory": row}, now)
        documents.remove(w, "memory", memory_id)
        memories.delete(w, memory_id)


def _job_provenance() -> Provenance:
    return Provenance(session_id=None, vendor="other", project=None, origin="job:maintenance")
