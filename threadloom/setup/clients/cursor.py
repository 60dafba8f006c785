"""Cursor.

- MCP: `mcpServers.<name>` with `command` and `args` in `~/.cursor/mcp.json`, or `.cursor/mcp.json`
  in the project (https://cursor.com/docs/context/mcp).
- Hooks: `~/.cursor/hooks.json`, `{"version": 1, "hooks": {"<event>": [{"command": ...}]}}` with
  camelCase events; sessionStart, sessionEnd and preCompact are among the agent events Cursor
  documents (https://cursor.com/docs/agent/hooks).
- Instructions: a project rule, `.cursor/rules/threadloom.mdc` (https://cursor.com/docs/context/rules);
  Cursor's user rules live in its settings, not in a file, so with user scope none is written.
"""

from __future__ import annotations

from pathlib import Path

from threadloom.setup.edits import Block, Edit, JsonEntry, JsonItem
from threadloom.setup.model import (
    PRE_COMPACT,
    SESSION_END,
    SESSION_START,
    Client,
    Context,
    Plan,
    Skip,
    Target,
    hook_marker,
)

NAME = "cursor"
EVENTS = {"sessionStart": SESSION_START, "sessionEnd": SESSION_END, "preCompact": PRE_COMPACT}


def folders(ctx: Context) -> list[Path]:
    return [ctx.home / ".cursor"]


def plan(ctx: Context) -> Plan:
    server = JsonEntry(NAME, ("mcpServers", "threadloom"), ctx.server())
    hooks: tuple[Edit, ...] = (
        JsonEntry(NAME, ("version",), 1, keep_existing=True),
        *(
            JsonItem(NAME, ("hooks", event), {"command": ctx.hook(ours, NAME)}, hook_marker(ours, NAME))
            for event, ours in EVENTS.items()
        ),
    )
    targets = [Target(NAME, "hooks", ctx.home / ".cursor" / "hooks.json", hooks)]
    skips: list[Skip] = []
    if ctx.repo is not None:
        targets.insert(0, Target(NAME, "MCP server", ctx.repo / ".cursor" / "mcp.json", (server,), private=False))
        rule = ctx.repo / ".cursor" / "rules" / "threadloom.mdc"
        targets.append(Target(NAME, "instructions", rule, (Block(NAME, "cursor"),), private=False))
    else:
        targets.insert(0, Target(NAME, "MCP server", ctx.home / ".cursor" / "mcp.json", (server,)))
        skips.append(Skip(NAME, "instructions", "Cursor keeps user rules in its settings (--project writes a rule)"))
    return Plan(targets, skips)


CLIENT = Client(NAME, "Cursor", ("cursor", "cursor-agent"), folders, plan)
