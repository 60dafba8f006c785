"""Shapes shared by dialog search, reading and the day summary."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from threadloom.errors import InvalidInput
from threadloom.store.base import Row

ROLES: Final = ("user", "assistant", "tool")
WINDOW_CHARS: Final = 240  # a neighbouring turn in a hit's window
HIT_CHARS: Final = 1_200  # the hit itself
READ_CHARS: Final = 4_000  # a message read with dialog_read
MAX_WINDOW: Final = 3
MAX_PAGE: Final = 50
NOT_FOUND: Final = "no transcript message {} (ids come from dialog_search or dialog_read)"
NO_SESSION: Final = "no transcript session {!r} (session ids come from dialog_search or dialog_day)"


@dataclass(frozen=True)
class DialogFilters:
    """Conditions applied inside the search's queries, before ranking."""

    vendors: tuple[str, ...] = ()  # transcript sources: claude-code, codex, gemini, copilot
    project: str | None = None
    session: str | None = None
    roles: tuple[str, ...] = ()
    since: int | None = None
    until: int | None = None

    def __post_init__(self) -> None:
        strange = [r for r in self.roles if r not in ROLES]
        if strange:
            raise InvalidInput(f"roles are {', '.join(ROLES)}, not {strange[0]!r}")
        if self.since is not None and self.until is not None and self.since >= self.until:
            raise InvalidInput("the time range is empty: since must be before until")


def trimmed(text: str, limit: int) -> tuple[str, bool]:
    """`text` cut to about `limit` characters at a word, and whether it was cut."""
    text = text.strip()
    if len(text) <= limit:
        return text, False
    cut = text[:limit]
    space = cut.rfind(" ", limit * 3 // 4)
    return (cut[:space] if space > 0 else cut).rstrip() + " …", True


def tools_line(raw: str) -> str:
    """A message's tool calls as one short line: `[Bash] [Read]`."""
    if not raw or raw == "[]":
        return ""
    try:
        names = [str(t.get("name", "?")) for t in _json_list(raw)]
    except ValueError:
        return ""
    return " ".join(f"[{n}]" for n in names[:8])


def _json_list(raw: str) -> list[dict[str, Any]]:
    import json

    value = json.loads(raw or "[]")
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def turn(row: Row, limit: int) -> dict[str, Any]:
    """A message as a tool shows it: id, role, time (the server writes it as ISO), text cut to `limit`."""
    text = row["text"] or ""
    tools = tools_line(row["tools"])
    if tools:
        text = f"{text}\n{tools}" if text.strip() else tools
    shown, cut = trimmed(text, limit)
    out: dict[str, Any] = {"id": int(row["id"]), "role": row["role"], "at": row["at"], "text": shown}
    if cut:
        out["cut"] = len(text)
    return out
