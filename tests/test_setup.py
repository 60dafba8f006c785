"""`threadloom setup` end to end: the real CLI as a subprocess, in a temporary HOME holding each
client's config in the shapes its docs show, the user's own servers, hooks and comments included."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from threadloom.setup import jsonc

FIXTURES = Path(__file__).parent / "fixtures" / "setup" / "home"
THREADLOOM = Path(sys.executable).parent / "threadloom"
EXE = str(THREADLOOM.resolve())
pytestmark = pytest.mark.slow  # each case runs the CLI as a process, a few seconds apiece on a busy machine


def run(home: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    return subprocess.run(
        [str(THREADLOOM), "setup", *args], cwd=cwd or home, env=env, capture_output=True, text=True, timeout=60
    )


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under `root` but threadloom's own home, by relative path."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".threadloom" not in p.relative_to(root).parts
    }


@pytest.fixture
def user_home(tmp_path: Path) -> Path:
    target = tmp_path / "home"
    shutil.copytree(FIXTURES, target)
    return target


def read_json(path: Path) -> dict:  # type: ignore[type-arg]
    value = jsonc.parse(path.read_text()).value()
    assert isinstance(value, dict)
    return value


def hook_commands(groups: list[dict]) -> list[str]:  # type: ignore[type-arg]
    return [h["command"] for g in groups for h in g["hooks"]]


def test_setup_merges_into_every_client_then_changes_nothing_then_undo_restores_each_byte(user_home: Path) -> None:
    home = user_home
    original = snapshot(home)

    first = run(home)
    assert first.returncode == 0, first.stderr
    for client in ("claude", "codex", "gemini", "vscode", "cursor", "copilot"):
        assert any(line.startswith(client) for line in first.stdout.splitlines()), first.stdout
    assert "backup" in first.stdout

    claude = read_json(home / ".claude.json")
    assert claude["mcpServers"]["threadloom"] == {"type": "stdio", "command": EXE, "args": ["serve"]}
    assert claude["mcpServers"]["github"]["env"] == {"GITHUB_TOKEN": "ghp_example"}
    assert claude["numStartups"] == 42 and "/home/me/work" in claude["projects"]
    settings = read_json(home / ".claude" / "settings.json")["hooks"]
    assert hook_commands(settings["SessionStart"]) == ["~/bin/greet.sh", f"{EXE} hook session-start --client claude"]
    assert hook_commands(settings["SessionEnd"]) == [f"{EXE} hook session-end --client claude"]
    assert hook_commands(settings["PreCompact"]) == [f"{EXE} hook pre-compact --client claude"]
    assert hook_commands(settings["PostToolUse"]) == ["npx prettier --write ."]
    claude_md = (home / ".claude" / "CLAUDE.md").read_text()
    assert claude_md.startswith("# My preferences\n\n- Answer briefly.") and "<!-- threadloom:begin" in claude_md

    codex_text = (home / ".codex" / "config.toml").read_text()
    assert "# keep this comment" in codex_text and "# Codex configuration (hand-written)" in codex_text
    codex = tomllib.loads(codex_text)
    assert codex["mcp_servers"]["threadloom"] == {"command": EXE, "args": ["serve"]}
    assert codex["mcp_servers"]["docs"]["env"] == {"DOCS_TOKEN": "secret"}
    assert codex["profiles"]["fast"]["model"] == "gpt-5-mini"
    assert "<!-- threadloom:begin" in (home / ".codex" / "AGENTS.md").read_text()

    gemini_text = (home / ".gemini" / "settings.json").read_text()
    assert "// Gemini CLI settings" in gemini_text and "// local server" in gemini_text
    gemini = read_json(home / ".gemini" / "settings.json")
    assert gemini["mcpServers"]["threadloom"]["command"] == EXE and "weather" in gemini["mcpServers"]
    assert hook_commands(gemini["hooks"]["PreCompress"]) == [f"{EXE} hook pre-compact --client gemini"]
    assert hook_commands(gemini["hooks"]["BeforeTool"]) == ["./audit.sh"]

    vscode_text = (home / ".config" / "Code" / "User" / "mcp.json").read_text()
    assert "/* Servers shared by every VS Code extension */" in vscode_text and "// keep" in vscode_text
    vscode = read_json(home / ".config" / "Code" / "User" / "mcp.json")
    assert vscode["servers"]["threadloom"] == {"type": "stdio", "command": EXE, "args": ["serve"]}
    assert vscode["inputs"][0]["id"] == "api-key"

    cursor_hooks = read_json(home / ".cursor" / "hooks.json")
    assert cursor_hooks["version"] == 1
    assert cursor_hooks["hooks"]["afterFileEdit"] == [{"command": "./hooks/format.sh"}]
    assert cursor_hooks["hooks"]["sessionStart"] == [{"command": f"{EXE} hook session-start --client cursor"}]
    copilot = read_json(home / ".copilot" / "mcp-config.json")["mcpServers"]
    assert set(copilot) == {"playwright", "threadloom"} and copilot["threadloom"]["tools"] == ["*"]
    copilot_hooks = read_json(home / ".copilot" / "hooks" / "threadloom.json")
    assert copilot_hooks["version"] == 1
    assert copilot_hooks["hooks"]["sessionEnd"][0]["bash"] == f"{EXE} hook session-end --client copilot"
    assert (home / ".threadloom" / "setup" / "manifest.json").stat().st_mode & 0o777 == 0o600

    after_first = snapshot(home)
    second = run(home)
    assert second.returncode == 0, second.stderr
    assert "Nothing to change" in second.stdout
    assert "added" not in second.stdout and "updated" not in second.stdout
    assert snapshot(home) == after_first

    undone = run(home, "--undo")
    assert undone.returncode == 0, undone.stderr
    assert "restored" in undone.stdout
    assert snapshot(home) == original
    assert not (home / ".copilot" / "hooks").exists()  # the folder setup made is gone with its file
    assert "Nothing to undo" in run(home, "--undo").stdout


def test_no_hook_is_written_for_an_event_the_client_lacks(user_home: Path) -> None:
    home = user_home
    done = run(home)
    assert done.returncode == 0, done.stderr
    codex_hooks = read_json(home / ".codex" / "hooks.json")["hooks"]
    assert set(codex_hooks) == {"SessionStart", "PreCompact"}  # Codex has no session end
    assert not any("session-end" in c for c in json.dumps(codex_hooks).split('"'))
    cursor = set(read_json(home / ".cursor" / "hooks.json")["hooks"])
    assert cursor == {"afterFileEdit", "sessionStart", "sessionEnd", "preCompact"}
    assert set(read_json(home / ".copilot" / "hooks" / "threadloom.json")["hooks"]) == {"sessionStart", "sessionEnd"}
    assert "hooks" not in read_json(home / ".config" / "Code" / "User" / "mcp.json")
    assert "skipped (Codex has no session-end event)" in done.stdout


def test_dry_run_prints_a_diff_of_each_file_and_changes_nothing(user_home: Path) -> None:
    home = user_home
    original = snapshot(home)
    done = run(home, "--dry-run")
    assert done.returncode == 0, done.stderr
    assert f"+++ {home / '.codex' / 'config.toml'}" in done.stdout
    assert "+[mcp_servers.threadloom]" in done.stdout
    assert f"+++ {home / '.claude.json'}" in done.stdout
    assert "would change" in done.stdout and "Dry run: nothing was changed." in done.stdout
    assert snapshot(home) == original
    assert not (home / ".threadloom").exists()


def test_client_option_limits_setup_to_that_client(user_home: Path) -> None:
    home = user_home
    original = snapshot(home)
    done = run(home, "--client", "codex")
    assert done.returncode == 0, done.stderr
    now = snapshot(home)
    changed = {p for p in now if now[p] != original.get(p)}
    assert changed == {".codex/config.toml", ".codex/hooks.json", ".codex/AGENTS.md"}
    assert run(home, "--client", "nope").returncode == 2


def test_a_client_is_detected_by_its_config_folder_alone(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".gemini").mkdir(parents=True)
    done = run(home)
    assert done.returncode == 0, done.stderr
    assert {line.split()[0] for line in done.stdout.splitlines() if line.strip()} <= {"gemini", "backup", "note"}
    assert (home / ".gemini" / "settings.json").exists() and not (home / ".claude.json").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "No agent CLI found" in run(empty).stdout


def test_undo_after_the_user_edited_a_file_removes_only_setups_entries(user_home: Path) -> None:
    home = user_home
    assert run(home).returncode == 0
    path = home / ".config" / "Code" / "User" / "mcp.json"
    edited = path.read_text().replace('"servers": {', '"servers": {\n    "mine": {"command": "mine"},', 1)
    path.write_text(edited)
    done = run(home, "--undo")
    assert done.returncode == 0, done.stderr
    assert "edited since setup" in done.stdout
    after = read_json(path)
    assert set(after["servers"]) == {"mine", "fetch"}
    assert "/* Servers shared by every VS Code extension */" in path.read_text()
    assert snapshot(home)[".codex/config.toml"] == (FIXTURES / ".codex" / "config.toml").read_bytes()


def test_an_older_threadloom_entry_is_updated_and_undo_puts_it_back(user_home: Path) -> None:
    home = user_home
    path = home / ".cursor" / "mcp.json"
    old = '{\n  "mcpServers": {\n    "threadloom": {"command": "/old/threadloom", "args": ["serve"]}\n  }\n}\n'
    path.write_text(old)
    first = run(home, "--client", "cursor")
    assert first.returncode == 0, first.stderr
    assert read_json(path)["mcpServers"]["threadloom"]["command"] == EXE
    path.write_text(path.read_text() + "\n")  # touched since: undo must go entry by entry
    assert run(home, "--undo", "--client", "cursor").returncode == 0
    assert read_json(path)["mcpServers"]["threadloom"]["command"] == "/old/threadloom"


def test_project_writes_the_repository_files(user_home: Path, tmp_path: Path) -> None:
    home = user_home
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "AGENTS.md").write_text("# Team notes\n")
    done = run(home, "--project", cwd=repo / "src")
    assert done.returncode == 0, done.stderr
    assert read_json(repo / ".mcp.json")["mcpServers"]["threadloom"]["command"] == EXE
    codex = tomllib.loads((repo / ".codex" / "config.toml").read_text())
    assert codex["mcp_servers"]["threadloom"]["args"] == ["serve"]
    assert read_json(repo / ".gemini" / "settings.json")["mcpServers"]["threadloom"]["command"] == EXE
    assert read_json(repo / ".vscode" / "mcp.json")["servers"]["threadloom"]["type"] == "stdio"
    assert read_json(repo / ".cursor" / "mcp.json")["mcpServers"]["threadloom"]["command"] == EXE
    for name in ("CLAUDE.md", "AGENTS.md", "GEMINI.md", ".github/copilot-instructions.md"):
        assert "<!-- threadloom:begin" in (repo / name).read_text(), name
    assert (repo / "AGENTS.md").read_text().startswith("# Team notes\n")
    assert (repo / ".cursor" / "rules" / "threadloom.mdc").read_text().startswith("---\n")
    assert os.stat(repo / ".mcp.json").st_mode & 0o777 == 0o644  # shared through git
    assert "threadloom" not in read_json(home / ".claude.json")["mcpServers"]  # the user file is left alone
    assert hook_commands(read_json(home / ".claude" / "settings.json")["hooks"]["SessionEnd"])  # hooks stay personal
    assert run(home, "--undo").returncode == 0
    assert not (repo / ".mcp.json").exists() and (repo / "AGENTS.md").read_text() == "# Team notes\n"
