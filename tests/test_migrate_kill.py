"""`threadloom migrate --to` killed with SIGKILL while a second store moves in beside another's (ids shifted),
then run again, ends in exactly the database a clean run makes: every table's rows, ids, edges, validity and
the journal's quoted ids; nothing duplicated. A real subprocess, real SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests import postgres_server
from tests.helpers import PY, cli, env_for
from tests.test_migrate import make_home
from tests.test_migrate_merge import carols_home
from threadloom.identity import Provenance
from threadloom.sessions import record_event
from threadloom.store.base import Writer
from threadloom.store.sqlite import open_store

pytestmark = pytest.mark.slow
EVENTS = 40_000


@pytest.fixture
def clean_url(postgres_cluster: str) -> Iterator[str]:
    yield from postgres_server.scratch_database(postgres_cluster)


def grow(db: Path) -> None:
    """Carol's journal, long enough that moving it takes seconds: events quoting her notes and signals."""
    store = open_store(db)
    try:
        notes = store.read(lambda r: [int(x) for (x,) in r.tuples("SELECT id FROM thread_notes")])
        signals = store.read(lambda r: [int(x) for (x,) in r.tuples("SELECT id FROM signals")])
        carol = Provenance(session_id="s-carol", vendor="claude", project="p", user="carol")

        def add(w: Writer, start: int) -> None:
            for i in range(start, start + 5_000):
                if i % 2:
                    record_event(w, carol, "thread.note", {"id": notes[i % len(notes)]}, bookkeeping=True)
                else:
                    record_event(w, carol, "signal.ask", {"id": signals[i % len(signals)]}, bookkeeping=True)

        for start in range(0, EVENTS, 5_000):
            store.write(lambda w, s=start: add(w, s))  # type: ignore[misc]
    finally:
        store.close()


def dump(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every table's rows, in a stable order."""
    with psycopg.connect(url) as conn:
        names = [str(n) for (n,) in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
            "AND table_type = 'BASE TABLE' ORDER BY 1").fetchall()]  # fmt: skip
        found = {}
        for name in names:
            rows = conn.execute(f'SELECT * FROM "{name}"').fetchall()
            found[name] = sorted(tuple(map(repr, row)) for row in rows)
        return found


def test_a_merge_killed_with_sigkill_ends_as_a_clean_one(tmp_path: Path, postgres_url: str, clean_url: str) -> None:
    (tmp_path / "a").mkdir()
    alice_home = make_home(tmp_path / "a")
    carol_home = carols_home(tmp_path / "b")
    grow(carol_home / "threadloom.db")
    source = open_store(carol_home / "threadloom.db")
    try:
        notes_events = int(source.read(lambda r: r.scalar("SELECT count(*) FROM events WHERE kind = 'thread.note'")))
    finally:
        source.close()
    for url in (postgres_url, clean_url):
        assert cli(alice_home, "migrate", "--to", url).returncode == 0
    with psycopg.connect(postgres_url) as conn:
        alices = int(conn.execute("SELECT count(*) FROM events").fetchone()[0])  # type: ignore[index]

    log = tmp_path / "migrate.log"
    with log.open("wb") as stderr:
        command = [PY, "-m", "threadloom", "migrate", "--to", postgres_url]
        proc = subprocess.Popen(command, env=env_for(carol_home), stdout=subprocess.DEVNULL, stderr=stderr)
    landed = 0
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            landed = int(conn.execute("SELECT count(*) FROM events").fetchone()[0]) - alices  # type: ignore[index]
            if landed >= 2_000:
                break
            time.sleep(0.01)
    assert proc.poll() is None, log.read_text()  # still copying: killed part-way
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with psycopg.connect(postgres_url) as conn:
        left = conn.execute("SELECT count(*) FROM job_cursors WHERE name LIKE 'migrate.copy:%'").fetchone()
    assert left is not None and left[0] >= 1 and 2_000 <= landed < EVENTS

    resumed = cli(carol_home, "migrate", "--to", postgres_url, "--json", timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["resumed"] is True
    clean = cli(carol_home, "migrate", "--to", clean_url, timeout=300)
    assert clean.returncode == 0, clean.stderr

    killed, whole = dump(postgres_url), dump(clean_url)
    assert killed.keys() == whole.keys()
    for table in whole:
        assert len(killed[table]) == len(whole[table]), table
        assert killed[table] == whole[table], table
    with psycopg.connect(postgres_url) as conn:
        (pointing,) = conn.execute(  # type: ignore[misc]
            "SELECT count(*) FROM events e JOIN thread_notes n ON n.id = CAST(e.detail::json ->> 'id' AS bigint) "
            "WHERE e.kind = 'thread.note' AND n.owner IN ('carol', 'dave')"
        ).fetchone()
    assert pointing == notes_events > EVENTS // 2  # each of carol's note events names one of her notes, after the shift
