"""What every thread file parses to, kept per process and keyed by each file's signature (inode, size,
mtime, ctime), so loading a project's threads reads and parses only the files that changed since the
last load: a write or a tree at 2,000 threads stats 2,000 files instead of parsing them (bench/threads.py).

The files stay the truth: every load lists the folder and stats each file through `Repository`, so
a hand edit, a `git checkout` or another process's write is picked up by the next load. A file
changed within the last `RACY_NS` is never kept (as git treats a "racily clean" index entry): a
coarse file-system clock could give two quick edits the same mtime and size. A file reached
through a link is read every time.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Generic, TypeVar

from threadloom.threads.repository import Repository, Signature

T = TypeVar("T")
RACY_NS: Final = 2_000_000_000
MAX_FOLDERS: Final = 64  # folders kept (least recently loaded dropped first)
MAX_BYTES: Final = 64 * 2**20  # of file text kept parsed, all folders together (a hostile repository's huge files)
MAX_FILE_BYTES: Final = 2**20  # a larger file is parsed each time, never kept


@dataclass(frozen=True)
class _Parsed(Generic[T]):
    value: T | None
    error: str | None


class FileCache(Generic[T]):
    """Parsed files of folders, by the repository's real root and the folder's relative path."""

    def __init__(self, parse: Callable[[str, str], T], errors: tuple[type[BaseException], ...]) -> None:
        self._parse = parse  # (text, name) -> value; raises one of `errors` for a broken file
        self._errors = errors
        self._lock = threading.Lock()
        self._folders: OrderedDict[tuple[str, str], dict[str, tuple[Signature, _Parsed[T]]]] = OrderedDict()
        self._sizes: dict[tuple[str, str], int] = {}  # bytes of text behind each folder's entries

    def load(self, files: Repository, rel: str, suffix: str) -> tuple[dict[str, T], dict[str, str]]:
        """Every file of the folder parsed, by name, and why each of the others could not be used."""
        key = (str(files.root), rel)
        with self._lock:
            kept = dict(self._folders.get(key, {}))
        read, same, problems = files.read_folder_changed(rel, suffix, {n: sig for n, (sig, _) in kept.items()})
        fresh = {name: kept[name] for name in same}
        racy = time.time_ns() - RACY_NS
        values: dict[str, T] = {}
        for name, (sig, text) in read.items():
            parsed = self._parsed(text, name)
            if sig is not None and sig[2] < racy and sig[3] < racy and sig[1] <= MAX_FILE_BYTES:
                fresh[name] = (sig, parsed)
            self._collect(name, parsed, values, problems)
        for name in same:
            self._collect(name, kept[name][1], values, problems)
        size = sum(sig[1] for sig, _ in fresh.values())
        with self._lock:
            self._folders[key], self._sizes[key] = fresh, size
            self._folders.move_to_end(key)
            while len(self._folders) > MAX_FOLDERS or sum(self._sizes.values()) > MAX_BYTES:
                dropped, _ = self._folders.popitem(last=False)
                del self._sizes[dropped]
        return dict(sorted(values.items())), problems

    def forget(self) -> None:
        with self._lock:
            self._folders.clear()
            self._sizes.clear()

    def _parsed(self, text: str, name: str) -> _Parsed[T]:
        try:
            return _Parsed(self._parse(text, name), None)
        except self._errors as exc:
            return _Parsed(None, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)

    @staticmethod
    def _collect(name: str, parsed: _Parsed[T], values: dict[str, T], problems: dict[str, str]) -> None:
        if parsed.value is not None:
            values[name] = parsed.value
        else:
            problems[name] = parsed.error or "unreadable"
