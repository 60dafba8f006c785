"""Learning from the user's own words: a pass over ingested transcript messages (role `user`) past the job's
cursor, under the `style.observe` lease so one process learns at a time. Each batch's sightings, language
votes, profile statements, TTL cleanup, revision and the cursor commit in one transaction (the matching runs
before it, outside): a pass killed midway leaves the cursor where its last whole batch ended, and nothing is
counted twice.

Only signals are kept (a habit, a count, a sanitised example of at most 60 characters), never the message.
Code blocks are not the user's voice and are skipped, as is anything that carries a style capsule back in
(an agent's own output must not teach style memory to imitate itself) and the conversations of agents
threadloom spawned (their "user" is the agent that prompted them).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Final

from threadloom.clock import now_ms
from threadloom.scrub.policy import Scrubber
from threadloom.store import jobs
from threadloom.store.base import Reader, Store, Writer
from threadloom.store.transcripts import spawned_client_sessions
from threadloom.style import capsule, rows
from threadloom.style.dictionary import extract
from threadloom.style.guard import refusal, sanitise
from threadloom.style.language import detect
from threadloom.style.model import Observation
from threadloom.style.profile import statements
from threadloom.style.service import known_preference

JOB: Final = "style.observe"
SWEEP: Final = "style.sweep"  # its cursor holds when the TTLs were last applied to every user (epoch ms)
SWEEP_MS: Final = 86_400_000
BATCH: Final = 500
MAX_BATCHES: Final = 20  # per pass; the rest waits for the next one
LEASE_MS: Final = 120_000
SCAN_CHARS: Final = 2_000  # a message longer than this is mostly pasted material, not the user's voice
# transcript source -> the agent CLI (threadloom.agents.VENDORS) the egress policy knows it by
VENDOR_OF_SOURCE: Final = {"claude-code": "claude", "codex": "codex", "gemini": "gemini", "copilot": "copilot"}
_CODE_RE: Final = re.compile(r"```.*?(?:```|$)|`[^`\n]*`", re.DOTALL)
_CAPSULE_MARK: Final = "[style r"


@dataclass
class PassReport:
    messages: int = 0
    observations: int = 0
    preferences: int = 0
    owners: set[str] = field(default_factory=set)
    cursor: int = 0
    busy: bool = False
    swept: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "messages": self.messages,
            "observations": self.observations,
            "preferences": self.preferences,
            "users": len(self.owners),
            "cursor": self.cursor,
            "busy": self.busy,
            "swept": self.swept,
            "seconds": round(self.seconds, 3),
        }


def voice(text: str) -> str:
    """The part of a message that is the user's own writing."""
    return _CODE_RE.sub(" ", text[:SCAN_CHARS])


@dataclass
class _Plan:
    """A batch read and analysed, to be written if nothing it read moved."""

    start: int
    found: list[Any]
    now: int
    learning: dict[str, bool] = field(default_factory=dict)
    groups: dict[tuple[str, str, str, str], tuple[Observation, int]] = field(default_factory=dict)
    votes: dict[str, dict[str, int]] = field(default_factory=dict)
    preferences: list[tuple[str, Any]] = field(default_factory=list)


