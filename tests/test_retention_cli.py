"""`threadloom retention` and `threadloom compact` as a person runs them: a real process over a real home."""

from __future__ import annotations

import json
from pathlib import Path

from tests import retention_world as rw
from tests.helpers import cli
from threadloom.clock import now_ms
from threadloom.store.base import Writer
from threadloom.store.sqlite import open_store


def _seed(home: Path) -> None:
    store = open_store(home / "threadloom.db")
    now = now_ms()

    def rows(w: Writer) -> None:
        for user in ("ana", "ben"):
            rw.session(w, f"s-{user}", user, now)
            rw.signal(w, f"s-{user}", "s-x", now - 60 * rw.DAY, f"{user}'s old whisper")
            rw.signal(w, f"s-{user}", "s-x", now - rw.DAY, f"{user}'s new whisper")

    store.write(rows)
    store.close()


def test_a_dry_run_then_a_pass_then_compaction_from_the_terminal(home: Path) -> None:
    _seed(home)
    plan = cli(home, "retention", "--dry-run", "--json", THREADLOOM_USER="ana")
    assert plan.returncode == 0, plan.stderr
    found = json.loads(plan.stdout)
    assert found["would_delete"]["signals"]["rows"] == 1 and found["before"]["signals"]["rows"] == 2

    done = cli(home, "retention", THREADLOOM_USER="ana")
    assert done.returncode == 0, done.stderr
    assert "signals" in done.stdout and "store file:" in done.stdout and "compaction:" in done.stdout

    again = json.loads(cli(home, "retention", "--json", THREADLOOM_USER="ben").stdout)
    assert again["deleted"]["signals"] == 0 and again["before"]["signals"]["rows"] == 1  # ana's pass took ben's too

    compacted = cli(home, "compact", "--json")
    assert compacted.returncode == 0, compacted.stderr
    assert json.loads(compacted.stdout)["ran"] is True


def test_a_window_of_zero_stops_the_command_naming_the_setting(home: Path) -> None:
    done = cli(home, "retention", "--dry-run", THREADLOOM_RETENTION_TRANSCRIPTS_DAYS="0")
    assert done.returncode == 2 and done.stdout == ""
    assert "THREADLOOM_RETENTION_TRANSCRIPTS_DAYS" in done.stderr and "delete everything" in done.stderr
