"""Codex CLI: `~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl` (and `archived_sessions/`;
`CODEX_HOME` replaces `~/.codex`).

Three record vocabularies are read, since files of each stay on disk after upgrades:
- bare (before 2025-09): a bare SessionMeta first line (`id`, `timestamp`, `instructions`) and bare
  ResponseItems (`{"type":"message","role":...}`), with `{"record_type":"state"}` markers;
  openai/codex PR 3380 ("Introduce rollout items") replaced it.
- envelope (2025-09 on): every line is `{"timestamp","type","payload"}` with `type` one of
  `session_meta`, `turn_context`, `response_item` (what the model sees: messages, function calls and
  outputs) and `event_msg` (what the TUI shows: `user_message`, `agent_message`, ...).
- items (CLI 0.148, 2026-08): user and agent turns arrive as `event_msg` `item_completed` with an
  `item` of type `UserMessage`/`AgentMessage` (codex-rs/protocol/src/items.rs, after openai/codex
  PR 37348); `user_message` stops being written. Around 0.153 (2026-09) some files carry user turns
  only as `response_item` messages (openai/codex issue 43593).
The same turn is usually written twice (a response_item and an event): the first one seen is kept
and an identical text of the same role before the other role speaks is skipped as a mirror.
`response_item` user messages that are only injected context (`<environment_context>`, AGENTS.md)
are skipped. Sources, read 2026-11-30: codex-rs/protocol/src/items.rs and protocol.rs in
openai/codex; txcript docs/formats/codex.md (skillsynchq/txcript); the field reports above.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from threadloom.transcripts.jsonl import Decoded, Record, parse_jsonl, remember
from threadloom.transcripts.model import Cursor, Message, ParseResult, Role, ToolUse
from threadloom.transcripts.reader import BUDGET
from threadloom.transcripts.text import cap, flatten, timestamp, tool_args, tool_result
from threadloom.transcripts.walk import walk

NAME = "codex"
UUID_TAIL = re.compile(r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$", re.IGNORECASE)
INJECTED = ("<environment_context", "<user_instructions", "<permissions", "<INSTRUCTIONS", "# AGENTS.md")
ENVELOPE_BOOKKEEPING = frozenset({"compacted", "world_state", "inter_agent_communication"})
ITEM_BOOKKEEPING = frozenset({"reasoning", "ghost_snapshot", "compaction", "compaction_summary"})
CALLS = frozenset({"function_call", "custom_tool_call", "local_shell_call", "web_search_call", "tool_search_call"})
OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output", "tool_search_output"})


class Codex:
    name = NAME

    def discover(self, home: Path, env: Mapping[str, str] | None = None) -> Iterator[Path]:
        root = Path(moved) if (moved := (env or {}).get("CODEX_HOME")) else home / ".codex"

        def rollout(parts: tuple[str, ...]) -> bool:
            return parts[-1].startswith("rollout-") and parts[-1].endswith(".jsonl")

        yield from walk(root / "sessions", rollout, 4)
        yield from walk(root / "archived_sessions", rollout, 1)

    def parse(self, path: Path, cursor: Cursor | None, *, budget: int = BUDGET) -> ParseResult:
        return parse_jsonl(path, cursor, decode, initial_state=first_state, budget=budget)


def first_state(path: Path) -> dict[str, Any]:
    found = UUID_TAIL.search(path.stem)
    return {"session": found.group(1) if found else path.stem}


def decode(value: Any, record: Record) -> Decoded:
    if not isinstance(value, dict):
        return "unknown_record"
    state = record.state
    kind = value.get("type")
    if "payload" in value and isinstance(kind, str):
        payload = value["payload"]
        if not isinstance(payload, dict):
            return "unknown_shape"
        stamp = value.get("timestamp")
        if kind == "session_meta":
            _meta(state, payload)
            return "session_meta"
        if kind == "turn_context":
            for field, slot in (("model", "model"), ("cwd", "cwd")):
                if isinstance(payload.get(field), str):
                    state[slot] = payload[field]
            return "turn_context"
        if kind == "response_item":
            return _response_item(payload, stamp, record, "envelope")
        if kind == "event_msg":
            return _event(payload, stamp, record)
        return "bookkeeping" if kind in ENVELOPE_BOOKKEEPING else "unknown_record"
    if "record_type" in value:
        return "bookkeeping"
    if kind is None and isinstance(value.get("id"), str) and "timestamp" in value:
        _meta(state, value)
        return "session_meta"
    return _response_item(value, None, record, "bare")


def _meta(state: dict[str, Any], meta: dict[str, Any]) -> None:
    for field, slot in (("id", "session"), ("cwd", "cwd"), ("model", "model")):
        if isinstance(meta.get(field), str) and meta[field]:
            state[slot] = meta[field]


def _response_item(item: dict[str, Any], stamp: Any, record: Record, version: str) -> Decoded:
    kind = item.get("type")
    fmt = f"codex/{version}:{kind}"
    if kind == "message":
        role = item.get("role")
        text = flatten(item.get("content"))
        if role not in ("user", "assistant") or (role == "user" and text.lstrip().startswith(INJECTED)):
            return "injected"
        return _said(record, role, text, stamp, fmt)
    if kind in CALLS:
        name = str(item.get("name") or ("shell" if kind == "local_shell_call" else kind.removesuffix("_call")))
        call_id = item.get("call_id") if isinstance(item.get("call_id"), str) else None
        args = item.get("arguments", item.get("input", item.get("action")))
        if call_id:
            remember(record.state, "calls", call_id, name)
        return [_message(record, "assistant", "", stamp, fmt, tools=(ToolUse(name, call_id, tool_args(args)),))]
    if kind in OUTPUTS:
        call_id = item.get("call_id") if isinstance(item.get("call_id"), str) else None
        name = record.state.get("calls", {}).get(call_id, "tool") if call_id else "tool"
        output = _decoded(item.get("output"))
        failed = isinstance(output, dict) and (
            bool(output.get("isError"))
            or output.get("success") is False
            or (isinstance(output.get("metadata"), dict) and output["metadata"].get("exit_code") not in (0, None))
        )
        use = ToolUse(name, call_id, result=tool_result(output), ok=not failed)
        return [_message(record, "tool", "", stamp, fmt, tools=(use,))]
    if kind in ITEM_BOOKKEEPING:
        return "bookkeeping"
    return "unknown_record"


def _decoded(output: Any) -> Any:
    """Shell outputs are JSON inside a string (`{"output": ..., "metadata": {"exit_code": ...}}`)."""
    if isinstance(output, str) and output.startswith("{"):
        try:
            return json.loads(output)
        except ValueError:
            return output
    return output


def _event(payload: dict[str, Any], stamp: Any, record: Record) -> Decoded:
    kind = payload.get("type")
    fmt = f"codex/envelope:{kind}"
    if kind == "user_message" and isinstance(payload.get("message"), str):
        return _said(record, "user", payload["message"], stamp, fmt)
    if kind == "agent_message" and isinstance(payload.get("message"), str):
        return _said(record, "assistant", payload["message"], stamp, fmt)
    if kind == "item_completed" and isinstance(payload.get("item"), dict):
        item = payload["item"]
        roles: dict[Any, Role] = {"UserMessage": "user", "AgentMessage": "assistant"}
        role = roles.get(item.get("type"))
        if role is None:
            return "item_mirror"  # tool and plan items repeat what response_items already said
        native = item.get("id") if isinstance(item.get("id"), str) else None
        return _said(record, role, flatten(item.get("content")), stamp, f"codex/items:{item.get('type')}", native)
    return "event"


def _said(record: Record, role: Role, text: str, stamp: Any, fmt: str, native: str | None = None) -> Decoded:
    """A turn, unless it mirrors the same role's last turn (see the module note)."""
    if not text.strip():
        return "empty"
    stripped = text.strip().encode("utf-8", "replace")
    digest = f"{zlib.crc32(stripped):08x}{len(stripped):x}"  # compared with the last few turns only
    recent: dict[str, list[str]] = record.state.setdefault("recent", {"user": [], "assistant": []})
    if digest in recent.get(role, []):
        return "mirror"
    recent[role] = [*recent.get(role, []), digest][-8:]
    recent["assistant" if role == "user" else "user"] = []
    return [_message(record, role, text, stamp, fmt, native=native)]


def _message(
    record: Record,
    role: Role,
    text: str,
    stamp: Any,
    fmt: str,
    *,
    tools: tuple[ToolUse, ...] = (),
    native: str | None = None,
) -> Message:
    state = record.state
    session = str(state.get("session") or "")
    # Bare lines carry no timestamp, so identical ones ("yes" twice) differ only by where they are.
    local = native or (record.line_key() + (f"@{record.offset}" if fmt.startswith("codex/bare") else ""))
    when, epoch_ms = timestamp(stamp)
    return Message(
        source=NAME,
        session_id=session,
        key=f"{session}:{local}",
        role=role,
        text=cap(text),
        timestamp=when,
        epoch_ms=epoch_ms,
        cwd=state.get("cwd"),
        model=state.get("model") if role == "assistant" else None,
        format=fmt,
        tools=tools,
        path=record.path,
        offset=record.offset,
    )
