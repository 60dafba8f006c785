"""Retention per kind: only rows past their window go, only of that kind, every user's alike, and each
report counts its reader's rows alone. A real SQLite store; transcripts through the real ingester; task
files in a real folder."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import retention_world as rw
from tests.conftest import Backend
from threadloom.cli.retention import render_compaction
from threadloom.clock import now_ms
from threadloom.config import load_settings
from threadloom.errors import ConfigError
from threadloom.health.journal import jobs
from threadloom.hygiene.compaction import Compaction
from threadloom.hygiene.retention import Retention, Windows
from threadloom.memory.maintenance import Maintenance
from threadloom.memory.scoring import ScoringConfig
from threadloom.store.base import Store, Writer
from threadloom.store.jobs import set_cursor
from threadloom.store.retention import CHUNK
from threadloom.store.sqlite import SqliteStore, open_store

DAY = rw.DAY
OLD = {"transcripts": 400, "signals": 45, "journal": 120, "tasks": 45, "restore": 45}  # days ago: past each window
RECENT = 10  # days ago: inside every window


@dataclass
class World:
    store: Store
    logs: Path
    now: int

    def count(self, sql: str, params: dict[str, object] | None = None) -> int:
        return int(self.store.read(lambda r: r.scalar(sql, params)))


def _seed(world: World, user: str, user_home: Path) -> None:
    now = world.now
    rw.transcript(user_home, f"{user}-old", now - OLD["transcripts"] * DAY, 6)
    rw.transcript(user_home, f"{user}-new", now - RECENT * DAY, 4)
    rw.ingest(world.store, user, user_home)

    def rows(w: Writer) -> None:
        old = {k: now - d * DAY for k, d in OLD.items()}
        recent = now - RECENT * DAY
        rw.session(w, f"s-{user}", user, old["signals"])
        for at in (old["signals"], recent):
            rw.signal(w, f"s-{user}", "someone", at, f"{user} says hello at {at}")
        for at in (old["journal"], recent):
            rw.event(w, f"s-{user}", at)
            rw.replay(w, user, f"{user}-key-{at}", at)
        for name, at in (("old", old["tasks"]), ("new", recent)):
            rw.task(w, world.logs, f"t_{user.encode().hex()}{name.encode().hex()}", user, at)
        rw.task(w, world.logs, f"t_{user.encode().hex()}99", user, old["tasks"], status="running")
        rw.archived(w, f"m-{user}-old", user, old["restore"])
        rw.archived(w, f"m-{user}-new", user, recent)

    world.store.write(rows)


@pytest.fixture
def world(tmp_path: Path, backend: Backend) -> World:
    """The same rows on each backend (PostgreSQL in the slow tier): the SQL is the shared subset."""
    w = World(backend.open(), tmp_path / "home" / "tasks", now_ms())
    _seed(w, "ana", tmp_path / "ana")
    _seed(w, "ben", tmp_path / "ben")

    def store_rows(wr: Writer) -> None:
        for at in (w.now - 200 * DAY, w.now - 150 * DAY, w.now - 5 * DAY):
            rw.job_run(wr, "memory.maintenance", at)
            rw.probe(wr, at)
        rw.job_run(wr, "ingest.once", w.now - 300 * DAY)  # a job's newest run stays, however old

    w.store.write(store_rows)
    return w


def _retention(world: World, **days: int) -> Retention:
    return Retention(world.store, world.logs, Windows(**days))


def test_a_pass_deletes_what_is_past_each_window_and_keeps_the_rest(world: World) -> None:
    done = _retention(world).run("ana", now=world.now)

    # ana's own rows, counted for her: the old of each kind
    assert done["deleted"] == {"transcripts": 6, "signals": 1, "journal": 2, "tasks": 1, "restore": 1}
    assert done["task_files_deleted"]["files"] == 4  # the old task's log and exit record, ana's and ben's
    # every user's old rows went (the windows are the store's), the recent stayed
    for user in ("ana", "ben"):
        assert world.count("SELECT COUNT(*) FROM transcript_messages WHERE owner = :u", {"u": user}) == 4
        assert world.count("SELECT COUNT(*) FROM memory_archive WHERE owner = :u", {"u": user}) == 1
        assert world.count("SELECT COUNT(*) FROM tool_requests WHERE owner = :u", {"u": user}) == 1
        assert world.count("SELECT COUNT(*) FROM tasks WHERE owner = :u", {"u": user}) == 2  # new + running
    assert world.count("SELECT COUNT(*) FROM signals") == 2
    assert world.count("SELECT COUNT(*) FROM signal_deliveries") == 2
    assert world.count("SELECT COUNT(*) FROM events WHERE kind = 'tool.call'") == 2
    assert world.count("SELECT COUNT(*) FROM probe_results") == 1
    runs = dict(world.store.read(lambda r: r.tuples("SELECT name, COUNT(*) FROM job_runs GROUP BY name")))
    assert runs["memory.maintenance"] == 1 and runs["ingest.once"] == 1 and runs["store.retention"] == 1
    # the old messages' search documents and their terms went with them
    assert world.count("SELECT COUNT(*) FROM documents WHERE kind = 'transcript'") == 8
    if isinstance(world.store, SqliteStore):  # FTS5's own table; PostgreSQL's index lives in the documents row
        assert world.count("SELECT COUNT(*) FROM documents_fts") == world.count("SELECT COUNT(*) FROM documents")
    assert world.count("SELECT COUNT(*) FROM document_terms WHERE df <= 0") == 0
    files = sorted(p.name for p in world.logs.iterdir())
    assert len(files) == 8 and not any("6f6c64" in name for name in files)  # "old" in hex: its files went
    assert world.store.integrity_check() == []


def test_a_pass_then_compaction_says_what_each_did_on_each_backend(world: World) -> None:
    """What `threadloom retention` runs: the pass, then compaction (SQLite: steps; PostgreSQL: VACUUM)."""
    done = _retention(world).run("ana", now=world.now)
    compacted = Compaction(world.store).run(convert=None, optimize=True, budget_s=60)

    assert done["deleted"]["transcripts"] == 6 and compacted["ran"] is True
    if isinstance(world.store, SqliteStore):
        assert compacted["steps"] >= 1 and compacted["after"]["file_bytes"] > 0
    else:
        assert compacted["backend"] == "postgresql" and compacted["vacuum"]["tables"] >= 40
        assert compacted["vacuum"]["dead_rows_removed"] >= 12  # the old messages and their documents, every user's
    assert world.count("SELECT COUNT(*) FROM job_runs WHERE name = 'store.compaction'") == 1
    assert world.count("SELECT COUNT(*) FROM job_leases WHERE name = 'store.hygiene'") == 0
    assert render_compaction(compacted).startswith(("store file:", "compaction: VACUUM"))


def test_the_report_counts_its_readers_rows_only(world: World) -> None:
    before_ana = _retention(world).held("ana")
    before_ben = _retention(world).held("ben")
    assert before_ana["transcripts"]["rows"] == 10 and before_ben["transcripts"]["rows"] == 10
    assert before_ana["signals"]["rows"] == 2 and before_ana["journal"]["rows"] == 4  # events + replay records
    store = _retention(world).held(None)
    assert store["transcripts"]["rows"] == 20 and store["journal"]["rows"] == 4 + 4 + 4 + 3  # + job runs, probes

    done = _retention(world).run("ben", now=world.now)

    assert done["before"] == before_ben
    assert done["after"]["transcripts"]["rows"] == 4 and done["after"]["tasks"]["files"] == 4
    assert done["deleted"]["transcripts"] == 6  # ana's 6 went too, and are not in ben's report
    assert "ana" not in repr(done)
    assert _retention(world).held("ana")["transcripts"]["rows"] == 4


def test_a_dry_run_counts_what_would_go_and_changes_nothing(world: World) -> None:
    rows_before = world.count("SELECT COUNT(*) FROM transcript_messages")
    plan = _retention(world).run("ana", dry_run=True, now=world.now)
    assert plan["would_delete"]["transcripts"]["rows"] == 6 and plan["would_delete"]["tasks"]["files"] == 2
    assert plan["would_delete"]["transcripts"]["chars"] > 0
    assert world.count("SELECT COUNT(*) FROM transcript_messages") == rows_before
    assert world.count("SELECT COUNT(*) FROM job_runs WHERE name = 'store.retention'") == 0
    assert len(list(world.logs.iterdir())) == 12

    done = _retention(world).run("ana", now=world.now)
    assert {k: v["rows"] for k, v in plan["would_delete"].items()} == done["deleted"]


def test_a_long_window_keeps_its_kind_while_the_others_go(world: World) -> None:
    done = _retention(world, transcripts=36_500, journal=36_500).run("ana", now=world.now)
    assert done["deleted"]["transcripts"] == 0 and done["deleted"]["journal"] == 0
    assert done["deleted"]["signals"] == 1 and done["deleted"]["restore"] == 1
    assert world.count("SELECT COUNT(*) FROM transcript_messages") == 20
    assert world.count("SELECT COUNT(*) FROM events") == 4


def test_what_is_kept_on_purpose_stays_however_old(world: World) -> None:
    ancient = world.now - 1000 * DAY

    def keep(w: Writer) -> None:
        w.execute("UPDATE transcript_messages SET role = 'erased', text = '' WHERE key = 'ana-old-0'")  # a tombstone
        recall = rw.event(w, "s-ana", ancient, "memory.recalled", {"refs": []})  # not applied by the memory pass yet
        set_cursor(w, "memory.recalls", recall - 1)

    world.store.write(keep)
    _retention(world).run(None, now=world.now)
    assert world.count("SELECT COUNT(*) FROM transcript_messages WHERE role = 'erased'") == 1
    assert world.count("SELECT COUNT(*) FROM events WHERE kind = 'memory.recalled'") == 1
    assert world.count("SELECT COUNT(*) FROM tasks WHERE status = 'running'") == 2


def test_task_files_are_taken_by_name_and_links_are_not_followed(world: World, tmp_path: Path) -> None:
    outside = tmp_path / "precious.txt"
    outside.write_text("keep me")
    (world.logs / "t_0badf00d.log").symlink_to(outside)  # a link named like a task's file, no task row
    (world.logs / "notes.txt").write_text("not a task's")
    stray = world.logs / "t_00aa.log"  # a stray from a task with no row, old
    stray.write_text("old output")
    old = (world.now - 60 * DAY) / 1000
    os.utime(stray, (old, old))

    done = _retention(world).run(None, now=world.now)

    assert outside.read_text() == "keep me" and (world.logs / "t_0badf00d.log").is_symlink()
    assert (world.logs / "notes.txt").exists() and not stray.exists()
    assert done["task_files_deleted"]["files"] == 5


def test_a_second_pass_finds_nothing_more(world: World) -> None:
    _retention(world).run("ana", now=world.now)
    again = _retention(world).run("ana", now=world.now)
    assert set(again["deleted"].values()) == {0}
    last = world.store.read(lambda r: jobs(r, "ana", world.now))["store.retention"]["last"]
    assert last["changed"]["deleted"] == 0 and last["dry_run"] is False


@pytest.mark.parametrize("value", ["0", "-3", "abc", "", "1.5", "nan", "inf", "99999"])
def test_a_bad_window_is_refused_at_load_naming_the_setting(
    value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("THREADLOOM_HOME", str(tmp_path))
    monkeypatch.setenv("THREADLOOM_RETENTION_SIGNALS_DAYS", value)
    with pytest.raises(ConfigError, match="THREADLOOM_RETENTION_SIGNALS_DAYS") as caught:
        load_settings(warn=False)
    assert "days" in caught.value.message


def test_the_windows_default_to_keeping_a_year_of_transcripts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("THREADLOOM_HOME", str(tmp_path))
    monkeypatch.setenv("THREADLOOM_RETENTION_JOURNAL_DAYS", "7")
    windows = Windows.of(load_settings(warn=False))
    assert windows.as_dict() == {"transcripts": 365, "signals": 30, "journal": 7, "tasks": 30, "restore": 30}


def test_the_memory_pass_keeps_pruned_memories_for_the_restore_window(world: World) -> None:
    """The memory pass purges its archive by the same window retention does (45 days old: kept for 60)."""
    Maintenance(world.store, ScoringConfig(archive_days=60)).run(now=world.now)
    assert world.count("SELECT COUNT(*) FROM memory_archive") == 4
    _retention(world, restore=60).run(None, now=world.now)
    assert world.count("SELECT COUNT(*) FROM memory_archive") == 4
    Maintenance(world.store, ScoringConfig()).run(now=world.now)  # the default: 30 days
    assert world.count("SELECT COUNT(*) FROM memory_archive") == 2


def test_chunks_go_past_kept_rows_interleaved_with_expired_ones(tmp_path: Path) -> None:
    """More rows than one chunk, old and recent mixed in id order (as a backfilled file's old messages are):
    every old row goes, every recent one stays."""
    store = open_store(tmp_path / "threadloom.db")
    now = now_ms()

    def mixed(w: Writer) -> None:
        rw.session(w, "s-ana", "ana", now)
        for i in range(3 * CHUNK + 7):
            rw.event(w, "s-ana", now - (200 if i % 3 else 5) * DAY)

    store.write(mixed)
    recent = int(store.read(lambda r: r.scalar("SELECT COUNT(*) FROM events WHERE at > :c", {"c": now - 90 * DAY})))
    done = Retention(store, tmp_path / "tasks", Windows()).run("ana", now=now)
    assert done["deleted"]["journal"] == 3 * CHUNK + 7 - recent
    assert int(store.read(lambda r: r.scalar("SELECT COUNT(*) FROM events"))) == recent


def test_a_tasks_folder_that_is_a_link_is_left_alone(world: World, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    world.logs.rename(elsewhere)
    world.logs.symlink_to(elsewhere)
    done = _retention(world).run(None, now=world.now)
    assert done["deleted"]["tasks"] == 2 and done["task_files_deleted"]["files"] == 0
    assert len(list(elsewhere.iterdir())) == 12


def test_a_node_sweeps_its_own_task_files_when_another_nodes_pass_deleted_their_rows(
    world: World, tmp_path: Path
) -> None:
    """Two nodes on one store, each with its own home: the pass runs on one (single-flight), which cannot
    reach the other's files; the other sweeps its own once their rows are gone."""
    other = tmp_path / "node-b" / "tasks"
    old, recent = world.now - OLD["tasks"] * DAY, world.now - RECENT * DAY
    world.store.write(lambda w: rw.task(w, other, "t_b0", "ana", old))
    world.store.write(lambda w: rw.task(w, other, "t_b1", "ana", recent))
    b = Retention(world.store, other, Windows())

    assert b.sweep_files(world.now) == {"files": 0, "bytes": 0}  # the rows are still there: nothing goes
    _retention(world).run(None, now=world.now)  # node A's pass deletes t_b0's row; its files are on node B
    assert (other / "t_b0.log").exists()

    swept = b.sweep_files(world.now)
    assert swept["files"] == 2 and swept["bytes"] > 2_000
    assert not (other / "t_b0.log").exists() and not (other / "t_b0.1.exit").exists()
    assert (other / "t_b1.log").exists() and (other / "t_b1.1.exit").exists()  # its task is inside the window
