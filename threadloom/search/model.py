"""Value objects of the search engine."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from threadloom.errors import InvalidInput

KINDS: Final = ("memory", "note", "thread", "quote", "transcript", "skill")
STATUSES: Final = ("active", "dormant", "fading", "pruned", "superseded", "done", "idle", "abandoned")
MAX_BODY_CHARS: Final = 100_000
MAX_LIMIT: Final = 200


@dataclass(frozen=True)
class Document:
    """One searchable item. `ref` is its id within its kind (a memory id, a thread slug, ...)."""

    kind: str
    ref: str
    body: str
    project: str | None = None
    thread: str | None = None
    source: str | None = None
    status: str = "active"
    title: str = ""
    occurred_at: int | None = None  # when the content happened (epoch ms), apart from when it was stored

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise InvalidInput(f"kind must be one of {', '.join(KINDS)}, not {self.kind!r}")
        if not self.ref or len(self.ref) > 200:
            raise InvalidInput("a document ref is 1-200 characters")
        if not self.body or self.body.isspace():  # not strip(): no copy of a long body
            raise InvalidInput("a document needs a non-empty body")
        if len(self.body) > MAX_BODY_CHARS:
            raise InvalidInput(f"a document body is at most {MAX_BODY_CHARS:,} characters (got {len(self.body):,})")


@dataclass(frozen=True)
class Viewer:
    """Who is reading: the one rule of who may see a memory is written against this (store/documents.py).

    Its owner sees a memory wherever it is; `project` memories are seen from their project;
    `org` memories by everyone of the owner's organisation, from every project.
    """

    user: str
    project: str | None
    org: str


@dataclass(frozen=True)
class MemoryScope:
    """Conditions on the memory graph's own columns, for searches over memories (kind `memory`)."""

    viewer: Viewer | None = None  # None only for jobs that act on every user's memories
    project: str | None = None  # this project's memories and those of no project
    categories: tuple[str, ...] = ()
    entity: str | None = None
    include_superseded: bool = True
    # Bi-temporal (store/visibility.py, memory/corrections.py): what held then as known now (valid then,
    # whenever recorded, so a late correction with an earlier valid_from counts), or what was believed
    # then (stored by then) and superseded only later. Other kinds never meet it.
    as_of: int | None = None
    created_since: int | None = None
    active_since: int | None = None  # last stored, recalled or reactivated since
    pinned_or_core: bool = False


@dataclass(frozen=True)
class Filters:
    """Conditions applied inside the query, before anything is ranked."""

    project: str | None = None
    kinds: tuple[str, ...] = ()
    thread: str | None = None
    sources: tuple[str, ...] = ()
    statuses: tuple[str, ...] = ()
    since: int | None = None  # occurred_at (or created_at when unknown) >= since, epoch ms
    until: int | None = None  # ... < until
    vendors: tuple[str, ...] = ()  # transcript messages of these agent CLIs only (transcript_messages.source)
    # Memories by their own columns, and who sees each kind: other kinds in `kinds` (notes, thread
    # summaries, quotes) pass by their own visibility rule, and never a memory-only condition.
    memory: MemoryScope | None = None

    def __post_init__(self) -> None:
        unknown = [k for k in self.kinds if k not in KINDS]
        if unknown:
            raise InvalidInput(f"unknown kind filter {unknown[0]!r}; kinds are {', '.join(KINDS)}")
        unknown = [s for s in self.statuses if s not in STATUSES]
        if unknown:
            raise InvalidInput(f"unknown status filter {unknown[0]!r}; statuses are {', '.join(STATUSES)}")
        if self.since is not None and self.until is not None and self.since >= self.until:
            raise InvalidInput("the time range is empty: since must be before until")


@dataclass(frozen=True)
class Hit:
    doc_id: int
    kind: str
    ref: str
    score: float
    body: str
    project: str | None
    thread: str | None
    source: str | None
    status: str
    occurred_at: int | None
    created_at: int
    why: dict[str, float] = field(default_factory=dict)  # rank or score per signal, for explanation


@dataclass(frozen=True)
class SearchResult:
    hits: list[Hit]
    caveats: list[str]
    signals: tuple[str, ...]  # which took part: lexical, dense, graph, temporal, source, context, thread
