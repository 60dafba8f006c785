"""Agent CLIs' local transcripts, read incrementally and exactly. Pure: no store, no daemon.

The seam for ingest: for each source in `sources()`, `scan()` yields (path, ParseResult); the caller
stores the messages (ignoring keys it holds, replacing on `revises`), then persists the cursor as
JSON keyed by path, and shows `alarms()` of the accumulated `SourceStats` in status and doctor.
"""

from threadloom.transcripts.claude_code import ClaudeCode
from threadloom.transcripts.codex import Codex
from threadloom.transcripts.copilot import Copilot
from threadloom.transcripts.gemini import Gemini
from threadloom.transcripts.model import Cursor, Message, ParseResult, Problem, ToolUse
from threadloom.transcripts.scan import Alarm, SourceStats, alarms, scan
from threadloom.transcripts.source import Source


def sources() -> list[Source]:
    return [ClaudeCode(), Codex(), Gemini(), Copilot()]


__all__ = [
    "Alarm",
    "ClaudeCode",
    "Codex",
    "Copilot",
    "Cursor",
    "Gemini",
    "Message",
    "ParseResult",
    "Problem",
    "Source",
    "SourceStats",
    "ToolUse",
    "alarms",
    "scan",
    "sources",
]
