"""The one driver for line-per-record transcripts: identity check, complete lines, JSON, then the
adapter's decoder per record. Damage is counted and reported, never raised."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from threadloom.transcripts.model import Cursor, Message, ParseResult, Problem
from threadloom.transcripts.reader import BUDGET, MAX_LINE, LineReader, open_checked

MAX_PROBLEMS = 20  # reported per call; every occurrence is still counted in `skipped`
DECODER = json.JSONDecoder()
# JSON may escape half a UTF-16 pair ("\\ud83d" alone: a tool cut an emoji in two); json.loads gives a str
# holding a lone surrogate, which no UTF-8 encoder (SQLite's included) accepts.
SURROGATE = re.compile("[\ud800-\udfff]")
ESCAPED_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")
LONE_SURROGATE = "a lone UTF-16 surrogate escaped in the JSON replaced with U+FFFD"


def load(text: str) -> Any:
    """`json.loads`, at half its cost for the usual line: raw_decode skips the wrapper's whitespace
    handling, and only a line it refuses goes through `json.loads` (for leading spaces, or the error)."""
    try:
        value, end = DECODER.raw_decode(text)
        if end == len(text) or not text[end:].strip():
            return value
    except ValueError:
        pass
    return json.loads(text)


def without_surrogates(value: Any) -> tuple[Any, bool]:
    """`value` (parsed JSON) with every lone surrogate in its strings, keys included, replaced by U+FFFD;
    and whether there was one. Call it only when the raw text holds an escaped one (`ESCAPED_SURROGATE`)."""
    if isinstance(value, str):
        cleaned = SURROGATE.sub("\ufffd", value)
        return cleaned, cleaned != value
    if isinstance(value, list):
        pairs = [without_surrogates(v) for v in value]
        return [v for v, _ in pairs], any(c for _, c in pairs)
    if isinstance(value, dict):
        out, changed = {}, False
        for k, v in value.items():
            (key, key_changed), (item, item_changed) = without_surrogates(k), without_surrogates(v)
            out[key] = item
            changed = changed or key_changed or item_changed
        return out, changed
    return value, False


@dataclass(slots=True)
class Record:
    """One parsed line and where it came from; `state` is the file's adapter state, mutable."""

    path: str
    offset: int
    line: bytes
    state: dict[str, Any]

    def line_key(self) -> str:
        """A key for a record with no native id: the raw line's hash (a timestamped record is unique)."""
        return "L" + hashlib.sha256(self.line).hexdigest()[:32]


# What a decoder makes of one record: its messages, or why it was skipped ("bookkeeping", "mirror"; a
# reason starting with "unknown" is a shape the adapter does not know, and is reported).
Decoded = list[Message] | str
Decoder = Callable[[Any, Record], Decoded]


def parse_jsonl(
    path: Path,
    cursor: Cursor | None,
    decode: Decoder,
    *,
    initial_state: Callable[[Path], dict[str, Any]] = lambda _: {},
    budget: int = BUDGET,
    max_line: int = MAX_LINE,
) -> ParseResult:
    opened = open_checked(path, cursor)
    if isinstance(opened, Problem):
        return ParseResult([], None, [opened])
    problems: list[Problem] = [opened.restarted] if opened.restarted else []
    state: dict[str, Any] = dict(opened.cursor.state) if opened.cursor.offset else initial_state(path)
    reader = LineReader(opened.file, opened.cursor.offset, opened.cursor.skipping, max_line)
    messages: list[Message] = []
    skipped: Counter[str] = Counter()
    records = 0
    name = str(path)

    def report(problem: Problem) -> None:
        if len(problems) < MAX_PROBLEMS:
            problems.append(problem)

    with opened.file:
        try:
            for offset, line in reader.lines(budget):
                records += 1
                try:
                    text = line.decode("utf-8")
                except UnicodeDecodeError:
                    text = line.decode("utf-8", "replace")
                    report(Problem(name, "invalid_utf8", offset, "invalid UTF-8 replaced with U+FFFD"))
                try:
                    value = load(text)
                    if ESCAPED_SURROGATE.search(line):
                        value, changed = without_surrogates(value)
                        if changed:
                            report(Problem(name, "invalid_utf8", offset, LONE_SURROGATE))
                except (ValueError, RecursionError) as exc:  # RecursionError: nesting deeper than Python's stack
                    skipped["invalid_json"] += 1
                    report(Problem(name, "invalid_json", offset, str(exc)[:120]))
                    continue
                try:
                    decoded = decode(value, Record(name, offset, line, state))
                except (KeyError, TypeError, ValueError, AttributeError, RecursionError) as exc:
                    # A known record type with fields of unexpected types: a shape we do not know.
                    skipped["unknown_shape"] += 1
                    report(Problem(name, "unknown_shape", offset, f"{type(exc).__name__}: {exc}"[:120]))
                    continue
                if isinstance(decoded, str):
                    skipped[decoded] += 1
                    if decoded.startswith("unknown"):
                        report(Problem(name, decoded, offset))
                else:
                    messages.extend(decoded)
        except OSError as exc:
            report(Problem(name, "unreadable", reader.position, exc.strerror or str(exc)))
    if reader.tail:
        detail = f"{reader.tail} bytes after the last complete record: read once their line is complete"
        report(Problem(name, "incomplete_tail", reader.position, detail))
    for offset in reader.oversize:
        skipped["line_too_long"] += 1
        report(Problem(name, "line_too_long", offset, f"a record over {max_line} bytes was skipped"))
    new_cursor = opened.cursor.advanced(offset=reader.position, skipping=reader.skipping, state=state)
    return ParseResult(messages, new_cursor, problems, records, dict(skipped), more=not reader.at_eof)


def remember(state: dict[str, Any], slot: str, key: str, value: Any, limit: int = 64) -> None:
    """Keep `key -> value` in a bounded, insertion-ordered map inside the cursor state."""
    table: dict[str, Any] = state.setdefault(slot, {})
    table.pop(key, None)
    table[key] = value
    while len(table) > limit:
        del table[next(iter(table))]
