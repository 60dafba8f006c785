"""GitHub Copilot CLI.

- MCP: `mcpServers.<name>` with `type`, `command`, `args` and `tools` in `$COPILOT_HOME/mcp-config.json`
  (default `~/.copilot`) (https://docs.github.com/en/copilot/how-tos/copilot-cli/customize-copilot/add-mcp-servers).
- Hooks: user hook files are the `*.json` in `$COPILOT_HOME/hooks/`, each `{"version": 1, "hooks":
  {"<event>": [{"type": "command", "bash": ..., "timeoutSec": ...}]}}`; sessionStart and sessionEnd
  exist, a compaction event does not (https://docs.github.com/en/copilot/reference/hooks-reference).
  setup writes a file of its own there, `threadloom.json`.
- Instructions: `$COPILOT_HOME/copilot-instructions.md`, and `.github/copilot-instructions.md` in the
  repository (https://docs.github.com/en/copilot/reference/copilot-cli-reference/cli-config-dir-reference).
"""

from __future__ import annotations

from pathlib import Path

from threadloom.setup.edits import Block, Edit, JsonEntry, JsonItem
from threadloom.setup.model import SESSION_END, SESSION_START, Client, Context, Plan, Skip, Target, hook_marker

NAME = "copilot"
EVENTS = {"sessionStart": SESSION_START, "sessionEnd": SESSION_END}


def _home(ctx: Context) -> Path:
    return ctx.folder("COPILOT_HOME", ctx.home / ".copilot")


def folders(ctx: Context) -> list[Path]:
    return [_home(ctx)]


def plan(ctx: Context) -> Plan:
    home = _home(ctx)
    hooks: tuple[Edit, ...] = (
        JsonEntry(NAME, ("version",), 1, keep_existing=True),
        *(
            JsonItem(
                NAME,
                ("hooks", event),
                {"type": "command", "bash": ctx.hook(ours, NAME), "timeoutSec": 30},
                hook_marker(ours, NAME),
            )
            for event, ours in EVENTS.items()
        ),
    )
    targets = [Target(NAME, "hooks", home / "hooks" / "threadloom.json", hooks)]
    skips = [Skip(NAME, "pre-compact hook", "Copilot CLI has no compaction hook event")]
    if ctx.repo is not None:
        skips.append(
            Skip(NAME, "MCP server", "Copilot CLI's servers are registered per user (run setup without --project)")
        )
        path = ctx.repo / ".github" / "copilot-instructions.md"
        targets.append(Target(NAME, "instructions", path, (Block(NAME, "agents"),), private=False))
    else:
        server = JsonEntry(NAME, ("mcpServers", "threadloom"), ctx.server(type="local", tools=["*"]))
        targets.insert(0, Target(NAME, "MCP server", home / "mcp-config.json", (server,)))
        targets.append(Target(NAME, "instructions", home / "copilot-instructions.md", (Block(NAME, "agents"),)))
    return Plan(targets, skips)


CLIENT = Client(NAME, "Copilot CLI", ("copilot",), folders, plan)
