"""Lessons: short rules learned in past sessions, kept as rows and rendered into one Markdown file per user
(`<home>/lessons/<user>.md`) for clients without a skills loader. Every entry says who wrote it (a person or
a learning loop), where it came from, and whether it is pinned.

No agent CLI reads this file on its own. Claude Code's CLAUDE.md pulls it in with an `@~/.threadloom/...`
import line (https://code.claude.com/docs/en/memory, "CLAUDE.md imports": relative, absolute and home
paths), Gemini CLI's GEMINI.md with `@/absolute/path` (https://geminicli.com/docs/reference/memport, "Memory
Import Processor": relative and absolute paths only); any MCP client reads lessons with the `skill_list`
and `skill_show` tools.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from threadloom.errors import InvalidInput
from threadloom.store.base import Row
from threadloom.threads.repository import Repository

MAX_LESSON: Final = 2000  # a lesson is a rule of a few lines; a longer text is a skill
HEADER: Final = (
    "# Lessons\n\n"
    "Rules learned in past sessions, kept by threadloom (`threadloom skills list --lessons`). Each entry says "
    "who wrote it: a person, or a learning loop from what it observed.\n"
)


def lesson_id(text: str) -> str:
    """A lesson's id, from its words: the same lesson added twice is one lesson."""
    return "l_" + hashlib.sha256(" ".join(text.casefold().split()).encode()).hexdigest()[:12]


def checked_text(text: object) -> str:
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput("a lesson needs text")
    text = text.strip()
    if len(text) > MAX_LESSON:
        raise InvalidInput(f"a lesson is at most {MAX_LESSON} characters, not {len(text)}: write a skill instead")
    return text


def render(rows: Sequence[Row]) -> str:
    parts = [HEADER]
    for row in rows:
        pinned = " · pinned" if row["pinned"] else ""
        source = " ".join(str(row["source"]).split())
        parts.append(f"\n## {row['name']}\n<!-- origin: {row['origin']} · source: {source}{pinned} -->\n\n")
        parts.append(_as_text(str(row["body"])) + "\n")
    return "".join(parts)


_BLOCK_STARTS: Final = ("#", "<", "-->", "```", "~~~")  # headings, HTML blocks and comments, code fences


def _as_text(body: str) -> str:
    """A lesson's lines, none of which can start a heading, a comment, an HTML block or a code fence, nor
    underline the line before into a heading: an entry cannot pose as the next one, swallow the entries
    after it, nor claim another origin (the store, not this file, decides what is protected)."""
    lines = body.strip().splitlines()
    return "\n".join("\\" + line if _starts_a_block(line) else line for line in lines)


def _starts_a_block(line: str) -> bool:
    bare = line.strip()
    return line.lstrip().startswith(_BLOCK_STARTS) or (bool(bare) and set(bare) in ({"-"}, {"="}))


def write_file(folder: Path, file_name: str, rows: Sequence[Row]) -> Path:
    """Replace the user's lessons file with the rows, whole (a temp file renamed into place)."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    repo = Repository(folder)
    repo.write_text(file_name, render(rows))
    return Path(os.path.join(folder, file_name))
