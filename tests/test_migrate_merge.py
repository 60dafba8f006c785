"""Two teammates move their laptops' SQLite stores into one team database (`threadloom migrate --to`): the
second lands beside the first, text ids kept and integer ids shifted with every reference to them, edges,
validity and provenance intact; a run stopped half-way resumes, and running either again adds nothing.
Real SQLite and PostgreSQL (tests/postgres_server.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers import cli
from tests.portable_world import session
from tests.test_migrate import make_home
from threadloom.config import Settings
from threadloom.identity import Provenance
from threadloom.memory.model import NewMemory
from threadloom.runtime import open_runtime
from threadloom.sessions import record_event
from threadloom.store.postgres import open_postgres
from threadloom.store.sqlite import open_store
from threadloom.store.transfer import copy_store

pytestmark = pytest.mark.slow
COUNTED = ("memories", "memory_edges", "events", "signals", "signal_deliveries", "thread_notes", "documents",
           "sessions", "user_claims", "style_habits", "document_vectors")  # fmt: skip


def carols_home(tmp: Path) -> Path:
    """The second laptop: carol and dave's store, with its own links, an amendment, notes, a question answered
    and the same thread project name as the first (its summary's search entry names the same thread)."""
    repo = tmp / "repo"
    repo.mkdir(parents=True)
    rt = open_runtime(Settings(home=tmp / "home-b", embedder="none", ingest=False, user="carol"), "cli")
    carol, dave = session(rt, "carol", repo), session(rt, "dave", repo)
    mem = rt.memory
    base = mem.store(NewMemory(content="the staging database is postgres 16", entities=("postgres",)), carol).memory
    rule = mem.store(NewMemory(content="migrations run before deploys", kind="decision"), carol).memory
    mem.link(rule.id, base.id, "depends_on", carol, reason="the schema lives there")
    mem.amend(rule.id, carol, content="migrations run after the backup", reason="incident")
    mem.store(NewMemory(content="dave owns the release checklist", visibility="project"), dave)
    rt.threads.create_project(carol, "Rockets", "", "solo")
    rt.notes.add_note(carol, "the staging copy is nightly", "insight")
    rt.notes.add_quote(dave, "no deploys on fridays")
    asked = rt.signals.ask(carol, "s-dave", "is the checklist done?")
    rt.signals.respond(dave, int(asked.id or 0), "yes, signed off")
    rt.close()
    return tmp / "home-b"


def snapshot(url: str) -> dict[str, Any]:
    pg = open_postgres(url)
    try:
        return pg.read(
            lambda r: (
                {t: r.scalar(f"SELECT count(*) FROM {t}") for t in COUNTED}
                | {"terms": r.rows("SELECT term, df FROM document_terms ORDER BY term")}
            )
        )
    finally:
        pg.close()


def source_rows(db: Path, sql: str) -> list[dict[str, Any]]:
    store = open_store(db)
    try:
        return [dict(row) for row in store.read(lambda r: r.rows(sql))]
    finally:
        store.close()


class Stop(Exception):
    pass


def test_two_laptops_move_into_one_team_database(tmp_path: Path, postgres_url: str) -> None:
    (tmp_path / "a").mkdir()
    alice_home = make_home(tmp_path / "a")
    carol_home = carols_home(tmp_path / "b")
    a_db, b_db = alice_home / "threadloom.db", carol_home / "threadloom.db"
    assert cli(alice_home, "migrate", "--to", postgres_url).returncode == 0

    def stop_half_way(table: str, copied: int, total: int) -> None:
        if table == "memory_edges":
            raise Stop  # a run killed after some tables committed

    source, target = open_store(b_db), open_postgres(postgres_url)
    with pytest.raises(Stop):
        copy_store(source, b_db, target, stop_half_way)
    source.close(), target.close()  # type: ignore[func-returns-value]
    second = cli(carol_home, "migrate", "--to", postgres_url, "--json")
    assert second.returncode == 0, second.stderr
    merged = snapshot(postgres_url)

    sql = {t: f"SELECT count(*) AS n FROM {t}" for t in COUNTED}
    for table, count in sql.items():
        want = source_rows(a_db, count)[0]["n"] + source_rows(b_db, count)[0]["n"]
        if table == "documents":  # the thread summary both index under rockets/... is the first's
            want -= 1
        assert merged[table] == want, table

    pg = open_postgres(postgres_url)
    try:
        # text ids, edges, validity and provenance kept
        mem_cols = "id, content, owner, project, visibility, valid_from, valid_to, superseded_by, session_id, origin"
        for db in (a_db, b_db):
            for row in source_rows(db, f"SELECT {mem_cols} FROM memories"):
                assert pg.read(lambda r, i=row["id"]: dict(r.one(f"SELECT {mem_cols} FROM memories WHERE id = :i",
                                                                   {"i": i}) or {})) == row  # fmt: skip
            for edge in source_rows(db, "SELECT source, target, type, reason, made_by, session_id FROM memory_edges"):
                found = pg.read(lambda r, e=edge: r.scalar(
                    "SELECT count(*) FROM memory_edges WHERE source = :source AND target = :target AND type = :type "
                    "AND COALESCE(reason, '') = COALESCE(:reason, '') AND made_by = :made_by "
                    "AND session_id = :session_id", e))  # fmt: skip
                assert found == 1, edge
        # carol's shifted integer ids still meet: the answer replies to her question, each delivery names its
        # signal, each note's search entry is the note, her session's events are hers
        answer = pg.read(lambda r: r.one(
            "SELECT q.body AS question, d.recipient FROM signals a JOIN signals q ON q.id = a.reply_to "
            "JOIN signal_deliveries d ON d.signal_id = a.id WHERE a.body = 'yes, signed off'"))  # fmt: skip
        assert answer == {"question": "is the checklist done?", "recipient": "s-carol"}
        for text in ("the staging copy is nightly", "no deploys on fridays"):
            assert pg.read(lambda r, t=text: r.scalar(
                "SELECT count(*) FROM thread_notes n JOIN documents d ON d.ref = CAST(n.id AS TEXT) "
                "AND d.kind IN ('note', 'quote') WHERE n.text = :t AND d.body = :t", {"t": t})) == 1  # fmt: skip
        assert pg.read(lambda r: r.scalar(
            "SELECT count(*) FROM events WHERE session_id IN ('s-carol', 's-dave')")) == source_rows(
            b_db, "SELECT count(*) AS n FROM events WHERE session_id IN ('s-carol', 's-dave')")[0]["n"]  # fmt: skip
        assert pg.read(lambda r: r.scalar("SELECT df FROM document_terms WHERE term = ''")) == merged["documents"]
        carols_only = source_rows(b_db, "SELECT df FROM document_terms WHERE term = 'stage'")[0]["df"]
        assert (
            carols_only > 0
            and pg.read(lambda r: r.scalar("SELECT df FROM document_terms WHERE term = 'stage'")) == carols_only
        )
        # the team server goes on writing: a new event takes a fresh id
        prov = Provenance(session_id="s-carol", vendor="claude", project="p", user="carol")
        assert pg.write(lambda w: record_event(w, prov, "memory.stored", {}, bookkeeping=True)) > 0
    finally:
        pg.close()

    for home in (alice_home, carol_home):  # running either again adds nothing
        assert cli(home, "migrate", "--to", postgres_url).returncode == 0
    again = snapshot(postgres_url)
    assert again == merged | {"events": merged["events"] + 1}

    grown = open_store(a_db)  # alice's laptop went on working after carol moved in
    try:
        alice = Provenance(session_id="s-alice", vendor="claude", project="p", user="alice")
        grown.write(lambda w: record_event(w, alice, "memory.stored", {}, bookkeeping=True))
    finally:
        grown.close()
    stored = cli(alice_home, "memory", "store", "the release train leaves on thursdays")  # full-text rows too
    assert stored.returncode == 0, stored.stderr
    again = snapshot(postgres_url)
    refused = cli(alice_home, "migrate", "--to", postgres_url)
    assert refused.returncode == 2 and "has grown since it moved into" in refused.stderr, refused.stderr
    assert "events" in refused.stderr and snapshot(postgres_url) == again
    assert "_fts_" not in refused.stderr  # the tables a person knows, not SQLite's full-text index's own
