"""Transcript ingest in process, into a real store: every fixture once, files that grow, shrink, rotate or
arrive late, a crash between batches, the byte budget, exclusions, secrets, a second user, and the alarm."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from datetime import UTC
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.conftest import Backend
from tests.sqlite_template import fresh_store
from tests.store_scan import holding
from threadloom.ingest import IngestConfig, Ingester, transcript_status
from threadloom.ingest.exclusions import parse_globs
from threadloom.search.engine import SearchEngine
from threadloom.search.model import Filters, MemoryScope, Viewer
from threadloom.store.base import Store, Writer
from threadloom.store.sqlite import SqliteStore, open_store
from threadloom.transcripts import sources

FIXTURES = Path(__file__).parent / "fixtures" / "transcripts"
PROJECT = "-home-ada-src-loom"
T = TypeVar("T")


def line(number: int, text: str = "", session: str = "s1", cwd: str = "/home/ada/src/loom") -> str:
    body = {
        "type": "user" if number % 2 else "assistant",
        "uuid": f"{session}-u-{number}",
        "sessionId": session,
        "cwd": cwd,
        "timestamp": f"2026-11-02T09:{number % 60:02d}:00.000Z",
        "message": {"role": "user" if number % 2 else "assistant", "content": text or f"message {number}"},
    }
    return json.dumps(body) + "\n"


def claude_file(home: Path, name: str = "s1.jsonl", project: str = PROJECT) -> Path:
    path = home / ".claude" / "projects" / project / name
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def ingester(store: Store, home: Path, owner: str = "ada", **config: Any) -> Ingester:
    return Ingester(store, IngestConfig(owner, home, {}, **config))


def texts(store: Store, owner: str = "ada") -> list[str]:
    rows = store.read(
        lambda r: r.tuples("SELECT text FROM transcript_messages WHERE owner = :o ORDER BY at, id", {"o": owner})
    )
    return [text for (text,) in rows]


def count(store: Store, sql: str) -> int:
    return int(store.read(lambda r: r.scalar(sql)))


@pytest.fixture
def store(backend: Backend, tmp_path: Path) -> Store:
    """The store each test ingests into: a SQLite file, and a PostgreSQL database (the slow tier)."""
    if backend.name == "sqlite":
        return open_store(fresh_store(tmp_path / "db" / "threadloom.db"))
    return backend.open()


# Every fixture, where its client keeps it.
PLACES = {
    "claude-code/session-v2.jsonl": f".claude/projects/{PROJECT}/5b1e9c3a-7d2f-4e8a-9b6c-2f4d8e1a3c70.jsonl",
    "codex/bare-2025-05.jsonl": ".codex/sessions/2025/05/14/rollout-2025-05-14T10-00-00-a.jsonl",
    "codex/envelope-2025-10.jsonl": ".codex/sessions/2025/10/20/rollout-2025-10-20T08-00-00-b.jsonl",
    "codex/items-2026-08.jsonl": ".codex/sessions/2026/08/18/rollout-2026-08-18T02-44-20-c.jsonl",
    "codex/response-2026-09.jsonl": ".codex/sessions/2026/09/30/rollout-2026-09-30T16-05-00-d.jsonl",
    "gemini/session-2025-11-03T14-20-7c1d2e3f.json": ".gemini/tmp/abc/chats/session-2025-11-03T14-20-7c.json",
    "gemini/session-2026-10-12T09-30-a1b2c3d4.jsonl": ".gemini/tmp/abc/chats/session-2026-10-12T09-30-a1.jsonl",
    "copilot/events-1.0.jsonl": ".copilot/session-state/0f0f0f0f/events.jsonl",
}


def install_all(home: Path) -> dict[str, set[str]]:
    """Every fixture under `home`; the keys of the messages each source parses from them."""
    for fixture, where in PLACES.items():
        (home / where).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(FIXTURES / fixture, home / where)
    parsed: dict[str, set[str]] = {}
    for source in sources():
        for path in source.discover(home):
            parsed.setdefault(source.name, set()).update(m.key for m in source.parse(path, None).messages)
    return parsed


def test_every_fixture_is_ingested_once_and_indexed(tmp_path: Path, store: Store) -> None:
    home = tmp_path / "u"
    parsed = install_all(home)
    assert set(parsed) == {"claude-code", "codex", "gemini", "copilot"} and all(parsed.values())

    first = ingester(store, home).run()
    stored = store.read(lambda r: r.tuples("SELECT source, key FROM transcript_messages"))
    held: dict[str, set[str]] = {}
    for source, key in stored:
        held.setdefault(source, set()).add(key)
    assert held == parsed
    assert first.added == len(stored)
    # Every message with text or tools is a search document of its own, its session as the thread.
    docs = count(store, "SELECT COUNT(*) FROM documents WHERE kind = 'transcript'")
    assert 0 < docs <= len(stored)
    joined = count(
        store,
        "SELECT COUNT(*) FROM documents d JOIN transcript_messages t ON t.id = CAST(d.ref AS INTEGER) "
        "WHERE d.kind = 'transcript' AND d.thread = t.session_id AND d.source = t.role",
    )
    assert joined == docs
    again = ingester(store, home).run()
    assert again.added == 0 and count(store, "SELECT COUNT(*) FROM transcript_messages") == len(stored)
    status = transcript_status(store, "ada")
    assert {row["source"] for row in status["sources"]} == set(parsed)
    assert status["span"] is not None and status["alarms"] == []


def test_append_truncate_and_rotate_never_duplicate_or_skip(tmp_path: Path, store: Store) -> None:
    home = tmp_path / "u"
    path = claude_file(home)
    path.write_text("".join(line(n) for n in range(1, 4)))
    ing = ingester(store, home)
    assert ing.run().added == 3
    with path.open("a") as f:  # appended, the last record cut mid-line: it waits for its newline
        f.write(line(4) + line(5)[:20])
    assert ing.run().added == 1
    with path.open("a") as f:
        f.write(line(5)[20:])
    assert ing.run().added == 1
    path.write_text(line(1) + line(6))  # truncated and rewritten: only the new record is new
    assert ing.run().added == 1
    rotated = path.with_name("s1.jsonl.1")
    path.rename(rotated)  # rotated: a new file at the old path; the old one's records are held already
    path.write_text(line(7))
    assert ing.run().added == 1
    assert texts(store) == [f"message {n}" for n in range(1, 8)]


def test_a_late_backfill_is_ingested_exactly_once(tmp_path: Path, store: Store) -> None:
    home = tmp_path / "u"
    claude_file(home, "new.jsonl").write_text(line(1, "recent work"))
    old = claude_file(home, "old.jsonl")
    old.write_text(line(2, "last year's session", session="s0"))
    year_ago = 1_700_000_000
    os.utime(old, (year_ago, year_ago))
    ing = ingester(store, home)
    assert ing.run(since_ms=1_750_000_000_000).added == 1  # --since leaves the old file out
    late = claude_file(home, "late.jsonl", "-home-ada-src-other")  # copied in later, with its old time
    late.write_text(line(3, "restored from a backup", session="s9"))
    os.utime(late, (year_ago, year_ago))
    assert ing.run().added == 2
    assert ing.run().added == 0
    assert sorted(texts(store)) == ["last year's session", "recent work", "restored from a backup"]


class CrashingStore:
    """A store whose `crash_at`-th write transaction fails after its statements ran (a crash before COMMIT)."""

    def __init__(self, inner: Store, crash_at: int) -> None:
        self.inner = inner
        self.writes = 0
        self.crash_at = crash_at

    def read(self, fn: Callable[[Any], T]) -> T:
        return self.inner.read(fn)

    def write(self, fn: Callable[[Writer], T]) -> T:
        self.writes += 1
        if self.writes != self.crash_at:
            return self.inner.write(fn)

        def crash(w: Writer) -> T:
            fn(w)
            raise RuntimeError("power cut")

        return self.inner.write(crash)


def test_a_crash_between_batches_neither_skips_nor_duplicates(tmp_path: Path, store: Store) -> None:
    home = tmp_path / "u"
    big = "x" * 2000
    claude_file(home).write_text("".join(line(n, f"{n} {big}") for n in range(1, 1500)))  # ~3 MB: several batches
    crashing = CrashingStore(store, crash_at=2)
    report = Ingester(crashing, IngestConfig("ada", home, {})).run()  # type: ignore[arg-type]
    assert report.sources["claude-code"].failed_files == 1  # reported, the pass went on
    held = count(store, "SELECT COUNT(*) FROM transcript_messages")
    assert 0 < held < 1499  # the first batch committed, the crashed one left nothing
    assert ingester(store, home).run().added == 1499 - held
    assert count(store, "SELECT COUNT(*) FROM transcript_messages") == 1499
    assert count(store, "SELECT COUNT(DISTINCT key) FROM transcript_messages") == 1499


def test_a_huge_file_waits_for_the_next_pass_and_the_others_go_on(tmp_path: Path, store: Store) -> None:
    home = tmp_path / "u"
    pad = "y" * 4000
    claude_file(home, "huge.jsonl").write_text("".join(line(n, f"{n} {pad}", "big") for n in range(1, 1001)))
    claude_file(home, "small.jsonl", "-w").write_text(line(1, "a small live session", "small"))
    ing = ingester(store, home)
    first = ing.run(file_budget=1 << 20, pass_budget=2 << 20)
    assert "a small live session" in texts(store)
    assert first.sources["claude-code"].pending_files == 1 and 0 < first.added < 1001
    passes = 1
    while ing.run(file_budget=1 << 20, pass_budget=2 << 20).sources["claude-code"].pending_files:
        passes += 1
        assert passes < 10
    assert count(store, "SELECT COUNT(*) FROM transcript_messages") == 1001
    assert count(store, "SELECT COUNT(DISTINCT key) FROM transcript_messages") == 1001


def test_bad_input_is_reported_and_the_other_files_are_ingested(tmp_path: Path, store: Store) -> None:
    home = tmp_path / "u"
    folder = claude_file(home, "good.jsonl").parent
    (folder / "good.jsonl").write_text(line(1, "the good one"))
    (folder / "cut.jsonl").write_bytes(line(1, "whole", "cut").encode() + b'{"type": "user", "mess\n' + b"\n")
    (folder / "latin.jsonl").write_bytes(line(1, "caf\u00e9", "latin").encode() + b"\xff\xfe broken \xc3\n")
    (folder / "loop").symlink_to(folder)  # a symlink loop in a watched folder
    os.mkfifo(folder / "fifo.jsonl")  # opened non-blocking, reported, never waited on
    (home / ".claude" / "projects" / "x").symlink_to("/etc")  # a link out of the client's folder
    report = ingester(store, home).run()
    assert {"the good one", "whole", "caf\u00e9"} <= set(texts(store))
    reported = {(Path(p["path"]).name, p["reason"]) for p in report.problems}
    assert {("cut.jsonl", "invalid_json"), ("latin.jsonl", "invalid_utf8")} <= reported
    assert not report.busy and not report.notes


class Vanishing:
    """Claude Code's adapter, but the file is deleted just before it is read, and another one raises."""

    name = "claude-code"

    def __init__(self) -> None:
        self.real = sources()[0]

    def discover(self, home: Path, env: Any = None) -> Any:
        return self.real.discover(home, env)

    def parse(self, path: Path, cursor: Any, *, budget: int = 1 << 20) -> Any:
        if path.name == "gone.jsonl":
            path.unlink(missing_ok=True)
        if path.name == "boom.jsonl":
            raise OSError("the disk went away")
        return self.real.parse(path, cursor, budget=budget)