@dataclass
class Learner:
    store: Store
    scrubber: Scrubber = field(default_factory=Scrubber)

    def run(self, holder: str, max_batches: int = MAX_BATCHES, batch: int = BATCH) -> PassReport:
        """One pass; `busy` when another process holds the lease."""
        started, report = time.monotonic(), PassReport()
        if not self.store.read(self._pending):
            report.swept = self.sweep()
            return report  # nothing new: no lease, and a write at most once a day
        if not self.store.write(lambda w: jobs.acquire(w, JOB, holder, now_ms(), LEASE_MS)):
            report.busy = True
            return report
        try:
            spawned = frozenset(self.store.read(lambda r: spawned_client_sessions(r, 0)))
            for _ in range(max_batches):
                if self._batch(batch, report, spawned) < batch:
                    break
        finally:
            self.store.write(lambda w: jobs.release(w, JOB, holder))
        report.seconds = time.monotonic() - started
        return report

    def sweep(self, now: int | None = None) -> int:
        """The TTLs for every user, once a day: with no new message no batch runs them, and a habit the user
        stopped showing must still archive (reads never change the capsule). Users whose capsule changed."""
        now = now_ms() if now is None else now
        if now - self.store.read(lambda r: jobs.cursor(r, SWEEP)) < SWEEP_MS:
            return 0

        def write(w: Writer) -> int:
            if now - jobs.cursor(w, SWEEP) < SWEEP_MS:
                return 0  # another process swept meanwhile
            changed = 0
            for (owner,) in w.tuples("SELECT owner FROM style_state"):
                before = rows.state(w, str(owner))["revision"]
                rows.cleanup(w, str(owner), now)
                changed += capsule.refresh(w, str(owner), now) != before
            jobs.set_cursor(w, SWEEP, now)
            return changed

        return self.store.write(write)

    def _pending(self, r: Reader) -> bool:
        return (
            r.one(
                "SELECT 1 AS x FROM transcript_messages WHERE id > :c AND role = 'user' LIMIT 1",
                {"c": jobs.cursor(r, JOB)},
            )
            is not None
        )

    def _batch(self, size: int, report: PassReport, spawned: frozenset[str]) -> int:
        """One batch: read and analysed outside any transaction (the matching is most of a batch's time, and
        a write holds every other writer back), then written in one, which first checks that nothing it read
        has moved (the lease makes that rare: a lost lease or a pause meanwhile)."""
        while (plan := self.store.read(lambda r: self._analyse(r, size, spawned))) is not None:
            if self.store.write(partial(self._apply, plan=plan, report=report)):
                return len(plan.found)
        return 0

    def _analyse(self, r: Reader, size: int, spawned: frozenset[str]) -> _Plan | None:
        start = jobs.cursor(r, JOB)
        found = r.rows(
            "SELECT id, owner, source, session_id, text, at FROM transcript_messages "
            "WHERE id > :c AND role = 'user' ORDER BY id LIMIT :n",
            {"c": start, "n": size},
        )
        if not found:
            return None
        plan = _Plan(start, found, now_ms())
        with_example: dict[str, set[tuple[str, str]]] = {}
        for m in found:
            owner = m["owner"]
            if owner not in plan.learning:
                plan.learning[owner] = bool(rows.state(r, owner)["learning"])
                with_example[owner] = {
                    (str(k), str(key))
                    for k, key in r.tuples(
                        "SELECT kind, key FROM style_habits WHERE owner = :o AND example IS NOT NULL", {"o": owner}
                    )
                }
            text = m["text"] or ""
            if not plan.learning[owner] or _CAPSULE_MARK in text or m["session_id"] in spawned:
                continue  # paused; an agent's own output; a spawned child's prompts are its parent agent's words
            vendor = VENDOR_OF_SOURCE.get(m["source"], "other")
            for obs in self.observations(m["source"], m["session_id"], text, m["at"] or plan.now, vendor,
                                         with_example[owner]):  # fmt: skip
                group = (owner, obs.kind, obs.key, obs.session)
                if group in plan.groups:  # the batch's sightings of one habit in one session: one write
                    first, n = plan.groups[group]
                    plan.groups[group] = (
                        replace(first, example=first.example or obs.example, at=max(first.at, obs.at)),
                        n + 1,
                    )
                else:
                    plan.groups[group] = (obs, 1)
                if obs.example:
                    with_example[owner].add((obs.kind, obs.key))
            own = voice(text)
            lang = detect(own)
            if lang:
                per = plan.votes.setdefault(owner, {})
                per[lang] = per.get(lang, 0) + 1
            stated = statements(own)
            if stated and refusal(own) is None:
                plan.preferences += [
                    (owner, known_preference(owner, key, "message", vendor, plan.now)) for key in stated
                ]
        return plan

    def _apply(self, w: Writer, *, plan: _Plan, report: PassReport) -> bool:
        """Whether the plan was written: not when the cursor moved or a user paused since it was read."""
        if jobs.cursor(w, JOB) != plan.start:
            return False
        if any(bool(rows.state(w, owner)["learning"]) != on for owner, on in plan.learning.items()):
            return False
        counted = prefs = 0
        for owner, pref in plan.preferences:
            prefs += rows.add_preference(w, owner, pref)
        for (owner, *_), (obs, n) in plan.groups.items():
            if rows.observe(w, owner, obs, n) is not None:
                counted += n
        found, now = plan.found, plan.now
        for owner in {m["owner"] for m in found if plan.learning.get(m["owner"])}:
            rows.add_language_votes(w, owner, plan.votes.get(owner, {}), now)
            # The TTLs as of the newest message read: a backfill of old transcripts keeps its candidates
            # until the sessions after them have been read.
            newest = max((m["at"] or now) for m in found if m["owner"] == owner)
            rows.cleanup(w, owner, min(now, newest))
            capsule.refresh(w, owner, now)
            report.owners.add(owner)
        last = int(found[-1]["id"])
        jobs.set_cursor(w, JOB, last)
        report.messages += len(found)
        report.observations += counted
        report.preferences += prefs
        report.cursor = last
        return True

    def observations(
        self, source: str, session_id: str, text: str, at: int, vendor: str,
        have_example: set[tuple[str, str]] = frozenset(),  # type: ignore[assignment]
    ) -> list[Observation]:  # fmt: skip
        """The dictionary's sightings in one message; an example only for a habit that has none yet (and only
        a window the refusals pass: guard.sanitise)."""
        own = voice(text)
        hits = extract(own)
        if not hits:
            return []
        session = f"{source}:{session_id}"
        found = []
        for h in hits:
            key = h.key
            example = sanitise(own, h.start, h.end, self.scrubber) if (h.kind, key) not in have_example else None
            found.append(Observation(h.kind, h.text, h.locale, example, session, vendor, "dictionary", at, key))
        return found
