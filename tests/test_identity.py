from __future__ import annotations

from pathlib import Path

import pytest

from threadloom.errors import InvalidInput
from threadloom.identity import Provenance, detect_vendor, project_root, session_id_from


@pytest.mark.parametrize(
    ("client", "env", "vendor"),
    [
        ("claude-code", {}, "claude"),
        ("codex-mcp-client", {}, "codex"),
        ("gemini-cli-mcp-client", {}, "gemini"),
        ("cursor-vscode", {}, "cursor"),
        ("Visual Studio Code", {}, "copilot"),
        (None, {"CLAUDECODE": "1"}, "claude"),
        (None, {"CODEX_HOME": "/x"}, "codex"),
        (None, {"GEMINI_CLI": "1"}, "gemini"),
        (None, {"CURSOR_TRACE_ID": "abc"}, "cursor"),
        (None, {"TERM_PROGRAM": "vscode"}, "copilot"),
        ("mcp", {}, "other"),
        ("claude-code", {"THREADLOOM_VENDOR": "codex"}, "codex"),
    ],
)
def test_the_vendor_is_detected_from_client_then_environment(
    client: str | None, env: dict[str, str], vendor: str
) -> None:
    assert detect_vendor(client, env) == vendor


def test_the_client_name_wins_over_the_environment() -> None:
    assert detect_vendor("codex-mcp-client", {"CLAUDECODE": "1"}) == "codex"


def test_a_given_session_id_is_kept_and_a_missing_one_generated() -> None:
    assert session_id_from("abc-123") == "abc-123"
    generated = {session_id_from(None) for _ in range(50)}
    assert len(generated) == 50


@pytest.mark.parametrize("bad", ["../etc", "a b", "x" * 200, "-lead"])
def test_a_malformed_session_id_is_rejected(bad: str) -> None:
    with pytest.raises(InvalidInput):
        session_id_from(bad)


def test_the_project_root_prefers_the_setting_then_client_roots_then_cwd(tmp_path: Path) -> None:
    setting, offered, cwd = tmp_path / "setting", tmp_path / "my repo", tmp_path / "cwd"
    for folder in (setting, offered, cwd):
        folder.mkdir()
    roots = [offered.as_uri()]  # file:///.../my%20repo
    assert project_root({"THREADLOOM_ROOT": str(setting)}, roots, str(cwd)) == setting
    assert project_root({"THREADLOOM_ROOT": "setting"}, roots, str(cwd.parent)) == setting
    assert project_root({}, roots, str(cwd)) == offered
    assert project_root({}, [], str(cwd)) == cwd


@pytest.mark.parametrize("origin", ["foreground", "hook", "job:maintenance"])
def test_valid_origins_are_accepted(origin: str) -> None:
    assert Provenance("s", "claude", "/p", origin).origin == origin


@pytest.mark.parametrize("origin", ["background", "job:", "job:Bad Name", ""])
def test_invalid_origins_are_rejected(origin: str) -> None:
    with pytest.raises(InvalidInput):
        Provenance("s", "claude", "/p", origin)
