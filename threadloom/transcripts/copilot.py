"""GitHub Copilot CLI: `~/.copilot/session-state/<session-id>/events.jsonl` (earlier builds wrote
`session-state/<session-id>.jsonl` flat; both are read). `COPILOT_HOME` replaces `~/.copilot`.

One event per line: `{"type", "id", "timestamp", "parentId", "data"}`. `session.start` carries
`data.sessionId`, `data.copilotVersion` and `data.context.cwd`; `session.model_change` carries
`data.newModel`; turns are `user.message` (`data.content`) and `assistant.message` (`data.content`,
`data.toolRequests: [{toolCallId, name, arguments}]`); tools run as `tool.execution_start`
(`toolCallId`, `toolName`, `arguments`) and `tool.execution_complete` (`toolCallId`, `success`,
`result.content`). Other `session.*`, `assistant.*`, `hook.*`, `subagent.*` events are bookkeeping.
The even older `history-session-state/<id>.json` layout is no longer written and is not read.

Sources, read 2026-11-30: GitHub Docs, "Copilot CLI configuration directory"
(https://docs.github.com/en/copilot/reference/copilot-cli-reference/cli-config-dir-reference) and
"About GitHub Copilot CLI session data" (.../concepts/agents/copilot-cli/chronicle) for the location;
the toolpath-copilot crate's README (verified against copilotVersion 1.0.67) and the vct-core
crate's `models::copilot` docs (docs.rs) for the event shapes; skiagram-core's copilot adapter for
the flat layout.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from threadloom.transcripts.jsonl import Decoded, Record, parse_jsonl, remember
from threadloom.transcripts.model import Cursor, Message, ParseResult, Role, ToolUse
from threadloom.transcripts.reader import BUDGET
from threadloom.transcripts.text import cap, flatten, timestamp, tool_args, tool_result
from threadloom.transcripts.walk import walk

NAME = "copilot"
FORMAT = "copilot/events"
BOOKKEEPING_PREFIXES = ("session.", "assistant.", "hook.", "subagent.", "skill.", "system.", "tool.", "user.")


class Copilot:
    name = NAME

    def discover(self, home: Path, env: Mapping[str, str] | None = None) -> Iterator[Path]:
        root = Path(moved) if (moved := (env or {}).get("COPILOT_HOME")) else home / ".copilot"

        def events(parts: tuple[str, ...]) -> bool:
            return parts[-1] == "events.jsonl" if len(parts) == 2 else len(parts) == 1 and parts[0].endswith(".jsonl")

        return walk(root / "session-state", events, 2)

    def parse(self, path: Path, cursor: Cursor | None, *, budget: int = BUDGET) -> ParseResult:
        return parse_jsonl(path, cursor, decode, initial_state=first_state, budget=budget)


def first_state(path: Path) -> dict[str, Any]:
    return {"session": path.parent.name if path.name == "events.jsonl" else path.stem}


def decode(value: Any, record: Record) -> Decoded:
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        return "unknown_record"
    kind = value["type"]
    data = value.get("data")
    if not isinstance(data, dict):
        return "unknown_shape"
    state = record.state
    if kind == "session.start":
        context = data["context"] if isinstance(data.get("context"), dict) else {}
        for slot, found in (("session", data.get("sessionId")), ("cwd", context.get("cwd"))):
            if isinstance(found, str) and found:
                state[slot] = found
        for field in ("selectedModel", "model"):
            if isinstance(data.get(field), str):
                state["model"] = data[field]
        return "session_meta"
    if kind == "session.model_change" and isinstance(data.get("newModel"), str):
        state["model"] = data["newModel"]
        return "session_meta"
    if kind == "user.message":
        return _message(value, record, "user", flatten(data.get("content")), ())
    if kind == "assistant.message":
        tools = []
        for request in data.get("toolRequests") or []:
            if isinstance(request, dict):
                call_id = request.get("toolCallId") if isinstance(request.get("toolCallId"), str) else None
                name = str(request.get("name") or "tool")
                if call_id:
                    remember(state, "calls", call_id, name)
                tools.append(ToolUse(name, call_id, tool_args(request.get("arguments"))))
        model = data.get("model") if isinstance(data.get("model"), str) else state.get("model")
        return _message(value, record, "assistant", flatten(data.get("content")), tuple(tools), model)
    if kind == "tool.execution_start":
        if isinstance(data.get("toolCallId"), str) and isinstance(data.get("toolName"), str):
            remember(state, "calls", data["toolCallId"], data["toolName"])
        return "tool_start"
    if kind == "tool.execution_complete":
        call_id = data.get("toolCallId") if isinstance(data.get("toolCallId"), str) else None
        name = str(data.get("toolName") or (state.get("calls", {}).get(call_id) if call_id else None) or "tool")
        ok = data.get("success") if isinstance(data.get("success"), bool) else None
        result = ToolUse(name, call_id, result=tool_result(data.get("result")), ok=ok)
        return _message(value, record, "tool", "", (result,))
    if kind.startswith(BOOKKEEPING_PREFIXES) or kind == "abort":
        return "bookkeeping"
    return "unknown_record"


def _message(
    value: dict[str, Any], record: Record, role: Role, text: str, tools: tuple[ToolUse, ...], model: Any = None
) -> Decoded:
    if not text.strip() and not tools:
        return "empty"
    state = record.state
    session = str(state.get("session") or "")
    native = value.get("id")
    when, epoch_ms = timestamp(value.get("timestamp"))
    return [
        Message(
            source=NAME,
            session_id=session,
            key=f"{session}:{native if isinstance(native, str) and native else record.line_key()}",
            role=role,
            text=cap(text),
            timestamp=when,
            epoch_ms=epoch_ms,
            cwd=state.get("cwd"),
            model=model if isinstance(model, str) else None,
            format=f"{FORMAT}:{value['type']}",
            tools=tools,
            path=record.path,
            offset=record.offset,
        )
    ]
