"""Claude Code: `~/.claude/projects/<cwd with non-alphanumerics as '-'>/<session-uuid>.jsonl`.

One JSON object per line, tagged by `type`. `user` and `assistant` lines carry an envelope
(`uuid`, `parentUuid`, `sessionId`, `timestamp`, `cwd`, `version`) around an Anthropic Messages API
`message` whose `content` is a string or a list of blocks (`text`, `thinking`, `tool_use`,
`tool_result` on user lines, `image`); other types (`summary`, `system`, `file-history-snapshot`,
`attachment`, `queue-operation`, ...) are bookkeeping.

Sources (the record format is officially internal and unstable; these were read 2026-11-30):
- Anthropic, "Manage sessions": https://code.claude.com/docs/en/sessions (storage path;
  `CLAUDE_CONFIG_DIR` moves it).
- txcript's format notes, reverse-engineered from CLI 0.144-2.1.227:
  https://github.com/skillsynchq/txcript/blob/main/docs/formats/claude-code.md
- elidickinson/cc-session-io docs/claude-code-sessions.md (directory naming).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from threadloom.transcripts.jsonl import Decoded, Record, parse_jsonl, remember
from threadloom.transcripts.model import Cursor, Message, ParseResult, Role, ToolUse
from threadloom.transcripts.reader import BUDGET
from threadloom.transcripts.text import cap, timestamp, tool_args, tool_result
from threadloom.transcripts.walk import walk

NAME = "claude-code"
FORMAT = "claude-code/jsonl"
BOOKKEEPING = frozenset(
    {
        "summary",
        "system",
        "file-history-snapshot",
        "file-history-delta",
        "attachment",
        "queue-operation",
        "progress",
        "custom-title",
        "ai-title",
        "agent-name",
        "mode",
        "last-prompt",
        "pr-link",
        "tag",
    }
)


class ClaudeCode:
    name = NAME

    def discover(self, home: Path, env: Mapping[str, str] | None = None) -> Iterator[Path]:
        root = Path(moved) if (moved := (env or {}).get("CLAUDE_CONFIG_DIR")) else home / ".claude"
        # Only <project>/<session>.jsonl: a session's side folder (subagents/, tool-results/) is not a session.
        return walk(root / "projects", lambda parts: len(parts) == 2 and parts[1].endswith(".jsonl"), 2)

    def parse(self, path: Path, cursor: Cursor | None, *, budget: int = BUDGET) -> ParseResult:
        return parse_jsonl(path, cursor, decode, initial_state=lambda p: {"session": p.stem}, budget=budget)


def decode(value: Any, record: Record) -> Decoded:
    if not isinstance(value, dict):
        return "unknown_record"
    kind = value.get("type")
    if kind in BOOKKEEPING:
        return "bookkeeping"
    if kind not in ("user", "assistant"):
        return "unknown_record"
    state = record.state
    for field, slot in (("sessionId", "session"), ("cwd", "cwd")):
        if isinstance(value.get(field), str) and value[field]:
            state[slot] = value[field]
    message = value.get("message")
    if not isinstance(message, dict):
        return "unknown_shape"
    if value.get("isMeta"):
        return "injected"  # caveats and reminders the CLI adds, not said by anyone
    content = message.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    if not isinstance(blocks, list):
        return "unknown_shape"
    texts: list[str] = []
    tools: list[ToolUse] = []
    results = 0
    for block in blocks:
        if not isinstance(block, dict):
            continue
        part = block.get("type")
        if part == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif part == "tool_use":
            name = str(block.get("name") or "tool")
            call_id = block.get("id") if isinstance(block.get("id"), str) else None
            if call_id:
                remember(state, "calls", call_id, name)
            tools.append(ToolUse(name, call_id, tool_args(block.get("input"))))
        elif part == "tool_result":
            call_id = block.get("tool_use_id") if isinstance(block.get("tool_use_id"), str) else None
            name = state.get("calls", {}).get(call_id, "tool") if call_id else "tool"
            ok = not block.get("is_error", False)
            tools.append(ToolUse(name, call_id, result=tool_result(block.get("content")), ok=ok))
            results += 1
        elif part in ("image", "document"):
            texts.append(f"[{part}]")
    text = "\n".join(t for t in texts if t.strip())
    if not text and not tools:
        return "empty"  # a thinking block, or a line with nothing said
    role: Role = "assistant" if kind == "assistant" else ("tool" if results and not text else "user")
    model = message.get("model") if kind == "assistant" else None
    when, epoch_ms = timestamp(value.get("timestamp"))
    session = str(state.get("session") or "")
    native = value.get("uuid")
    return [
        Message(
            source=NAME,
            session_id=session,
            # The uuid alone: a resumed session's file repeats earlier lines with their uuids.
            key=native if isinstance(native, str) and native else f"{session}:{record.line_key()}",
            role=role,
            text=cap(text),
            timestamp=when,
            epoch_ms=epoch_ms,
            cwd=state.get("cwd"),
            model=model if isinstance(model, str) and model != "<synthetic>" else None,
            format=f"{FORMAT}:{kind}",
            tools=tuple(tools),
            path=record.path,
            offset=record.offset,
        )
    ]
