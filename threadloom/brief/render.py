"""Assembling the brief from its slots within a token budget."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from threadloom import tokens

if TYPE_CHECKING:
    from threadloom.identity import Provenance
    from threadloom.runtime import Runtime

Scope = Literal["full", "query"]
DEFAULT_BUDGET: Final = 2000


@dataclass(frozen=True)
class Dropped:
    """A section left out for the budget, and the call that gives it whole."""

    section: str
    tokens: int
    get_with: str

    def as_dict(self) -> dict[str, Any]:
        return {"section": self.section, "tokens": self.tokens, "get_with": self.get_with}


@dataclass(frozen=True)
class Brief:
    """The rendered brief: `text` is what a model reads (and what the session-start hook injects)."""

    text: str
    dropped: tuple[Dropped, ...]
    tokens: int
    scope: Scope = "full"

    def as_dict(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "text": self.text,
            "tokens": self.tokens,
            "dropped": [d.as_dict() for d in self.dropped],
        }


def render_brief(
    runtime: Runtime,
    provenance: Provenance,
    *,
    scope: Scope = "full",
    query: str | None = None,
    budget: int = DEFAULT_BUDGET,
    session_id: str | None = None,
) -> Brief:
    """The brief for `provenance`'s user and project. Blocking: call it through `runtime.call`."""
    provenance.viewer()  # a brief is read with a user's eyes; no user, no brief
    text = "# threadloom brief\n"
    return Brief(text=text, dropped=(), tokens=tokens.count(text), scope=scope)
