"""`Consolidator.run`: one consolidation pass. Near-duplicate memories, notes and quotes merged (plan.py,
merge.py), the stale threads of a repository idled (the janitor's inactivity rule, threads/hygiene.py), and
what gone holders left released by the liveness rules already in force (coordination/presence.py: a session
unheard of for LIVENESS_MS is ended; its thread claims go; a spawned task whose processes died is recorded
as ended). A dry run by default: the report says what would merge into what, with the similarity and why.

An applied pass takes the `consolidate` lease (single-flight across processes); every pass, dry or not, is
recorded in `job_runs` (`consolidate` for the daemon's pass over every user, `consolidate:<user>` for one
user's), which is what `threadloom stats` and the `health` tool report as its last run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Final

from threadloom.clock import now_ms
from threadloom.consolidate import merge
from threadloom.consolidate.plan import Item, Plan, plan
from threadloom.coordination.presence import PresenceService, present_since
from threadloom.coordination.spawn import SpawnService
from threadloom.errors import InvalidInput
from threadloom.memory import scoring
from threadloom.store import consolidation, jobs
from threadloom.store.base import Reader, Store, Writer
from threadloom.threads.hygiene import ThreadHygiene

if TYPE_CHECKING:
    from threadloom.identity import Provenance
    from threadloom.runtime import Runtime
    from threadloom.search.embedder import Embedder

JOB: Final = "consolidate"
LEASE_MS: Final = 30 * 60_000  # a holder that died frees it after this long
KINDS: Final = ("memory", "note", "quote")


@dataclass(frozen=True)
class Options:
    apply: bool = False
    owner: str | None = None  # one user's; None: every user's, each apart (the daemon's pass)
    kinds: tuple[str, ...] = KINDS
    threads: tuple[Provenance, ...] = ()  # idle the stale threads of these sessions' repositories
    release: bool = True
    keep_sessions: tuple[str, ...] = ()  # sessions the caller serves: never expired
    now: int | None = None  # when the threads' inactivity is measured to (tests)


class Consolidator:
    def __init__(
        self,
        store: Store,
        embedder: Callable[[], Embedder | None],
        config: scoring.ScoringConfig,
        hygiene: ThreadHygiene,
        presence: PresenceService,
        spawner: SpawnService,
    ) -> None:
        self._store = store
        self._embedder = embedder
        self._config = config
        self._hygiene = hygiene
        self._presence = presence
        self._spawner = spawner
        self.holder = jobs.holder_id()  # a holder that died (kill -9) frees the lease at once

    def run(self, options: Options) -> dict[str, Any]:
        unknown = [k for k in options.kinds if k not in KINDS]
        if unknown or not options.kinds:
            raise InvalidInput(f"kinds are one or more of {', '.join(KINDS)}")
        started, clock = now_ms(), time.perf_counter()
        name = JOB if options.owner is None else f"{JOB}:{options.owner}"
        if options.apply and not self._store.write(lambda w: jobs.acquire(w, JOB, self.holder, now_ms(), LEASE_MS)):
            return {"dry_run": False, "ran": False, "skipped_reason": "another process is consolidating"}
        outcome: dict[str, Any] = {}
        try:
            found = self.plan(options.owner, options.kinds)
            planned_s = time.perf_counter() - clock
            merges = [m.as_dict() for m in found.merges]
            skipped: list[dict[str, Any]] = []
            if options.apply:
                merges, skipped = self._apply(found)
            threads = self._threads(options)
            released = self._release(options)
            counts = {k: sum(1 for m in merges if m["kind"] == k) for k in options.kinds}
            report = {
                "dry_run": not options.apply,
                "ran": True,
                "merged" if options.apply else "would_merge": counts,
                "merges": merges,
                "skipped": skipped,
                "kept": found.kept,
                "near_misses": found.near_misses,
                "near_miss_count": found.near_miss_count,
                "threads": threads,
                "released": released,
                "stats": {
                    "items": found.items,
                    "blocks": found.blocks,
                    "candidates": found.candidates,
                    "judged": found.judged,
                    "embedded": found.embedded,
                    "similarity": "words and the model's cosine" if found.with_model else "words only (no model)",
                    "plan_s": round(planned_s, 3),
                    "total_s": round(time.perf_counter() - clock, 3),
                },
            }
            outcome = {
                ("merged" if options.apply else "would_merge"): counts,
                "near_misses": found.near_miss_count,
                "skipped": len(skipped),
                ("threads_idled" if options.apply else "threads_stale"): sum(
                    1 for t in threads if "id" in t and (t.get("applied") or not options.apply)
                ),
            } | released
            return report
        finally:
            finished = now_ms()

            def finish(w: Writer) -> None:
                jobs.record_run(w, name, started, finished, not options.apply, outcome or {"failed": 1})
                if options.apply:
                    jobs.release(w, JOB, self.holder)

            self._store.write(finish)

    def plan(self, owner: str | None, kinds: tuple[str, ...] = KINDS) -> Plan:
        items = self._store.read(partial(_items, owner=owner, kinds=kinds))
        model = self._embedder()
        embed = model.embed_documents if model is not None else None
        return plan(items, embed, model.dense_floor if model is not None else 0.0)

    def _apply(self, found: Plan) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        done, skipped = [], []
        for m in found.merges:
            now = now_ms()
            try:
                if m.kind == "memory":
                    done.append(self._store.write(partial(merge.merge_memory, m=m, config=self._config, now=now)))
                else:
                    done.append(self._store.write(partial(merge.merge_note, m=m, now=now)))
            except merge.Skip as exc:
                skipped.append(m.as_dict() | {"skipped": exc.message})
        return done, skipped

    def _threads(self, options: Options) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for prov in options.threads:
            try:
                stale = self._hygiene.janitor(prov, apply=options.apply, now=options.now, only=("stale",))
            except InvalidInput as exc:  # a repository gone, unreadable or refused: the others go on
                found.append({"repo": prov.project, "error": exc.message})
                continue
            found.extend(t | {"repo": prov.project} for t in stale)
        return found

    def _release(self, options: Options) -> dict[str, int]:
        if not options.release:
            return {}
        if not options.apply:
            absent, claims = self._store.read(partial(_gone, keep=options.keep_sessions))
            return {"sessions_absent": absent, "claims_orphaned": claims, "tasks_unsettled": self._spawner.unsettled()}
        expired = self._presence.expire_absent(options.keep_sessions)
        return {
            "sessions_expired": len(expired),
            "claims_released": self._hygiene.release_orphans(),
            "tasks_settled": self._spawner.settle(),
        }


def _gone(r: Reader, keep: tuple[str, ...]) -> tuple[int, int]:
    """Sessions past the liveness bound, and the thread claims that an applied pass would release."""
    absent = {
        str(sid)
        for (sid,) in r.tuples(
            "SELECT id FROM sessions WHERE ended_at IS NULL AND last_seen_at < :since", {"since": present_since()}
        )
    } - set(keep)
    claims = r.tuples(
        "SELECT c.session_id, s.ended_at IS NULL AS open FROM thread_claims c LEFT JOIN sessions s "
        "ON s.id = c.session_id"
    )
    return len(absent), sum(1 for sid, open_ in claims if not open_ or str(sid) in absent)


def _items(r: Reader, owner: str | None, kinds: tuple[str, ...]) -> list[Item]:
    items: list[Item] = []
    if "memory" in kinds:
        degree = consolidation.edge_counts(r, owner)
        for row in consolidation.current_memories(r, owner):
            protected = "core memory" if row["core_key"] is not None else "pinned" if row["pinned"] else None
            items.append(
                Item(
                    "memory",
                    str(row["id"]),
                    str(row["content"]),
                    str(row["owner"]),
                    (str(row["owner"]), str(row["org"]), str(row["visibility"]), str(row["project"])),
                    protected,
                    (degree.get(str(row["id"]), 0), int(row["reactivation_count"]), -int(row["created_at"])),
                )
            )
    if "note" in kinds or "quote" in kinds:
        for row in consolidation.current_notes(r, owner):
            kind = "quote" if row["kind"] == "quote" else "note"
            if kind not in kinds:
                continue
            place = (str(row["owner"]), str(row["repo"]), str(row["project"]), str(row["thread"]), str(row["kind"]))
            items.append(Item(kind, str(row["id"]), str(row["text"]), str(row["owner"]), place, None,
                              (-int(row["created_at"]), -int(row["id"]))))  # fmt: skip
    return items


def thread_repositories(store: Store, user: str) -> list[str]:
    """The repositories `user`'s sessions worked in that hold thread files (thread_cursors)."""
    from pathlib import Path

    rows = store.read(
        lambda r: r.tuples(
            "SELECT DISTINCT c.repo FROM thread_cursors c JOIN sessions s ON s.id = c.session_id WHERE s.user = :u",
            {"u": user},
        )
    )
    return sorted(str(repo) for (repo,) in rows if (Path(str(repo)) / ".threadloom").is_dir())


def for_runtime(rt: Runtime) -> Consolidator:
    return Consolidator(rt.store, rt.embedder.get, rt.maintenance.config, rt.hygiene, rt.presence, rt.spawner)
