"""The contract every transcript adapter keeps."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Protocol

from threadloom.transcripts.model import Cursor, ParseResult
from threadloom.transcripts.reader import BUDGET


class Source(Protocol):
    """One agent CLI's local transcripts.

    `discover` lists the transcript files under a user's home, or under the folder the client's own
    variable in `env` moves them to, never following a link out of the client's folder. `parse` reads
    one file from `cursor` (None: from the start) and returns the messages completed since, the cursor
    to persist, and what was skipped. It never raises on bad input, reads about `budget` bytes per call
    (`more` says to call again), and yields each record's message once per cursor: keys are stable, so
    a restart after truncation or replacement yields the same keys again, never new ones for old records.
    """

    name: str

    def discover(self, home: Path, env: Mapping[str, str] | None = None) -> Iterator[Path]: ...

    def parse(self, path: Path, cursor: Cursor | None, *, budget: int = BUDGET) -> ParseResult: ...
