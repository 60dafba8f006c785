"""Value objects of the memory graph: memories, typed edges, and what the service returns."""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from threadloom.errors import InvalidInput
from threadloom.search.model import Document

MAX_CONTENT_CHARS: Final = 20_000  # a memory is a fact or a decision, not a document; files go elsewhere
MAX_SUMMARY_CHARS: Final = 500
MAX_ENTITIES: Final = 32
MAX_RELATED: Final = 32
MAX_CORE_CHARS: Final = 2_000  # core memories are shown in every brief, so they stay short

EDGE_TYPES: Final = (
    "caused_by",
    "supersedes",
    "contradicts",
    "refines",
    "depends_on",
    "related_to",
    "mentions",
    "elaborates",
    "derived_from",
)
# Edge types whose chains mean "this came from that": a cycle in them is nonsense and refused.
ACYCLIC_TYPES: Final = frozenset({"caused_by", "supersedes", "depends_on", "derived_from", "refines"})
MEMORY_KINDS: Final = ("fact", "decision", "preference", "event", "lesson", "procedure", "observation")
VISIBILITIES: Final = ("private", "project", "org")
LIFECYCLE: Final = ("active", "dormant", "fading", "pruned")
MADE_BY: Final = ("explicit", "auto_link")  # plus "job:<name>" for a background job

Visibility = Literal["private", "project", "org"]
_ID_RE: Final = re.compile(r"^m_[0-9a-f]{16}$")
_CORE_KEY_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,79}$")
# A line of dialogue's speaker: "Alice: ...", "Dr. Mary Smith: ..." (migration m017 repeats this rule in SQL).
_SPEAKER: Final = re.compile(r"([A-Z][A-Za-z .'-]{1,39}): ")


def check_id(memory_id: object) -> str:
    if not isinstance(memory_id, str) or not _ID_RE.match(memory_id):
        shown = memory_id[:40] if isinstance(memory_id, str) else memory_id  # never a megabyte echoed back
        raise InvalidInput(f"{shown!r} is not a memory id (they look like m_0123456789abcdef)")
    return memory_id


def check_core_key(key: str) -> str:
    if not _CORE_KEY_RE.match(key):
        raise InvalidInput("a core key is 1-80 characters of letters, digits and _ . : / - (e.g. build.command)")
    return key


@dataclass(frozen=True)
class Link:
    """An edge the writer asks for: new memory --type--> target."""

    target: str
    type: str

    def __post_init__(self) -> None:
        check_id(self.target)
        if self.type not in EDGE_TYPES:
            raise InvalidInput(f"unknown edge type {self.type!r}; edge types are {', '.join(EDGE_TYPES)}")


@dataclass(frozen=True)
class NewMemory:
    """What a caller stores; validated on construction, before anything is written."""

    content: str
    summary: str | None = None
    category: str | None = None
    kind: str = "fact"
    entities: tuple[str, ...] = ()
    visibility: Visibility = "private"
    related: tuple[Link, ...] = ()
    idempotency_key: str | None = None
    valid_from: int | None = None  # epoch ms when the fact began to hold; default: now
    pinned: bool = False

    def __post_init__(self) -> None:
        content = self.content.strip()
        if not content:
            raise InvalidInput("a memory needs non-empty content")
        if len(self.content) > MAX_CONTENT_CHARS:
            raise InvalidInput(
                f"a memory is at most {MAX_CONTENT_CHARS:,} characters (got {len(self.content):,}); "
                "store the gist and point at the file or thread that holds the rest"
            )
        if self.summary is not None and len(self.summary) > MAX_SUMMARY_CHARS:
            raise InvalidInput(f"a summary is at most {MAX_SUMMARY_CHARS} characters")
        if self.kind not in MEMORY_KINDS:
            raise InvalidInput(f"unknown memory kind {self.kind!r}; kinds are {', '.join(MEMORY_KINDS)}")
        if self.visibility not in VISIBILITIES:
            raise InvalidInput(f"visibility must be one of {', '.join(VISIBILITIES)}")
        if self.category is not None and not 1 <= len(self.category) <= 64:
            raise InvalidInput("a category is 1-64 characters")
        if len(self.entities) > MAX_ENTITIES or any(not 1 <= len(e.strip()) <= 100 for e in self.entities):
            raise InvalidInput(f"at most {MAX_ENTITIES} entities, each 1-100 characters")
        if len(self.related) > MAX_RELATED:
            raise InvalidInput(f"at most {MAX_RELATED} related edges per memory")
        pairs = [(link.target, link.type) for link in self.related]
        if len(set(pairs)) != len(pairs):
            raise InvalidInput("the same edge is listed twice in related")
        if self.idempotency_key is not None and not 1 <= len(self.idempotency_key) <= 200:
            raise InvalidInput("an idempotency key is 1-200 characters")


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    type: str
    weight: float
    made_by: str
    created_at: int
    reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "source": self.source,
            "target": self.target,
            "type": self.type,
            "weight": self.weight,
            "made_by": self.made_by,
            "created_at": self.created_at,
        }
        if self.reason:
            out["reason"] = self.reason
        return out


