"""The kinds an export holds, one module each, and what they share while a set of files is merged."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol, runtime_checkable

from threadloom.portable.format import Line
from threadloom.scrub import Scrubber
from threadloom.store.base import Reader, Writer

if TYPE_CHECKING:
    from threadloom.learning.library import Library


@dataclass
class Context:
    """One import: whose items they become (the importing user, always), the scrubber every write path
    uses, and the ids from the files mapped to local ones (a claim's evidence may name a memory)."""

    user: str
    org: str
    scrubber: Scrubber
    now: int
    ids: dict[str, str] = field(default_factory=dict)

    def local_id(self, prefix: str, foreign: str, key: str) -> str:
        """The id an item gets when its own is taken here by something else: derived from the importing
        user, the foreign id and the item's content, so importing the same file again finds the same id."""
        digest = hashlib.blake2b(f"{self.user}\0{foreign}\0{key}".encode(), digest_size=8).hexdigest()
        return prefix + digest


class Kind(Protocol):
    name: str  # also the file's name: <name>.jsonl

    def export(self, r: Reader, user: str) -> Iterator[dict[str, Any]]:
        """`user`'s own items, in a stable order that does not depend on local row ids."""
        ...

    def markdown(self, record: dict[str, Any]) -> str:
        """The record for people to read, or '' (the kind has no Markdown)."""
        ...

    def parse(self, line: Line) -> Any:
        """The record checked field by field, as this kind's item; InvalidInput names the line."""
        ...

    def merge(self, r: Reader, w: Writer | None, ctx: Context, items: list[Any]) -> dict[str, int]:
        """Merge `items` into the store as `ctx.user`'s (a dry run when `w` is None: the same decisions, no
        writes); counts by outcome. Raises InvalidInput on anything that cannot be merged whole."""
        ...


@runtime_checkable
class Deferred(Protocol):
    """A kind whose writes go through a service that keeps files beside rows (skills): `merge` only checks
    and counts, and `after` writes, once the import's transaction has committed."""

    def after(self, ctx: Context, items: list[Any]) -> None: ...


def kinds(library: Library | None = None) -> dict[str, Kind]:
    """Every kind; skills only given the library (the home's files), which a runtime has."""
    from threadloom.portable.claims import CLAIMS
    from threadloom.portable.memories import MEMORIES
    from threadloom.portable.notes import NOTES
    from threadloom.portable.skills import Skills
    from threadloom.portable.style import STYLE
    from threadloom.portable.transcripts import TRANSCRIPTS

    # Import order: memories, notes and transcripts before claims, whose evidence names them.
    found: list[Kind] = [MEMORIES, NOTES, TRANSCRIPTS, CLAIMS, STYLE]
    return {k.name: k for k in (*found, *([Skills(library)] if library is not None else []))}


OPTIONAL: Final = ("transcripts",)  # exported only when asked for: large, and already on the machine that made them
