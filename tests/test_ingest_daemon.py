"""Transcript ingest through the real daemon: its background poll, the session-end hook's pass, the status
tool (counts, span, alarms) seen by the owner and by another user, the daemon log, doctor and the CLI. Each
test on both backends (tests/backend_home.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests import helpers
from tests.backend_home import home, open_home_store, store_env
from tests.helpers import PY, structured
from tests.test_ingest import FIXTURES, PROJECT, install_all, line

pytestmark = pytest.mark.anyio
__all__ = ["home"]


def env_for(home: Path, **env: str) -> dict[str, str]:
    return helpers.env_for(home, **env, **store_env(home))


def serve_params(home: Path, *args: str, **env: str) -> Any:
    return helpers.serve_params(home, *args, **env, **store_env(home))


def cli(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return helpers.cli(home, *args, **env, **store_env(home))


def user_home(tmp_path: Path) -> Path:
    """A user's home folder holding a Claude Code session and a Codex rollout."""
    home = tmp_path / "u"
    claude = home / ".claude" / "projects" / PROJECT / "5b1e9c3a-7d2f-4e8a-9b6c-2f4d8e1a3c70.jsonl"
    claude.parent.mkdir(parents=True)
    shutil.copyfile(FIXTURES / "claude-code/session-v2.jsonl", claude)
    codex = home / ".codex" / "sessions" / "2026" / "09" / "30" / "rollout-2026-09-30T16-05-00-d.jsonl"
    codex.parent.mkdir(parents=True)
    shutil.copyfile(FIXTURES / "codex/response-2026-09.jsonl", codex)
    return home


async def transcripts(client: Client) -> dict[str, Any]:
    result = await client.call_tool("status", {})
    assert not result.is_error, result
    return dict(structured(result)["transcripts"])


async def until(client: Client, check: Any, what: str) -> dict[str, Any]:
    with anyio.fail_after(60):
        while True:
            found = await transcripts(client)
            if check(found):
                return found
            await anyio.sleep(0.1)
    raise AssertionError(what)  # pragma: no cover - fail_after raises first


def messages(found: dict[str, Any]) -> dict[str, int]:
    return {row["source"]: row["messages"] for row in found["sources"]}


async def test_every_fixture_through_the_daemon(home: Path, tmp_path: Path) -> None:
    user = tmp_path / "u"
    parsed = install_all(user)
    expected = {source: len(keys) for source, keys in parsed.items()}
    assert set(expected) == {"claude-code", "codex", "gemini", "copilot"}
    env = {"HOME": str(user), "THREADLOOM_INGEST": "true", "THREADLOOM_INGEST_INTERVAL": "0.2"}
    async with Client(serve_params(home, **env), mode="legacy") as client:
        found = await until(client, lambda f: messages(f) == expected, "every fixture")
        assert found["alarms"] == []


async def test_the_daemon_ingests_in_the_background_for_its_user_only(home: Path, tmp_path: Path) -> None:
    user = user_home(tmp_path)
    # The home's user owns what its daemon ingests (a session naming no user acts for them too).
    (home / ".env").write_text("THREADLOOM_USER=ada\n")
    env = {"HOME": str(user), "THREADLOOM_INGEST": "true", "THREADLOOM_INGEST_INTERVAL": "0.2"}
    async with Client(serve_params(home, **env), mode="legacy") as ada:
        found = await until(ada, lambda f: messages(f) == {"claude-code": 5, "codex": 2}, "the first pass")
        assert found["span"] == {"first": "2026-09-30T16:05:01+00:00", "last": "2026-11-02T09:15:09+00:00"}
        assert found["alarms"] == [] and found["enabled"] is True
        session = user / ".claude" / "projects" / PROJECT / "5b1e9c3a-7d2f-4e8a-9b6c-2f4d8e1a3c70.jsonl"
        with session.open("a") as f:  # the session goes on: the poll picks up the new turn
            f.write(line(7, "where is the lighthouse keeper's logbook?", session="5b1e9c3a"))
        await until(ada, lambda f: messages(f)["claude-code"] == 6, "the appended turn")
        bob_env = env | {"THREADLOOM_USER": "bob"}
        async with Client(serve_params(home, **bob_env), mode="legacy") as bob:
            assert await transcripts(bob) == {"enabled": True, "sources": [], "span": None, "alarms": []}
            recalled = await bob.call_tool("memory_recall", {"query": "lighthouse keeper logbook"})
            assert not recalled.is_error and "logbook" not in json.dumps(structured(recalled))
    # Nothing stored twice across the passes.
    store = open_home_store(home)
    try:
        counted = store.read(
            lambda r: r.tuples("SELECT COUNT(*), COUNT(DISTINCT source || key) FROM transcript_messages")[0]
        )
    finally:
        store.close()
    assert tuple(counted) == (8, 8)


async def test_session_end_triggers_a_pass_and_an_alarm_shows_everywhere(home: Path, tmp_path: Path) -> None:
    user = user_home(tmp_path)
    env = {"HOME": str(user), "THREADLOOM_INGEST": "true", "THREADLOOM_INGEST_INTERVAL": "0"}  # no poll
    changed = user / ".codex" / "sessions" / "2026" / "10" / "01" / "rollout-2026-10-01T09-00-00-e.jsonl"
    async with Client(serve_params(home, **env), mode="legacy") as client:
        await until(client, lambda f: messages(f) == {"claude-code": 5, "codex": 2}, "the first pass")
        # A Codex whose format changed: records keep coming, none is recognised.
        changed.parent.mkdir(parents=True)
        changed.write_text("".join(json.dumps({"kind": "turn.v9", "said": f"hi {n}"}) + "\n" for n in range(30)))
        hook_input = json.dumps({"session_id": "c-1", "cwd": str(tmp_path), "hook_event_name": "SessionEnd"})
        done = subprocess.run(
            [PY, "-m", "threadloom", "hook", "session-end", "--client", "codex"],
            input=hook_input, env=env_for(home, **env), capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        found = await until(client, lambda f: f["alarms"], "the alarm after the hook's pass")
        assert [row["files"] for row in found["sources"] if row["source"] == "codex"] == [2]
        assert any("codex" in alarm and "no message" in alarm for alarm in found["alarms"])
    log = (home / "daemon.log").read_text()
    assert "transcript alarm: codex" in log
    doctor = cli(home, "doctor", **env)
    assert "transcripts" in doctor.stdout and "format may have changed" in doctor.stdout
    status = cli(home, "ingest", "status", **env)
    assert status.returncode == 1 and "alarm:" in status.stdout


def test_the_cli_backfills_since_a_date_and_says_what_it_did(home: Path, tmp_path: Path) -> None:
    user = user_home(tmp_path)
    env = {"HOME": str(user), "THREADLOOM_INGEST": "true"}
    done = cli(home, "ingest", "--source", "codex", "--json", **env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["pass"]["sources"]["codex"]["messages_added"] == 2 and "claude-code" not in report["pass"]["sources"]
    again = cli(home, "ingest", "--since", "2026-11-01", **env)
    assert again.returncode == 0 and "5 new message(s)" in again.stdout
    wrong = cli(home, "ingest", "--source", "cursor", **env)
    assert wrong.returncode == 2 and "unknown transcript source 'cursor'" in wrong.stderr
    off = cli(home, "ingest", **(env | {"THREADLOOM_INGEST": "false"}))
    assert off.returncode == 0 and "off" in off.stdout
