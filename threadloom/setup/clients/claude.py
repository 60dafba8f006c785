"""Claude Code.

- MCP: user scope is the top-level `mcpServers` of `~/.claude.json`; project scope is `.mcp.json` at
  the repository root (https://code.claude.com/docs/en/mcp, "Configuration scopes").
- Hooks: `~/.claude/settings.json`, `hooks.<Event>` = a list of `{matcher?, hooks: [{type: "command",
  command}]}`; SessionStart, SessionEnd and PreCompact all exist (https://code.claude.com/docs/en/hooks).
- Instructions: `~/.claude/CLAUDE.md` for the user, `CLAUDE.md` at the project root
  (https://code.claude.com/docs/en/memory).
"""

from __future__ import annotations

from pathlib import Path

from threadloom.setup.edits import Block, JsonEntry
from threadloom.setup.model import PRE_COMPACT, SESSION_END, SESSION_START, Client, Context, Plan, Target, matcher_hooks

NAME = "claude"
EVENTS = {"SessionStart": SESSION_START, "SessionEnd": SESSION_END, "PreCompact": PRE_COMPACT}


def folders(ctx: Context) -> list[Path]:
    return [ctx.home / ".claude", ctx.home / ".claude.json"]


def plan(ctx: Context) -> Plan:
    server = JsonEntry(NAME, ("mcpServers", "threadloom"), ctx.server(type="stdio"))
    hooks = matcher_hooks(ctx, NAME, EVENTS)
    if ctx.repo is not None:
        mcp = Target(NAME, "MCP server", ctx.repo / ".mcp.json", (server,), private=False)
        instructions = Target(NAME, "instructions", ctx.repo / "CLAUDE.md", (Block(NAME, "agents"),), private=False)
    else:
        mcp = Target(NAME, "MCP server", ctx.home / ".claude.json", (server,))
        instructions = Target(NAME, "instructions", ctx.home / ".claude" / "CLAUDE.md", (Block(NAME, "agents"),))
    return Plan([mcp, Target(NAME, "hooks", ctx.home / ".claude" / "settings.json", hooks), instructions])


CLIENT = Client(NAME, "Claude Code", ("claude",), folders, plan)
