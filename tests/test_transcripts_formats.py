"""Every fixture of every client and format version, found where the client keeps it and parsed to the
messages a person would say were in it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from threadloom.transcripts import ClaudeCode, Codex, Copilot, Gemini, Message, ParseResult, Source, sources

FIXTURES = Path(__file__).parent / "fixtures" / "transcripts"
CLAUDE_SESSION = "5b1e9c3a-7d2f-4e8a-9b6c-2f4d8e1a3c70"


def install(home: Path, fixture: str, where: str) -> Path:
    target = home / where
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(FIXTURES / fixture, target)
    return target


def read_all(source: Source, home: Path) -> dict[str, ParseResult]:
    found = {str(path.relative_to(home)): source.parse(path, None) for path in source.discover(home)}
    assert all(not result.more for result in found.values())
    return found


def said(messages: list[Message]) -> list[tuple[str, str]]:
    return [(m.role, m.text) for m in messages]


def test_claude_code_session_yields_turns_tools_and_results(tmp_path: Path) -> None:
    where = f".claude/projects/-home-ada-src-loom/{CLAUDE_SESSION}.jsonl"
    install(tmp_path, "claude-code/session-v2.jsonl", where)
    install(
        tmp_path,
        "claude-code/session-v2.jsonl",
        f".claude/projects/-home-ada-src-loom/{CLAUDE_SESSION}/subagents/a.jsonl",
    )
    found = read_all(ClaudeCode(), tmp_path)
    assert list(found) == [where]  # a session's side folder is not a session
    result = found[where]
    messages = result.messages
    assert said(messages) == [
        ("user", "The clock test fails once in ten runs. Can you find out why?"),
        ("assistant", "Reading the test first."),
        ("tool", ""),
        ("assistant", "The test asserts a timing threshold; a loaded machine exceeds it. Use a fake clock."),
        ("user", "Here is the CI screenshot.\n[image]"),
    ]
    assert {m.session_id for m in messages} == {CLAUDE_SESSION}
    assert {m.cwd for m in messages} == {"/home/ada/src/loom"}
    assert [m.model for m in messages] == [None, "claude-opus-4-5", None, "claude-opus-4-5", None]
    assert messages[0].timestamp == "2026-11-02T09:15:04.120+00:00"
    assert messages[0].epoch_ms == 1793610904120
    assert messages[4].timestamp == "2026-11-02T09:17:30.000+01:00"
    call, answer = messages[1].tools[0], messages[2].tools[0]
    assert (call.name, call.call_id, call.args) == (
        "Read",
        "toolu_01A",
        "file_path=/home/ada/src/loom/tests/test_clock.py",
    )
    assert (answer.name, answer.ok) == ("Read", True)
    assert answer.result is not None and answer.result.startswith("def test_elapsed(): start = time.time()")
    assert messages[0].key == "0c9a7f52-1111-4a4b-9c1d-000000000001"
    assert {m.format for m in messages} == {"claude-code/jsonl:user", "claude-code/jsonl:assistant"}
    # summary, snapshot, system: bookkeeping; the caveat: injected; thinking only: empty; one unknown type.
    assert result.skipped == {"bookkeeping": 3, "injected": 1, "empty": 1, "unknown_record": 1}
    assert [p.reason for p in result.problems] == ["unknown_record"]


CODEX_DAY = ".codex/sessions/2026/08/18/"


def test_codex_bare_2025_rollout(tmp_path: Path) -> None:
    name = "rollout-2025-05-14T10-00-00-0196d0c4-5e6f-7a8b-9c0d-1e2f3a4b5c6d.jsonl"
    install(tmp_path, "codex/bare-2025-05.jsonl", f".codex/sessions/2025/05/14/{name}")
    (result,) = read_all(Codex(), tmp_path).values()
    messages = result.messages
    assert said(messages) == [
        ("user", "List the failing tests."),
        ("assistant", ""),
        ("tool", ""),
        ("assistant", "Two tests fail: test_clock and test_merge. Fix them?"),
        ("user", "yes"),
        ("assistant", "Fixed test_clock. Continue with test_merge?"),
        ("user", "yes"),  # said twice, on purpose: not a mirror, and a key of its own
    ]
    assert len({m.key for m in messages}) == len(messages)
    assert {m.session_id for m in messages} == {"0196d0c4-5e6f-7a8b-9c0d-1e2f3a4b5c6d"}
    assert all(m.format.startswith("codex/bare:") and m.timestamp is None for m in messages)
    assert messages[1].tools[0].args == "command=bash -lc pytest -q"
    result_tool = messages[2].tools[0]
    assert (result_tool.name, result_tool.result, result_tool.ok) == ("shell", "2 failed, 40 passed", False)


def test_codex_envelope_2025_rollout_keeps_one_copy_of_each_mirrored_turn(tmp_path: Path) -> None:
    install(tmp_path, "codex/envelope-2025-10.jsonl", CODEX_DAY + "rollout-2025-10-20T08-00-00-x.jsonl")
    (result,) = read_all(Codex(), tmp_path).values()
    messages = result.messages
    assert said(messages) == [
        ("user", "Why does the merge test fail?"),
        ("assistant", ""),
        ("tool", ""),
        ("assistant", "The last merge keeps both sides of a conflict; the test expects ours."),
        ("assistant", ""),
        ("tool", ""),
    ]
    assert {m.session_id for m in messages} == {"0199f0aa-1c2d-7e3f-8a9b-0c1d2e3f4a5b"}
    assert {m.cwd for m in messages} == {"/home/ada/src/loom"}
    assert messages[3].model == "gpt-5-codex" and messages[0].model is None
    assert messages[0].timestamp == "2025-10-20T08:00:01.100+00:00"
    assert [t.name for m in messages for t in m.tools] == ["shell", "shell", "apply_patch", "apply_patch"]
    assert messages[2].tools[0].result == "a1b2c3 merge: keep both sides" and messages[2].tools[0].ok is True
    assert result.skipped["mirror"] == 2 and result.skipped["injected"] == 2
    assert "unknown_record" not in result.skipped


def test_codex_item_completed_2026_rollout(tmp_path: Path) -> None:
    install(tmp_path, "codex/items-2026-08.jsonl", CODEX_DAY + "rollout-2026-08-18T02-44-20-y.jsonl")
    (result,) = read_all(Codex(), tmp_path).values()
    messages = result.messages
    assert said(messages) == [
        ("user", "Add a --dry-run flag to the export command."),
        ("assistant", ""),
        ("tool", ""),
        ("assistant", "Added --dry-run: it lists the files it would write and writes nothing."),
        ("user", "Now document it in the README."),  # only an item_completed carries this one
    ]
    assert messages[4].format == "codex/items:UserMessage"
    assert messages[4].key == "019a3b4c-5d6e-7f80-91a2-b3c4d5e6f708:item_u2"
    assert messages[3].model == "gpt-5.5-codex" and messages[3].cwd == "/home/ada/src/atlas"
    assert messages[1].tools[0].args == "cmd=rg -n 'def export' src"
    assert result.skipped["item_mirror"] == 1 and result.skipped["mirror"] == 2


def test_codex_response_only_2026_rollout_and_an_unknown_line_type(tmp_path: Path) -> None:
    install(tmp_path, "codex/response-2026-09.jsonl", CODEX_DAY + "rollout-2026-09-30T16-05-00-z.jsonl")
    (result,) = read_all(Codex(), tmp_path).values()
    assert said(result.messages) == [
        ("user", "Which tests cover the exporter?"),
        ("assistant", "tests/test_export.py and tests/test_cli.py::test_export_dry_run."),
    ]
    assert result.messages[1].model == "gpt-5.6-codex"
    assert result.skipped["unknown_record"] == 1 and result.skipped["bookkeeping"] == 1


def test_codex_archived_sessions_are_found(tmp_path: Path) -> None:
    install(tmp_path, "codex/response-2026-09.jsonl", ".codex/archived_sessions/rollout-2026-09-30T16-05-00-z.jsonl")
    install(tmp_path, "codex/response-2026-09.jsonl", ".codex/sessions/2026/09/30/notes.jsonl")
    assert list(read_all(Codex(), tmp_path)) == [".codex/archived_sessions/rollout-2026-09-30T16-05-00-z.jsonl"]


def test_gemini_legacy_json_session(tmp_path: Path) -> None:
    where = ".gemini/tmp/3f2a9c0e/chats/session-2025-11-03T14-20-7c1d2e3f.json"
    install(tmp_path, "gemini/session-2025-11-03T14-20-7c1d2e3f.json", where)
    (result,) = read_all(Gemini(), tmp_path).values()
    messages = result.messages
    assert said(messages) == [
        ("user", "Summarise what changed in the parser this week."),
        ("assistant", "Looking at the git log."),
        ("assistant", "Two changes: trailing commas are accepted, and the tokenizer is faster."),
    ]
    assert {m.session_id for m in messages} == {"7c1d2e3f-4a5b-4c6d-8e7f-901a2b3c4d5e"}
    assert messages[1].model == "gemini-2.5-pro" and messages[1].format == "gemini/json:gemini"
    tool = messages[1].tools[0]
    assert tool.name == "run_shell_command" and tool.ok is True
    assert tool.args == "command=git log --since=1.week --oneline -- parser/"
    assert tool.result == "9e8d7c6 parser: accept trailing commas 1a2b3c4 parser: faster tokenizer"
    assert result.skipped == {"notice": 1}


def test_gemini_jsonl_session_yields_an_updated_turn_as_a_revision(tmp_path: Path) -> None:
    where = ".gemini/tmp/9b8a7c6d/chats/session-2026-10-12T09-30-a1b2c3d4.jsonl"
    install(tmp_path, "gemini/session-2026-10-12T09-30-a1b2c3d4.jsonl", where)
    (result,) = read_all(Gemini(), tmp_path).values()
    messages = result.messages
    assert said(messages) == [
        ("user", "Rename the config key timeout to timeout_ms everywhere."),
        ("assistant", "Searching for uses of timeout."),
        ("assistant", "Searching for uses of timeout."),
        ("assistant", "Renamed in src/config.py and docs/config.md."),
        ("user", "Thanks."),
    ]
    first, revision = messages[1], messages[2]
    assert first.key == revision.key and (first.revises, revision.revises) == (False, True)
    assert revision.tools[0].args == "pattern=timeout" and revision.tools[0].result == "src/config.py:8: timeout = 30"
    assert {m.session_id for m in messages} == {"a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d"}
    assert result.skipped == {"session_meta": 1, "metadata": 2, "notice": 1, "rewind": 1}


def test_gemini_session_migrated_to_jsonl_keeps_its_keys(tmp_path: Path) -> None:
    legacy = FIXTURES / "gemini/session-2025-11-03T14-20-7c1d2e3f.json"
    chats = tmp_path / ".gemini/tmp/3f2a9c0e/chats"
    chats.mkdir(parents=True)
    shutil.copyfile(legacy, chats / "session-a.json")
    record = json.loads(legacy.read_text())
    lines = [{k: v for k, v in record.items() if k != "messages"}, *record["messages"]]
    (chats / "session-a.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    found = read_all(Gemini(), tmp_path)
    keys = [[m.key for m in result.messages] for result in found.values()]
    assert len(keys) == 2 and keys[0] == keys[1] and len(keys[0]) == 3


def test_copilot_events_session_in_both_layouts(tmp_path: Path) -> None:
    install(
        tmp_path, "copilot/events-1.0.jsonl", ".copilot/session-state/e4d3c2b1-a0f9-4e8d-9c7b-6a5f4e3d2c1b/events.jsonl"
    )
    install(tmp_path, "copilot/events-1.0.jsonl", ".copilot/session-state/0f0f0f0f.jsonl")
    found = read_all(Copilot(), tmp_path)
    assert sorted(found) == [
        ".copilot/session-state/0f0f0f0f.jsonl",
        ".copilot/session-state/e4d3c2b1-a0f9-4e8d-9c7b-6a5f4e3d2c1b/events.jsonl",
    ]
    result = found[".copilot/session-state/e4d3c2b1-a0f9-4e8d-9c7b-6a5f4e3d2c1b/events.jsonl"]
    messages = result.messages
    assert said(messages) == [
        ("user", "How big is the build output?"),
        ("assistant", ""),
        ("tool", ""),
        ("assistant", "The build output in dist/ is 14 MB."),
    ]
    assert {m.session_id for m in messages} == {"e4d3c2b1-a0f9-4e8d-9c7b-6a5f4e3d2c1b"}
    assert {m.cwd for m in messages} == {"/home/ada/src/atlas"}
    assert messages[3].model == "claude-sonnet-4.5"
    assert messages[1].tools[0].args == "command=du -sh dist"
    assert (messages[2].tools[0].name, messages[2].tools[0].result) == ("bash", "14M dist")
    assert messages[0].key == "e4d3c2b1-a0f9-4e8d-9c7b-6a5f4e3d2c1b:ev-0004"
    assert result.skipped["unknown_record"] == 1


@pytest.mark.parametrize("source", sources(), ids=lambda s: s.name)
def test_a_home_without_the_client_yields_no_files(tmp_path: Path, source: Source) -> None:
    assert list(source.discover(tmp_path)) == []


@pytest.mark.parametrize(
    ("source", "variable", "where"),
    [
        (ClaudeCode(), "CLAUDE_CONFIG_DIR", "projects/-w/s.jsonl"),
        (Codex(), "CODEX_HOME", "sessions/2026/01/02/rollout-2026-01-02T00-00-00-a.jsonl"),
        (Gemini(), "GEMINI_CLI_HOME", ".gemini/tmp/w/chats/session-2026-01-02T00-00-a.jsonl"),
        (Copilot(), "COPILOT_HOME", "session-state/a/events.jsonl"),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_the_clients_own_variable_moves_its_folder(tmp_path: Path, source: Source, variable: str, where: str) -> None:
    moved = tmp_path / "elsewhere"
    (moved / where).parent.mkdir(parents=True)
    (moved / where).write_text("{}\n")
    home = tmp_path / "home"
    home.mkdir()
    assert list(source.discover(home)) == []
    assert list(source.discover(home, {variable: str(moved)})) == [moved / where]


def test_gemini_messages_carry_the_project_folder_from_its_marker(tmp_path: Path) -> None:
    where = ".gemini/tmp/loom/chats/session-2026-10-12T09-30-a1b2c3d4.jsonl"
    install(tmp_path, "gemini/session-2026-10-12T09-30-a1b2c3d4.jsonl", where)
    (tmp_path / ".gemini/tmp/loom/.project_root").write_text("/home/ada/src/loom")
    (result,) = read_all(Gemini(), tmp_path).values()
    assert {m.cwd for m in result.messages} == {"/home/ada/src/loom"}


def test_a_resumed_claude_session_repeats_earlier_turns_under_the_same_keys(tmp_path: Path) -> None:
    first = install(tmp_path, "claude-code/session-v2.jsonl", ".claude/projects/-w/a.jsonl")
    resumed = tmp_path / ".claude/projects/-w/b.jsonl"
    lines = first.read_text().splitlines(keepends=True)
    resumed.write_text("".join(line.replace(CLAUDE_SESSION, "9d9d9d9d-0000-4000-8000-000000000002") for line in lines))
    keys = [[m.key for m in result.messages] for result in read_all(ClaudeCode(), tmp_path).values()]
    assert len(keys) == 2 and keys[0] == keys[1] and len(keys[0]) == 5


def test_a_gemini_checkpoint_yields_its_turns_past_a_notice(tmp_path: Path) -> None:
    chats = tmp_path / ".gemini/tmp/p/chats"
    chats.mkdir(parents=True)
    history = [
        {"id": "n-1", "timestamp": "2026-10-12T09:00:00Z", "type": "info", "content": "Resumed."},
        {"id": "u-9", "timestamp": "2026-10-12T09:00:01Z", "type": "user", "content": "Where were we?"},
    ]
    lines = [{"sessionId": "s-9", "projectHash": "h"}, {"$set": {"messages": history}}]
    (chats / "session-2026-10-12T09-00-s9.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (result,) = read_all(Gemini(), tmp_path).values()
    assert said(result.messages) == [("user", "Where were we?")]
    assert result.messages[0].key == "s-9:u-9"
