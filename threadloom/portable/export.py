"""`export_to`: the caller's own items, each kind to `<kind>.jsonl` (a header line, then one record a line,
in each kind's stable order) and, for people, `<kind>.md`. All kinds are read in one snapshot, so the files
agree with each other; each file is written under a temporary name and renamed, 0600 in a 0700 folder."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from threadloom.errors import InvalidInput
from threadloom.learning.library import Library
from threadloom.portable import format as f
from threadloom.portable.registry import OPTIONAL, Kind, kinds
from threadloom.store.base import Reader, Store


@dataclass(frozen=True)
class Exported:
    folder: Path
    counts: dict[str, int]  # records per kind
    files: tuple[str, ...]


def choose(names: Sequence[str] | None, library: Library | None = None, with_transcripts: bool = False) -> list[Kind]:
    """The kinds named, or every kind but the optional ones (transcripts: `with_transcripts`)."""
    known = kinds(library)
    unknown = [n for n in names or () if n not in known]
    if unknown:
        raise InvalidInput(f"unknown kind {unknown[0]!r}; kinds are {', '.join(known)}")
    wanted = set(names or (n for n in known if n not in OPTIONAL)) | ({"transcripts"} if with_transcripts else set())
    return [k for name, k in known.items() if name in wanted]


def prepare(folder: Path) -> Path:
    """The export folder: made 0700 if missing; a link, a file or a folder that is not empty is refused (a
    repository's own folder, `--out .`, would put private items beside its sources for `git add` to find)."""
    if folder.is_symlink():
        raise InvalidInput(f"{folder} is a symbolic link; name a real folder")
    if folder.exists():
        if not folder.is_dir():
            raise InvalidInput(f"{folder} exists and is not a folder")
        held = sorted(p.name for p in folder.iterdir())
        if held:
            raise InvalidInput(f"{folder} is not empty (it already holds {held[0]}): export into an empty or new one")
    else:
        try:
            folder.mkdir(mode=0o700, parents=True)
        except OSError as exc:
            raise InvalidInput(f"cannot make the folder {folder}: {exc.strerror or exc}") from None
    return folder


def export_to(
    store: Store,
    user: str,
    folder: Path,
    names: Sequence[str] | None = None,
    library: Library | None = None,
    with_transcripts: bool = False,
) -> Exported:
    """`library`: the home's skills and lessons (without it, skills are not a kind)."""
    chosen = choose(names, library, with_transcripts)
    folder = prepare(folder.absolute())

    def run(r: Reader) -> dict[str, int]:
        return {kind.name: _write(r, kind, user, folder) for kind in chosen}

    counts = store.read(run)
    files = tuple(sorted(p.name for p in folder.iterdir() if p.name.endswith((".jsonl", ".md"))))
    return Exported(folder, counts, files)


def _write(r: Reader, kind: Kind, user: str, folder: Path) -> int:
    target, readable = folder / f"{kind.name}.jsonl", folder / f"{kind.name}.md"
    staged = [folder / f".{kind.name}.jsonl.part", folder / f".{kind.name}.md.part"]
    for path in staged:
        path.unlink(missing_ok=True)
    count = 0
    with f.open_private(staged[0]) as data, f.open_private(staged[1]) as md:
        data.write(f.dump(f.header(kind.name)))
        md.write(f"# {kind.name} of {user}\n\nExported by threadloom; the data is `{kind.name}.jsonl`.\n\n")
        for record in kind.export(r, user):
            data.write(f.dump(record))
            md.write(kind.markdown(record))
            count += 1
        for fh in (data, md):
            fh.flush()
            os.fsync(fh.fileno())
    staged[0].replace(target)
    staged[1].replace(readable)
    return count
