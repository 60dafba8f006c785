"""The parts of a brief: items, sections, slots, and what the budget dropped."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

if TYPE_CHECKING:
    from threadloom.identity import Provenance
    from threadloom.runtime import Runtime

Scope = Literal["full", "query"]
SCOPES: Final = ("full", "query")
DEFAULT_BUDGET: Final = 2000
MIN_BUDGET: Final = 200
MAX_BUDGET: Final = 20_000


@dataclass(frozen=True)
class Ask:
    """What a slot is asked for: whose brief, which scope, the query (query scope), and the instant."""

    runtime: Runtime
    provenance: Provenance
    scope: Scope
    query: str | None
    budget: int
    now_ms: int


@dataclass(frozen=True)
class Item:
    """One entry of a section. `key` names what the session then holds (`memory:m_1`, `signal:12`), so a
    query-scope brief does not send it again; an empty key is always sent."""

    text: str
    key: str = ""


@dataclass(frozen=True)
class Section:
    """A slot's part of the brief. `fenced` items are stored content, shown as data (fence.py); `notes` are
    threadloom's own lines (caveats), shown after the items, `lead` one above them; `get_with` is the call
    that gives it whole."""

    title: str
    items: tuple[Item, ...]
    get_with: str
    fenced: bool = True
    notes: tuple[str, ...] = ()
    lead: str = ""  # threadloom's line above the items (the now table's header)
    # Personal memory the egress policy kept from this reader, per kind ({"claims": 2}): the brief says it in
    # one line for all sections (usermodel/egress.py), so a section may hold nothing else.
    withheld: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class Slot:
    """A part of the brief. `priority`: under the budget, the lowest goes first; `order`: where it shows;
    `scopes`: the scopes it renders in; `build`: its section, or None when it has nothing to say."""

    name: str
    priority: int
    build: Callable[[Ask], Section | None]
    order: int = 50
    scopes: frozenset[Scope] = frozenset({"full"})


@dataclass(frozen=True)
class Dropped:
    """Items a section left out for the budget, and the call that gives them."""

    section: str
    items: int
    tokens: int
    get_with: str

    def as_dict(self) -> dict[str, Any]:
        return {"section": self.section, "items": self.items, "tokens": self.tokens, "get_with": self.get_with}


@dataclass(frozen=True)
class Brief:
    """The rendered brief: `text` is what a model reads (and what the session-start hook injects)."""

    text: str
    dropped: tuple[Dropped, ...]
    tokens: int
    scope: Scope = "full"
    budget: int = DEFAULT_BUDGET

    def as_dict(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "text": self.text,
            "tokens": self.tokens,
            "budget": self.budget,
            "dropped": [d.as_dict() for d in self.dropped],
        }
