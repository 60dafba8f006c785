"""The text-splicing JSON(C) and TOML edits behind `threadloom setup`: what they add, that they keep
every other byte, and that taking an entry back gives the text it was added to."""

from __future__ import annotations

import json
import tomllib

import pytest

from threadloom.errors import InvalidInput
from threadloom.setup import jsonc
from threadloom.setup.edits import Block, JsonEntry, JsonItem, TomlEntry, revert

SERVER = {"command": "/x/threadloom", "args": ["serve"]}
HOOK = {"hooks": [{"type": "command", "command": "/x/threadloom hook session-start --client claude"}]}
TEXTS = [
    "",
    "{}",
    "{}\n",
    '{\n  "theme": "dark"\n}\n',
    '{"theme": "dark"}',
    '{\n\t"theme": "dark",\n\t"mcpServers": {\n\t\t"a": {"command": "a"}\n\t}\n}\n',
    '{\n  // comment\n  "mcpServers": {\n    "a": {"command": "a"}, // why\n  },\n}\n',
    '{\n  "hooks": {\n    "SessionStart": [\n      {"hooks": [{"type": "command", "command": "x"}]}\n    ]\n  }\n}\n',
    '{\n  "mcpServers": {\n  }\n}\n',
    '/* head */\n{\n    "mcpServers": {"a": {"command": "a"}}\n}\n',
    '{\r\n  "theme": "dark",\r\n  "hooks": {\r\n    "SessionStart": []\r\n  }\r\n}\r\n',
    '{\r\n  "mcpServers": {\r\n    "a": {"command": "a"}\r\n  }\r\n}\r\n',
]


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize(
    "edit",
    [
        JsonEntry("t", ("mcpServers", "threadloom"), SERVER),
        JsonItem("t", ("hooks", "SessionStart"), HOOK, " hook session-start --client claude"),
    ],
    ids=["entry", "item"],
)
def test_an_added_entry_keeps_everything_else_and_taking_it_back_restores_the_text(
    text: str, edit: JsonEntry | JsonItem
) -> None:
    new, record = edit.apply(text or None)
    assert record is not None
    before = jsonc.parse(text or "{}").value()
    after = jsonc.parse(new).value()
    path = edit.path
    inner = after
    for key in path[:-1]:
        inner = inner[key]
    if isinstance(edit, JsonEntry):
        assert inner[path[-1]] == SERVER
    else:
        assert inner[path[-1]][-1] == HOOK
    for comment in ("// comment", "// why", "/* head */"):
        assert (comment in text) == (comment in new)
    if "\r\n" in text:
        assert new.count("\n") == new.count("\r\n")  # a CRLF file gets CRLF lines
    if jsonc.is_strict(text or "{}"):
        json.loads(new)  # a plain JSON file stays plain JSON (Claude's ~/.claude.json is read strictly)
    assert edit.apply(new) == (new, None)  # idempotent
    back = revert(new, record)
    assert jsonc.parse(back or "{}").value() == before
    if text.strip() and "// why" not in text and "{\n  }" not in text:
        assert back == text  # (an emptied multi-line object comes back as {}; undo restores those from the backup)


def test_a_user_entry_named_threadloom_is_replaced_and_put_back() -> None:
    text = '{"mcpServers": {"threadloom": {"command": "/old"}}}'
    new, record = JsonEntry("t", ("mcpServers", "threadloom"), SERVER).apply(text)
    assert record is not None and record["previous"] == {"command": "/old"}
    assert jsonc.parse(revert(new, record)).value() == json.loads(text)


@pytest.mark.parametrize(
    "bad, where",
    [
        ('{"a": 1,,}', "line 1, column 9"),
        ('{\n  "a" 1\n}', "line 2, column 7"),
        ('{"a": [1, 2}', "line 1, column 12"),
        ('{"a": "unterminated}', "line 1, column 7"),
        ('{"a": 1} trailing', "line 1, column 10"),
        ("/* open", "line 1, column 1"),
    ],
)
def test_malformed_json_is_refused_saying_where(bad: str, where: str) -> None:
    with pytest.raises(InvalidInput, match=where):
        JsonEntry("t", ("mcpServers", "threadloom"), SERVER).apply(bad)


TOML = """# Codex configuration
model = "gpt-5"  # my model

[mcp_servers.docs]
command = "npx"
args = ["-y", "docs"]
"""


INLINE_TOML = 'mcp_servers = { docs = { command = "npx" } }\n'


@pytest.mark.parametrize("text", ["", TOML, TOML.replace("\n", "\r\n"), INLINE_TOML])
def test_a_toml_table_is_added_keeping_comments_and_taken_back(text: str) -> None:
    edit = TomlEntry("codex", ("mcp_servers", "threadloom"), SERVER)
    new, record = edit.apply(text or None)
    assert record is not None
    assert tomllib.loads(new)["mcp_servers"]["threadloom"] == SERVER
    if "{" not in text:
        assert new.startswith(text)  # added at the end, the user's lines untouched
    assert edit.apply(new) == (new, None)
    if "\r\n" in text:
        assert new.count("\n") == new.count("\r\n")
    back = revert(new, record)
    assert tomllib.loads(back) == tomllib.loads(text)
    if "{" not in text:
        assert back == text  # (an inline table keeps a space where the entry was)


def test_the_instruction_block_is_added_after_the_users_text_and_taken_back() -> None:
    text = "# Mine\n\nkeep this\n"
    new, record = Block("claude", "agents").apply(text)
    assert record is not None and new.startswith("# Mine\n\nkeep this\n\n<!-- threadloom:begin")
    assert Block("claude", "agents").apply(new) == (new, None)
    assert revert(new, record) == text
