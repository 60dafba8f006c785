"""What each agent CLI sends a hook and what it reads back. Standard library only.

One small formatter per client: `output(event, text)` is what the hook prints on stdout for the text to
reach the model, or None where the client cannot inject context at that event (then the hook prints
nothing: it never pretends). Every client below injects at session start at most; none lets a
pre-compaction hook add context, so `pre-compact` only records. Claude Code fires its SessionStart hook
again after a compaction (`source: compact`), which is where the thread is re-injected.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal, NamedTuple

from threadloom.agents import VENDOR_ENV_MARKERS, Vendor

Event = Literal["session-start", "session-end", "pre-compact"]
EVENTS: Final[tuple[Event, ...]] = ("session-start", "session-end", "pre-compact")
MAX_FIELD = 4096  # a longer string from a client is cut: it goes into the journal and a 64 KiB header


def _hook_specific_output(event_name: str) -> Callable[[Event, str], str | None]:
    def output(event: Event, text: str) -> str | None:
        if event != "session-start":
            return None
        return json.dumps({"hookSpecificOutput": {"hookEventName": event_name, "additionalContext": text}})

    return output


# Claude Code: SessionStart prints JSON with hookSpecificOutput.additionalContext (added to the context);
# PreCompact and SessionEnd cannot add context. SessionStart's `source` is startup|resume|clear|compact.
# https://code.claude.com/docs/en/hooks (SessionStart, SessionEnd, PreCompact)
claude = _hook_specific_output("SessionStart")

# Codex CLI: SessionStart's output schema has hookSpecificOutput.additionalContext; PreCompact's output has no
# context field; there is no session-end event. codex-rs/hooks/schema/generated/session-start.command.output
# .schema.json and pre-compact.command.output.schema.json in github.com/openai/codex;
# https://developers.openai.com/codex/hooks
codex = _hook_specific_output("SessionStart")

# Gemini CLI: SessionStart's hookSpecificOutput.additionalContext is injected (first turn, or prepended to the
# prompt when non-interactive); SessionEnd and PreCompress are advisory only. docs/hooks/reference.md in
# github.com/google-gemini/gemini-cli (https://geminicli.com/docs/hooks/reference)
gemini = _hook_specific_output("SessionStart")

# VS Code agent hooks: SessionStart's hookSpecificOutput.additionalContext is added to the conversation;
# PreCompact takes the common output only; there is no session-end event.
# https://code.visualstudio.com/docs/agents/reference/hooks-reference (microsoft/vscode-docs)
vscode = _hook_specific_output("SessionStart")


def cursor(event: Event, text: str) -> str | None:
    """Cursor: sessionStart answers with a flat `additional_context`; sessionEnd and preCompact inject
    nothing. https://cursor.com/docs/agent/hooks#sessionstart"""
    return json.dumps({"additional_context": text}) if event == "session-start" else None


def copilot(event: Event, text: str) -> str | None:
    """Copilot CLI: sessionStart, sessionEnd and preCompact output is not processed ("Output processed:
    No"), so nothing is printed. https://docs.github.com/en/copilot/reference/copilot-cli-reference/
    cli-hooks-reference (github/docs)"""
    return None


class Client(NamedTuple):
    vendor: Vendor
    output: Callable[[Event, str], str | None]


CLIENTS: Final[dict[str, Client]] = {
    "claude": Client("claude", claude),
    "codex": Client("codex", codex),
    "gemini": Client("gemini", gemini),
    "vscode": Client("copilot", vscode),
    "cursor": Client("cursor", cursor),
    "copilot": Client("copilot", copilot),
}
_CLIENT_OF_VENDOR: Final[dict[str, str]] = {v: v for v in ("claude", "codex", "gemini", "cursor")}


def injects(client: str, event: Event) -> bool:
    return CLIENTS[client].output(event, "") is not None


def guess_client(environ: Mapping[str, str]) -> tuple[str, Vendor]:
    """With no --client: the client named by the agent CLI's environment markers, printing Claude Code's
    shape (which Codex, Gemini CLI and VS Code read too) when none names one."""
    for var, vendor in VENDOR_ENV_MARKERS:
        if environ.get(var):
            return _CLIENT_OF_VENDOR.get(vendor, "vscode"), vendor
    return "claude", "other"


class HookInput(NamedTuple):
    """The fields threadloom reads from a client's hook JSON, each None when absent or of the wrong type."""

    session: str | None  # the client's own session id
    cwd: str | None
    source: str | None  # session start: startup, resume, clear, compact, new
    reason: str | None  # session end
    trigger: str | None  # compaction: manual or auto
    transcript: str | None


def _text(payload: Mapping[str, Any], *keys: str) -> str | None:
    for key in keys:
        value = payload.get(key)
        if isinstance(value, str) and value:
            return value[:MAX_FIELD]
    return None


def parse_input(payload: Mapping[str, Any]) -> HookInput:
    """The hook JSON of any client above: snake_case (Claude Code, Codex, Gemini CLI, Cursor, and Copilot CLI's
    VS Code-compatible form) or camelCase (VS Code's common fields, Copilot CLI's own form). Cursor names the
    workspace in `workspace_roots` rather than `cwd`."""
    cwd = _text(payload, "cwd")
    roots = payload.get("workspace_roots")
    if cwd is None and isinstance(roots, list) and roots and isinstance(roots[0], str) and roots[0]:
        cwd = roots[0][:MAX_FIELD]
    return HookInput(
        session=_text(payload, "session_id", "sessionId", "conversation_id"),
        cwd=cwd,
        source=_text(payload, "source"),
        reason=_text(payload, "reason"),
        trigger=_text(payload, "trigger"),
        transcript=_text(payload, "transcript_path", "transcriptPath"),
    )
