"""Codex CLI.

- MCP: `[mcp_servers.<name>]` tables with `command` and `args` in `$CODEX_HOME/config.toml` (default
  `~/.codex`), or `.codex/config.toml` of a trusted project (https://developers.openai.com/codex/mcp).
- Hooks: `$CODEX_HOME/hooks.json`, the same `hooks.<Event>` lists as Claude Code's. Codex has
  SessionStart and PreCompact but no session-end event (its Stop ends a turn), so none is written;
  Codex asks the user to review and trust new hooks before they run
  (https://developers.openai.com/codex/hooks).
- Instructions: `$CODEX_HOME/AGENTS.md`, and `AGENTS.md` at the project root
  (https://developers.openai.com/codex/guides/agents-md).
"""

from __future__ import annotations

from pathlib import Path

from threadloom.setup.edits import Block, TomlEntry
from threadloom.setup.model import PRE_COMPACT, SESSION_START, Client, Context, Plan, Skip, Target, matcher_hooks

NAME = "codex"
EVENTS = {"SessionStart": SESSION_START, "PreCompact": PRE_COMPACT}


def _home(ctx: Context) -> Path:
    return ctx.folder("CODEX_HOME", ctx.home / ".codex")


def folders(ctx: Context) -> list[Path]:
    return [_home(ctx)]


def plan(ctx: Context) -> Plan:
    home = _home(ctx)
    server = TomlEntry(NAME, ("mcp_servers", "threadloom"), ctx.server())
    hooks = matcher_hooks(ctx, NAME, EVENTS)
    if ctx.repo is not None:
        mcp = Target(NAME, "MCP server", ctx.repo / ".codex" / "config.toml", (server,), private=False)
        instructions = Target(NAME, "instructions", ctx.repo / "AGENTS.md", (Block(NAME, "agents"),), private=False)
    else:
        mcp = Target(NAME, "MCP server", home / "config.toml", (server,))
        instructions = Target(NAME, "instructions", home / "AGENTS.md", (Block(NAME, "agents"),))
    return Plan(
        [mcp, Target(NAME, "hooks", home / "hooks.json", hooks), instructions],
        [Skip(NAME, "session-end hook", "Codex has no session-end event")],
        ["codex: review and trust the new hooks in Codex (/hooks) before they run"],
    )


CLIENT = Client(NAME, "Codex CLI", ("codex",), folders, plan)
