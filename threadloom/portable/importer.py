"""`import_from`: export files merged into this store as the importing user's.

Every file is read as a stream and checked record by record first (a bad line stops everything before a
single write); then all of them are merged in one write transaction, so an import is whole or absent. A dry
run makes the same decisions in a read snapshot and writes nothing. Merging is by each kind's stable key, so
importing the same files again adds nothing.
"""

from __future__ import annotations

import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from threadloom.clock import now_ms
from threadloom.errors import InvalidInput
from threadloom.learning.library import Library
from threadloom.portable import format as f
from threadloom.portable.registry import Context, Deferred, Kind, kinds
from threadloom.scrub import Scrubber
from threadloom.store.base import Reader, Store, Writer


@dataclass(frozen=True)
class Imported:
    user: str
    dry_run: bool
    files: tuple[str, ...]
    counts: dict[str, int]

    def as_dict(self) -> dict[str, Any]:
        return {"user": self.user, "dry_run": self.dry_run, "files": list(self.files), "counts": self.counts}


def files_of(path: Path, library: Library | None = None) -> list[tuple[Kind, Path]]:
    """The kinds' files at `path` (one `<kind>.jsonl`, or a folder of them), in import order. Links are
    refused, at the path and inside the folder; Markdown is for people and never read back."""
    info = f.refuse_link(path)
    known = kinds(library)
    if stat.S_ISDIR(info.st_mode):
        found = {p.name for p in path.iterdir() if p.name.endswith(".jsonl") and not p.name.startswith(".")}
        unknown = sorted(n for n in found if n.removesuffix(".jsonl") not in known)
        if unknown:
            raise InvalidInput(f"{path}: {unknown[0]} is no kind this threadloom imports ({', '.join(known)})")
        chosen = [(k, path / f"{name}.jsonl") for name, k in known.items() if f"{name}.jsonl" in found]
        if not chosen:
            raise InvalidInput(f"{path} holds no export files (<kind>.jsonl)")
        for _, file in chosen:
            f.refuse_link(file)
        return chosen
    name = path.name.removesuffix(".jsonl")
    if not path.name.endswith(".jsonl") or name not in known:
        names = ", ".join(k + ".jsonl" for k in known)
        raise InvalidInput(f"{path.name} is not an export file: they are named {names}")
    return [(known[name], path)]


def import_from(
    store: Store,
    user: str,
    org: str,
    scrubber: Scrubber,
    path: Path,
    *,
    dry_run: bool = False,
    max_bytes: int = f.MAX_FILE_BYTES,
    library: Library | None = None,
) -> Imported:
    """`library`: the home's skills and lessons (without it, a skills file is no kind this imports)."""
    chosen = files_of(path.absolute(), library)
    parsed = [(kind, [kind.parse(line) for line in f.read_lines(file, kind.name, max_bytes)]) for kind, file in chosen]
    now = now_ms()

    contexts: list[Context] = []

    def merge(r: Reader, w: Writer | None) -> dict[str, int]:
        ctx = Context(user=user, org=org or user, scrubber=scrubber, now=now)  # fresh on a retried transaction
        contexts.append(ctx)
        counts: dict[str, int] = {}
        for kind, items in parsed:
            counts |= kind.merge(r, w, ctx, items)
        return counts

    counts = store.read(lambda r: merge(r, None)) if dry_run else store.write(lambda w: merge(w, w))
    for kind, items in parsed:
        if isinstance(kind, Deferred) and not dry_run:
            kind.after(contexts[-1], items)
    return Imported(user, dry_run, tuple(file.name for _, file in chosen), counts)
