"""The observation miner: the user's own statements of a preference, habit or value, read from their
ingested transcript messages and their memories, become hypotheses and evidence in the user model.

No model runs here: `patterns.py` reads each message. A statement that matches a current claim of the user's
(the same normalised text, in any language's label) supports it; one with the opposite stance on the same
object contradicts it; a new one is proposed as a hypothesis. Everything the miner writes is origin
`automated` (half weight) and cites its message or memory, so re-reading a message adds nothing
(`user_evidence` is unique per claim, direction and source).

What is read: messages of role `user` past the job's cursor (ingest order, the row id: a late backfill is
read exactly once), not in a conversation of an agent threadloom spawned, with what the user pasted or
quoted and what a client injected (code blocks, quoted lines, `<tag>…</tag>` wrappers, threadloom's own data
fence) taken out first; and memories the user's own foreground sessions stored. One pass at a time per home
(the `usermodel.mine` job lease), recorded in `job_runs` for `threadloom user status`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from functools import partial
from itertools import islice
from typing import Any, Final

from threadloom.agents import VENDORS
from threadloom.brief.fence import CLOSE, OPEN
from threadloom.clock import now_ms
from threadloom.errors import ThreadloomError
from threadloom.identity import Provenance
from threadloom.scrub.policy import Scrubber
from threadloom.store import jobs
from threadloom.store.base import Reader, Store, Writer
from threadloom.store.transcripts import spawned_client_sessions
from threadloom.usermodel import rows
from threadloom.usermodel.patterns import OPPOSITE, Finding, find, keys, normalise
from threadloom.usermodel.service import UserModel

JOB: Final = "usermodel.mine"
ORIGIN: Final = "job:usermodel_mine"
LEASE_MS: Final = 120_000
BATCH: Final = 500
MAX_ROWS: Final = 20_000  # per source and pass; the rest waits for the next pass
SCAN_CHARS: Final = 2_000  # of one message, after what was pasted is taken out
PER_TEXT: Final = 5  # statements read from one message or memory: a list of fifty is not fifty observations
MEMORY_OVERLAP_MS: Final = 60_000  # memories are read by creation time; see _memories
SAMPLES: Final = 20
Batches = Callable[[int], Iterator[tuple[list["Observation"], int, int]]]
SOURCE_VENDOR: Final = {"claude-code": "claude", "codex": "codex", "gemini": "gemini", "copilot": "copilot"}

_CODE: Final = re.compile(r"```.*?(?:```|\Z)|~~~.*?(?:~~~|\Z)", re.S)
_INLINE: Final = re.compile(r"`[^`\n]*`")
_TAGGED: Final = re.compile(r"<([A-Za-z][\w-]{0,40})(?:\s[^<>]{0,200})?>.*?(?:</\1>|\Z)", re.S)
_FENCE: Final = re.compile(re.escape(OPEN) + r".*?(?:" + re.escape(CLOSE) + r"|\Z)", re.S)
_PASTED_LINE: Final = re.compile(r"^(?:>|\||\s{4}|\t|\$ |#!|Traceback|  File ).*$", re.M)


def own_words(text: str) -> str:
    """What the user wrote themselves: code, quotes, tables, client wrappers and threadloom's data fence out."""
    for pattern in (_FENCE, _TAGGED, _CODE, _INLINE, _PASTED_LINE):
        text = pattern.sub(" ", text[: SCAN_CHARS * 4])
    return text[:SCAN_CHARS]


@dataclass(frozen=True)
class Observation:
    finding: Finding
    source: str  # message or memory
    ref: str
    vendor: str


@dataclass
class MineReport:
    messages: int = 0  # read past the cursor (every role)
    memories: int = 0
    statements: int = 0  # statements found
    proposed: int = 0  # new hypotheses
    supported: int = 0  # support evidence counted
    contradicted: int = 0
    repeated: int = 0  # evidence already counted (a re-read)
    skipped: int = 0  # a claim superseded or a source erased since it was read
    busy: bool = False  # another process was mining
    dry_run: bool = False
    seconds: float = 0.0
    cursors: dict[str, int] = field(default_factory=dict)
    samples: list[dict[str, str]] = field(default_factory=list)  # what it did, first SAMPLES

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def left_over(self) -> bool:
        """Whether the pass stopped at its cap with more to read (the next one should come soon)."""
        return not self.busy and (self.messages >= MAX_ROWS or self.memories >= MAX_ROWS)

    def note(self, action: str, text: str, source: str, ref: str) -> None:
        if len(self.samples) < SAMPLES:
            self.samples.append({"action": action, "claim": text, "source": source, "ref": ref})


