"""Tool groups. `THREADLOOM_TOOLSET` picks groups; the default set stays small.

Agents pay for every tool description in every session and choose worse among
many similar tools, so groups beyond `default` are opt-in. `default` is the groups in DEFAULT_GROUPS
plus the tools marked `default` in other groups: enough to remember, recall, correct, pick up the
thread, leave a note, and read, answer and send signals, within 3,000 tokens with the server
instructions (tests/test_tool_surface.py).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Final

from mcp_types import ToolAnnotations
from pydantic import BeforeValidator, Field, ValidationInfo, WithJsonSchema

from threadloom.clock import instant
from threadloom.errors import ConfigError, InvalidInput


@dataclass(frozen=True)
class ToolDef:
    fn: Callable[..., Any]
    group: str
    title: str
    read_only: bool
    destructive: bool
    idempotent: bool
    keyed: bool = False  # takes `idempotency_key: RequestKey`, handled by the server (threadloom/requests.py)
    default: bool = False  # in the default toolset although its group is not
    # A replay answers the tasks its first call admitted as they are now (Spawner.replayed), not that call's answer.
    replays_tasks: bool = False
    # Whether what a killed call kept with its key is unfinished work the retry finishes (requests.RESUMING).
    resumes: Callable[[dict[str, Any]], bool] | None = None

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
    Field(description="Retry key: a repeat returns the first result."),
]

_TIME_HINT: Final = 'copy a value from the brief\'s "now" table (brief(scope="now") shows it)'


def _time(value: object, info: ValidationInfo) -> int | None:
    name = info.field_name or "time"
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # a JavaScript client may send 1793491200000 as 1793491200000.0
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | str)):
        raise InvalidInput(f"{name}: a time is an ISO 8601 date or date-time, or epoch milliseconds; {_TIME_HINT}")
    try:
        return instant(value, name)
    except InvalidInput as exc:
        raise InvalidInput(f"{exc.message}; {_TIME_HINT}") from None


# Every time argument of every tool: what the now table shows, an ISO 8601 date (local midnight) or
# date-time, or epoch ms; the tool gets epoch ms. "last week" is refused: models copy well and compute badly.
Time = Annotated[
    int | None,
    BeforeValidator(_time),
    WithJsonSchema({"type": ["string", "integer"]}),
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
            wanted |= DEFAULT_GROUPS | {"default"}
        elif part in groups:
            wanted.add(part)
        else:
            known = ", ".join(sorted(groups | {"default", "full"}))
            raise ConfigError(f"unknown tool group {part!r} in THREADLOOM_TOOLSET; known: {known}")
    if not wanted:
        wanted = {*DEFAULT_GROUPS, "default"}
    return frozenset(name for name, t in tools.items() if t.group in wanted or (t.default and "default" in wanted))


def first_paragraph(doc: str | None) -> str:
    """A tool's docstring up to its first blank line, on one line: what it does and when to call it."""
    return " ".join(inspect.cleandoc(doc or "").split("\n\n")[0].split())
