"""Small renderings every adapter shares: times, capped text, short tool summaries."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from threadloom.transcripts.model import MAX_TEXT, MAX_TOOL_ARGS, MAX_TOOL_RESULT

# Argument names that say most about a call, tried in order before falling back to compact JSON.
TELLING_ARGS = ("command", "cmd", "pattern", "query", "file_path", "path", "url", "description", "prompt")

CANONICAL_LENGTH = len("2026-01-01T00:00:00.000+00:00")


def timestamp(value: Any) -> tuple[str | None, int | None]:
    """An ISO 8601 string (a trailing Z or an offset) or epoch ms/s, as (ISO with offset, epoch ms)."""
    if isinstance(value, str):
        text = value.strip().replace("Z", "+00:00")
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            return None, None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)  # the clients write UTC; without an offset it is read as UTC
            text = ""
        # Most clients write milliseconds and an offset already (29 characters): keep the text, since
        # isoformat() is the slowest step of reading a line.
        canonical = len(text) == CANONICAL_LENGTH and text[10] == "T" and text[19] == "."
        iso = text if canonical else moment.isoformat(timespec="milliseconds")
        return iso, int(moment.timestamp() * 1000)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            ms = int(value if value > 100_000_000_000 else value * 1000)
            return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds"), ms
        except (OverflowError, OSError, ValueError):  # NaN, infinity, or a number past year 9999
            return None, None
    return None, None


def cap(text: str, limit: int = MAX_TEXT) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit} more characters]"


def short(value: Any, limit: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    text = " ".join(text[: limit * 4].split())  # collapse whitespace in the part that can be shown
    return text if len(text) <= limit else text[: limit - 1] + "…"


def tool_args(args: Any) -> str:
    """A call's arguments in a line: the telling argument if there is one, else compact JSON."""
    if isinstance(args, str):
        try:
            args = json.loads(args)  # Codex and others pass arguments as JSON inside a string
        except ValueError:
            return short(args, MAX_TOOL_ARGS)
    if isinstance(args, dict):
        for name in TELLING_ARGS:
            value = args.get(name)
            if isinstance(value, str) and value:
                return short(f"{name}={value}", MAX_TOOL_ARGS)
            if isinstance(value, list) and value and all(isinstance(part, str) for part in value):
                return short(f"{name}={' '.join(value)}", MAX_TOOL_ARGS)
    return short(args, MAX_TOOL_ARGS) if args not in (None, {}, []) else ""


def tool_result(value: Any) -> str:
    """A result's first few hundred characters, from a string or the usual content-block shapes."""
    return short(flatten(value), MAX_TOOL_RESULT)


def flatten(value: Any) -> str:
    """Text inside content blocks: a string, a list of blocks with `text`, or an object with content."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(part for part in (flatten(item) for item in value) if part)
    if isinstance(value, dict):
        for name in ("text", "content", "output", "result", "message"):
            if name in value:
                return flatten(value[name])
        return ""
    return "" if value is None else str(value)