def test_a_vanishing_file_and_a_failing_read_never_stop_the_pass(tmp_path: Path, store: Store) -> None:
    home = tmp_path / "u"
    for name in ("gone", "boom", "fine"):
        claude_file(home, f"{name}.jsonl").write_text(line(1, f"{name} text", name))
    report = Ingester(store, IngestConfig("ada", home, {}), [Vanishing()]).run()
    assert texts(store) == ["fine text"]
    assert report.sources["claude-code"].failed_files == 1
    assert any(p["reason"] == "vanished" for p in report.problems)


def test_exclusions_apply_before_anything_is_stored(tmp_path: Path, store: Store) -> None:
    home = tmp_path / "u"
    claude_file(home, "a.jsonl").write_text(line(1, "secret project plans", cwd="/work/client-x/api"))
    claude_file(home, "b.jsonl").write_text(line(1, "open work", "s2", cwd="/work/open"))
    claude_file(home, "c.jsonl", "-private").write_text(line(1, "private folder", "s3", cwd="/work/open"))
    globs = parse_globs("/work/client-*, */-private/")
    report = ingester(store, home, exclude=globs).run()
    assert texts(store) == ["open work"]
    assert report.sources["claude-code"].messages_excluded == 1 and report.sources["claude-code"].excluded_files == 1
    assert count(store, "SELECT COUNT(*) FROM documents WHERE body LIKE '%secret project%'") == 0


