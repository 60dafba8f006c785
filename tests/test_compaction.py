"""Compaction while another process writes: no acknowledged write lost, none refused, the file smaller; an
older store converted once; `forget` that erased nothing leaves the file alone. Real SQLite files and a real
second process (tests/compaction_writer.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import apsw
import pytest

from tests import retention_world as rw
from threadloom.clock import now_ms
from threadloom.erasure.service import Eraser
from threadloom.errors import StoreBusy
from threadloom.health.journal import jobs
from threadloom.hygiene.compaction import Compaction
from threadloom.hygiene.retention import LEASE, Retention, Windows
from threadloom.store import jobs as job_rows
from threadloom.store.compaction import SqliteCompactor
from threadloom.store.erasure import Selector
from threadloom.store.sqlite import SqliteStore, open_store

ROOT = Path(__file__).parent.parent


def _filled(tmp_path: Path, sessions: int = 40, messages: int = 60) -> SqliteStore:
    """A store holding `sessions` transcripts, all but the last four past the transcript window."""
    store = open_store(tmp_path / "threadloom.db")
    now = now_ms()
    for n in range(sessions):
        age = 400 if n < sessions - 4 else 3
        rw.transcript(tmp_path / "ana", f"s{n:03d}", now - age * rw.DAY + n * 3_600_000, messages, words=60)
    rw.ingest(store, "ana", tmp_path / "ana")
    return store


def _wait_for(predicate: object, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


@pytest.mark.slow
def test_compaction_beside_a_writing_process_loses_and_refuses_nothing_and_shrinks_the_file(tmp_path: Path) -> None:
    store = _filled(tmp_path)
    Retention(store, tmp_path / "tasks", Windows()).run(None)
    sizes = SqliteCompactor(store).sizes()
    assert sizes["free_bytes"] > 0  # the deletes left pages to give back
    stop = tmp_path / "stop"
    writer = subprocess.Popen(
        [sys.executable, "-m", "tests.compaction_writer", str(store.path), str(stop)],
        cwd=ROOT, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert writer.stdout is not None
    acked: list[int] = []
    try:
        while len(acked) < 20:  # the writer is writing before compaction starts
            line = writer.stdout.readline()
            assert line, "the writer exited early"
            acked.append(int(line))
        report = Compaction(store).run()
        acked_during = len(acked)
    finally:
        stop.touch()
    out, _ = writer.communicate(timeout=60)
    lines = out.splitlines()
    summary = json.loads(lines[-1])
    acked += [int(x) for x in lines[:-1] if x.isdigit()]

    assert summary["refused"] == 0 and acked_during >= 20
    assert summary["writes"] == len(acked)
    written = {
        json.loads(d)["seq"]
        for (d,) in store.read(lambda r: r.tuples("SELECT detail FROM events WHERE kind = 'test.write'"))
    }
    assert set(acked) <= written  # every acknowledged write is there
    assert report["index_steps"] >= 1 and report["space_steps"] >= 1 and report["pages_freed"] > 0

    # On disk the store is its file and its log (the writer folds the log in every 10,000 pages, so a small
    # store may live mostly in its log). Fewer bytes once the log is folded; a log the busy writer kept from
    # being folded is folded by the next pass.
    def on_disk(sizes: dict[str, int]) -> int:
        return sizes["file_bytes"] + sizes["wal_bytes"]

    settled = report if report["checkpoint"]["truncated"] else Compaction(store).run()
    assert settled["checkpoint"]["truncated"], settled["checkpoint"]
    assert on_disk(settled["after"]) < on_disk(report["before"])
    assert report["after"]["free_bytes"] < report["before"]["free_bytes"]
    assert store.integrity_check() == []
    store.write(lambda w: w.execute("INSERT INTO documents_fts (documents_fts) VALUES ('integrity-check')"))
    kept = store.read(lambda r: r.scalar("SELECT text FROM transcript_messages ORDER BY id DESC LIMIT 1"))
    term = str(kept).split()[0]
    hits = store.read(
        lambda r: r.scalar("SELECT COUNT(*) FROM documents_fts WHERE documents_fts MATCH :m", {"m": f'"{term}"'})
    )
    assert hits >= 1
    seen = store.read(lambda r: jobs(r, "ana", now_ms()))
    assert seen["store.compaction"]["last"]["changed"]["steps"] == settled["steps"]
    assert seen["store.retention"]["last"]["changed"]["deleted"] == 36 * 60


def _old_store(path: Path) -> SqliteStore:
    """A store as an earlier threadloom made it: auto_vacuum off from its first table."""
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA auto_vacuum = NONE; CREATE TABLE early (x); DROP TABLE early;")
    conn.close()
    return open_store(path)


def test_an_older_store_is_converted_once_and_only_when_asked_or_small(tmp_path: Path) -> None:
    store = _old_store(tmp_path / "threadloom.db")
    compactor = SqliteCompactor(store)
    assert not compactor.ready()
    skipped = Compaction(store).run(convert=False)
    assert "conversion" in skipped and skipped["space_steps"] == 0 and not compactor.ready()

    done = Compaction(store).run(convert=None)  # the daemon's choice: a small file is converted
    assert "converted_hold_s" in done and compactor.ready()
    again = Compaction(store).run(convert=None)
    assert "converted_hold_s" not in again and "conversion" not in again


def test_a_pass_holds_the_lease_so_a_second_one_is_refused(tmp_path: Path) -> None:
    store = open_store(tmp_path / "threadloom.db")
    store.write(lambda w: job_rows.acquire(w, LEASE, "elsewhere:1", now_ms(), 60_000))
    with pytest.raises(StoreBusy):
        Compaction(store).run()
    with pytest.raises(StoreBusy):
        Retention(store, tmp_path / "tasks", Windows()).run(None)
    assert Retention(store, tmp_path / "tasks", Windows()).run(None, dry_run=True)["dry_run"] is True


def test_forget_that_erased_nothing_does_not_rewrite_the_file(tmp_path: Path) -> None:
    store = _filled(tmp_path, sessions=2, messages=10)
    wal = store.path.with_name(store.path.name + "-wal")
    before = (store.path.stat().st_size, wal.stat().st_size)
    assert before[1] > 0  # a compaction would have emptied it

    done = Eraser(store).forget("ana", Selector(text="no message says this"), dry_run=False)

    assert "compaction" not in done and "compaction_skipped" in done
    assert set(v for v in done["erased"].values() if isinstance(v, int)) == {0}
    assert wal.stat().st_size >= before[1] and store.path.stat().st_size == before[0]
    found = Eraser(store).forget("ana", Selector(session="s000"), dry_run=False)
    assert found["compaction"]["complete"] is True  # something erased: compacted as before


def test_a_pass_killed_mid_way_leaves_a_lease_the_next_one_takes(tmp_path: Path) -> None:
    store = open_store(tmp_path / "threadloom.db")
    code = (
        "import sys, os; from pathlib import Path; from threadloom.store.sqlite import SqliteStore; "
        "from threadloom.store import jobs; from threadloom.clock import now_ms; "
        "from threadloom.hygiene.retention import LEASE, holder; s = SqliteStore(Path(sys.argv[1])); "
        "s.write(lambda w: jobs.acquire(w, LEASE, holder(), now_ms(), 600_000)); os._exit(9)"
    )
    died = subprocess.run([sys.executable, "-c", code, str(store.path)], cwd=ROOT, timeout=60, check=False)
    assert died.returncode == 9
    assert store.read(lambda r: r.scalar("SELECT COUNT(*) FROM job_leases WHERE name = :n", {"n": LEASE})) == 1
    assert Compaction(store).run()["ran"] is True  # not refused for the lease's ten minutes


def test_a_reader_holding_an_old_snapshot_keeps_the_log_and_the_next_pass_truncates_it(tmp_path: Path) -> None:
    store = _filled(tmp_path, sessions=3, messages=10)
    reader = apsw.Connection(str(store.path), flags=apsw.SQLITE_OPEN_READONLY)
    reader.execute("BEGIN")
    assert reader.execute("SELECT COUNT(*) FROM transcript_messages").fetchall()[0][0] == 30  # the snapshot is held
    store.write(lambda w: rw.event(w, None, now_ms()))  # a frame past the reader's snapshot
    held = Compaction(store).run()
    assert held["checkpoint"]["truncated"] is False and "reader" in held["checkpoint"]["reason"]
    assert held["after"]["wal_bytes"] > 0
    reader.execute("COMMIT")
    reader.close()
    done = Compaction(store).run()
    assert done["checkpoint"]["truncated"] is True and done["after"]["wal_bytes"] == 0
