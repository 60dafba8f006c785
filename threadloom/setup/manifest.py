"""What setup changed, kept in the threadloom home so that `--undo` can take it back.

`<home>/setup/manifest.json` has one entry per file setup changed: where it is, whether it existed,
its permissions, the backup of the user's original (`<home>/setup/backups/`), the SHA-256 of what setup
last wrote, and the records of each entry it added. `baseline` stays true while the file holds exactly
what setup wrote over the user's original: then undo restores the backup byte for byte; once anyone
else changed the file in between, undo removes setup's entries one by one instead.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from threadloom.errors import InvalidInput

Entry = dict[str, Any]


class Manifest:
    def __init__(self, home: Path) -> None:
        self.folder = home / "setup"
        self.path = self.folder / "manifest.json"
        self.entries: dict[str, Entry] = {}
        self.load()

    def load(self) -> None:
        self.entries = {}
        if self.path.exists():
            try:
                loaded = json.loads(self.path.read_text("utf-8"))
                self.entries = dict(loaded["files"])
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise InvalidInput(
                    f"cannot read setup's record {self.path}: {exc}; move it aside to start afresh"
                ) from None

    def _ensure_folder(self, sub: Path) -> None:
        for folder in (self.folder.parent, self.folder, sub):
            folder.mkdir(mode=0o700, exist_ok=True)

    @contextmanager
    def locked(self) -> Iterator[None]:
        """One setup or undo at a time per home: two at once would each write the manifest."""
        self._ensure_folder(self.folder)
        fd = os.open(self.folder / "lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            self.load()  # what another setup wrote while this one waited
            yield
        finally:
            os.close(fd)

    def backup(self, real: Path, data: bytes) -> Path:
        """A copy of `data` (mode 0600) under `<home>/setup/backups/`, named after the file and the time."""
        folder = self.folder / "backups"
        self._ensure_folder(folder)
        stamp = time.strftime("%Y%m%dT%H%M%S")
        base = str(real).strip("/").replace("/", "%")
        for n in range(1000):
            path = folder / f"{stamp}{'-' + str(n) if n else ''}-{base}"
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            except FileExistsError:
                continue
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            return path
        raise InvalidInput(f"cannot make a backup of {real} in {folder}")

    def save(self) -> None:
        self._ensure_folder(self.folder)
        tmp = self.path.with_name(f".manifest.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump({"version": 1, "files": self.entries}, out, indent=2, sort_keys=True)
            out.write("\n")
            out.flush()
            os.fsync(out.fileno())
        os.rename(tmp, self.path)


def same_record(a: dict[str, Any], b: dict[str, Any]) -> bool:
    keys = ("client", "kind", "path", "marker")
    return all(a.get(k) == b.get(k) for k in keys)
