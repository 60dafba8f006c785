"""`threadloom retention` and `threadloom compact` as a person runs them: a real process over a real home, its
store on each backend (tests/backend_home.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests import helpers
from tests import retention_world as rw
from tests.backend_home import home, open_home_store, store_env
from threadloom.clock import now_ms
from threadloom.store.base import Writer

__all__ = ["home"]


def cli(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return helpers.cli(home, *args, **env, **store_env(home))


def _seed(home: Path) -> None:
    store = open_home_store(home)
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
    assert "signals" in done.stdout and "compaction:" in done.stdout
    if store_env(home):  # PostgreSQL: what the VACUUM did
        assert "compaction: VACUUM (ANALYZE) of" in done.stdout and "dead row versions removed" in done.stdout
    else:
        assert "store file:" in done.stdout

    again = json.loads(cli(home, "retention", "--json", THREADLOOM_USER="ben").stdout)
    assert again["deleted"]["signals"] == 0 and again["before"]["signals"]["rows"] == 1  # ana's pass took ben's too

    compacted = cli(home, "compact", "--json")
    assert compacted.returncode == 0, compacted.stderr
    assert json.loads(compacted.stdout)["ran"] is True
    store = open_home_store(home)
    try:
        runs = store.read(lambda r: r.scalar("SELECT COUNT(*) FROM job_runs WHERE name = 'store.compaction'"))
    finally:
        store.close()
    assert runs == 3  # after each of the two passes, and alone


def test_a_window_of_zero_stops_the_command_naming_the_setting(home: Path) -> None:
    done = cli(home, "retention", "--dry-run", THREADLOOM_RETENTION_TRANSCRIPTS_DAYS="0")
    assert done.returncode == 2 and done.stdout == ""
    assert "THREADLOOM_RETENTION_TRANSCRIPTS_DAYS" in done.stderr and "delete everything" in done.stderr
