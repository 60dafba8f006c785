"""Gemini CLI: `~/.gemini/tmp/<project>/chats/session-<time>-<id8>.json[l]` (subagents one folder down).

Two formats, from packages/core/src/services/chatRecordingService.ts and chatRecordingTypes.ts in
google-gemini/gemini-cli (read at 5411f113, 2026-08-21):
- json (before 2026): one ConversationRecord rewritten whole on every change: `sessionId`,
  `projectHash`, `startTime`, `lastUpdated`, `messages: [{id, timestamp, type, content, toolCalls,
  model, ...}]`, `type` one of user, gemini, info, error, warning.
- jsonl (2026): a metadata line, then one MessageRecord per line, appended. A message updated later
  (tool calls, tokens) is appended again with the same `id`; `{"$set": {...}}` updates metadata (a
  `messages` array in it is a checkpoint of the whole history); `{"$rewindTo": id}` marks a rewind.
  Resuming an old .json session migrates it to a .jsonl beside it, so both exist: keys are
  `<sessionId>:<message id>`, the same in both.
A record seen again with new content is yielded again with `revises=True` under the same key.
The files hold no working directory (`projectHash` is a hash of it); `cwd` comes from the
`tmp/<project>/.project_root` marker that packages/core/src/config/projectRegistry.ts writes.
`GEMINI_CLI_HOME` replaces the home folder (packages/core/src/utils/paths.ts).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from threadloom.transcripts.jsonl import (
    ESCAPED_SURROGATE,
    LONE_SURROGATE,
    Decoded,
    Record,
    parse_jsonl,
    remember,
    without_surrogates,
)
from threadloom.transcripts.model import Cursor, Message, ParseResult, Problem, Role, ToolUse
from threadloom.transcripts.reader import BUDGET, open_checked
from threadloom.transcripts.text import cap, flatten, timestamp, tool_args, tool_result
from threadloom.transcripts.walk import walk

NAME = "gemini"
MAX_JSON = 64 << 20  # a whole-file .json session is parsed at once; larger ones are reported and skipped
ROLES: dict[str, Role] = {"user": "user", "gemini": "assistant"}
NOTICES = frozenset({"info", "error", "warning"})


class Gemini:
    name = NAME

    def discover(self, home: Path, env: Mapping[str, str] | None = None) -> Iterator[Path]:
        base = Path(moved) if (moved := (env or {}).get("GEMINI_CLI_HOME")) else home

        def chat(parts: tuple[str, ...]) -> bool:
            if len(parts) < 3 or parts[1] != "chats":
                return False
            name = parts[-1]
            return name.endswith((".json", ".jsonl")) and (name.startswith("session-") or len(parts) == 4)

        return walk(base / ".gemini" / "tmp", chat, 4)

    def parse(self, path: Path, cursor: Cursor | None, *, budget: int = BUDGET) -> ParseResult:
        if path.suffix == ".jsonl":
            return parse_jsonl(path, cursor, decode, initial_state=first_state, budget=budget)
        return parse_whole(path, cursor)


def first_state(path: Path) -> dict[str, Any]:
    """The project folder, from the `.project_root` marker Gemini keeps beside `chats/` (when present)."""
    for folder in list(path.parents)[:3]:
        if folder.name == "chats":
            try:
                with (folder.parent / ".project_root").open("rb") as marker:
                    root = marker.read(4096).decode("utf-8", "replace").strip()
            except OSError:
                return {}
            return {"cwd": root} if root else {}
    return {}


def decode(value: Any, record: Record) -> Decoded:
    if not isinstance(value, dict):
        return "unknown_record"
    if "$rewindTo" in value:
        return "rewind"
    if "$set" in value:
        update = value["$set"]
        if isinstance(update, dict) and isinstance(update.get("messages"), list):
            # A checkpoint of the whole history: its turns already yielded repeat their keys.
            decoded = [_message(item, record, "gemini/jsonl") for item in update["messages"]]
            return [message for out in decoded if not isinstance(out, str) for message in out]
        return "metadata"
    if "type" not in value and isinstance(value.get("sessionId"), str):
        record.state["session"] = value["sessionId"]
        return "session_meta"
    return _message(value, record, "gemini/jsonl")


def _message(item: Any, record: Record, version: str) -> Decoded:
    if not isinstance(item, dict) or not isinstance(item.get("id"), str) or "type" not in item:
        return "unknown_record"
    kind = item["type"]
    if kind in NOTICES:
        return "notice"
    role = ROLES.get(kind)
    if role is None:
        return "unknown_record"
    tools: list[ToolUse] = []
    for call in item.get("toolCalls") or []:
        if isinstance(call, dict):
            status = call.get("status")
            tools.append(
                ToolUse(
                    str(call.get("name") or "tool"),
                    call.get("id") if isinstance(call.get("id"), str) else None,
                    tool_args(call.get("args")),
                    tool_result(_response(call.get("result"))) if call.get("result") is not None else None,
                    None if status is None else status == "success",
                )
            )
    text = flatten(item.get("content"))
    if not text.strip() and not tools:
        return "empty"
    state = record.state
    digest = hashlib.sha256(json.dumps(item, sort_keys=True).encode()).hexdigest()[:16]
    previous = state.get("seen", {}).get(item["id"])
    if previous == digest:
        return "repeat"
    remember(state, "seen", item["id"], digest)
    session = str(state.get("session") or "")
    when, epoch_ms = timestamp(item.get("timestamp"))
    model = item.get("model")
    return [
        Message(
            source=NAME,
            session_id=session,
            key=f"{session}:{item['id']}",
            role=role,
            text=cap(text),
            timestamp=when,
            epoch_ms=epoch_ms,
            cwd=state.get("cwd"),
            model=model if isinstance(model, str) else None,
            format=f"{version}:{kind}",
            tools=tuple(tools),
            path=record.path,
            offset=record.offset,
            revises=previous is not None,
        )
    ]


def _response(result: Any) -> Any:
    """A tool result is a list of parts; the text sits in functionResponse.response.output."""
    parts = result if isinstance(result, list) else [result]
    texts = []
    for part in parts:
        if isinstance(part, dict) and isinstance(part.get("functionResponse"), dict):
            response = part["functionResponse"].get("response")
            texts.append(flatten(response.get("output", response) if isinstance(response, dict) else response))
        else:
            texts.append(flatten(part))
    return "\n".join(t for t in texts if t)


def parse_whole(path: Path, cursor: Cursor | None) -> ParseResult:
    """A legacy .json session: re-read whole when it changed; messages after those already yielded
    are new, and the last few are compared again since the CLI updates the latest turn in place."""
    opened = open_checked(path, cursor)
    if isinstance(opened, Problem):
        return ParseResult([], None, [opened])
    name = str(path)
    fresh = opened.cursor
    problems = [opened.restarted] if opened.restarted else []
    unchanged = (
        cursor is not None and not opened.restarted and (cursor.size, cursor.mtime_ns) == (fresh.size, fresh.mtime_ns)
    )
    with opened.file:
        if unchanged:
            return ParseResult([], fresh.advanced(offset=fresh.size), problems)
        if fresh.size > MAX_JSON:
            problems.append(Problem(name, "too_large", 0, f"a whole-file session over {MAX_JSON} bytes is not read"))
            return ParseResult([], fresh.advanced(offset=fresh.size), problems, skipped={"too_large": 1})
        opened.file.seek(0)
        raw = opened.file.read(MAX_JSON + 1)
    try:
        document = json.loads(raw.decode("utf-8", "replace"))
        if ESCAPED_SURROGATE.search(raw):
            document, changed = without_surrogates(document)
            if changed:
                problems.append(Problem(name, "invalid_utf8", None, LONE_SURROGATE))
    except (ValueError, RecursionError) as exc:
        # Cut mid-write or damaged: nothing is trusted; the next change is read again.
        problems.append(Problem(name, "invalid_json", None, str(exc)[:120]))
        return ParseResult([], fresh.advanced(offset=fresh.size), problems, 1, {"invalid_json": 1})
    if not isinstance(document, dict) or not isinstance(document.get("messages"), list):
        problems.append(Problem(name, "unknown_record", 0, "not a Gemini conversation record"))
        return ParseResult([], fresh.advanced(offset=fresh.size), problems, 1, {"unknown_record": 1})
    state: dict[str, Any] = dict(fresh.state) or first_state(path)
    state["session"] = str(document.get("sessionId") or state.get("session") or path.stem)
    items = document["messages"]
    done = min(int(state.get("count", 0)), len(items))
    record = Record(name, 0, b"", state)
    messages: list[Message] = []
    skipped: dict[str, int] = {}
    for item in items[max(0, done - 4) :]:
        try:
            decoded = _message(item, record, "gemini/json")
        except (KeyError, TypeError, ValueError, AttributeError, RecursionError):
            decoded = "unknown_shape"
        if isinstance(decoded, str):
            skipped[decoded] = skipped.get(decoded, 0) + 1
        else:
            messages.extend(decoded)
    state["count"] = len(items)
    return ParseResult(messages, fresh.advanced(offset=fresh.size, state=state), problems, len(items) - done, skipped)
