"""The command line, run as a user runs it."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from mcp import Client

from tests.helpers import cli, count_rows, serve_params
from threadloom import __version__
from threadloom.store.migrations import MIGRATIONS
from threadloom.store.sqlite import open_store

pytestmark = pytest.mark.anyio


def add_events(home: Path, n: int) -> None:
    store = open_store(home / "threadloom.db")
    try:
        for i in range(n):
            store.write(
                lambda w, i=i: w.execute("INSERT INTO events (at, kind, origin) VALUES (:i, 'x', 'hook')", {"i": i})
            )
    finally:
        store.close()


def test_version_prints_the_package_version(home: Path) -> None:
    done = cli(home, "version")
    assert done.returncode == 0
    assert done.stdout.strip() == __version__


def test_help_documents_every_command(home: Path) -> None:
    done = cli(home, "--help")
    for command in ("serve", "doctor", "check", "daemon", "backup", "version"):
        assert command in done.stdout


def test_doctor_is_healthy_on_a_fresh_home_and_on_a_used_store(home: Path) -> None:
    fresh = cli(home, "doctor")
    assert fresh.returncode == 0, fresh.stdout
    assert "healthy" in fresh.stdout
    add_events(home, 3)
    used = cli(home, "doctor")
    assert used.returncode == 0, used.stdout
    assert f"{len(MIGRATIONS)}/{len(MIGRATIONS)} applied" in used.stdout


def test_doctor_fails_on_a_corrupt_store(home: Path) -> None:
    add_events(home, 200)
    db = home / "threadloom.db"
    data = bytearray(db.read_bytes())
    data[4096 + 100 : 4096 + 400] = b"\xff" * 300
    db.write_bytes(bytes(data))
    (home / "threadloom.db-wal").unlink(missing_ok=True)
    done = cli(home, "doctor")
    assert done.returncode == 1
    assert "not healthy" in done.stdout


def test_doctor_fails_on_a_world_readable_store(home: Path) -> None:
    add_events(home, 1)
    (home / "threadloom.db").chmod(0o644)
    done = cli(home, "doctor")
    assert done.returncode == 1
    assert "store permissions" in done.stdout


def test_a_backup_restores_the_store_as_it_was(home: Path, tmp_path: Path) -> None:
    add_events(home, 5)
    made = cli(home, "backup", "create", str(tmp_path / "b.db"))
    assert made.returncode == 0, made.stderr
    assert stat.S_IMODE((tmp_path / "b.db").stat().st_mode) == 0o600
    add_events(home, 7)
    assert count_rows(home, "events") == 12
    restored = cli(home, "backup", "restore", str(tmp_path / "b.db"))
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert count_rows(home, "events") == 5
    assert list(home.glob("threadloom.db.pre-restore-*"))


def test_a_backup_is_refused_over_an_existing_file(home: Path, tmp_path: Path) -> None:
    add_events(home, 1)
    (tmp_path / "b.db").write_text("keep me")
    done = cli(home, "backup", "create", str(tmp_path / "b.db"))
    assert done.returncode == 2
    assert (tmp_path / "b.db").read_text() == "keep me"


def test_restoring_something_that_is_not_a_store_changes_nothing(home: Path, tmp_path: Path) -> None:
    add_events(home, 2)
    (tmp_path / "junk.db").write_bytes(b"not a database at all" * 100)
    done = cli(home, "backup", "restore", str(tmp_path / "junk.db"))
    assert done.returncode == 2
    assert count_rows(home, "events") == 2


async def test_a_restore_is_refused_while_a_server_uses_the_store_unless_forced(home: Path, tmp_path: Path) -> None:
    add_events(home, 4)
    assert cli(home, "backup", "create", str(tmp_path / "b.db")).returncode == 0
    async with Client(serve_params(home), mode="legacy") as client:
        await client.call_tool("status", {})
        refused = cli(home, "backup", "restore", str(tmp_path / "b.db"))
        assert refused.returncode == 2
        assert "using the store" in refused.stderr
    forced = cli(home, "backup", "restore", "--force", str(tmp_path / "b.db"))
    assert forced.returncode == 0, forced.stderr
    assert count_rows(home, "events") == 4


def test_check_runs_the_server_as_an_agent_would(home: Path) -> None:
    done = cli(home, "check")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "threadloom works" in done.stdout
    assert str(home / "threadloom.db") in done.stdout


def test_cli_errors_are_clean_messages_on_stderr(home: Path) -> None:
    done = cli(home, "serve", "--http", "nonsense:port")
    assert done.returncode == 2
    assert "[HOST:]PORT" in done.stderr
    assert "Traceback" not in done.stderr


def test_memory_commands_store_recall_maintain_and_refuse_bad_input(home: Path) -> None:
    stored = cli(home, "memory", "store", "Tests run with make test", "--category", "tooling")
    assert stored.returncode == 0, stored.stderr
    memory_id = json.loads(stored.stdout)["id"]
    recalled = json.loads(cli(home, "memory", "recall", "how do tests run", "--concise").stdout)
    assert [m["id"] for m in recalled["memories"]] == [memory_id]
    dry = json.loads(cli(home, "memory", "maintain").stdout)
    assert dry["dry_run"] and dry["scored"] == 1
    bad = cli(home, "memory", "store", "x", "--related", f"{memory_id}:causes")
    assert bad.returncode == 2 and "unknown edge type" in bad.stderr
    assert count_rows(home, "memories") == 1
    assert cli(home, "memory", "delete", memory_id, "--yes").returncode == 0
    assert count_rows(home, "memories") == 0


def test_init_writes_the_instruction_files_once(home: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    first = cli(home, "init", THREADLOOM_ROOT=str(repo))
    assert first.returncode == 0 and "created  AGENTS.md" in first.stdout
    again = cli(home, "init", "--target", "agents", THREADLOOM_ROOT=str(repo))
    assert "unchanged  AGENTS.md" in again.stdout and (repo / ".cursor/rules/threadloom.mdc").is_file()


def test_thread_commands_work_in_the_repository(home: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {"THREADLOOM_ROOT": str(repo)}
    assert cli(home, "thread", "project", "--create", "Shop", **env).returncode == 0
    assert cli(home, "thread", "summary", "--section", "Decisions", "--", "- Postgres", **env).returncode == 0
    assert cli(home, "thread", "create", "Search", **env).returncode == 0
    assert cli(home, "thread", "tree", **env).stdout.strip() == "main\n└── search  <- active"
    context = cli(home, "thread", "context", **env).stdout
    assert "- Postgres" in context and "Search (active)" in context
    bad = cli(home, "thread", "status", "finished", **env)
    assert bad.returncode == 2 and "status must be one of" in bad.stderr


def test_watch_shows_who_signalled_whom(home: Path) -> None:
    from threadloom.coordination.signals import SignalService
    from threadloom.sessions import SessionInfo, SessionService

    store = open_store(home / "threadloom.db")
    try:
        for sid in ("ana-1", "ben-1"):
            SessionService(store).open(SessionInfo(sid, "claude", "stdio", "/r", "/r", 1, user="ana"))
        prov = SessionInfo("ana-1", "claude", "stdio", "/r", "/r", 1, user="ana").provenance()
        SignalService(store).whisper(prov, "ben-1", "review my PR please")
    finally:
        store.close()
    shown = cli(home, "watch", "--once", THREADLOOM_USER="ana")
    assert shown.returncode == 0 and "ana-1 -whisper-> ben-1: review my PR please" in shown.stdout
    other = cli(home, "watch", "--once", THREADLOOM_USER="cy")
    assert other.returncode == 0 and "review my PR" not in other.stdout


@pytest.mark.parametrize(
    "args",
    [
        ("forget", "--text", "zzzz", "--dry-run"),
        ("forget", "--yes"),
        ("brief",),
        ("memory", "recall", "anything"),
        ("ingest", "status"),
    ],
)
def test_a_command_on_a_home_not_made_yet_answers_without_a_traceback(home: Path, args: tuple[str, ...]) -> None:
    fresh = home / "not-yet"
    done = cli(home, *args, THREADLOOM_HOME=str(fresh))
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode in (0, 1, 2), (done.returncode, done.stderr)
    assert fresh.is_dir()