def test_a_spawned_childs_conversation_is_left_out_when_configured(tmp_path: Path, store: Store) -> None:
    home = tmp_path / "u"
    claude_file(home, "child.jsonl").write_text(line(1, "child's work", "child-session"))
    claude_file(home, "me.jsonl").write_text(line(1, "my work", "my-session"))
    detail = json.dumps({"client": "claude", "client_session": "child-session", "spawned_by": "p-1"})
    store.write(
        lambda w: w.execute(
            "INSERT INTO events (at, kind, session_id, origin, detail) VALUES (:at, 'client.session_started', "
            "NULL, 'hook', :d)",
            {"at": 1_800_000_000_000, "d": detail},
        )
    )
    report = ingester(store, home, children=False).run()
    assert texts(store) == ["my work"] and report.sources["claude-code"].messages_excluded == 1
    # The default: children's conversations are memory too (from what is read from then on).
    claude_file(home, "child.jsonl").write_text(line(1, "child's work", "child-session") + line(2, "more"))
    ingester(store, home, children=True).run()
    assert sorted(texts(store)) == ["more", "my work"]


def test_secrets_never_reach_the_database_file(tmp_path: Path, store: Store) -> None:
    """SQLite: the file's bytes. PostgreSQL: every column of every table (tests/store_scan.py)."""
    home = tmp_path / "u"
    key = "AKIA" + "Q3EGX7TZ2YB4NWKD"
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    claude_file(home).write_text(line(1, f"deploy with {key} and {token}") + line(2, f"export GITHUB_TOKEN={token}"))
    ingester(store, home).run()
    assert texts(store)[0].startswith("deploy with [secret:")
    if not isinstance(store, SqliteStore):
        assert holding(store, "deploy with") != []  # the scan can find text
        assert holding(store, key.lower()) == [] and holding(store, token.lower()) == []
        return
    store.close()
    for file in (tmp_path / "db").iterdir():
        data = file.read_bytes()
        assert key.encode() not in data and token.encode() not in data, file.name


