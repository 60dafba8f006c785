"""Retention in the store: per kind, which rows are past their window, how much a user (or the whole store)
holds, and the deletion of expired rows in bounded chunks, each chunk one short write transaction.

A kind is a few tables (`Part`s). Each part names how a row's owner is found (a column, or the session that
wrote it), its time, the characters of its text columns (bytes for ASCII text; the pages its rows and indexes
take are the store file's figures, store/compaction.py), which rows count at all and which may go. Times are
epoch ms; a window's cutoff is computed by the caller. SQL is the SQLite/PostgreSQL
subset: `length()`, `COALESCE`, correlated subqueries, `IN` lists.

Kept on purpose, whatever their age:
- an erased transcript message's tombstone (store/erasure.py): it stops a re-read file bringing the message
  back; an expired message a re-read brings back goes again at the next pass;
- a `memory.recalled` event the memory pass has not applied yet (past the `memory.recalls` cursor);
- each background job's newest run (its schedule is due from it);
- a task still starting or running.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from threadloom.store import documents, terms
from threadloom.store.base import Reader, Writer

KINDS: Final = ("transcripts", "signals", "journal", "tasks", "restore")
CHUNK: Final = 500  # rows a delete transaction takes at most (the service sizes each by how long the last took)
RECALL_CURSOR: Final = "memory.recalls"  # memory/reactivation.py's cursor over `memory.recalled` events
_SESSION_USER: Final = "(SELECT s.user FROM sessions s WHERE s.id = {col})"


@dataclass(frozen=True)
class Part:
    table: str
    key: str  # the column a chunk is picked by
    owner: str | None  # SQL giving the row's user; None: the store's own (no user's report counts it)
    at: str
    bytes: str
    live: str = "1 = 1"  # rows the kind holds at all
    expirable: str = "1 = 1"  # rows that may go once past the window


PARTS: Final[dict[str, tuple[Part, ...]]] = {
    "transcripts": (
        Part("transcript_messages", "id", "owner", "COALESCE(at, ingested_at)",
             "length(text) + length(tools)", live="role <> 'erased'"),
    ),
    "signals": (Part("signals", "id", _SESSION_USER.format(col="signals.sender"), "created_at", "length(body)"),),
    "journal": (
        Part("events", "id", _SESSION_USER.format(col="events.session_id"), "at", "length(detail)",
             expirable="(kind <> 'memory.recalled' OR id <= COALESCE((SELECT position FROM job_cursors "
             f"WHERE name = '{RECALL_CURSOR}'), 0))"),
        Part("tool_requests", "created_at", "owner", "created_at", "COALESCE(length(result), 0) + length(key)"),
        Part("job_runs", "id", None, "finished_at", "length(outcome)",
             expirable="id NOT IN (SELECT max(j.id) FROM job_runs j GROUP BY j.name)"),
        Part("probe_results", "id", None, "at", "COALESCE(length(error), 0) + length(category)"),
    ),
    "tasks": (
        Part("tasks", "id", "owner", "COALESCE(finished_at, started_at)",
             "length(command) + COALESCE(length(role), 0) + length(cwd)",
             expirable="finished_at IS NOT NULL AND status NOT IN ('starting', 'running')"),
    ),
    "restore": (Part("memory_archive", "id", "owner", "pruned_at", "length(payload)"),),
}  # fmt: skip


def _scope(part: Part, owner: str | None) -> tuple[str, dict[str, Any]]:
    """The condition picking `owner`'s rows of a part (every row when no owner is given)."""
    if owner is None:
        return part.live, {}
    if part.owner is None:
        return "1 = 0", {}
    return f"{part.live} AND {part.owner} = :owner", {"owner": owner}


def held(r: Reader, kind: str, owner: str | None) -> dict[str, int]:
    """Rows and text characters of `kind` that `owner` holds (the whole store's, given no owner)."""
    rows = size = 0
    for part in PARTS[kind]:
        where, params = _scope(part, owner)
        row = r.one(
            f"SELECT COUNT(*) AS n, COALESCE(SUM({part.bytes}), 0) AS c FROM {part.table} WHERE {where}", params
        )
        assert row is not None
        rows += int(row["n"])
        size += int(row["c"])
    return {"rows": rows, "chars": size}


