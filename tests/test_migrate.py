"""`threadloom migrate --to postgresql://...`: a personal SQLite store moved into a team database keeps its
ids, edges, validity and provenance; running it twice ends the same; a run killed -9 half-way resumes; a
wrong URL or a target from a newer threadloom are clear refusals that write nothing. Real SQLite and
PostgreSQL (tests/postgres_server.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest

from tests.helpers import PY, cli, env_for, wait_for
from tests.portable_world import build
from threadloom.config import Settings
from threadloom.memory.model import NewMemory
from threadloom.runtime import open_runtime
from threadloom.store import document_vectors
from threadloom.store.postgres import open_postgres
from threadloom.store.sqlite import open_store
from threadloom.store.transfer import BATCH, copy_store, tables

pytestmark = pytest.mark.slow
SAMPLED = ("memories", "memory_edges", "memory_entities", "signals", "signal_deliveries", "thread_notes", "events")


def make_home(tmp: Path, extra_memories: int = 0) -> Path:
    """A personal store (two users' memories, links, amendments, notes, claims, style, a signal, a vector)."""
    world = build(tmp)
    rt = world.rt
    rt.signals.whisper(world.alice, "s-bob", "the build is red")
    doc_id = int(rt.store.read(lambda r: r.scalar("SELECT min(id) FROM documents")))
    vector = np.arange(8, dtype=np.float32).tobytes()
    rt.store.write(lambda w: document_vectors.put_vector(w, doc_id, "test-fp", "digest", vector))
    for i in range(extra_memories):
        rt.memory.store(NewMemory(content=f"fact {i}: service {i} listens on port {9000 + i}"), world.alice)
    rt.close()
    return tmp / "home-a"


def rows_of(url_or_path: str | Path, table: str) -> list[dict[str, Any]]:
    if isinstance(url_or_path, Path):
        store: Any = open_store(url_or_path)
    else:
        store = open_postgres(url_or_path)
    try:
        return store.read(lambda r: [dict(row) for row in r.rows(f"SELECT * FROM {table} ORDER BY 1, 2")])  # type: ignore[no-any-return]
    finally:
        store.close()


def assert_same(source: Path, url: str) -> None:
    sqlite = open_store(source)
    pg = open_postgres(url)
    try:
        for table in sqlite.read(tables):
            mine = " WHERE name NOT LIKE 'migrate.%'" if table.name == "job_cursors" else ""  # the copy's mark
            count = f"SELECT count(*) FROM {table.name}{mine}"
            assert sqlite.read(lambda r, c=count: r.scalar(c)) == pg.read(lambda r, c=count: r.scalar(c)), table.name
        for name in SAMPLED:
            sql = f"SELECT * FROM {name} ORDER BY 1, 2"
            assert sqlite.read(lambda r, s=sql: r.rows(s)) == pg.read(lambda r, s=sql: r.rows(s)), name
        # what PostgreSQL keeps beside the rows: every document's terms, the vector's pgvector copy
        assert pg.read(lambda r: r.scalar("SELECT count(*) FROM documents WHERE fts_len = 0")) == 0
        assert pg.read(lambda r: r.scalar("SELECT count(*) FROM document_vectors WHERE embedding IS NULL")) == 0
    finally:
        sqlite.close()
        pg.close()


def test_a_store_moves_in_whole_and_a_second_run_ends_the_same(tmp_path: Path, postgres_url: str) -> None:
    home = make_home(tmp_path)
    db = home / "threadloom.db"
    source, target = open_store(db), open_postgres(postgres_url)
    try:
        first = copy_store(source, db, target)
        second = copy_store(source, db, target)
    finally:
        source.close()
        target.close()
    assert not first.again and second.again and first.tables == second.tables
    assert first.tables["memories"] >= 6 and first.tables["memory_edges"] >= 1
    assert_same(db, postgres_url)
    # the team side goes on from there: new rows get new ids, never one of the copied ones
    rt = open_runtime(Settings(home=tmp_path / "team", embedder="none", ingest=False, user="alice",
                               store_url=postgres_url), "cli")  # type: ignore[arg-type]  # fmt: skip
    try:
        info = rt_session(tmp_path)
        rt.sessions.open(info)
        alice = info.provenance()
        stored = rt.memory.store(NewMemory(content="the team store takes new memories"), alice)
        sent = rt.signals.whisper(alice, "s-bob", "and new signals")
        old_signals = [row["id"] for row in rows_of(db, "signals")]
        assert sent.id is not None and sent.id > max(old_signals)
        assert stored.memory.id not in {row["id"] for row in rows_of(db, "memories")}
    finally:
        rt.close()


def rt_session(tmp: Path) -> Any:
    from threadloom.sessions import SessionInfo

    repo = tmp / "repo"
    info = SessionInfo(id="s-team", vendor="claude", transport="stdio", project=str(repo), cwd=str(repo), pid=None)
    return SessionInfo(**{**info.__dict__, "user": "alice", "author": "alice", "org": "alice"})


@pytest.mark.timeout(300)
def test_a_migration_killed_half_way_resumes_and_finishes(tmp_path: Path, postgres_url: str) -> None:
    home = make_home(tmp_path, extra_memories=500)
    env = env_for(home, THREADLOOM_USER="alice")
    log = tmp_path / "migrate.log"
    with psycopg.connect(postgres_url, autocommit=True) as gate:
        # The second batch of memories waits on a lock the test holds (polling the count and killing at once
        # raced the copy: a test stalled 0.3 s saw all 507 copied), and the copy is killed there.
        gate.execute(
            "CREATE FUNCTION gate() RETURNS trigger AS $$ BEGIN IF (SELECT count(*) FROM memories) >= "
            f"{BATCH} THEN PERFORM pg_advisory_xact_lock(4242); END IF; RETURN NEW; END $$ LANGUAGE plpgsql"
        )
        gate.execute("CREATE TRIGGER gate BEFORE INSERT ON memories FOR EACH ROW EXECUTE FUNCTION gate()")
        gate.execute("SELECT pg_advisory_lock(4242)")
        with log.open("wb") as stderr:
            command = [PY, "-m", "threadloom", "migrate", "--to", postgres_url]
            proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
        waiting = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event = 'advisory'"
        wait_for(lambda: proc.poll() is not None or gate.execute(waiting).fetchone() != (0,), timeout=120)
        assert proc.poll() is None, log.read_text()  # still copying: killed half-way
        copied = int(gate.execute("SELECT count(*) FROM memories").fetchone()[0])  # type: ignore[index]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        gate.execute("SELECT pg_advisory_unlock(4242)")  # its backend finds its client gone and rolls back
        gate.execute("DROP TRIGGER gate ON memories")
        gate.execute("DROP FUNCTION gate()")
    assert copied == BATCH  # the first batch, committed
    with psycopg.connect(postgres_url) as conn:
        left = conn.execute("SELECT count(*) FROM job_cursors WHERE name LIKE 'migrate.copy:%'").fetchone()
    assert left is not None and left[0] >= 1  # where it stopped is recorded
    done = cli(home, "migrate", "--to", postgres_url, "--json", timeout=300, THREADLOOM_USER="alice")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["resumed"] is True and report["tables"]["memories"] < 506  # it went on, not from the start
    assert_same(home / "threadloom.db", postgres_url)
    again = cli(home, "migrate", "--to", postgres_url, "--json", timeout=300, THREADLOOM_USER="alice")
    assert again.returncode == 0 and json.loads(again.stdout)["again"] is True
    assert_same(home / "threadloom.db", postgres_url)


def test_wrong_urls_and_a_newer_schema_are_refused_and_an_occupied_target_is_shared(
    tmp_path: Path, postgres_url: str, postgres_cluster: str
) -> None:
    home = make_home(tmp_path)
    wrong = cli(home, "migrate", "--to", "mysql://u:p@localhost/team")
    assert wrong.returncode == 2 and "--to takes a postgresql:// URL" in wrong.stderr
    unreachable = cli(home, "migrate", "--to", "postgresql://ana:hunter2@127.0.0.1:1/team")
    assert unreachable.returncode == 2 and "cannot open the PostgreSQL store" in unreachable.stderr
    assert "hunter2" not in unreachable.stderr + unreachable.stdout
    missing = cli(home, "migrate", "--to", postgres_url, "--from", str(tmp_path / "nothing.db"))
    assert missing.returncode == 2 and "no SQLite store at" in missing.stderr
    assert not (tmp_path / "nothing.db").exists()

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("INSERT INTO schema_migrations (name, applied_at) VALUES ('m999_from_the_future', 0)")
    newer = cli(home, "migrate", "--to", postgres_url)
    assert newer.returncode == 2 and "newer threadloom" in newer.stderr
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM job_cursors WHERE name LIKE 'migrate.%'").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM memories").fetchone() == (0,)
        conn.execute("DELETE FROM schema_migrations WHERE name = 'm999_from_the_future'")

    (tmp_path / "other").mkdir()
    first = make_home(tmp_path / "other")  # someone else's store, moved in first
    assert cli(first, "migrate", "--to", postgres_url).returncode == 0
    beside = cli(home, "migrate", "--to", postgres_url)  # lands beside it (tests/test_migrate_merge.py)
    assert beside.returncode == 0, beside.stderr
