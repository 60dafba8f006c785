"""Attack from outside (issues 17 and 18): forgetting a conversation must take the user's words out of the
style memory too. Style learning keeps one sanitised example per habit, cut from a message, and the capsule
(and its stored revisions) quotes it; `threadloom forget --text ...` over transcripts left that copy in the
database file. Through the CLI on a fake HOME with a Claude Code transcript, the file's bytes read after."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import cli

pytestmark = pytest.mark.slow
SESSIONS = ("5b1e9c3a-7d2f-4e8a-9b6c-2f4d8e1a3c70", "6c2f0d4b-8e3a-4f9b-8c7d-3a5e9f2b4d81")
MARKER = "zanzibarquokka"


def transcript(user_home: Path) -> None:
    """Two Claude Code sessions of lowercase messages (a register habit the dictionary learns, with an
    example), all naming MARKER; the shape of tests/fixtures/transcripts/claude-code."""
    folder = user_home / ".claude" / "projects" / "-home-ada-src-loom"
    folder.mkdir(parents=True)
    for s, session in enumerate(SESSIONS):
        lines = []
        for i in range(4):
            text = f"the {MARKER} build broke again on step {i}"
            lines.append(
                {"type": "user", "sessionId": session, "cwd": "/home/ada/src/loom", "version": "2.1.227",
                 "uuid": f"0c9a7f52-1111-4a4b-9c1d-00000000{s}{i:03d}", "parentUuid": None,
                 "timestamp": f"2026-11-0{2 + s}T09:1{i}:00.000Z", "message": {"role": "user", "content": text}}
            )  # fmt: skip
        (folder / f"{session}.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_forgetting_transcripts_by_text_leaves_no_copy_in_style_examples(home: Path, tmp_path: Path) -> None:
    user_home = tmp_path / "user"
    transcript(user_home)
    env = {"HOME": str(user_home), "THREADLOOM_USER": "ada", "THREADLOOM_INGEST": "true"}
    assert cli(home, "ingest", **env).returncode == 0
    learned = cli(home, "style", "learn", **env)
    assert learned.returncode == 0, learned.stderr
    habits = json.loads(cli(home, "style", "habits", **env).stdout)["habits"]
    assert any(MARKER in (h["example"] or "") for h in habits), habits  # the attack's premise
    done = cli(home, "forget", "--text", MARKER, "--yes", **env)
    assert done.returncode == 0, done.stderr
    data = b"".join(p.read_bytes() for p in home.glob("threadloom.db*"))
    assert MARKER.encode() not in data
    after = json.loads(cli(home, "style", "habits", **env).stdout)["habits"]
    assert {h["id"] for h in after} == {h["id"] for h in habits}  # the habits stay; only the words went
    assert MARKER not in json.dumps(after) and MARKER not in cli(home, "style", "show", **env).stdout
