"""Bad transcript input from outside, through `threadloom ingest` and the real daemon (issue 17's bad-input
list): a 50 MB single line, invalid UTF-8 (raw bytes, and half a UTF-16 pair escaped in the JSON), a
JSONL record and a Gemini JSON session cut mid-record, a symlink loop in a watched folder, a file that
vanishes mid-read and a 200 MB transcript. Each is skipped or read up to the damage, reported, and never
stops the other files, the other sources or the daemon. Each test with a `home` runs on both backends
(tests/backend_home.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests import helpers
from tests.backend_home import home, open_home_store, store_env
from tests.helpers import structured
from tests.test_ingest import FIXTURES, PLACES, PROJECT, line
from threadloom.transcripts import sources

HUGE = 50 << 20
BIG = 200 << 20
__all__ = ["home"]
GOOD = {"before the huge line", "after the huge line", "valid first", "bad \ufffd here", "valid after", "complete"}


def damaged_home(user: Path) -> Path:
    """Every fixture where its client keeps it, beside the damage; the Claude Code project folder."""
    for fixture, where in PLACES.items():
        (user / where).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(FIXTURES / fixture, user / where)
    project = user / ".claude" / "projects" / PROJECT
    with open(project / "huge-line.jsonl", "w") as f:
        f.write(line(1, "before the huge line", session="hl"))
        f.write(json.dumps({"type": "user", "uuid": "hl-x", "sessionId": "hl", "message": {"content": "x" * HUGE}}))
        f.write("\n" + line(3, "after the huge line", session="hl"))
    with open(project / "bad-utf8.jsonl", "wb") as f:
        f.write(line(1, "valid first", session="u8").encode())
        # json.dumps escapes the lone surrogate as \udcff: valid JSON, but no UTF-8 encoder takes its str
        f.write(line(3, "bad \udcff here", session="u8").encode())
        f.write(line(5, "raw RAW byte", session="u8").encode().replace(b"RAW", b"\xff\xfe"))
        f.write(b"\xff\xfe\x00\x80 not json at all\n")
        f.write(line(7, "valid after", session="u8").encode())
        # a NUL escaped in the JSON: SQLite keeps it, PostgreSQL's text refuses it
        f.write(line(9, "nul \x00 inside", session="u8", cwd="/home/ada/src/lo\x00om").encode())
    with open(project / "cut.jsonl", "w") as f:
        f.write(line(1, "complete", session="cut") + line(3, "cut short", session="cut")[:40])
    whole = (FIXTURES / "gemini/session-2025-11-03T14-20-7c1d2e3f.json").read_text()
    (user / ".gemini/tmp/abc/chats/session-2026-11-01T10-00-cut.json").write_text(whole[: len(whole) // 2])
    loop = project / "loop"
    loop.mkdir()
    os.symlink(loop, loop / "self")
    os.symlink("..", loop / "up")
    os.symlink(user / ".claude", project / "claude-again")
    return project


def cli(home: Path, *args: str, timeout: float = 60, **env: str) -> subprocess.CompletedProcess[str]:
    return helpers.cli(home, *args, timeout=timeout, **env, **store_env(home))


def serve_params(home: Path, *args: str, **env: str) -> Any:
    return helpers.serve_params(home, *args, **env, **store_env(home))


def from_store(home: Path, sql: str, params: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
    store = open_home_store(home)
    try:
        return [tuple(row) for row in store.read(lambda r: r.tuples(sql, params or {}))]
    finally:
        store.close()


def stored_texts(home: Path, session: str) -> set[str]:
    rows = from_store(home, "SELECT text FROM transcript_messages WHERE session_id = :s", {"s": session})
    return {str(text) for (text,) in rows}


def test_the_cli_reads_past_every_kind_of_damage_and_reports_it(home: Path, tmp_path: Path) -> None:
    user = tmp_path / "u"
    project = damaged_home(user)
    env = {"HOME": str(user), "THREADLOOM_INGEST": "true"}
    done = cli(home, "ingest", "--json", timeout=600, **env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)["pass"]
    assert report["notes"] == []  # no file failed (a lone surrogate used to fail its whole file)
    assert all(s["failed_files"] == 0 for s in report["sources"].values())
    assert set(report["sources"]) == {"claude-code", "codex", "gemini", "copilot"}  # the other sources went on
    found = {(Path(p["path"]).name, p["reason"]) for p in report["problems"]}
    assert {
        ("huge-line.jsonl", "line_too_long"),
        ("bad-utf8.jsonl", "invalid_utf8"),
        ("bad-utf8.jsonl", "invalid_json"),
        ("session-2026-11-01T10-00-cut.json", "invalid_json"),
    } <= found
    details = [p["detail"] for p in report["problems"] if p["reason"] == "invalid_utf8"]
    assert any("surrogate" in d for d in details) and any("invalid UTF-8" in d for d in details)
    said = stored_texts(home, "hl") | stored_texts(home, "u8") | stored_texts(home, "cut")
    assert said >= GOOD and "cut short" not in said
    assert any(t.startswith("raw ") and "\ufffd" in t for t in said)
    assert any(t in ("nul \x00 inside", "nul \ufffd inside") for t in said)  # PostgreSQL's text has no NUL
    status = json.loads(done.stdout)["status"]
    claude = next(s for s in status["sources"] if s["source"] == "claude-code")
    assert claude["problems"]["incomplete_tail"] == 1

    again = cli(home, "ingest", "--json", timeout=600, **env)
    assert again.returncode == 0 and json.loads(again.stdout)["pass"]["sources"]["claude-code"]["messages_added"] == 0
    with open(project / "cut.jsonl", "a") as f:  # the cut record is completed: read once, whole
        f.write(line(3, "cut short", session="cut")[40:])
    third = cli(home, "ingest", "--json", timeout=600, **env)
    assert json.loads(third.stdout)["pass"]["sources"]["claude-code"]["messages_added"] == 1
    assert stored_texts(home, "cut") == {"complete", "cut short"}


def write_big(path: Path, size: int) -> int:
    """A Claude Code session of `size` bytes, ~700-byte turns; how many turns it holds."""
    pad = "lorem ipsum dolor sit amet " * 20
    template = line(0, "TURN " + pad, session="big")
    n, written = 0, 0
    with open(path, "w") as f:
        while written < size:
            block = "".join(template.replace('"big-u-0"', f'"big-u-{i}"', 1) for i in range(n, n + 1000))
            f.write(block)
            written, n = written + len(block), n + 1000
    return n


async def status_of(client: Client) -> dict[str, Any]:
    result = await client.call_tool("status", {})
    assert not result.is_error, result
    return dict(structured(result)["transcripts"])


async def until(client: Client, check: Any, what: str, timeout: float = 300) -> dict[str, Any]:
    """Polls status; the generous timeout is a hang detector under a loaded machine, not a speed check."""
    answered = 0
    with anyio.fail_after(timeout):
        while True:
            found = await status_of(client)
            answered += 1
            if check(found):
                return found | {"answered": answered}
            await anyio.sleep(0.5)
    raise AssertionError(what)  # pragma: no cover - fail_after raises first


def counts(found: dict[str, Any]) -> dict[str, int]:
    return {row["source"]: row["messages"] for row in found["sources"]}


@pytest.mark.anyio
async def test_the_daemon_answers_through_a_200_mb_transcript_that_then_vanishes(home: Path, tmp_path: Path) -> None:
    user = tmp_path / "u"
    project = damaged_home(user)
    big = project / "big.jsonl"
    turns = write_big(big, BIG)
    assert big.stat().st_size >= BIG
    env = {"HOME": str(user), "THREADLOOM_INGEST": "true", "THREADLOOM_INGEST_INTERVAL": "0.2"}
    async with Client(serve_params(home, **env), mode="legacy") as client:
        # The daemon answers while the big file is part read, and the other sources are in by then.
        found = await until(client, lambda f: 20 < counts(f).get("claude-code", 0) < turns, "a part of the big file")
        assert {"codex", "gemini", "copilot"} <= set(counts(found))
        big.unlink()  # it vanishes mid-read
        later = project / "after.jsonl"
        later.write_text(line(1, "written after the big file vanished", session="after"))
        # The daemon goes on: a file that arrives afterwards is read (and status still answers).
        await until(client, lambda f: "written after the big file vanished" in stored_texts(home, "after"), "after")
        # and the 50 MB line is skipped over several passes (each reads at most 16 MB of a file)
        await until(client, lambda f: "after the huge line" in stored_texts(home, "hl"), "past the huge line")
    assert stored_texts(home, "hl") >= {"before the huge line", "after the huge line"}
    [(kept, keys)] = from_store(
        home, "SELECT COUNT(*), COUNT(DISTINCT key) FROM transcript_messages WHERE session_id = 'big'"
    )
    assert 0 < kept < turns and keys == kept  # read up to where it vanished, each turn once


def test_half_a_utf16_pair_in_a_gemini_session_is_replaced_and_reported(tmp_path: Path) -> None:
    gemini = next(s for s in sources() if s.name == "gemini")
    document = json.loads((FIXTURES / "gemini/session-2025-11-03T14-20-7c1d2e3f.json").read_text())
    document["messages"][0]["content"] = "an emoji cut in two: \ud83d"  # json.dumps writes it as \ud83d
    path = tmp_path / "session-2026-11-01T10-00-half.json"
    path.write_text(json.dumps(document))
    parsed = gemini.parse(path, None)
    assert any(m.text == "an emoji cut in two: \ufffd" for m in parsed.messages)
    assert [p.reason for p in parsed.problems] == ["invalid_utf8"]
    for m in parsed.messages:
        m.text.encode("utf-8")  # every text can be stored
