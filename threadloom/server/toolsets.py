"""Tool groups. `THREADLOOM_TOOLSET` picks groups; the default set stays small.

Agents pay for every tool description in every session and choose worse among
many similar tools, so groups beyond `default` are opt-in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Final

from mcp_types import ToolAnnotations
from pydantic import Field

from threadloom.errors import ConfigError


@dataclass(frozen=True)
class ToolDef:
    fn: Callable[..., Any]
    group: str
    title: str
    read_only: bool
    destructive: bool
    idempotent: bool
    keyed: bool = False  # takes `idempotency_key: RequestKey`, handled by the server (threadloom/requests.py)

    @property
    def name(self) -> str:
        return self.fn.__name__

    def annotations(self) -> ToolAnnotations:
        return ToolAnnotations(
            title=self.title,
            read_only_hint=self.read_only,
            destructive_hint=self.destructive,
            idempotent_hint=self.idempotent,
            open_world_hint=False,
        )


# The argument of every keyed write tool; the server takes it out before the tool runs.
RequestKey = Annotated[
    str | None,
    Field(description="Retry key: a retry with it returns the first result instead of acting twice."),
]

# Groups that `default` stands for. Later groups (memory, threads, ...) join here or stay opt-in.
DEFAULT_GROUPS: Final = frozenset({"core", "memory", "threads"})


def select_tools(spec: str, tools: Mapping[str, ToolDef]) -> frozenset[str]:
    """Names of the tools a toolset spec enables: comma-separated groups, `default` or `full`."""
    groups = {g for t in tools.values() for g in [t.group]}
    wanted: set[str] = set()
    for part in (p.strip().lower() for p in spec.split(",")):
        if not part:
            continue
        if part == "full":
            wanted |= groups
        elif part == "default":
            wanted |= DEFAULT_GROUPS
        elif part in groups:
            wanted.add(part)
        else:
            known = ", ".join(sorted(groups | {"default", "full"}))
            raise ConfigError(f"unknown tool group {part!r} in THREADLOOM_TOOLSET; known: {known}")
    if not wanted:
        wanted = set(DEFAULT_GROUPS)
    return frozenset(name for name, t in tools.items() if t.group in wanted)