class Miner:
    """One user's miner: `run` is a pass (the daemon's job, `threadloom user mine`)."""

    def __init__(self, store: Store, user: str, scrubber: Scrubber | None = None) -> None:
        self.store = store
        self.user = user
        self.model = UserModel(store, scrubber or Scrubber())
        self.job = f"{JOB}:{user}"  # lease, runs and cursors per user: a run's samples are that user's claims
        self.cursor_names = {"messages": f"{JOB}.messages:{user}", "memories": f"{JOB}.memories:{user}"}

    def run(self, dry_run: bool = False) -> MineReport:
        started, clock = now_ms(), time.perf_counter()
        report = MineReport(dry_run=dry_run)
        holder = jobs.holder_id()
        if not dry_run and not self.store.write(lambda w: jobs.acquire(w, self.job, holder, now_ms(), LEASE_MS)):
            report.busy = True
            return report
        completed = False
        try:
            index = self._index()
            spawned = frozenset(self.store.read(lambda r: spawned_client_sessions(r, 0)))
            for name, batches in (("messages", self._messages(spawned)), ("memories", self._memories())):
                position = self.store.read(partial(jobs.cursor, name=self.cursor_names[name]))
                for observations, count, after in batches(position):
                    setattr(report, name, getattr(report, name) + count)
                    for observation in observations:
                        report.statements += 1
                        self._apply(observation, index, report, dry_run)
                    position = after
                    if not dry_run and not self.store.write(
                        partial(self._advance, holder=holder, name=name, position=after)
                    ):
                        report.busy = True  # the lease was lost: another pass goes on from our cursor
                        return report
                report.cursors[name] = position
            completed = True
        finally:
            if not dry_run:
                report.seconds = round(time.perf_counter() - clock, 3)
                outcome = report.as_dict()

                def close(w: Writer) -> None:
                    jobs.release(w, self.job, holder)
                    if completed:  # a pass that failed part-way is not a run: the next one redoes its batch
                        jobs.record_run(w, self.job, started, now_ms(), False, outcome)

                self.store.write(close)
        report.seconds = round(time.perf_counter() - clock, 3)
        return report

    # -- reading --------------------------------------------------------------------------------------

    def _messages(self, spawned: frozenset[str]) -> Batches:
        def batches(position: int) -> Iterator[tuple[list[Observation], int, int]]:
            read = 0
            while read < MAX_ROWS:
                found = self.store.read(partial(_message_rows, user=self.user, after=position))
                if not found:
                    return
                observations = [
                    Observation(f, "message", str(mid), SOURCE_VENDOR.get(source, "other"))
                    for mid, source, session, role, text in found
                    if role == "user" and session not in spawned
                    for f in islice(find(own_words(text)), PER_TEXT)
                ]
                read += len(found)
                position = int(found[-1][0])
                yield observations, len(found), position

        return batches

    def _memories(self) -> Batches:
        """Memories by creation time, from a minute before the cursor: a memory's time is taken before its
        transaction commits, so one written beside the last pass may carry an earlier time than what that
        pass read. Re-reading the minute costs a few no-op writes (evidence is counted once per source)."""

        def batches(position: int) -> Iterator[tuple[list[Observation], int, int]]:
            since, last_id, read = max(0, position - MEMORY_OVERLAP_MS), "", 0
            while read < MAX_ROWS:
                found = self.store.read(partial(_memory_rows, user=self.user, since=since, after_id=last_id))
                if not found:
                    return
                observations = [
                    Observation(f, "memory", mid, vendor)
                    for mid, content, vendor, _ in found
                    for f in islice(find(own_words(content), memory=True), PER_TEXT)
                ]
                read += len(found)
                since, last_id = int(found[-1][3]), str(found[-1][0])
                yield observations, len(found), max(position, since)

        return batches

    def _index(self) -> dict[str, str]:
        """The user's current claims by normalised text."""
        viewer = self._prov("other").viewer()
        current = self.store.read(lambda r: rows.claims(r, viewer))
        return {normalise(c.text): c.id for c in current}

    # -- writing --------------------------------------------------------------------------------------

    def _advance(self, w: Writer, holder: str, name: str, position: int) -> bool:
        if not jobs.acquire(w, self.job, holder, now_ms(), LEASE_MS):
            return False
        jobs.set_cursor(w, self.cursor_names[name], position)
        return True

    def _apply(self, obs: Observation, index: dict[str, str], report: MineReport, dry_run: bool) -> None:
        f = obs.finding
        prov = self._prov(obs.vendor)
        against = [f.stance] if f.retract else list(OPPOSITE[f.stance])
        for claim_id in _matches(index, against, f.obj):
            self._evidence(prov, claim_id, "contradict", obs, report, dry_run, f.text)
        if f.retract:
            return
        same = _matches(index, [f.stance], f.obj)
        if same:
            claim_id = same[0]
        else:
            report.proposed += 1
            report.note("proposed", f.text, obs.source, obs.ref)
            if dry_run:
                index[normalise(f.text)] = "dry-run"
                return
            try:
                claim_id = self.model.claim(prov, f.text, f.domain)["claim"]["id"]
            except ThreadloomError:
                report.skipped += 1
                return
            index[normalise(f.text)] = claim_id
        self._evidence(prov, claim_id, "support", obs, report, dry_run, f.text)

    def _evidence(
        self, prov: Provenance, claim_id: str, kind: str, obs: Observation, report: MineReport, dry: bool, text: str
    ) -> None:
        if dry:
            report.supported += kind == "support"
            report.contradicted += kind == "contradict"
            if kind == "contradict":
                report.note("contradicts", text, obs.source, obs.ref)
            return
        try:
            result = self.model.add_evidence(prov, claim_id, kind, obs.source, obs.ref, 1.0, "automated")
        except ThreadloomError:  # superseded since the pass began, or the message was erased
            report.skipped += 1
            return
        if not result["counted"]:
            report.repeated += 1
        elif kind == "support":
            report.supported += 1
        else:
            report.contradicted += 1
            report.note("contradicted", result["claim"]["text"], obs.source, obs.ref)

    def _prov(self, vendor: str) -> Provenance:
        # The vendor of the session the words were written in: the egress policy reads it off the claim.
        known = vendor if vendor in VENDORS else "other"
        return Provenance(session_id=None, vendor=known, project=None, origin=ORIGIN, user=self.user)


