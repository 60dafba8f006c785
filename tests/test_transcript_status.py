"""The transcript counts in `status` (ingest/report.transcript_status) follow what is stored: kept per
process between writes, they change with a new message and with an erasure, and an erased turn is not
counted."""

from __future__ import annotations

from typing import Any

from tests.conftest import Backend
from threadloom.erasure.service import Eraser
from threadloom.ingest.report import transcript_status
from threadloom.search.engine import SearchEngine
from threadloom.search.model import Document
from threadloom.store import transcripts
from threadloom.store.erasure import Selector
from threadloom.store.transcripts import StoredMessage

AT = 1_780_000_000_000


def add(store: Any, owner: str, session: str, n: int, first: int = 0) -> None:
    def write(w: Any) -> None:
        for i in range(first, first + n):
            m = StoredMessage("codex", session, f"{session}:{i}", "user", f"turn {i} of {session}", "[]", AT + i,
                              "/p", "/p", None, "t", "", i)  # fmt: skip
            row = transcripts.upsert_message(w, owner, m, False, AT + i)
            assert row is not None
            SearchEngine.index(
                w, Document("transcript", str(row[0]), m.text, "/p", session, "user", occurred_at=AT + i)
            )

    store.write(write)


def counts(store: Any, owner: str) -> tuple[int, int]:
    found = transcript_status(store, owner)["sources"]
    return (found[0]["messages"], found[0]["sessions"]) if found else (0, 0)


def test_counts_follow_new_messages_and_erasure_and_stay_per_owner(backend: Backend) -> None:
    store = backend.open()
    try:
        add(store, "ann", "s1", 5)
        add(store, "bob", "b1", 3)
        assert counts(store, "ann") == (5, 1)
        assert counts(store, "ann") == (5, 1)  # kept: the same answer
        add(store, "ann", "s2", 2)
        assert counts(store, "ann") == (7, 2)
        assert counts(store, "bob") == (3, 1)
        result = Eraser(store).forget("ann", Selector(session="s1"), dry_run=False)
        assert result
        assert counts(store, "ann") == (2, 1)  # the tombstones are not messages
        assert counts(store, "bob") == (3, 1)
    finally:
        store.close()
