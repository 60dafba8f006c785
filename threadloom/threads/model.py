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
# A whole summary, well under the search index's 100,000-character body: ~15k tokens of context.
MAX_SUMMARY_CHARS: Final = 60_000
MAX_REASON_CHARS: Final = 2_000  # a status change's reason, kept as the outcome
MAX_PATHS: Final = 50
MAX_PATH_CHARS: Final = 500
MAX_BRANCH_CHARS: Final = 250
MAX_AUTHOR_CHARS: Final = 100
MAX_SYSTEM_CONTEXT_CHARS: Final = 8_000  # a project's standing instructions: in every context, so ~2k tokens at most
_ID_RE: Final = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")
_HEADING_RE: Final = re.compile(r"^##\s+(.+?)\s*$")


def lines_of(text: str) -> list[str]:
    """Lines as Markdown sees them: split at LF, CRLF or CR only (not at the other breaks
    `str.splitlines` knows, which a renderer shows inside a line)."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def section_name(name: str) -> str:
    """One of the five sections, in any case; anything else is refused."""
    for known in SECTIONS:
        if name.strip().lower() == known.lower():
            return known
    shown = name if len(name) <= 60 else name[:60] + "..."
    raise InvalidInput(f"unknown section {shown!r}: a summary's sections are {', '.join(SECTIONS)}")


def check_thread_id(thread_id: object) -> str:
    """A thread id is its file name: a-z, 0-9 and inner hyphens, so it can never name another path."""
    if not isinstance(thread_id, str) or not _ID_RE.match(thread_id):
        shown = repr(thread_id) if len(repr(thread_id)) <= 80 else repr(thread_id)[:80] + "..."
        raise InvalidInput(f"{shown} is not a thread id (a-z, 0-9 and hyphens, 1-64 characters)")
    return thread_id


def check_paths(paths: list[str] | tuple[str, ...]) -> None:
    """The files a summary describes: at most MAX_PATHS, each relative to the repository."""
    if len(paths) > MAX_PATHS:
        raise InvalidInput(f"a summary watches at most {MAX_PATHS} paths ({len(paths)} given): name folders instead")
    for path in paths:
        shown = path if len(path) <= 60 else path[:60] + "..."
        if not path.strip() or len(path) > MAX_PATH_CHARS:
            raise InvalidInput(f"a watched path is 1-{MAX_PATH_CHARS} characters: {shown!r}")
        if path.startswith("/") or ".." in path.replace("\\", "/").split("/"):
            raise InvalidInput(f"watched paths are relative to the repository: {shown!r}")


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
    """A thread's summary: its sections in the canonical order, then any others a hand edit added."""

    sections: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, markdown: str, strict: bool = False) -> Summary:
        """Split Markdown at its `## ` headings; text before the first heading goes to State. A file
        may hold sections of any name (a hand edit kept as it is); `strict` (what a writer sends)
        refuses a heading that is not one of the five sections."""
        sections: dict[str, list[str]] = {}
        current = "State"
        for line in lines_of(markdown):
            heading = _HEADING_RE.match(line)
            if heading:
                current = section_name(heading.group(1)) if strict else _canonical(heading.group(1))
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
        """Add `text` to (or replace) one of the five sections. Its text cannot hold a `## ` heading
        line, which would start another section when the file is read back."""
        name = section_name(name)
        lines = lines_of(text)
        for n, line in enumerate(lines, 1):
            if _HEADING_RE.match(line):
                raise InvalidInput(
                    f"line {n} of the text for {name} is a '## ' heading, which would start another section: "
                    "use '### ' for a sub-heading, or send the whole summary without a section"
                )
        text = "\n".join(lines).strip()
        old = self.sections.get(name, "")
        new = f"{old}\n{text}".strip() if append and old else text
        sections = dict(self.sections)
        if new:
            sections[name] = new
        else:
            sections.pop(name, None)
        return Summary(sections)

    def check(self, thread_id: str) -> None:
        """Refuse a summary over the limits: each section, and the whole."""
        for name, text in self.sections.items():
            if len(text) > MAX_SECTION_CHARS:
                raise InvalidInput(
                    f"{name} of {thread_id} would be {len(text):,} characters; a section is at most "
                    f"{MAX_SECTION_CHARS:,}: shorten it (replace=true rewrites the section)"
                )
        size = len(self.render())
        if size > MAX_SUMMARY_CHARS:
            raise InvalidInput(
                f"the summary of {thread_id} would be {size:,} characters; a summary is at most "
                f"{MAX_SUMMARY_CHARS:,}: keep decisions and state, drop the history"
            )


def _canonical(name: str) -> str:
    """A known section's name in its own case; any other name as written (from a file)."""
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

    def check(self) -> None:
        """Refuse, before anything is written, a thread over any limit: what a file read back must
        hold (`__post_init__`) and what threadloom writes (each section, the summary, the strings of
        the front matter)."""
        self.summary.check(self.id)
        check_paths(self.paths)
        if self.outcome is not None and len(self.outcome) > MAX_REASON_CHARS:
            raise InvalidInput(f"an outcome (a status change's reason) is at most {MAX_REASON_CHARS:,} characters")
        if self.branch is not None and len(self.branch) > MAX_BRANCH_CHARS:
            raise InvalidInput(f"a branch name is at most {MAX_BRANCH_CHARS} characters")
        if len(self.author) > MAX_AUTHOR_CHARS:
            raise InvalidInput(f"an author is at most {MAX_AUTHOR_CHARS} characters")

    def touched(self, now: int, **changes: object) -> Thread:
        """A copy with `changes`, its updated time strictly after the previous one."""
        return replace(self, updated_at=max(now, self.updated_at + 1), **changes)  # type: ignore[arg-type]
