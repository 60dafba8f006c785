"""Transcript ingest: the one service the daemon's background pass, the session-end hook and
`threadloom ingest` all call.

A pass plans the files of each source (new, grown or replaced since their cursor: an unchanged file costs
one `stat`), reads each from its cursor in small batches, and writes every batch (its messages, their
search documents and the cursor after them) in one transaction: a crash re-reads a batch, never skips or
duplicates one. Exclusions and secret scrubbing happen before anything is written. One ingester runs at a
time per home: each batch renews a job lease in its own transaction, and a pass that cannot take it
stops (the daemon retries at its next pass; the CLI waits). Embedding is left to the background job.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from threadloom.clock import now_ms
from threadloom.errors import InvalidInput, StoreBusy
from threadloom.ingest.ahead import ahead
from threadloom.ingest.convert import Prepared, Projects, document
from threadloom.ingest.exclusions import Exclusions, parse_globs
from threadloom.ingest.report import PassReport
from threadloom.scrub import Scrubber
from threadloom.search.engine import SearchEngine
from threadloom.store import jobs
from threadloom.store import transcripts as tables
from threadloom.store.base import Store, Writer
from threadloom.transcripts import Cursor, ParseResult, Source, SourceStats, sources

log = logging.getLogger(__name__)
LEASE = "transcripts.ingest"
LEASE_TTL_MS = 120_000  # a holder that died frees the lease after this long
BATCH_BYTES = 256 << 10  # bytes parsed per transaction (~350 turns): a tool call waits at most one for the writer
# (1 MiB held it 0.2-0.8 s; the same throughput in one run, bench/ingest.py)
CHILDREN_LOOKBACK_MS = 90 * 24 * 3600 * 1000
QUIET = frozenset({"incomplete_tail"})  # problems that are a record still being written, not damage


class LeaseLost(Exception):
    """Another ingester holds the lease: this pass stops without writing."""


@dataclass(frozen=True)
class IngestConfig:
    owner: str  # whose transcripts these are (the home's user): only they ever see them
    home: Path  # the user's home folder, where the clients keep their transcripts
    env: Mapping[str, str]  # the clients' own variables that move their folders (CODEX_HOME, ...)
    exclude: tuple[str, ...] = ()
    children: bool = True  # False: the conversations of agents threadloom spawned are not stored
    scrub: bool = True

    @classmethod
    def of(cls, user: str, exclude: str, children: bool, scrub: bool) -> IngestConfig:
        return cls(user, Path.home(), dict(os.environ), parse_globs(exclude), children, scrub)


@dataclass
class _File:
    source: Source
    path: Path
    cursor: Cursor | None
    counters: SourceStats
    pending: int  # bytes not read yet, as far as a stat tells


@dataclass(frozen=True)
class _Batch:
    result: ParseResult
    rows: list[Prepared] | None  # None: unreadable
    excluded: int
    read: int  # bytes of the file read so far this pass
    cut: bool  # the byte budget ran out before the end of the file
    counters: dict[str, Any]  # the file's counters up to this batch


@dataclass
class _Pass:
    report: PassReport
    exclusions: Exclusions
    projects: Projects = field(default_factory=Projects)
    wrote: bool = False  # a batch was written (under the lease, released at the end)


ProgressFn = Callable[[int, int], None]  # (bytes done, bytes planned)


class Ingester:
    def __init__(self, store: Store, config: IngestConfig, all_sources: Sequence[Source] | None = None) -> None:
        self._store = store
        self.config = config
        self.sources = list(all_sources) if all_sources is not None else sources()
        self._scrubber = Scrubber(config.scrub)
        self._holder = jobs.holder_id()  # a lease left by a killed holder is taken at once
        self._parsed: dict[str, tuple[tuple[str, str], Cursor | None, dict[str, Any]]] = {}
        self._stopping = threading.Event()

    def stop(self) -> None:
        """End the pass under way after its current batch (the daemon is retiring); later passes do nothing."""
        self._stopping.set()

    def source_names(self) -> list[str]:
        return [s.name for s in self.sources]

    def run(
        self,
        only: Iterable[str] | None = None,
        since_ms: int | None = None,
        file_budget: int | None = None,
        pass_budget: int | None = None,
        on_progress: ProgressFn | None = None,
    ) -> PassReport:
        """One pass over `only` (source names; None: all). `file_budget` bounds the bytes read from one
        file and `pass_budget` those of the whole pass (None: no bound); what is left waits for the next pass."""
        started = time.monotonic()
        chosen = self._chosen(only)
        report = PassReport()
        excluded = Exclusions(self.config.exclude, self._spawned())
        state = _Pass(report, excluded)
        work = self._plan(chosen, since_ms, state)
        planned = sum(f.pending for f in work)
        done = 0
        stats = {s.name: SourceStats(s.name) for s in chosen}
        for f in work:
            stats[f.source.name].files_seen += 1
        for f in sorted(work, key=lambda f: f.pending):  # small live files first; a huge one gets the rest
            if report.busy or self._stopping.is_set():
                break
            room = None if pass_budget is None else pass_budget - done
            budget = min(x for x in (file_budget, room) if x is not None) if (file_budget or room) else None
            if budget is not None and budget <= 0:
                report.source(f.source.name).pending_files += 1
                continue
            done += self._ingest_file(f, stats[f.source.name], budget, state)
            if on_progress is not None:
                on_progress(min(done, planned), planned)
        if not report.busy and state.wrote:  # an idle poll writes nothing
            self._store.write(lambda w: self._save_passes(w, stats.values()))
        report.stats = {name: s.to_dict() for name, s in stats.items()}
        report.seconds = time.monotonic() - started
        return report

    def _chosen(self, only: Iterable[str] | None) -> list[Source]:
        if only is None:
            return self.sources
        wanted = list(only)
        unknown = [n for n in wanted if n not in self.source_names()]
        if unknown:
            raise InvalidInput(
                f"unknown transcript source {unknown[0]!r}; sources are {', '.join(self.source_names())}"
            )
        return [s for s in self.sources if s.name in wanted]

    def _spawned(self) -> frozenset[str]:
        if self.config.children:
            return frozenset()
        since = now_ms() - CHILDREN_LOOKBACK_MS
        return frozenset(self._store.read(lambda r: tables.spawned_client_sessions(r, since)))

    def _plan(self, chosen: Sequence[Source], since_ms: int | None, state: _Pass) -> list[_File]:
        work: list[_File] = []
        for source in chosen:
            held = self._store.read(partial(tables.files, owner=self.config.owner, source=source.name))
            side = state.report.source(source.name)
            for path in source.discover(self.config.home, self.config.env):
                name = str(path)
                if state.exclusions.folder(name):
                    side.excluded_files += 1
                    continue
                try:
                    info = path.stat()
                except OSError:
                    info = None  # vanished or a dangling link: parse reports it
                if info is not None and since_ms is not None and info.st_mtime_ns // 1_000_000 < since_ms:
                    continue
                raw = held.get(name)
                cursor, raw_stats = self._known(name, raw) if raw is not None else (None, {})
                if info is not None and cursor is not None and not raw_stats.get("pending"):
                    same = (cursor.device, cursor.inode, cursor.size, cursor.mtime_ns) == (
                        info.st_dev,
                        info.st_ino,
                        info.st_size,
                        info.st_mtime_ns,
                    )
                    if same:
                        side.unchanged_files += 1
                        continue
                counters = SourceStats.from_dict({"source": source.name, **raw_stats})
                offset = cursor.offset if cursor is not None and info is not None and cursor.inode == info.st_ino else 0
                size = info.st_size if info is not None else 0
                work.append(_File(source, path, cursor, counters, max(0, size - offset) if size >= offset else size))
        return work

    def _known(self, path: str, raw: tuple[str, str]) -> tuple[Cursor | None, dict[str, Any]]:
        """A stored cursor and counters, parsed once while they stay the same (an idle poll parses nothing)."""
        kept = self._parsed.get(path)
        if kept is not None and kept[0] == raw:
            return kept[1], kept[2]
        cursor, stats = _cursor(raw[0]), json.loads(raw[1])
        self._parsed[path] = (raw, cursor, stats)
        return cursor, stats

    def _ingest_file(self, f: _File, stats: SourceStats, budget: int | None, state: _Pass) -> int:
        """Read one file from its cursor, a batch per transaction (the next one read meanwhile); the bytes read."""
        side = state.report.source(f.source.name)
        read = 0
        try:
            batches = self._batches(f, stats, budget, state)
            # A file of one batch has nothing to read ahead: no thread for it (most files of a poll).
            for b in ahead(batches) if f.pending > BATCH_BYTES else batches:
                read = b.read
                self._record_problems(b.result, state)
                if b.rows is None:
                    if f.cursor is not None:  # keep the old cursor; say why the file was not read
                        self._store.write(partial(self._save_problem, f=f, b=b))
                        state.wrote = True
                    break
                added, revised = self._store.write(partial(self._save_batch, f=f, b=b))
                state.wrote = True
                side.messages_added += added
                side.messages_revised += revised
                side.messages_excluded += b.excluded
                if b.cut:
                    side.pending_files += 1
                if self._stopping.is_set():
                    break
        except (StoreBusy, LeaseLost) as exc:
            state.report.busy = True
            state.report.note(f"{f.path}: stopped, {exc}")
        except Exception as exc:
            log.exception("ingesting %s failed", f.path)
            side.failed_files += 1
            state.report.note(f"{f.path}: {type(exc).__name__}: {exc}")
        return read

    def _batches(self, f: _File, stats: SourceStats, budget: int | None, state: _Pass) -> Iterator[_Batch]:
        """Parse calls from the file's cursor, each prepared for writing, until the end or the budget."""
        cursor, read = f.cursor, 0
        while True:
            step = BATCH_BYTES if budget is None else max(1, min(BATCH_BYTES, budget - read))
            result = f.source.parse(f.path, cursor, budget=step)
            stats.add(result)
            f.counters.add(result)
            read += _advanced(cursor, result)
            cut = budget is not None and read >= budget and result.more
            if result.cursor is None:
                yield _Batch(result, None, 0, read, False, f.counters.to_dict())
                return
            rows, excluded = self._prepare(result, state)
            yield _Batch(result, rows, excluded, read, cut, f.counters.to_dict())
            cursor = result.cursor
            if not result.more or cut:
                return

    def _record_problems(self, result: ParseResult, state: _Pass) -> None:
        for problem in result.problems:
            if problem.reason in QUIET:
                continue
            state.report.problem(problem.path, problem.reason, problem.detail)

    def _prepare(self, result: ParseResult, state: _Pass) -> tuple[list[Prepared], int]:
        """The messages to write, scrubbed, their projects resolved and their search documents' terms found
        (outside the transaction), and how many were excluded."""
        rows: list[Prepared] = []
        excluded = 0
        for message in result.messages:
            project = state.projects.of(message.cwd)
            if state.exclusions.session(message.session_id) or state.exclusions.any_folder((message.cwd, project)):
                excluded += 1
                continue
            rows.append(Prepared.of(message, self._scrubber, project))
        return rows, excluded

    def _save_batch(self, w: Writer, *, f: _File, b: _Batch) -> tuple[int, int]:
        """Messages new and revised, written with the cursor after them (pure database work: the store may
        run it again when busy)."""
        now = now_ms()
        if not jobs.acquire(w, LEASE, self._holder, now, LEASE_TTL_MS):
            raise LeaseLost("another ingest holds the lease")
        added = revised = 0
        docs, known = [], []
        assert b.rows is not None and b.result.cursor is not None
        batch = [(p.row, p.revises) for p in b.rows]
        for p, written in zip(b.rows, tables.upsert_messages(w, self.config.owner, batch, now), strict=True):
            if written is None:
                continue
            doc = document(written[0], p)
            if doc is not None and p.ahead is not None:
                docs.append(doc)
                known.append(p.ahead)
            added += written[1]
            revised += not written[1]
        SearchEngine.index_many(w, docs, known)
        problem = next((f"{p.reason}: {p.detail}" for p in b.result.problems if p.reason not in QUIET), None)
        counters = b.counters | {"pending": b.result.more}
        owner, path, cursor = self.config.owner, str(f.path), b.result.cursor.to_json()
        tables.save_file(w, owner, f.source.name, path, cursor, counters, problem, now)
        return added, revised

    def _save_problem(self, w: Writer, *, f: _File, b: _Batch) -> None:
        assert f.cursor is not None
        if not jobs.acquire(w, LEASE, self._holder, now_ms(), LEASE_TTL_MS):
            raise LeaseLost("another ingest holds the lease")
        problem = next((f"{p.reason}: {p.detail}" for p in b.result.problems), "unreadable")
        counters = b.counters | {"pending": False}
        owner, path = self.config.owner, str(f.path)
        tables.save_file(w, owner, f.source.name, path, f.cursor.to_json(), counters, problem, now_ms())

    def _save_passes(self, w: Writer, stats: Iterable[SourceStats]) -> None:
        now = now_ms()
        for s in stats:
            if s.records:  # a pass that read nothing new says nothing about the format
                tables.save_last_pass(w, self.config.owner, s.source, s.to_dict(), now)
        jobs.release(w, LEASE, self._holder)


def _cursor(raw: str | None) -> Cursor | None:
    if raw is None:
        return None
    try:
        return Cursor.from_json(raw)
    except ValueError:
        return None  # damaged: the file is read again from the start, and its keys deduplicate


def _advanced(before: Cursor | None, result: ParseResult) -> int:
    """Bytes a parse call moved through the file (from the start when it restarted a replaced file)."""
    after = result.cursor
    if after is None:
        return 0
    restarted = any(p.reason in ("replaced", "truncated") for p in result.problems)
    same = before is not None and (before.device, before.inode) == (after.device, after.inode)
    start = before.offset if same and before is not None and not restarted and after.offset >= before.offset else 0
    return after.offset - start