def _matches(index: dict[str, str], stances: Iterable[str], obj: str) -> list[str]:
    found: list[str] = []
    for stance in stances:
        for key in keys(stance, obj):
            claim_id = index.get(key)
            if claim_id is not None and claim_id not in found:
                found.append(claim_id)
    return found


def _message_rows(r: Reader, user: str, after: int) -> list[tuple[Any, ...]]:
    return r.tuples(
        "SELECT id, source, session_id, role, text FROM transcript_messages WHERE owner = :u AND id > :p "
        "ORDER BY id LIMIT :n",
        {"u": user, "p": after, "n": BATCH},
    )


def _memory_rows(r: Reader, user: str, since: int, after_id: str) -> list[tuple[Any, ...]]:
    """The user's memories from `since` on (after `after_id` at that very time), that a foreground session of
    theirs stored: not a job's, not a spawned child's."""
    return r.tuples(
        "SELECT m.id, m.content, m.vendor, m.created_at FROM memories m LEFT JOIN sessions s ON s.id = m.session_id "
        "WHERE m.owner = :u AND m.origin = 'foreground' AND s.parent_id IS NULL "
        "AND (m.created_at > :since OR (m.created_at = :since AND m.id > :after)) "
        "ORDER BY m.created_at, m.id LIMIT :n",
        {"u": user, "since": since, "after": after_id, "n": BATCH},
    )


def last_run(store: Store, user: str) -> dict[str, Any] | None:
    """`user`'s last recorded pass (when, and what it did), or None before the first."""
    return store.read(lambda r: jobs.last_run(r, f"{JOB}:{user}"))
