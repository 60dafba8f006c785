"""`threadloom setup` against configs it must not harm: malformed, read-only, symlinked, changed
between its read and its write. Real files in a temporary HOME, through the same runner the CLI uses."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from threadloom.errors import InvalidInput
from threadloom.setup import files
from threadloom.setup.clients import CLIENTS
from threadloom.setup.manifest import Manifest
from threadloom.setup.model import Context
from threadloom.setup.runner import Report, setup, undo
from threadloom.threads.agent_files import BEGIN

EXE = "/opt/threadloom/bin/threadloom"


def run_setup(home: Path, *clients: str, dry_run: bool = False) -> Report:
    ctx = Context(home, EXE, {}, None)
    return setup(ctx, [CLIENTS[c].plan(ctx) for c in clients], Manifest(home / ".threadloom"), dry_run)


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    (path / ".gemini").mkdir(parents=True)
    (path / ".claude").mkdir()
    return path


def test_a_malformed_config_is_refused_naming_the_file_and_nothing_is_written(home: Path) -> None:
    bad = home / ".gemini" / "settings.json"
    bad.write_text('{\n  "theme": "GitHub",\n  "mcpServers": {\n}\n')
    before = tree(home)
    with pytest.raises(InvalidInput) as refused:
        run_setup(home, "claude", "gemini")
    assert str(bad) in refused.value.message
    assert "line 5" in refused.value.message and "nothing was changed" in refused.value.message
    assert tree(home) == before  # Claude's files were not written either


def test_the_cli_refuses_a_malformed_config_with_exit_code_2(home: Path) -> None:
    bad = home / ".gemini" / "settings.json"
    bad.write_text("{ not json")
    done = subprocess.run(
        [str(Path(sys.executable).parent / "threadloom"), "setup", "--client", "gemini"],
        env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert str(bad) in done.stderr and "Traceback" not in done.stderr
    assert bad.read_text() == "{ not json"


@pytest.mark.parametrize(
    "text, why",
    [
        ('{"mcpServers": ["a"]}', "not an object"),
        ('{"hooks": {"SessionStart": {"hooks": []}}}', "not a list"),
        ("[1, 2]", "top level is not a JSON object"),
    ],
)
def test_a_config_of_the_wrong_shape_is_refused(home: Path, text: str, why: str) -> None:
    (home / ".gemini" / "settings.json").write_text(text)
    with pytest.raises(InvalidInput, match=why):
        run_setup(home, "gemini")


def test_a_malformed_toml_is_refused(home: Path) -> None:
    (home / ".codex").mkdir()
    (home / ".codex" / "config.toml").write_text("[mcp_servers\ncommand = 1\n")
    with pytest.raises(InvalidInput, match=r"config\.toml: cannot parse it as TOML"):
        run_setup(home, "codex")


def test_a_read_only_config_is_refused(home: Path) -> None:
    path = home / ".gemini" / "settings.json"
    path.write_text("{}\n")
    path.chmod(0o444)
    with pytest.raises(InvalidInput, match="read-only"):
        run_setup(home, "gemini")
    assert path.read_text() == "{}\n"
    assert not (home / ".gemini" / "GEMINI.md").exists()


def test_a_symlink_inside_home_is_followed_and_stays_a_link(home: Path) -> None:
    real = home / "dotfiles" / "gemini-settings.json"
    real.parent.mkdir()
    real.write_text('{"theme": "GitHub"}\n')
    real.chmod(0o640)
    link = home / ".gemini" / "settings.json"
    link.symlink_to(real)
    run_setup(home, "gemini")
    assert link.is_symlink()
    assert '"threadloom"' in real.read_text()
    assert real.stat().st_mode & 0o777 == 0o640  # the user's permissions are kept
    undo({"gemini"}, Manifest(home / ".threadloom"), dry_run=False)
    assert link.is_symlink() and real.read_text() == '{"theme": "GitHub"}\n'


def test_a_symlink_out_of_home_is_refused_naming_the_link(home: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.json"
    outside.write_text("{}\n")
    link = home / ".gemini" / "settings.json"
    link.symlink_to(outside)
    with pytest.raises(InvalidInput, match=f"{link} is a symlink to {outside}, outside"):
        run_setup(home, "gemini")
    assert outside.read_text() == "{}\n"


def test_a_folder_link_out_of_home_is_refused(home: Path, tmp_path: Path) -> None:
    (tmp_path / "shared-codex").mkdir()
    (home / ".codex").symlink_to(tmp_path / "shared-codex")
    with pytest.raises(InvalidInput, match=r"\.codex is a symlink"):
        run_setup(home, "codex")
    assert list((tmp_path / "shared-codex").iterdir()) == []


def test_a_file_changed_between_read_and_write_is_refused_and_kept(home: Path) -> None:
    path = home / ".gemini" / "settings.json"
    path.write_text('{"theme": "GitHub"}\n')
    snap = files.read(path, home)
    path.write_text('{"theme": "Dracula"}\n')  # the client rewrote it meanwhile
    with pytest.raises(InvalidInput, match="changed while setup was working on it"):
        files.write(snap, b'{"theme": "GitHub", "mcpServers": {}}\n')
    assert path.read_text() == '{"theme": "Dracula"}\n'
    assert [p.name for p in path.parent.iterdir()] == ["settings.json"]  # no temporary file left


def test_a_file_that_is_not_regular_is_refused(home: Path) -> None:
    os.mkfifo(home / ".gemini" / "settings.json")
    with pytest.raises(InvalidInput, match="not a regular file"):
        run_setup(home, "gemini")


def test_a_broken_managed_block_is_refused(home: Path) -> None:
    (home / ".claude" / "CLAUDE.md").write_text(f"{BEGIN}\nhalf a block\n")
    with pytest.raises(InvalidInput, match=r"CLAUDE\.md: .*broken"):
        run_setup(home, "claude")


def test_dry_run_and_a_second_run_report_without_writing(home: Path) -> None:
    report = run_setup(home, "gemini", dry_run=True)
    assert {r.status for r in report.rows if r.path} == {"would change"}
    assert tree(home) == {}
    run_setup(home, "gemini")
    written = tree(home)
    again = run_setup(home, "gemini")
    assert not again.changed and tree(home) == written


def test_undo_without_its_backup_takes_the_entries_out_one_by_one(home: Path) -> None:
    path = home / ".gemini" / "settings.json"
    path.write_text('{\n  "theme": "GitHub"\n}\n')
    run_setup(home, "gemini")
    for backup in (home / ".threadloom" / "setup" / "backups").iterdir():
        backup.unlink()
    report = undo({"gemini"}, Manifest(home / ".threadloom"), dry_run=False)
    assert path.read_text() == '{\n  "theme": "GitHub"\n}\n'
    assert any("only threadloom's entries" in r.status for r in report.rows)


def test_a_repository_file_linked_out_of_the_repository_is_refused(home: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    secret = home / ".claude.json"
    secret.write_text('{"oauthAccount": {}}\n')
    (repo / ".mcp.json").symlink_to(secret)  # a hostile clone pointing at the user's own file
    ctx = Context(home, EXE, {}, repo)
    with pytest.raises(InvalidInput, match=r"\.mcp\.json.*symlink"):
        setup(ctx, [CLIENTS["claude"].plan(ctx)], Manifest(home / ".threadloom"), False)
    assert secret.read_text() == '{"oauthAccount": {}}\n'
    assert not (repo / "CLAUDE.md").exists()


def test_a_write_refused_at_the_last_moment_leaves_no_record_behind(home: Path) -> None:
    from threadloom.setup import runner

    path = home / ".gemini" / "settings.json"
    path.write_text('{"theme": "GitHub"}\n')
    ctx = Context(home, EXE, {}, None)
    planned = runner._plan_files(ctx, [CLIENTS["gemini"].plan(ctx)])
    settings = next(p for p in planned if p.snap.real == path.resolve())
    path.write_text('{"theme": "Dracula"}\n')  # Gemini rewrote it after setup read it
    manifest = Manifest(home / ".threadloom")
    with pytest.raises(InvalidInput, match="changed while setup was working on it"):
        runner._write(settings, manifest, Report())
    assert str(path.resolve()) not in Manifest(home / ".threadloom").entries
    assert path.read_text() == '{"theme": "Dracula"}\n'


@pytest.mark.skipif(os.getuid() != 0, reason="only root can give a file to another user here")
def test_another_users_file_is_refused(home: Path) -> None:
    path = home / ".gemini" / "settings.json"
    path.write_text("{}\n")
    os.chown(path, 65534, 65534)
    with pytest.raises(InvalidInput, match="belongs to another user"):
        run_setup(home, "gemini")
    assert path.read_text() == "{}\n"


def test_a_file_that_is_not_utf8_is_refused(home: Path) -> None:
    (home / ".gemini" / "settings.json").write_bytes(b'{"theme": "\xff"}')
    with pytest.raises(InvalidInput, match=r"settings\.json: it is not UTF-8"):
        run_setup(home, "gemini")


def test_undo_dry_run_shows_the_diffs_and_changes_nothing(home: Path) -> None:
    run_setup(home, "gemini")
    written = tree(home)
    report = undo({"gemini"}, Manifest(home / ".threadloom"), dry_run=True)
    assert {r.status for r in report.rows} == {"would change"}
    assert any(f"--- {home / '.gemini' / 'settings.json'}" in d and '-    "threadloom": {' in d for d in report.diffs)
    assert tree(home) == written
