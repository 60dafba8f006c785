"""`threadloom migrate --to` used clumsily: a URL that does not parse (its password never shown), a `--from`
that is no threadloom store (refused before anything opens it for writing, the file untouched), and Ctrl-C
mid-run (a one-line message, exit 130, and the next run resumes to the same database a clean run makes).
Real SQLite and PostgreSQL, the CLI as a subprocess."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import psycopg
import pytest

from tests.helpers import PY, cli, env_for
from tests.test_migrate import assert_same, make_home
from threadloom.identity import Provenance
from threadloom.sessions import record_event
from threadloom.store.sqlite import open_store

pytestmark = pytest.mark.slow


def test_unparseable_urls_and_foreign_files_are_refused_clearly(tmp_path: Path, postgres_url: str) -> None:
    home = make_home(tmp_path)
    for url in ("postgresql://ana:hunter2@[::1/team", "postgresql://ana:hunter2@%zz/team"):
        done = cli(home, "migrate", "--to", url)
        assert done.returncode == 2 and "cannot open the PostgreSQL store" in done.stderr, done.stderr
        assert "hunter2" not in done.stderr + done.stdout and "Traceback" not in done.stderr

    garbage, empty, other = tmp_path / "garbage.db", tmp_path / "empty.db", tmp_path / "other.db"
    garbage.write_bytes(b"not a database at all\n")
    empty.write_bytes(b"")
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT)")
    before = {p: p.read_bytes() for p in (garbage, empty, other)}
    said = {
        garbage: "is not a SQLite database",
        empty: "is not a SQLite database (it is empty)",
        other: "is a SQLite database but not a threadloom store",
    }
    for path, message in said.items():
        done = cli(home, "migrate", "--to", postgres_url, "--from", str(path))
        assert done.returncode == 2 and message in done.stderr, done.stderr
    assert {p: p.read_bytes() for p in before} == before
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT count(*) FROM job_cursors WHERE name LIKE 'migrate.%'").fetchone() == (0,)


@pytest.mark.timeout(300)
def test_ctrl_c_mid_run_says_how_to_resume_and_the_next_run_finishes_it(tmp_path: Path, postgres_url: str) -> None:
    home = make_home(tmp_path)
    db = home / "threadloom.db"
    store = open_store(db)
    try:
        prov = Provenance(session_id="s-alice", vendor="claude", project="p", user="alice")
        for _ in range(6):
            store.write(
                lambda w: [record_event(w, prov, "test.bulk", {"n": i}, bookkeeping=True) for i in range(5_000)]
            )
    finally:
        store.close()
    proc = subprocess.Popen(
        [PY, "-m", "threadloom", "migrate", "--to", postgres_url],
        env=env_for(home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            if int(conn.execute("SELECT count(*) FROM events").fetchone()[0]) >= 2_000:  # type: ignore[index]
                break
            time.sleep(0.01)
    assert proc.poll() is None  # still copying
    os.kill(proc.pid, signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "interrupted: run the same command again to resume where it stopped" in stderr
    assert "Traceback" not in stderr
    done = cli(home, "migrate", "--to", postgres_url, timeout=300)
    assert done.returncode == 0, done.stderr
    assert_same(db, postgres_url)


def test_a_new_store_where_one_moved_in_from_before_is_refused(tmp_path: Path, postgres_url: str) -> None:
    first = tmp_path / "laptop"
    first.mkdir()
    home = make_home(first)
    assert cli(home, "migrate", "--to", postgres_url).returncode == 0
    with psycopg.connect(postgres_url) as conn:
        before = conn.execute("SELECT (SELECT count(*) FROM memories), (SELECT count(*) FROM events)").fetchone()
    shutil.rmtree(first)  # the laptop's store made afresh, at the same path
    first.mkdir()
    home = make_home(first)
    again = cli(home, "migrate", "--to", postgres_url)
    assert again.returncode == 2 and "another store, made before this one, moved into" in again.stderr, again.stderr
    with psycopg.connect(postgres_url) as conn:
        after = conn.execute("SELECT (SELECT count(*) FROM memories), (SELECT count(*) FROM events)").fetchone()
    assert after == before
