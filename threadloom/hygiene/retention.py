"""Retention: each kind's rows past its window deleted (every user's alike: the windows are the store's), in
chunks of short transactions, with the spawned tasks' files on disk; then the store compacted (compaction.py).

A report counts only its reader's own rows (the daemon's, with no reader, everything): rows and text before,
what went (or would go, in a dry run) and after, with the store file's figures, which are the store's. Every
real pass is recorded in `job_runs` as `store.retention` with the store's totals, which is what `threadloom
stats` shows for background jobs. Single-flight across processes by the `store.hygiene` lease.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Final

from threadloom.clock import now_ms
from threadloom.config import Settings
from threadloom.errors import StoreBusy
from threadloom.store import jobs
from threadloom.store import retention as rows
from threadloom.store.base import Store, Writer

JOB: Final = "store.retention"
LEASE: Final = "store.hygiene"
LEASE_MS: Final = 30 * 60_000  # a holder that died frees it after this long
DAY_MS: Final = 86_400_000
# Each delete transaction is sized to hold the write lock about TARGET_S (a transcript's row takes its search
# document, term counts and full-text entries with it), and the lock is left free PAUSE_S after it: back to back,
# 500-row chunks kept a writer of another process waiting up to 7 s (bench/year.py, at a load of 15).
TARGET_S: Final = 0.03
PAUSE_S: Final = 0.1
FIRST_CHUNK: Final = 50
_TASK_FILE: Final = re.compile(r"(t_[0-9a-f]{1,64})\.[A-Za-z0-9.]{1,32}")  # spawn.py's <id>.log, <id>.<n>.run/.exit


@dataclass(frozen=True)
class Windows:
    """Days each kind is kept (config.py checks each is 1-36,500)."""

    transcripts: int = 365
    signals: int = 30
    journal: int = 90
    tasks: int = 30
    restore: int = 30

    @classmethod
    def of(cls, settings: Settings) -> Windows:
        return cls(
            settings.retention_transcripts_days,
            settings.retention_signals_days,
            settings.retention_journal_days,
            settings.retention_tasks_days,
            settings.retention_restore_days,
        )

    def days(self, kind: str) -> int:
        return int(getattr(self, kind))

    def as_dict(self) -> dict[str, int]:
        return {kind: self.days(kind) for kind in rows.KINDS}


def holder() -> str:
    """This process as a lease holder: a pass killed mid-way leaves a lease the next one takes at once."""
    return jobs.holder_id()


class Retention:
    def __init__(self, store: Store, task_logs: Path, windows: Windows) -> None:
        self._store = store
        self._logs = task_logs
        self.windows = windows
        self.last_totals: dict[str, int] = {}  # every user's rows the last pass deleted, per kind (not for reports)

    def cutoffs(self, now: int) -> dict[str, int]:
        return {kind: now - self.windows.days(kind) * DAY_MS for kind in rows.KINDS}

    def held(self, owner: str | None) -> dict[str, dict[str, int]]:
        """Rows and text characters per kind of `owner`'s (the store's, given no owner), and the task files."""
        found = self._store.read(lambda r: {kind: rows.held(r, kind, owner) for kind in rows.KINDS})
        files = self._task_files(owner)
        found["tasks"] = found["tasks"] | {"files": len(files), "file_bytes": sum(size for _, size, _ in files)}
        return found

    def run(self, owner: str | None, dry_run: bool = False, now: int | None = None) -> dict[str, Any]:
        """One pass, or (dry run) what it would delete. `owner`: the reader the report counts for."""
        now = now if now is not None else now_ms()
        cut = self.cutoffs(now)
        report: dict[str, Any] = {
            "dry_run": dry_run,
            "windows_days": self.windows.as_dict(),
            "before": self.held(owner),
        }
        if dry_run:
            would = self._store.read(lambda r: {k: rows.expired(r, k, cut[k], owner) for k in rows.KINDS})
            old_files = self._old_files(owner, cut["tasks"])
            would["tasks"] |= {"files": len(old_files), "file_bytes": sum(size for _, size in old_files)}
            return report | {"would_delete": would}
        me = holder()
        if not self._store.write(lambda w: jobs.acquire(w, LEASE, me, now_ms(), LEASE_MS)):
            raise StoreBusy("another process is running retention or compaction; try again when it is done")
        started = now_ms()
        mine: dict[str, int] = dict.fromkeys(rows.KINDS, 0)
        total: dict[str, int] = dict.fromkeys(rows.KINDS, 0)
        files = [0, 0]  # count, bytes
        try:
            for kind in rows.KINDS:
                for index in range(len(rows.PARTS[kind])):
                    after: Any = None
                    limit = FIRST_CHUNK
                    while True:
                        clock = time.monotonic()
                        chunk = self._store.write(
                            partial(rows.delete_chunk, kind=kind, part_index=index, cutoff=cut[kind], owner=owner,
                                    after=after, limit=limit)
                        )  # fmt: skip
                        limit = _next_limit(limit, time.monotonic() - clock)
                        mine[kind] += chunk.owners
                        total[kind] += chunk.rows
                        _add(files, self._remove_task_files(chunk.task_ids))
                        if chunk.last is None:
                            break
                        after = chunk.last
                        time.sleep(PAUSE_S)  # a writer of another process, in its busy handler, gets the lock
            _add(files, self._remove_orphans(cut["tasks"]))
        finally:
            self._store.write(
                partial(finish, started=started, holder=me, outcome={"deleted": total, "task_files": files[0]})
            )
        self.last_totals = total
        return report | {
            "deleted": mine,
            "task_files_deleted": {"files": files[0], "bytes": files[1]},
            "after": self.held(owner),
        }

    def sweep_files(self, now: int | None = None) -> dict[str, int]:
        """This home's task files whose task row is gone, once older than the window: no lease, since the files
        are this machine's alone. A node whose pass another node ran (the lease was held) sweeps this way, or
        the files of tasks that node's pass deleted would stay on this machine for good."""
        count, size = self._remove_orphans(self.cutoffs(now if now is not None else now_ms())["tasks"])
        return {"files": count, "bytes": size}

    # the spawned tasks' files: `<home>/tasks/<task id>.*`, named by spawn.py; nothing else there is touched

    def _listing(self) -> list[tuple[str, Path, int, int]]:
        """(task id, path, bytes, mtime ms) of each regular file named like a task's (links not followed)."""
        found: list[tuple[str, Path, int, int]] = []
        if self._logs.is_symlink():  # spawn.py makes a folder; a link put there leads elsewhere: not ours to clear
            return found
        try:
            entries = list(os.scandir(self._logs))
        except (FileNotFoundError, NotADirectoryError):
            return found
        for entry in entries:
            match = _TASK_FILE.fullmatch(entry.name)
            if match is None or not entry.is_file(follow_symlinks=False):
                continue
            st = entry.stat(follow_symlinks=False)
            found.append((match.group(1), Path(entry.path), st.st_size, int(st.st_mtime * 1000)))
        return found

    def _task_files(self, owner: str | None) -> list[tuple[str, int, int]]:
        ids = set(self._store.read(partial(rows.task_ids_of, owner=owner)))
        return [(t, size, mtime) for t, _, size, mtime in self._listing() if owner is None or t in ids]

    def _old_files(self, owner: str | None, cutoff: int) -> list[tuple[str, int]]:
        """Files a pass would take: those of `owner`'s tasks past the window, and (the store's report alone)
        strays with no task row, once as old."""
        tasks = rows.PARTS["tasks"][0]

        def read(r: Any) -> tuple[set[str], set[str], set[str]]:
            every = set(rows.task_ids_of(r, None))
            going = {str(i) for (i,) in r.tuples(
                f"SELECT id FROM tasks WHERE {tasks.expirable} AND {tasks.at} < :c", {"c": cutoff})}  # fmt: skip
            return every, going, (every if owner is None else set(rows.task_ids_of(r, owner)))

        every, going, mine = self._store.read(read)
        return [
            (t, size)
            for t, _, size, mtime in self._listing()
            if (t in going and t in mine) or (owner is None and t not in every and mtime < cutoff)
        ]

    def _remove_task_files(self, task_ids: tuple[str, ...]) -> tuple[int, int]:
        if not task_ids:
            return 0, 0
        wanted = set(task_ids)
        count = size = 0
        for task_id, path, nbytes, _ in self._listing():
            if task_id in wanted and _unlink(path):
                count, size = count + 1, size + nbytes
        return count, size

    def _remove_orphans(self, cutoff: int) -> tuple[int, int]:
        """Files of tasks with no row (a row forgotten, an admission that failed), once older than the window."""
        known = set(self._store.read(partial(rows.task_ids_of, owner=None)))
        count = size = 0
        for task_id, path, nbytes, mtime in self._listing():
            if task_id not in known and mtime < cutoff and _unlink(path):
                count, size = count + 1, size + nbytes
        return count, size


def _unlink(path: Path) -> bool:
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True


def finish(w: Writer, started: int, holder: str, outcome: dict[str, Any]) -> None:
    """Record the pass in `job_runs` and give the lease back, in one transaction."""
    jobs.record_run(w, JOB, started, now_ms(), False, outcome)
    jobs.release(w, LEASE, holder)


def _next_limit(limit: int, took_s: float) -> int:
    if took_s < TARGET_S / 2:
        return min(rows.CHUNK, limit * 2)
    if took_s > TARGET_S * 2:
        return max(5, limit // 2)
    return limit


def _add(total: list[int], more: tuple[int, int]) -> None:
    total[0] += more[0]
    total[1] += more[1]
