"""A second store moved in beside another's (`threadloom migrate --to`) has its integer ids shifted: the ids its
event journal quotes inside `events.detail` (a note's, a signal's, a merged note's, a brief's keys) move with
them, so each event still names the row it was about. Real SQLite stores and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import cli
from tests.test_migrate import make_home
from tests.test_migrate_merge import carols_home
from threadloom.identity import Provenance
from threadloom.sessions import record_event
from threadloom.store.base import Reader
from threadloom.store.postgres import open_postgres
from threadloom.store.sqlite import open_store

pytestmark = pytest.mark.slow
TEXT_OF = {
    "thread_notes": "SELECT text FROM thread_notes WHERE id = :i",
    "signals": "SELECT body FROM signals WHERE id = :i",
}
KEY_TABLES = {"note": "thread_notes", "quote": "thread_notes", "signal": "signals"}


def quoted(kind: str, detail: dict[str, Any]) -> list[tuple[str, int]]:
    """What an event's detail names by integer id: (table, id)."""
    if kind in ("thread.note", "thread.quote"):
        return [("thread_notes", detail["id"])]
    if kind.startswith("signal."):
        return [("signals", detail["id"])]
    if kind.endswith("_merged") and kind.startswith("thread."):
        return [("thread_notes", detail["survivor"]), ("thread_notes", detail["merged"])]
    if kind == "brief.sent":
        pairs = [str(k).split(":", 1) for k in detail["keys"]]
        return [(KEY_TABLES[k], int(i)) for k, i in pairs if k in KEY_TABLES]
    return []


def named(r: Reader) -> dict[tuple[str, int, str], list[str]]:
    """Each event that quotes an id, by (session, time, kind): the text of every row it names."""
    found: dict[tuple[str, int, str], list[str]] = {}
    for row in r.rows("SELECT session_id, at, kind, detail FROM events ORDER BY id"):
        for table, ident in quoted(str(row["kind"]), json.loads(row["detail"])):
            text = r.scalar(TEXT_OF[table], {"i": ident})
            found.setdefault((str(row["session_id"]), int(row["at"]), str(row["kind"])), []).append(str(text))
    return found


def test_event_details_name_the_same_rows_after_a_merge(tmp_path: Path, postgres_url: str) -> None:
    (tmp_path / "a").mkdir()
    alice_home = make_home(tmp_path / "a")
    carol_home = carols_home(tmp_path / "b")
    b_db = carol_home / "threadloom.db"
    source = open_store(b_db)
    try:  # a note merged into another and a brief that sent a signal and a note, as the journal records them
        notes = source.read(lambda r: [int(x) for (x,) in r.tuples("SELECT id FROM thread_notes ORDER BY id")])
        signal = int(source.read(lambda r: r.scalar("SELECT max(id) FROM signals")))
        carol = Provenance(session_id="s-carol", vendor="claude", project="p", user="carol")
        detail = {
            "scope": "session",
            "tokens": 9,
            "keys": sorted([f"note:{notes[0]}", f"signal:{signal}", "memory:m_x"]),
        }
        source.write(lambda w: record_event(w, carol, "brief.sent", detail, bookkeeping=True))
        merged = {"survivor": notes[0], "merged": notes[-1]}
        source.write(lambda w: record_event(w, carol, "thread.note_merged", merged, bookkeeping=True))
        before = source.read(named)
    finally:
        source.close()
    kinds = {kind for _, _, kind in before}
    assert {"thread.note", "thread.quote", "signal.ask", "signal.answer", "brief.sent", "thread.note_merged"} <= kinds

    assert cli(alice_home, "migrate", "--to", postgres_url).returncode == 0
    done = cli(carol_home, "migrate", "--to", postgres_url)
    assert done.returncode == 0, done.stderr
    pg = open_postgres(postgres_url)
    try:
        shifted = pg.read(lambda r: r.scalar("SELECT count(*) FROM job_cursors WHERE name LIKE 'migrate.offset:%' "
                                             "AND name LIKE '%:thread_notes' AND position > 0"))  # fmt: skip
        assert shifted == 1  # carol's notes did move: the check below would pass unshifted otherwise
        after = pg.read(named)
        brief = pg.read(lambda r: json.loads(r.scalar("SELECT detail FROM events WHERE kind = 'brief.sent'")))
    finally:
        pg.close()
    for key, texts in before.items():
        assert after[key] == texts, key
    assert "memory:m_x" in brief["keys"] and brief["keys"] == sorted(brief["keys"])
