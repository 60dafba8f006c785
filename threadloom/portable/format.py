"""The file format: a header line, then one JSON object a line, read as a stream with size caps, and the
field checks every kind's parser uses (each failure an `InvalidInput` naming the file, line and field)."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final

from threadloom import __version__
from threadloom.errors import InvalidInput

FORMAT: Final = "threadloom-export"
VERSION: Final = 1
MAX_FILE_BYTES: Final = 256 * 1024 * 1024  # one kind's file; `--max-bytes` raises it
MAX_LINE_BYTES: Final = 4 * 1024 * 1024  # one record (a claim carries its evidence)
MAX_EPOCH_MS: Final = 2**53


def header(kind: str) -> dict[str, Any]:
    """No time and no user in it: an export of the same data is the same bytes (the round-trip test)."""
    return {"format": FORMAT, "version": VERSION, "kind": kind, "threadloom": __version__}


def dump(record: dict[str, Any]) -> str:
    return json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n"


def open_private(path: Path) -> IO[str]:
    """A new file only the user may read; a link planted at `path` is refused, never followed."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    return os.fdopen(fd, "w", encoding="utf-8", newline="\n")


def refuse_link(path: Path) -> os.stat_result:
    """`path`'s own status; a symbolic link there is an error (a link could point anywhere)."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        raise InvalidInput(f"{path} does not exist") from None
    if stat.S_ISLNK(info.st_mode):
        raise InvalidInput(f"{path} is a symbolic link; name the real file or folder")
    return info


@dataclass(frozen=True)
class Line:
    where: str  # "memories.jsonl:12"
    record: dict[str, Any]


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise ValueError(f"the key {key!r} appears twice")
        found[key] = value
    return found


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def read_lines(path: Path, kind: str, max_bytes: int = MAX_FILE_BYTES) -> Iterator[Line]:
    """The records of one kind's file after its header, a line at a time: the file is never held whole, a
    file over `max_bytes` is refused before its first byte is read, and so is a line over MAX_LINE_BYTES."""
    refuse_link(path)
    # O_NONBLOCK: a FIFO planted under an export's name must not hang the open waiting for a writer.
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise InvalidInput(f"{path.name} is not a regular file")
        os.set_blocking(fh.fileno(), True)
        if info.st_size > max_bytes:
            raise InvalidInput(
                f"{path.name} is {info.st_size:,} bytes, over the import cap of {max_bytes:,} "
                "(raise it with --max-bytes)"
            )
        seen = 0
        for number in range(1, 2**62):
            raw = fh.readline(MAX_LINE_BYTES + 1)
            if not raw:
                break
            seen += len(raw)
            where = f"{path.name}:{number}"
            if seen > max_bytes:  # the file grew while being read
                raise InvalidInput(f"{path.name} grew past the import cap of {max_bytes:,} bytes while being read")
            if len(raw) > MAX_LINE_BYTES:
                raise InvalidInput(f"{where}: a line is longer than {MAX_LINE_BYTES:,} bytes")
            if not raw.strip():
                continue
            record = _parse(raw, where)
            if number == 1:
                check_header(record, kind, where)
                continue
            yield Line(where, record)
        else:  # pragma: no cover - 2**62 lines cannot fit under the cap
            raise InvalidInput(f"{path.name} has too many lines")
        if seen == 0:
            raise InvalidInput(f"{path.name} is empty: an export file starts with its header line")


def _parse(raw: bytes, where: str) -> dict[str, Any]:
    try:
        value = json.loads(raw.decode("utf-8"), object_pairs_hook=_no_duplicate_keys, parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError) as exc:
        raise InvalidInput(f"{where}: not a JSON line ({str(exc)[:120]})") from None
    if not isinstance(value, dict):
        raise InvalidInput(f"{where}: a record is a JSON object, not {type(value).__name__}")
    return value


def check_header(record: dict[str, Any], kind: str, where: str) -> None:
    if record.get("format") != FORMAT:
        raise InvalidInput(f"{where}: not a threadloom export (the first line must name format {FORMAT!r})")
    version = record.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise InvalidInput(f"{where}: the header's version must be a positive integer")
    if version > VERSION:
        raise InvalidInput(
            f"{where}: format version {version} is newer than this threadloom ({__version__}) reads ({VERSION}); "
            "upgrade threadloom"
        )
    if record.get("kind") != kind:
        raise InvalidInput(f"{where}: the header names kind {record.get('kind')!r}, the file name {kind!r}")


# Field checks: each returns the value or raises naming where it is.


def text(rec: dict[str, Any], key: str, where: str, limit: int, *, optional: bool = False) -> Any:
    value = rec.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{where}: {key} must be a string")
    if len(value) > limit:
        raise InvalidInput(f"{where}: {key} is {len(value):,} characters, over {limit:,}")
    if "\x00" in value:
        raise InvalidInput(f"{where}: {key} contains a NUL character")
    if not optional and not value.strip():
        raise InvalidInput(f"{where}: {key} is empty")
    return value


def choice(rec: dict[str, Any], key: str, where: str, allowed: tuple[str, ...]) -> str:
    value = rec.get(key)
    if value not in allowed:
        raise InvalidInput(f"{where}: {key} must be one of {', '.join(allowed)}")
    return str(value)


def integer(
    rec: dict[str, Any], key: str, where: str, *, optional: bool = False, low: int = 0, high: int = MAX_EPOCH_MS
) -> Any:
    value = rec.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise InvalidInput(f"{where}: {key} must be an integer from {low} to {high}")
    return value


def number(rec: dict[str, Any], key: str, where: str, low: float, high: float) -> float:
    value = rec.get(key)
    if not isinstance(value, int | float) or isinstance(value, bool) or not low <= value <= high:
        raise InvalidInput(f"{where}: {key} must be a number from {low} to {high}")
    return float(value)


def boolean(rec: dict[str, Any], key: str, where: str) -> bool:
    value = rec.get(key)
    if not isinstance(value, bool):
        raise InvalidInput(f"{where}: {key} must be true or false")
    return value


def strings(rec: dict[str, Any], key: str, where: str, count: int, limit: int) -> list[str]:
    value = rec.get(key)
    if not isinstance(value, list) or len(value) > count:
        raise InvalidInput(f"{where}: {key} must be a list of at most {count} strings")
    return [text({key: v}, key, where, limit) for v in value]


def records(rec: dict[str, Any], key: str, where: str, count: int) -> list[dict[str, Any]]:
    value = rec.get(key)
    if not isinstance(value, list) or len(value) > count or not all(isinstance(v, dict) for v in value):
        raise InvalidInput(f"{where}: {key} must be a list of at most {count:,} objects")
    return value


def checked(check: Callable[[str], str], value: str, where: str) -> str:
    """A model's own check (a core key, a thread id), its error prefixed with where the value was."""
    try:
        return check(value)
    except InvalidInput as exc:
        raise InvalidInput(f"{where}: {exc}") from None