@dataclass(frozen=True)
class Memory:
    id: str
    content: str
    summary: str | None
    category: str | None
    kind: str
    entities: tuple[str, ...]
    project: str | None
    visibility: str
    owner: str
    status: str
    pinned: bool
    core_key: str | None
    core_priority: int | None
    session_id: str | None
    vendor: str
    origin: str
    created_at: int
    last_reactivated_at: int
    reactivation_count: int
    valid_from: int
    valid_to: int | None
    superseded_by: str | None
    decay_score: float
    org: str = ""

    @property
    def is_core(self) -> bool:
        return self.core_key is not None

    def as_dict(self, concise: bool = False) -> dict[str, Any]:
        if concise:
            out: dict[str, Any] = {
                "id": self.id,
                "summary": self.summary or gist(self.content),
                "status": self.status,
                "activation": round(self.decay_score, 4),
                "is_core": self.is_core,
            }
        else:
            out = {
                "id": self.id,
                "content": self.content,
                "summary": self.summary,
                "category": self.category,
                "kind": self.kind,
                "entities": list(self.entities),
                "project": self.project,
                "visibility": self.visibility,
                "owner": self.owner,
                "status": self.status,
                "pinned": self.pinned,
                "is_core": self.is_core,
                "core_key": self.core_key,
                "core_priority": self.core_priority,
                "provenance": {"session": self.session_id, "vendor": self.vendor, "origin": self.origin},
                "created_at": self.created_at,
                "last_reactivated_at": self.last_reactivated_at,
                "reactivation_count": self.reactivation_count,
                "valid_from": self.valid_from,
                "valid_to": self.valid_to,
                "activation": round(self.decay_score, 4),
            }
        if self.superseded_by:
            out["superseded_by"] = self.superseded_by
        return out


def seen_by_all_who_see(new: Memory, old: Memory) -> bool:
    """Whether everyone who may see `old` may also see `new`, by the rule of store/visibility.py: a
    correction must never be hidden from someone who sees what it corrects."""
    if old.visibility == "org":
        return new.visibility == "org" and new.org == old.org
    if old.visibility == "project":
        return new.visibility == "project" and new.project == old.project
    return (
        new.owner == old.owner
        or (new.visibility == "project" and new.project == old.project)
        or (new.visibility == "org" and new.org == old.org)
    )


def gist(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


@dataclass(frozen=True)
class Conflict:
    """A hint that a new memory may disagree with an older one; never stored as an edge."""

    id: str
    content: str
    reason: str
    similarity: float

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "content": self.content, "reason": self.reason, "similarity": round(self.similarity, 3)}


@dataclass(frozen=True)
class Stored:
    memory: Memory
    created: bool
    duplicate_of: str | None = None  # the same content was already stored
    replayed: bool = False  # the idempotency key was seen before: this is the first call's result
    edges: tuple[Edge, ...] = ()
    auto_links: tuple[Edge, ...] = ()
    possible_conflicts: tuple[Conflict, ...] = field(default_factory=tuple)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.memory.id, "created": self.created, "status": self.memory.status}
        if self.duplicate_of:
            out["duplicate_of"] = self.duplicate_of
        if self.replayed:
            out["replayed"] = True
        out["edges"] = [e.as_dict() for e in self.edges]
        out["auto_links"] = [e.as_dict() for e in self.auto_links]
        out["possible_conflicts"] = [c.as_dict() for c in self.possible_conflicts]
        return out


def content_digest(content: str) -> str:
    return hashlib.blake2b(" ".join(content.split()).encode(), digest_size=16).hexdigest()


def new_memory_id() -> str:
    return "m_" + secrets.token_hex(8)


def memory_thread(session_id: str | None) -> str | None:
    """The search thread of the memories a session stores: they form one in storing order, so the
    engine's thread signals (context spread, contextual embedding, thread prior) work for them as
    for the turns of a conversation. (A session's active thread, which spans many sessions, grouped
    worse: LoCoMo dev R@10 78.4 for one thread per conversation against 80.8 per session.)"""
    return f"session:{session_id}" if session_id else None


def speaker(content: str) -> str | None:
    """The name a memory written as a line of dialogue starts with ("Alice: we ship on Friday")."""
    found = _SPEAKER.match(content)
    name = found.group(1).strip() if found else ""
    return name if any("a" <= c <= "z" for c in name) else None  # "TODO:", "NOTE:" are labels, not names


def memory_source(entities: tuple[str, ...], content: str) -> str | None:
    """Who a memory is from, as its document's source, so that a question naming them lifts it (the
    engine's source boost): the speaker it is written as, else its first entity. One name: on the
    LoCoMo dev split, with the people a turn mentions as entities beside its speaker, R@10 was 80.6 for
    the speaker alone, 78.3 for the first entity and 77.1 for all of them joined (lifting every memory
    that mentions a person, not only theirs); with no entities, the speaker gave 73.0 against 68.4."""
    return speaker(content) or (entities[0] if entities else None)


def memory_document(m: Memory) -> Document:
    """A memory as the search engine sees it: its session as its thread, its entities (or speaker) as its
    source, and the time it began to hold as when it happened."""
    return Document(
        kind="memory",
        ref=m.id,
        body=m.content,
        title=m.summary or "",
        project=m.project,
        thread=memory_thread(m.session_id),
        source=memory_source(m.entities, m.content),
        status="superseded" if m.superseded_by else m.status,
        occurred_at=m.valid_from,
    )
