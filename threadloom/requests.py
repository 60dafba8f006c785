"""Idempotency keys for write tools: a retried call with the same key returns the first call's result
instead of writing twice.

A call's key is claimed inside the first write transaction the call makes (by `record_event`, which
every write path calls), so the claim and the write commit together: a crash between the write and
the reply leaves the claim, and the retry learns the write happened. A second call racing with the
same key fails its own transaction, writing nothing. A call that must write something else first (a
thread reopened before its note) does that `unclaimed()`, so the key commits with the write the call is
for: a crash between them leaves the key free, and the retry writes it.

A call that writes repository files before the transaction that indexes them (a thread's file) first records
them (`record_files`: path and digest, under the tool's name + `#files`); the claim drops that record in its
transaction. Killed between the file and the claim, the retry finds what it left (`unfinished_files`) and
finishes it instead of writing a second file beside the first (threads/pending.py).
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Final

from threadloom.clock import now_ms
from threadloom.errors import InvalidInput, ThreadloomError
from threadloom.search.model import Viewer
from threadloom.store import memories
from threadloom.store.base import Reader, Store, Writer

MAX_KEY_CHARS: Final = 200
MEMORY_ID: Final = re.compile(r"\bm_[0-9a-f]{16}\b")  # memory/model.py's new_memory_id
FILES: Final = "#files"  # after a tool's name: the files its call wrote and has not yet indexed


# What a keyed call killed before it finished kept with its key, handed by the server to the retry of a tool
# that finishes such a call (`ToolDef.resumes`; a tournament's missing roles).
RESUMING: ContextVar[dict[str, Any] | None] = ContextVar("threadloom_request_resuming", default=None)


class RequestInFlight(ThreadloomError):
    """Another call with the same idempotency key is running or has just written: retry to get its result."""

    retryable = True


@dataclass(frozen=True)
class Request:
    owner: str
    tool: str
    key: str
    nonce: str = field(default_factory=lambda: secrets.token_hex(8))


CURRENT: ContextVar[Request | None] = ContextVar("threadloom_request", default=None)


@contextmanager
def unclaimed() -> Iterator[None]:
    """Writes made meanwhile do not claim the current call's key (a retry may safely make them again)."""
    token = CURRENT.set(None)
    try:
        yield
    finally:
        CURRENT.reset(token)


def claim(w: Writer) -> None:
    """Claim the current call's key in this transaction (once per call; a no-op without a key)."""
    request = CURRENT.get()
    if request is None:
        return
    params = {"o": request.owner, "t": request.tool, "k": request.key, "n": request.nonce, "now": now_ms()}
    w.execute(
        "INSERT INTO tool_requests (owner, tool, key, nonce, created_at) VALUES (:o, :t, :k, :n, :now) "
        "ON CONFLICT (owner, tool, key) DO NOTHING",
        params,
    )
    holder = w.scalar("SELECT nonce FROM tool_requests WHERE owner = :o AND tool = :t AND key = :k", params)
    if holder != request.nonce:
        raise RequestInFlight(
            f"a {request.tool} call with idempotency key {request.key!r} is running or has written; retry it to "
            "get that call's result"
        )
    w.execute(  # the files its calls wrote are indexed in this transaction: nothing is left to finish
        "DELETE FROM tool_requests WHERE owner = :o AND tool = :t AND key = :k",
        {"o": request.owner, "t": request.tool + FILES, "k": request.key},
    )


def record_files(store: Store, files: dict[str, str]) -> None:
    """Before the current call writes them: repository files (real path -> sha256 of the text) that its claim's
    transaction will index. Added to what earlier calls with the key left unfinished; a no-op without a key."""
    request = CURRENT.get()
    if request is None:
        return

    def tx(w: Writer) -> None:
        params = {"o": request.owner, "t": request.tool + FILES, "k": request.key}
        kept = w.scalar("SELECT result FROM tool_requests WHERE owner = :o AND tool = :t AND key = :k", params)
        recorded = json.dumps((_files(kept) | files), sort_keys=True)
        w.execute(
            "INSERT INTO tool_requests (owner, tool, key, nonce, result, created_at) VALUES (:o, :t, :k, :n, :r, "
            ":now) ON CONFLICT (owner, tool, key) DO UPDATE SET result = :r, created_at = :now",
            params | {"n": request.nonce, "r": recorded, "now": now_ms()},
        )

    store.write(tx)


def unfinished_files(store: Store) -> dict[str, str]:
    """The files (real path -> sha256) calls with the current key wrote and never indexed: killed in between."""
    request = CURRENT.get()
    if request is None:
        return {}
    params = {"o": request.owner, "t": request.tool + FILES, "k": request.key}
    sql = "SELECT result FROM tool_requests WHERE owner = :o AND tool = :t AND key = :k"
    return _files(store.read(lambda r: r.scalar(sql, params)))


def _files(kept: object) -> dict[str, str]:
    try:
        found = json.loads(str(kept)) if kept else {}
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def keep(w: Writer, result: dict[str, Any]) -> None:
    """Keep `result` for the current call's retries in this transaction, with its claim (a spawned task's id: a
    call killed before it answers still tells its retry which task it admitted). `remember` replaces it."""
    request = CURRENT.get()
    if request is not None:
        w.execute(
            "UPDATE tool_requests SET result = :r WHERE owner = :o AND tool = :t AND key = :k AND nonce = :n",
            {"r": json.dumps(result), "o": request.owner, "t": request.tool, "k": request.key, "n": request.nonce},
        )


def earlier(store: Store, owner: str, tool: str, key: str, viewer: Viewer | None = None) -> dict[str, Any] | None:
    """What the first call with this key returned, if one wrote something. Given the caller as `viewer`, an answer
    naming a memory they may no longer see (deleted, erased, or no longer shared with them) is not handed back:
    it would show what they lost."""

    def read(r: Reader) -> dict[str, Any] | None:
        row = r.one(
            "SELECT result FROM tool_requests WHERE owner = :o AND tool = :t AND key = :k",
            {"o": owner, "t": tool, "k": key},
        )
        if row is None:
            return None
        named = sorted(set(MEMORY_ID.findall(row["result"] or ""))) if viewer is not None else []
        if named and len(memories.get_many(r, named, viewer)) < len(named):
            raise InvalidInput(
                f"the first {tool} call with this idempotency key answered about a memory you can no longer see "
                "(deleted, erased or no longer shared with you): it is not replayed; call again with a new key"
            )
        if row["result"] is None:
            return {"replayed": True, "note": "the first call with this key wrote, but its result was not kept"}
        return dict(json.loads(row["result"])) | {"replayed": True}

    return store.read(read)


def remember(store: Store, request: Request, result: dict[str, Any]) -> None:
    """Keep the first call's result for its retries (only if that call claimed the key)."""
    store.write(
        lambda w: w.execute(
            "UPDATE tool_requests SET result = :r WHERE owner = :o AND tool = :t AND key = :k AND nonce = :n",
            {"r": json.dumps(result), "o": request.owner, "t": request.tool, "k": request.key, "n": request.nonce},
        )
    )
