"""Invalid per-session settings fail when the session starts, with one clear line, on every path."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.helpers import MODES, PY, env_for


def serve(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "threadloom", "serve", *args],
        env=env_for(home, **env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize(
    ("setting", "value", "says"),
    [
        ("THREADLOOM_SESSION_ID", "no spaces allowed", "THREADLOOM_SESSION_ID"),
        ("THREADLOOM_PARENT_SESSION", "bad/parent", "THREADLOOM_PARENT_SESSION"),
        ("THREADLOOM_TOOLSET", "core,bogus", "unknown tool group 'bogus'"),
        ("THREADLOOM_USER", " padded ", "THREADLOOM_USER"),
        ("THREADLOOM_ORG", "line\nbreak", "THREADLOOM_ORG"),
        ("THREADLOOM_ROOT", "/no/such/folder", "THREADLOOM_ROOT=/no/such/folder"),
    ],
)
def test_a_bad_per_session_setting_is_refused_at_start_with_one_line(
    home: Path, mode: str, setting: str, value: str, says: str
) -> None:
    done = serve(home, *MODES[mode], **{setting: value})
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("threadloom: ")
    assert says in lines[0]
    assert "Traceback" not in done.stderr and "TaskGroup" not in done.stderr


def test_an_unknown_log_level_is_refused_listing_the_valid_ones(home: Path) -> None:
    done = serve(home, "--in-process", THREADLOOM_LOG_LEVEL="verbose")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "threadloom: invalid settings: THREADLOOM_LOG_LEVEL: Value error, 'verbose' is not a log level; "
        "use one of DEBUG, INFO, WARNING, ERROR, CRITICAL"
    ]


def test_a_daemon_given_an_unknown_log_level_fails_to_start_and_the_bridge_says_why(home: Path) -> None:
    done = serve(home, THREADLOOM_LOG_LEVEL="verbose")
    assert done.returncode == 2
    assert "failed to start" in done.stderr
    assert "'verbose' is not a log level; use one of DEBUG, INFO, WARNING, ERROR, CRITICAL" in done.stderr


def test_log_levels_are_case_insensitive(home: Path) -> None:
    done = serve(home, "--in-process", THREADLOOM_LOG_LEVEL="info")
    assert done.returncode == 0, done.stderr
