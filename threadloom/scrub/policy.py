"""What the services call before they persist text: `Scrubber` (on, or off for people who must keep
verbatim text: THREADLOOM_SCRUB_SECRETS=false), and the report of what one call scrubbed.

The report rides in a context variable that the MCP server sets around each tool call
(`collecting()`); the worker thread `Runtime.call` runs a service in gets a copy of the context, which
holds the same list, so the service's scrubs land in the tool's result as `scrubbed: [kinds]`. Outside a
tool call (the CLI, background jobs) nothing collects and the scrub still happens.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar, overload

from threadloom.scrub.engine import scrub

T = TypeVar("T")
_REPORT: ContextVar[list[str] | None] = ContextVar("threadloom_scrubbed", default=None)


@dataclass
class Collected:
    """The kinds every scrub in this context replaced (each once, in order), until `close()`."""

    kinds: list[str] = field(default_factory=list)
    _token: Token[list[str] | None] | None = None

    def close(self) -> None:
        if self._token is not None:
            _REPORT.reset(self._token)
            self._token = None


def collect() -> Collected:
    """Start collecting what this context's scrubs replace (a tool call: see the module docstring)."""
    collected = Collected()
    collected._token = _REPORT.set(collected.kinds)
    return collected


@contextmanager
def collecting() -> Iterator[list[str]]:
    collected = collect()
    try:
        yield collected.kinds
    finally:
        collected.close()


def _report(kinds: Sequence[str]) -> None:
    collected = _REPORT.get()
    if collected is not None:
        collected.extend(k for k in kinds if k not in collected)


@dataclass(frozen=True)
class Scrubber:
    enabled: bool = True

    def text(self, value: str) -> str:
        """`value` with its credentials replaced by typed placeholders (as given when scrubbing is off)."""
        if not self.enabled:
            return value
        result = scrub(value)
        _report(result.kinds)
        return result.text

    @overload
    def optional(self, value: str) -> str: ...
    @overload
    def optional(self, value: None) -> None: ...
    def optional(self, value: str | None) -> str | None:
        return None if value is None else self.text(value)

    def texts(self, values: Sequence[str]) -> tuple[str, ...]:
        return tuple(self.text(v) for v in values)

    def fields(self, value: T, *names: str) -> T:
        """A copy of the dataclass `value` with the named fields scrubbed (a string, None, or strings)."""
        changes: dict[str, Any] = {}
        for name in names:
            current = getattr(value, name)
            scrubbed = self.texts(current) if isinstance(current, tuple) else self.optional(current)
            if scrubbed != current:
                changes[name] = scrubbed
        return replace(value, **changes) if changes else value  # type: ignore[type-var]

    def tree(self, value: Any) -> Any:
        """Every string in a JSON-like value (dicts, lists, strings), keys included, scrubbed."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.tree(k): self.tree(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.tree(v) for v in value]
        return value


SCRUB = Scrubber()  # the default: scrubbing on
