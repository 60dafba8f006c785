"""VS Code (Copilot Chat and every extension that reads VS Code's MCP configuration).

- MCP: `servers.<name>` with `type: "stdio"`, `command`, `args` in the user profile's `mcp.json`
  (`~/.config/Code/User/` on Linux, `~/Library/Application Support/Code/User/` on macOS), or
  `.vscode/mcp.json` in the workspace (https://code.visualstudio.com/docs/copilot/customization/mcp-servers).
- Hooks: VS Code's agent hooks (a preview) take user hook files from `~/.copilot/hooks/`, the folder
  Copilot CLI reads its own from, in another format (PascalCase events, `command` rather than `bash`)
  (https://code.visualstudio.com/docs/copilot/customization/hooks). A file there would be read by both,
  so none is written for VS Code; `--client copilot` writes Copilot CLI's.
- Instructions: `.github/copilot-instructions.md` in the workspace
  (https://code.visualstudio.com/docs/copilot/customization/custom-instructions); VS Code has no
  user-level instructions file, so with user scope none is written.
"""

from __future__ import annotations

import sys
from pathlib import Path

from threadloom.setup.edits import Block, JsonEntry
from threadloom.setup.model import Client, Context, Plan, Skip, Target

NAME = "vscode"


def _user_folder(ctx: Context) -> Path:
    if sys.platform == "darwin":
        return ctx.home / "Library" / "Application Support" / "Code" / "User"
    return ctx.folder("XDG_CONFIG_HOME", ctx.home / ".config") / "Code" / "User"


def folders(ctx: Context) -> list[Path]:
    return [_user_folder(ctx)]


def plan(ctx: Context) -> Plan:
    server = JsonEntry(NAME, ("servers", "threadloom"), ctx.server(type="stdio"))
    why = "VS Code's preview hooks share ~/.copilot/hooks with Copilot CLI's, in another format"
    skips = [Skip(NAME, "hooks", why)]
    if ctx.repo is not None:
        return Plan(
            [
                Target(NAME, "MCP server", ctx.repo / ".vscode" / "mcp.json", (server,), private=False),
                Target(
                    NAME,
                    "instructions",
                    ctx.repo / ".github" / "copilot-instructions.md",
                    (Block(NAME, "agents"),),
                    private=False,
                ),
            ],
            skips,
        )
    skips.append(
        Skip(
            NAME,
            "instructions",
            "VS Code has no user-level instructions file (--project writes .github/copilot-instructions.md)",
        )
    )
    return Plan([Target(NAME, "MCP server", _user_folder(ctx) / "mcp.json", (server,))], skips)


CLIENT = Client(NAME, "VS Code", ("code",), folders, plan)