def test_verbatim_when_scrubbing_is_off(tmp_path: Path, store: Store) -> None:
    home = tmp_path / "u"
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    claude_file(home).write_text(line(1, f"use {token}"))
    ingester(store, home, scrub=False).run()
    assert texts(store) == [f"use {token}"]


def test_a_second_user_sees_none_of_the_first_users_transcripts(tmp_path: Path, store: Store) -> None:
    home = tmp_path / "u"
    claude_file(home).write_text(line(1, "the lighthouse keeper's schedule"))
    ingester(store, home, owner="ada").run()
    engine = SearchEngine(store)

    def hits(user: str) -> int:
        scope = MemoryScope(viewer=Viewer(user=user, project=None, org=user))
        filters = Filters(kinds=("memory", "transcript"), memory=scope)
        return len(engine.search("lighthouse schedule", filters).hits)

    assert hits("ada") == 1
    assert hits("bob") == 0
    assert transcript_status(store, "bob") == {"enabled": True, "sources": [], "span": None, "alarms": []}


def test_one_ingester_at_a_time(tmp_path: Path, store: Store) -> None:
    home = tmp_path / "u"
    claude_file(home).write_text(line(1))
    from threadloom.ingest import LEASE
    from threadloom.store import jobs

    store.write(lambda w: jobs.acquire(w, LEASE, "the-daemon", 10**13, 1))  # held by someone else
    report = ingester(store, home).run()
    assert report.busy and count(store, "SELECT COUNT(*) FROM transcript_messages") == 0
    store.write(lambda w: jobs.release(w, LEASE, "the-daemon"))
    assert ingester(store, home).run().added == 1


