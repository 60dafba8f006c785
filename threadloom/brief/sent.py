"""What each session was sent in its briefs, so a query-scope brief does not send it again.

Kept in the event journal (`brief.sent`, one event per brief, its item keys), not in a process's memory:
the session-start hook's brief is rendered by the daemon, and the session's later `brief` calls may be
served by another process (--in-process, HTTP). Bookkeeping: a full or busy store loses the record (the
next query brief then repeats a few lines), never the brief.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection
from typing import Final

from threadloom.errors import ThreadloomError
from threadloom.identity import Provenance
from threadloom.sessions import record_event
from threadloom.store.base import Reader, Store

EVENT: Final = "brief.sent"
MAX_EVENTS: Final = 200  # a session's newest briefs considered; older ones are long out of its context
log = logging.getLogger(__name__)


def already_sent(store: Store, session_id: str) -> set[str]:
    """Every item key the session's briefs carried."""

    def read(r: Reader) -> set[str]:
        rows = r.rows(
            "SELECT detail FROM events WHERE session_id = :sid AND kind = :kind ORDER BY id DESC LIMIT :n",
            {"sid": session_id, "kind": EVENT, "n": MAX_EVENTS},
        )
        keys: set[str] = set()
        for row in rows:
            try:
                found = json.loads(row["detail"]).get("keys", [])
            except (ValueError, AttributeError):
                continue
            keys.update(k for k in found if isinstance(k, str))
        return keys

    return store.read(read)


def record(store: Store, provenance: Provenance, keys: Collection[str], scope: str, tokens: int) -> None:
    """Journal what one brief sent; a failure is logged, never raised."""
    if not provenance.session_id:
        return
    detail = {"scope": scope, "tokens": tokens, "keys": sorted(keys)}
    try:
        store.write(lambda w: record_event(w, provenance, EVENT, detail, bookkeeping=True))
    except ThreadloomError as exc:
        log.warning("brief not journaled: %s", exc.message)
