from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from threadloom.config import load_settings
from threadloom.errors import ConfigError


def test_defaults_apply_when_nothing_is_set(home: Path) -> None:
    s = load_settings()
    assert s.home == home
    assert s.toolset == "default"
    assert s.layout.database == home / "threadloom.db"


def test_the_env_file_in_the_home_overrides_defaults(home: Path) -> None:
    (home / ".env").write_text("THREADLOOM_TOOLSET=full\nTHREADLOOM_DAEMON_IDLE_TIMEOUT=5\n")
    s = load_settings()
    assert s.toolset == "full"
    assert s.daemon_idle_timeout == 5


def test_environment_variables_override_the_env_file(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (home / ".env").write_text("THREADLOOM_TOOLSET=full\n")
    monkeypatch.setenv("THREADLOOM_TOOLSET", "core")
    assert load_settings().toolset == "core"


def test_unknown_threadloom_keys_are_warned_about(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("THREADLOOM_TOOLSETT", "full")
    (home / ".env").write_text("THREADLOOM_HOMEE=/x\n")
    load_settings()
    err = capsys.readouterr().err
    assert "THREADLOOM_TOOLSETT" in err
    assert "THREADLOOM_HOMEE" in err


def test_an_invalid_value_is_a_clear_config_error(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("THREADLOOM_DAEMON_IDLE_TIMEOUT", "soon")
    with pytest.raises(ConfigError, match="THREADLOOM_DAEMON_IDLE_TIMEOUT"):
        load_settings()


def test_the_node_lease_sets_its_beat_and_is_refused_outside_its_range(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert (load_settings().node_lease_seconds, load_settings().node_beat_s) == (90.0, 15.0)
    monkeypatch.setenv("THREADLOOM_NODE_LEASE_SECONDS", "12")
    assert load_settings().node_beat_s == 2.0
    for bad in ("5", "3601", "0", "soon"):
        monkeypatch.setenv("THREADLOOM_NODE_LEASE_SECONDS", bad)
        with pytest.raises(ConfigError, match="THREADLOOM_NODE_LEASE_SECONDS"):
            load_settings()


def test_a_home_too_long_for_a_socket_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("THREADLOOM_HOME", str(tmp_path / ("x" * 120)))
    with pytest.raises(ConfigError, match="too long"):
        load_settings()


@pytest.mark.slow  # a fresh Python process imports every surface of the package
def test_importing_the_package_reads_no_configuration(tmp_path: Path) -> None:
    env = {"THREADLOOM_DAEMON_IDLE_TIMEOUT": "not-a-number", "THREADLOOM_HOME": str(tmp_path), "PATH": ""}
    code = (
        "import threadloom.cli.app, threadloom.server.app, threadloom.daemon.process, threadloom.server.http;"
        "import os; assert not os.listdir(os.environ['THREADLOOM_HOME'])"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr.lower()