def test_a_source_whose_files_yield_no_message_raises_the_alarm(tmp_path: Path, store: Store) -> None:
    home = tmp_path / "u"
    changed = [json.dumps({"kind": "turn.v9", "payload": {"who": "user", "said": f"hello {n}"}}) for n in range(30)]
    claude_file(home).write_text("\n".join(changed) + "\n")
    ingester(store, home).run()
    status = transcript_status(store, "ada")
    assert [row["source"] for row in status["sources"]] == ["claude-code"]
    assert status["sources"][0]["messages"] == 0 and status["sources"][0]["files"] == 1
    assert len(status["alarms"]) == 1 and "no message" in status["alarms"][0]
    # The client writes a format we read again: the last pass says so, and the alarm goes.
    claude_file(home, "next.jsonl").write_text("".join(line(n, session="s2") for n in range(1, 31)))
    ingester(store, home).run()
    assert transcript_status(store, "ada")["alarms"] == []


def test_since_takes_dates_times_and_spans_and_refuses_the_rest() -> None:
    from datetime import datetime, timedelta, timezone

    from threadloom.cli.ingest import parse_since
    from threadloom.errors import InvalidInput

    now = datetime(2026, 11, 30, 12, 0, tzinfo=timezone(timedelta(hours=1)))
    assert parse_since("2026-11-02T09:00+00:00", now) == int(datetime(2026, 11, 2, 9, tzinfo=UTC).timestamp() * 1000)
    assert parse_since("7d", now) == int((now - timedelta(days=7)).timestamp() * 1000)
    assert parse_since("12h", now) < parse_since("1h", now)
    for junk in ("yesterday", "7 days", "", "-3d", "2026-13-01"):
        with pytest.raises(InvalidInput):
            parse_since(junk, now)


def test_a_hostile_working_directory_resolves_to_nothing_here(tmp_path: Path, store: Store) -> None:
    home = tmp_path / "u"
    odd = ["../../etc", "~", "a" * 5000, "/tmp/\u0000x"]
    claude_file(home).write_text("".join(line(n + 1, f"turn {n}", cwd=cwd) for n, cwd in enumerate(odd)))
    report = ingester(store, home, exclude=("/etc",)).run()
    assert report.added == 4 and not report.notes
    rows = store.read(lambda r: r.tuples("SELECT cwd, project FROM transcript_messages ORDER BY id"))
    assert [project for _, project in rows[:3]] == [None, None, None]  # never resolved against this process


def test_a_turn_rewritten_in_place_replaces_its_stored_version(tmp_path: Path, store: Store) -> None:
    home = tmp_path / "u"
    where = home / ".gemini/tmp/abc/chats/session-2025-11-03T14-20-7c.json"
    where.parent.mkdir(parents=True)
    session = json.loads((FIXTURES / "gemini/session-2025-11-03T14-20-7c1d2e3f.json").read_text())
    where.write_text(json.dumps(session))
    ing = ingester(store, home)
    first = ing.run().added
    assert first > 0 and "Looking at the git log." in texts(store)
    session["messages"][1]["content"] = "Looking at the git log, then the tests."  # Gemini updates the turn
    where.write_text(json.dumps(session))
    report = ing.run()
    assert report.added == 0 and report.sources["gemini"].messages_revised == 1
    assert "Looking at the git log, then the tests." in texts(store) and "Looking at the git log." not in texts(store)
    assert count(store, "SELECT COUNT(*) FROM transcript_messages") == first
    found = SearchEngine(store).search("tests", Filters(kinds=("transcript",))).hits
    firsts = [hit.body.splitlines()[0] for hit in found]
    assert firsts[0] == "Looking at the git log, then the tests." and "Looking at the git log." not in firsts


def test_a_stopped_pass_ends_after_its_batch_and_the_next_goes_on_exactly(tmp_path: Path, store: Store) -> None:
    home = tmp_path / "u"
    claude_file(home).write_text("".join(line(n, f"{n} {'z' * 2000}") for n in range(1, 1500)))  # several batches
    real = sources()[0]

    class Stopping:
        name = "claude-code"

        def discover(self, home: Path, env: Any = None) -> Any:
            return real.discover(home, env)

        def parse(self, path: Path, cursor: Any, *, budget: int = 1 << 20) -> Any:
            ing.stop()  # the daemon retires while the first batch is read
            return real.parse(path, cursor, budget=budget)

    ing = Ingester(store, IngestConfig("ada", home, {}), [Stopping()])
    report = ing.run()
    held = count(store, "SELECT COUNT(*) FROM transcript_messages")
    assert 0 < report.added == held < 1499 and not report.notes
    assert ingester(store, home).run().added == 1499 - held
    assert count(store, "SELECT COUNT(DISTINCT key) FROM transcript_messages") == 1499
