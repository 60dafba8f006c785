"""What each client's hook JSON gives threadloom, and what threadloom prints back for it (no daemon)."""

from __future__ import annotations

import io
import json
import os
import re
from typing import BinaryIO

import pytest

from threadloom.hooks.clients import CLIENTS, EVENTS, guess_client, injects, parse_input
from threadloom.hooks.run import HookFailed, run


@pytest.mark.parametrize(
    ("payload", "session", "cwd"),
    [
        # Claude Code, Codex, Gemini CLI: snake_case with cwd.
        ({"session_id": "s1", "cwd": "/r", "source": "compact", "transcript_path": "/t.jsonl"}, "s1", "/r"),
        # VS Code's common fields and Copilot CLI's camelCase form.
        ({"sessionId": "s2", "cwd": "/r", "hookEventName": "SessionStart", "transcriptPath": "/t"}, "s2", "/r"),
        # Cursor: the conversation and the workspace roots.
        ({"conversation_id": "s3", "workspace_roots": ["/w", "/x"], "hook_event_name": "sessionStart"}, "s3", "/w"),
        # Wrong types are as good as absent.
        ({"session_id": 7, "cwd": ["/r"], "workspace_roots": "nope"}, None, None),
    ],
)
def test_each_clients_json_gives_the_session_and_folder(payload: dict[str, object], session: str, cwd: str) -> None:
    hook = parse_input(payload)
    assert (hook.session, hook.cwd) == (session, cwd)


def test_a_long_field_is_cut() -> None:
    assert len(parse_input({"session_id": "x" * 100_000}).session or "") == 4096


def test_only_session_start_injects_and_never_for_copilot_cli() -> None:
    for client in CLIENTS:
        assert not injects(client, "session-end") and not injects(client, "pre-compact")
        assert injects(client, "session-start") is (client != "copilot")
    claude = json.loads(CLIENTS["claude"].output("session-start", "brief") or "")
    assert claude == {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "brief"}}
    assert json.loads(CLIENTS["cursor"].output("session-start", "brief") or "") == {"additional_context": "brief"}
    assert set(EVENTS) == {"session-start", "session-end", "pre-compact"}


def test_with_no_client_named_the_environment_names_it() -> None:
    assert guess_client({"CURSOR_TRACE_ID": "x"}) == ("cursor", "cursor")
    assert guess_client({"CLAUDECODE": "1"}) == ("claude", "claude")
    assert guess_client({"VSCODE_PID": "1"}) == ("vscode", "copilot")
    assert guess_client({}) == ("claude", "other")


def pipe(data: bytes) -> BinaryIO:
    """stdin as a client gives it: a pipe, already closed at the writing end."""
    read, write = os.pipe()
    os.write(write, data)
    os.close(write)
    return os.fdopen(read, "rb")


@pytest.mark.parametrize(
    ("argv", "why"),
    [
        ([], "unknown hook '(none)'"),
        (["session-begin"], "unknown hook 'session-begin'"),
        (["session-start", "--client"], "unexpected arguments"),
        (["session-start", "--client", "emacs"], "unexpected arguments"),
        (["session-start", "--client", "claude", "extra"], "unexpected arguments"),
    ],
)
def test_wrong_arguments_are_refused_before_anything_is_read(argv: list[str], why: str) -> None:
    with pipe(b"{}") as stdin, pytest.raises(HookFailed, match=re.escape(why)):
        run(argv, stdin, {})


def test_a_terminal_on_stdin_is_not_waited_for() -> None:
    class Terminal(io.BytesIO):
        def isatty(self) -> bool:
            return True

    with pytest.raises(HookFailed, match="no hook JSON on stdin"):
        run(["session-start", "--client", "claude"], Terminal(), {})
