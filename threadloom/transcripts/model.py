"""What every adapter yields, and the per-file cursor a caller persists between passes.

Exactness is by key: every `Message.key` is stable across re-reads of the same record (a native id
where the client writes one, else a hash of the raw line), so a sink that ignores a key it already
holds never stores a message twice, even after a file is truncated, replaced and read from the start.
One exception is stated by the flag `revises`: a client that rewrites a record in place (Gemini's
updated turns) yields the same key again with the new content, and the sink replaces it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

Role = Literal["user", "assistant", "tool"]
ROLES: tuple[Role, ...] = ("user", "assistant", "tool")

# Bounds on what one message carries: a transcript is memory, not an archive of every payload.
MAX_TEXT = 64 * 1024
MAX_TOOL_ARGS = 200
MAX_TOOL_RESULT = 300


@dataclass(frozen=True)
class ToolUse:
    """One tool call or its result, summarised: the name and a short rendering, never the payload."""

    name: str
    call_id: str | None = None
    args: str = ""  # the call's arguments, short
    result: str | None = None  # the result, short; None on a call
    ok: bool | None = None  # False when the client marked the result an error


# Not frozen: one is built per transcript line, and a frozen dataclass's __init__ costs 3-4 times as
# much (measured in bench/transcripts.py's terms). Treat it as immutable all the same.
@dataclass(slots=True)
class Message:
    source: str  # the adapter's name: claude-code, codex, gemini, copilot
    session_id: str
    key: str  # unique within the source; stable across re-reads of the same record
    role: Role
    text: str
    timestamp: str | None  # ISO 8601 with an offset
    epoch_ms: int | None
    cwd: str | None
    model: str | None
    format: str  # the format version and record kind it came from, e.g. "codex/envelope:item_completed"
    tools: tuple[ToolUse, ...] = ()
    path: str = ""  # the transcript file and the byte offset of the record
    offset: int = 0
    revises: bool = False  # a newer version of a message already yielded under this key


@dataclass(frozen=True)
class Problem:
    """Something skipped or distrusted in a file, reported instead of raised."""

    path: str
    reason: str  # invalid_json, line_too_long, unknown_record, vanished, not_regular, truncated, ...
    offset: int | None = None
    detail: str = ""


@dataclass(frozen=True)
class Cursor:
    """Where reading of one file stopped, and how to recognise that file next time.

    `offset` is the byte after the last complete record consumed. `head_len` bytes from the start hash
    to `head_sha`: a file rewritten in place (same inode, new content) no longer matches. `state` is the
    adapter's own small, JSON-shaped memory (session id, cwd, model, recent ids), bounded in size.
    """

    path: str
    device: int
    inode: int
    size: int
    mtime_ns: int
    offset: int
    head_len: int
    head_sha: str
    skipping: bool = False  # inside an over-long line: resume by discarding up to the next newline
    state: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self) | {"state": dict(self.state)}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Cursor:
        """The cursor `to_json` wrote; ValueError on anything else (drop it and read the file again)."""
        try:
            raw = json.loads(text)
            return cls(
                path=str(raw["path"]),
                device=int(raw["device"]),
                inode=int(raw["inode"]),
                size=int(raw["size"]),
                mtime_ns=int(raw["mtime_ns"]),
                offset=int(raw["offset"]),
                head_len=int(raw["head_len"]),
                head_sha=str(raw["head_sha"]),
                skipping=bool(raw.get("skipping", False)),
                state=dict(raw.get("state") or {}),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"not a transcript cursor: {exc}") from exc

    def advanced(self, **changes: Any) -> Cursor:
        return replace(self, **changes)


@dataclass(frozen=True)
class ParseResult:
    messages: list[Message]
    cursor: Cursor | None  # None when the file could not be opened: keep the old cursor, retry later
    problems: list[Problem]
    records: int = 0  # complete records read this call, recognised or not
    skipped: Mapping[str, int] = field(default_factory=dict)  # records skipped, by reason
    more: bool = False  # the read budget ran out before the end of the file: call again
