"""A second laptop moves into a team database while a team server goes on writing to it: the server's rows
and the laptop's all land, none on another's id (the move reserves its shifted ids before any row lands).
Real SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import cli
from tests.test_migrate import make_home
from tests.test_migrate_merge import carols_home, source_rows
from threadloom.identity import Provenance
from threadloom.sessions import record_event
from threadloom.store.postgres import open_postgres
from threadloom.store.sqlite import open_store
from threadloom.store.transfer import copy_store

pytestmark = pytest.mark.slow
SERVER = Provenance(session_id="s-server", vendor="claude", project="p", user="alice")


def test_rows_a_server_writes_while_a_store_moves_in_and_the_stores_rows_all_land(
    tmp_path: Path, postgres_url: str
) -> None:
    (tmp_path / "a").mkdir()
    alice_home = make_home(tmp_path / "a")
    carol_home = carols_home(tmp_path / "b")
    assert cli(alice_home, "migrate", "--to", postgres_url).returncode == 0
    server = open_postgres(postgres_url)
    written: list[int] = []

    def server_writes(table: str, copied: int, total: int) -> None:  # between the offsets and carol's rows
        if len(written) < 3:
            written.append(server.write(lambda w: record_event(w, SERVER, "live.write", {"n": len(written)})))

    b_db = carol_home / "threadloom.db"
    source, target = open_store(b_db), open_postgres(postgres_url)
    try:
        copy_store(source, b_db, target, server_writes)
    finally:
        source.close()
        target.close()
    try:
        assert len(written) == 3
        kept = server.read(lambda r: r.rows("SELECT id, detail FROM events WHERE kind = 'live.write' ORDER BY id"))
        assert [row["id"] for row in kept] == written  # the server's rows are where it wrote them, unchanged
        assert [row["detail"] for row in kept] == ['{"n":0}', '{"n":1}', '{"n":2}']
        want = sum(source_rows(h / "threadloom.db", "SELECT count(*) AS n FROM events")[0]["n"]
                   for h in (alice_home, carol_home))  # fmt: skip
        assert server.read(lambda r: r.scalar("SELECT count(*) FROM events WHERE kind <> 'live.write'")) == want
        carols = source_rows(b_db, "SELECT kind, at FROM events WHERE session_id = 's-carol' ORDER BY id")
        landed = server.read(lambda r: r.rows(
            "SELECT kind, at FROM events WHERE session_id = 's-carol' ORDER BY id"))  # fmt: skip
        assert [dict(row) for row in landed] == carols  # every one, in order (their details' ids move with them)
    finally:
        server.close()


def test_a_store_that_grew_is_refused_once_a_server_wrote_since_it_moved_in(tmp_path: Path, postgres_url: str) -> None:
    (tmp_path / "a").mkdir()
    alice_home = make_home(tmp_path / "a")
    a_db = alice_home / "threadloom.db"
    laptop = Provenance(session_id="s-alice", vendor="claude", project="p", user="alice")

    def laptop_writes() -> None:
        store = open_store(a_db)
        try:
            store.write(lambda w: record_event(w, laptop, "laptop.write", {}, bookkeeping=True))
        finally:
            store.close()

    assert cli(alice_home, "migrate", "--to", postgres_url).returncode == 0
    laptop_writes()  # grown, nobody else wrote: its new rows take the next ids
    assert cli(alice_home, "migrate", "--to", postgres_url).returncode == 0
    server = open_postgres(postgres_url)
    try:
        ours = server.write(lambda w: record_event(w, SERVER, "live.write", {"n": 1}))
        laptop_writes()  # its new event's id is the one the server's row took
        refused = cli(alice_home, "migrate", "--to", postgres_url)
        assert refused.returncode == 2 and "has grown since it moved in" in refused.stderr, refused.stderr
        assert "events" in refused.stderr
        kept = server.read(lambda r: r.rows("SELECT kind, detail FROM events WHERE id = :i", {"i": ours}))
        assert [dict(row) for row in kept] == [{"kind": "live.write", "detail": '{"n":1}'}]
        assert server.read(lambda r: r.scalar("SELECT count(*) FROM events WHERE kind = 'laptop.write'")) == 1
    finally:
        server.close()