def expired(r: Reader, kind: str, cutoff: int, owner: str | None) -> dict[str, int]:
    """Rows and text characters of `owner`'s `kind` (the store's, given no owner) a pass at `cutoff` takes."""
    rows = size = 0
    for part in PARTS[kind]:
        where, params = _scope(part, owner)
        row = r.one(
            f"SELECT COUNT(*) AS n, COALESCE(SUM({part.bytes}), 0) AS c FROM {part.table} "
            f"WHERE {where} AND {part.expirable} AND {part.at} < :cutoff",
            params | {"cutoff": cutoff},
        )
        assert row is not None
        rows += int(row["n"])
        size += int(row["c"])
    return {"rows": rows, "chars": size}


@dataclass(frozen=True)
class Chunk:
    """What one delete transaction took: rows in all, the given owner's among them, for tasks the ids whose
    files on disk go once it commits, and the last key it looked at."""

    rows: int
    owners: int
    task_ids: tuple[str, ...] = ()
    last: Any = None  # where the next chunk starts; None: this part is done


def delete_chunk(
    w: Writer, kind: str, part_index: int, cutoff: int, owner: str | None, after: Any = None, limit: int = CHUNK
) -> Chunk:
    """Delete up to `limit` expired rows of one part of `kind` (every user's: the windows are the store's), in
    the caller's transaction. `after`: the previous chunk's `last`, so that a pass never walks again over the
    rows it kept (transcripts are not in time order by id: a backfilled file's old messages come last)."""
    part = PARTS[kind][part_index]
    past = "" if after is None else f" AND {part.key} > :after"
    keys = [
        k
        for (k,) in w.tuples(
            f"SELECT {part.key} FROM {part.table} WHERE {part.live} AND {part.expirable} AND {part.at} < :cutoff"
            f"{past} ORDER BY {part.key} LIMIT :n",
            {"cutoff": cutoff, "n": limit, "after": after},
        )
    ]
    if not keys:
        return Chunk(0, 0, last=None)
    if part.key == part.at:  # picked by time (no single-column key): every row up to the chunk's last time
        where, params = f"{part.at} <= :last AND {part.at} < :cutoff", {"last": keys[-1], "cutoff": cutoff}
    else:
        where, params = f"{part.key} IN ({_marks(keys)})", _named(keys)
    mine = 0
    if owner is not None and part.owner is not None:
        mine = int(w.scalar(f"SELECT COUNT(*) FROM {part.table} WHERE {where} AND {part.owner} = :owner",
                            params | {"owner": owner}))  # fmt: skip
    task_ids: tuple[str, ...] = ()
    if kind == "tasks":
        task_ids = tuple(str(k) for k in keys)
    if kind == "transcripts":
        with terms.batched(w):
            for key in keys:
                documents.remove(w, "transcript", str(key))
    if kind == "signals":  # deliveries go by ON DELETE CASCADE too; said here so no backend depends on it
        w.execute(f"DELETE FROM signal_deliveries WHERE signal_id IN ({_marks(keys)})", _named(keys))
    gone = w.execute(f"DELETE FROM {part.table} WHERE {where}", params)
    if kind == "transcripts":
        w.execute("DELETE FROM document_terms WHERE df <= 0 AND term <> ''")
    return Chunk(gone, mine if owner is not None else gone, task_ids, last=keys[-1] if len(keys) == limit else None)


def task_ids_of(r: Reader, owner: str | None) -> list[str]:
    """Ids of `owner`'s tasks (every task, given no owner): their files on disk are theirs."""
    if owner is None:
        return [str(i) for (i,) in r.tuples("SELECT id FROM tasks")]
    return [str(i) for (i,) in r.tuples("SELECT id FROM tasks WHERE owner = :o", {"o": owner})]


def _marks(keys: Sequence[Any]) -> str:
    return ", ".join(f":k{n}" for n in range(len(keys)))


def _named(keys: Sequence[Any]) -> dict[str, Any]:
    return {f"k{n}": v for n, v in enumerate(keys)}
