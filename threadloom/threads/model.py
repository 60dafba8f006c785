"""Threads: a tree of topics, each with a summary in sections, kept as Markdown in the repository."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Final

from threadloom.errors import InvalidInput

SECTIONS: Final = ("Decisions", "Constraints", "State", "Open questions", "Next steps")
INHERITED: Final = ("Decisions", "Constraints")  # what a thread passes down to its descendants' context
STATUSES: Final = ("active", "idle", "done", "abandoned")
MAX_TITLE: Final = 200
MAX_SECTION_CHARS: Final = 20_000
_ID_RE: Final = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")
_HEADING_RE: Final = re.compile(r"^##\s+(.+?)\s*$")


def check_thread_id(thread_id: object) -> str:
    """A thread id is its file name: a-z, 0-9 and inner hyphens, so it can never name another path."""
    if not isinstance(thread_id, str) or not _ID_RE.match(thread_id):
        raise InvalidInput(f"{thread_id!r} is not a thread id (a-z, 0-9 and hyphens, 1-64 characters)")
    return thread_id


def slugify(title: str, taken: set[str] | frozenset[str] = frozenset()) -> str:
    """An id from a title, unique among `taken`: 'Auth API (v2)!' -> 'auth-api-v2', then 'auth-api-v2-2'."""
    base = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:56].strip("-") or "thread"
    candidate, n = base, 2
    while candidate in taken:
        candidate = f"{base}-{n}"
        n += 1
    return candidate


@dataclass(frozen=True)
class Summary:
    """A thread's summary: its sections in the canonical order, then any others the writer added."""

    sections: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, markdown: str) -> Summary:
        """Split Markdown at its `## ` headings; text before the first heading goes to State."""
        sections: dict[str, list[str]] = {}
        current = "State"
        for line in markdown.splitlines():
            heading = _HEADING_RE.match(line)
            if heading:
                current = _canonical(heading.group(1))
                sections.setdefault(current, [])
                continue
            sections.setdefault(current, []).append(line)
        cleaned = {name: "\n".join(lines).strip() for name, lines in sections.items()}
        return cls({name: text for name, text in cleaned.items() if text})

    def render(self, only: tuple[str, ...] | None = None) -> str:
        names = [s for s in SECTIONS if s in self.sections] + [s for s in self.sections if s not in SECTIONS]
        chosen = [n for n in names if only is None or n in only]
        return "\n\n".join(f"## {name}\n{self.sections[name]}" for name in chosen)

    def with_section(self, name: str, text: str, append: bool) -> Summary:
        name = _canonical(name)
        text = text.strip()
        if len(text) > MAX_SECTION_CHARS:
            raise InvalidInput(f"a section is at most {MAX_SECTION_CHARS:,} characters")
        old = self.sections.get(name, "")
        new = f"{old}\n{text}".strip() if append and old else text
        sections = dict(self.sections)
        if new:
            sections[name] = new
        else:
            sections.pop(name, None)
        return Summary(sections)


def _canonical(name: str) -> str:
    for known in SECTIONS:
        if name.strip().lower() == known.lower():
            return known
    return name.strip()


@dataclass(frozen=True)
class Thread:
    id: str
    title: str
    parent: str | None
    status: str
    author: str
    created_at: int  # epoch ms
    updated_at: int
    summary: Summary = field(default_factory=Summary)
    branch: str | None = None
    commit: str | None = None
    paths: tuple[str, ...] = ()
    outcome: str | None = None

    def __post_init__(self) -> None:
        check_thread_id(self.id)
        if self.parent is not None:
            check_thread_id(self.parent)
        if self.parent == self.id:
            raise InvalidInput("a thread cannot be its own parent")
        if self.status not in STATUSES:
            raise InvalidInput(f"status must be one of {', '.join(STATUSES)}")
        if not self.title.strip() or len(self.title) > MAX_TITLE:
            raise InvalidInput(f"a thread title is 1-{MAX_TITLE} characters")

    def touched(self, now: int, **changes: object) -> Thread:
        """A copy with `changes`, its updated time strictly after the previous one."""
        return replace(self, updated_at=max(now, self.updated_at + 1), **changes)  # type: ignore[arg-type]
