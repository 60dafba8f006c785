"""Gemini CLI.

- MCP: `mcpServers.<name>` with `command` and `args` in `~/.gemini/settings.json`, or
  `.gemini/settings.json` in the project (https://geminicli.com/docs/tools/mcp-server/).
- Hooks: the same settings file, `hooks.<Event>` = a list of `{matcher?, hooks: [{name, type:
  "command", command}]}`; the lifecycle events are SessionStart, SessionEnd and PreCompress
  (https://geminicli.com/docs/hooks/reference).
- Instructions: `~/.gemini/GEMINI.md`, and `GEMINI.md` at the project root
  (https://geminicli.com/docs/cli/gemini-md/).
"""

from __future__ import annotations

from pathlib import Path

from threadloom.setup.edits import Block, JsonEntry
from threadloom.setup.model import PRE_COMPACT, SESSION_END, SESSION_START, Client, Context, Plan, Target, matcher_hooks

NAME = "gemini"
EVENTS = {"SessionStart": SESSION_START, "SessionEnd": SESSION_END, "PreCompress": PRE_COMPACT}


def folders(ctx: Context) -> list[Path]:
    return [ctx.home / ".gemini"]


def plan(ctx: Context) -> Plan:
    user = ctx.home / ".gemini" / "settings.json"
    server = JsonEntry(NAME, ("mcpServers", "threadloom"), ctx.server())
    hooks = matcher_hooks(ctx, NAME, EVENTS, named=True)
    if ctx.repo is not None:
        mcp = Target(NAME, "MCP server", ctx.repo / ".gemini" / "settings.json", (server,), private=False)
        instructions = Target(NAME, "instructions", ctx.repo / "GEMINI.md", (Block(NAME, "agents"),), private=False)
    else:
        mcp = Target(NAME, "MCP server", user, (server,))
        instructions = Target(NAME, "instructions", ctx.home / ".gemini" / "GEMINI.md", (Block(NAME, "agents"),))
    return Plan([mcp, Target(NAME, "hooks", user, hooks), instructions])


CLIENT = Client(NAME, "Gemini CLI", ("gemini",), folders, plan)
