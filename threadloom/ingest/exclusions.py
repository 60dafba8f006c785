"""What is never stored: folders and projects matched by a glob (THREADLOOM_INGEST_EXCLUDE), with
everything below them, and the conversations of agents threadloom spawned (THREADLOOM_INGEST_CHILDREN=false).

Checked before anything is persisted: against a transcript file's path (the whole file is passed over),
and against each message's working directory and project (the message is dropped).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import PurePosixPath


def parse_globs(setting: str) -> tuple[str, ...]:
    """The setting's comma-separated globs, `~` expanded, trailing slashes dropped."""
    globs = (os.path.expanduser(g.strip()).rstrip("/") for g in setting.split(","))
    return tuple(g for g in globs if g)


@dataclass
class Exclusions:
    globs: tuple[str, ...] = ()
    sessions: frozenset[str] = frozenset()  # client session ids of spawned children
    _seen: dict[str, bool] = field(default_factory=dict)  # folder -> excluded, per pass

    def folder(self, path: str | None) -> bool:
        """Whether `path` or a folder above it matches a glob (fnmatch: `*` also crosses `/`)."""
        if not path or not self.globs:
            return False
        known = self._seen.get(path)
        if known is None:
            pure = PurePosixPath(path)
            known = any(fnmatchcase(str(p), g) for p in (pure, *pure.parents) for g in self.globs)
            if len(self._seen) < 10_000:
                self._seen[path] = known
        return known

    def any_folder(self, paths: Iterable[str | None]) -> bool:
        return any(self.folder(p) for p in paths)

    def session(self, session_id: str) -> bool:
        return session_id in self.sessions
