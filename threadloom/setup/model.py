"""The shapes every client module fills: where setup works, what it writes, and what it skips."""

from __future__ import annotations

import shlex
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from threadloom.setup.edits import Edit, JsonItem

# `threadloom hook <event> --client <name>`: the events threadloom answers.
SESSION_START = "session-start"
SESSION_END = "session-end"
PRE_COMPACT = "pre-compact"


@dataclass(frozen=True)
class Context:
    home: Path  # the user's home folder
    exe: str  # the absolute path of this threadloom
    env: Mapping[str, str]
    repo: Path | None = None  # set with --project: the repository whose shared files are written

    @property
    def project(self) -> bool:
        return self.repo is not None

    def folder(self, variable: str, default: Path) -> Path:
        """A client's folder that an environment variable may move (CODEX_HOME, COPILOT_HOME...)."""
        raw = self.env.get(variable)
        return Path(raw).expanduser() if raw else default

    def server(self, **extra: Any) -> dict[str, Any]:
        """The MCP server entry: this threadloom, `serve`, and the home when it is not the default."""
        entry: dict[str, Any] = {**extra, "command": self.exe, "args": ["serve"]}
        if self.env.get("THREADLOOM_HOME"):
            entry["env"] = {"THREADLOOM_HOME": self.env["THREADLOOM_HOME"]}
        return entry

    def hook(self, event: str, client: str) -> str:
        """The shell command a client runs for `event` (hook commands go through a shell)."""
        prefix = ""
        if self.env.get("THREADLOOM_HOME"):
            prefix = f"THREADLOOM_HOME={shlex.quote(self.env['THREADLOOM_HOME'])} "
        return f"{prefix}{shlex.quote(self.exe)} hook {event} --client {client}"


def hook_marker(event: str, client: str) -> str:
    """What identifies setup's hook entry among the user's, whatever path threadloom had then."""
    return f" hook {event} --client {client}"


def matcher_hooks(ctx: Context, client: str, events: Mapping[str, str], *, named: bool = False) -> tuple[JsonItem, ...]:
    """One `hooks.<Event>` entry per event, `{hooks: [{type: "command", command}]}`: the shape Claude Code,
    Codex and Gemini CLI share (Gemini's handlers also carry a `name`)."""

    def handler(ours: str) -> dict[str, str]:
        name = {"name": f"threadloom-{ours}"} if named else {}
        return name | {"type": "command", "command": ctx.hook(ours, client)}

    return tuple(
        JsonItem(client, ("hooks", event), {"hooks": [handler(ours)]}, hook_marker(ours, client))
        for event, ours in events.items()
    )


@dataclass(frozen=True)
class Target:
    """A file setup writes for a client: `what` it holds there and the edits that put it there."""

    client: str
    what: str  # "MCP server", "hooks", "instructions"
    path: Path
    edits: tuple[Edit, ...]
    private: bool = True  # a user file (created 0600) rather than one shared through git (0644)


@dataclass(frozen=True)
class Skip:
    client: str
    what: str
    why: str


@dataclass(frozen=True)
class Plan:
    targets: list[Target] = field(default_factory=list)
    skips: list[Skip] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the user must still do by hand


@dataclass(frozen=True)
class Client:
    name: str  # what `--client` and `threadloom hook --client` take
    title: str
    binaries: tuple[str, ...]
    folders: Callable[[Context], list[Path]]  # any of them existing means the client is configured
    plan: Callable[[Context], Plan]

    def present(self, ctx: Context) -> bool:
        if any(shutil.which(b, path=ctx.env.get("PATH")) for b in self.binaries):
            return True
        return any(folder.exists() for folder in self.folders(ctx))
