"""What each client module plans: every hook command is one `threadloom hook` accepts, every file is
the user's (or the repository's with --project), and a home other than the default travels along."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest

from threadloom.hooks.clients import CLIENTS as HOOK_CLIENTS
from threadloom.hooks.clients import EVENTS
from threadloom.setup.clients import CLIENTS
from threadloom.setup.edits import JsonEntry, JsonItem, TomlEntry
from threadloom.setup.model import Context

EXE = "/opt/my tools/threadloom"  # a space: the hook command must quote it


def strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []


@pytest.mark.parametrize("project", [False, True], ids=["user", "project"])
@pytest.mark.parametrize("name", list(CLIENTS))
def test_every_planned_hook_is_a_command_threadloom_hook_accepts(name: str, project: bool, tmp_path: Path) -> None:
    home, repo = tmp_path / "home", tmp_path / "repo"
    ctx = Context(home, EXE, {}, repo if project else None)
    plan = CLIENTS[name].plan(ctx)
    hooks = [e for t in plan.targets for e in t.edits if isinstance(e, JsonItem)]
    for edit in hooks:
        commands = [s for s in strings(edit.value) if " hook " in s]
        assert len(commands) == 1
        argv = shlex.split(commands[0])
        assert argv[0] == EXE and argv[1] == "hook"
        assert argv[2] in EVENTS and argv[3:] == ["--client", name]
        assert name in HOOK_CLIENTS
        assert edit.marker in commands[0]
    for target in plan.targets:
        assert target.client == name
        inside = repo if project and not target.private else home
        assert target.path.is_relative_to(inside), target.path
    servers = [
        e for t in plan.targets for e in t.edits if isinstance(e, JsonEntry | TomlEntry) and "threadloom" in e.path
    ]
    for server in servers:
        assert server.value["command"] == EXE and server.value["args"] == ["serve"]


def test_a_home_other_than_the_default_goes_into_entries_and_hook_commands(tmp_path: Path) -> None:
    ctx = Context(tmp_path, EXE, {"THREADLOOM_HOME": "/data/tl home"}, None)
    plan = CLIENTS["claude"].plan(ctx)
    server = next(e for e in plan.targets[0].edits if isinstance(e, JsonEntry))
    assert server.value["env"] == {"THREADLOOM_HOME": "/data/tl home"}
    hook = next(e for t in plan.targets for e in t.edits if isinstance(e, JsonItem))
    command = strings(hook.value)[-1]
    assert shlex.split(command)[:2] == ["THREADLOOM_HOME=/data/tl home", EXE]


def test_a_client_folder_moved_by_its_variable_is_followed(tmp_path: Path) -> None:
    ctx = Context(tmp_path, EXE, {"CODEX_HOME": str(tmp_path / "codex"), "COPILOT_HOME": str(tmp_path / "cp")}, None)
    assert {t.path.parent for t in CLIENTS["codex"].plan(ctx).targets} == {tmp_path / "codex"}
    assert all(t.path.is_relative_to(tmp_path / "cp") for t in CLIENTS["copilot"].plan(ctx).targets)
