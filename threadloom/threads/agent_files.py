"""Instruction files for agents that do not read MCP server instructions: AGENTS.md (Codex, Cursor,
Copilot and others), a Cursor rule, and a generic file to paste anywhere. threadloom writes only
inside its managed block, so whatever the user wrote around it stays; writing again is a no-op.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Final

from threadloom.errors import InvalidInput
from threadloom.guide import INSTRUCTIONS

BEGIN: Final = "<!-- threadloom:begin (managed by threadloom; edit outside this block) -->"
END: Final = "<!-- threadloom:end -->"
TARGETS: Final = {
    "agents": Path("AGENTS.md"),
    "cursor": Path(".cursor/rules/threadloom.mdc"),
    "generic": Path(".threadloom/instructions.md"),
}
_CURSOR_HEADER: Final = "---\ndescription: threadloom memory and threads\nalwaysApply: true\n---\n"


def block() -> str:
    return f"{BEGIN}\n## threadloom\n\n{INSTRUCTIONS.strip()}\n{END}\n"


def with_block(existing: str | None, target: str) -> str:
    """The file's new text: its managed block replaced, or appended when it has none."""
    if existing is None:
        return (_CURSOR_HEADER if target == "cursor" else "") + block()
    start, end = existing.find(BEGIN), existing.find(END)
    if start >= 0 and end > start:
        return existing[:start] + block() + existing[end + len(END) :].lstrip("\n")
    if start >= 0 or end >= 0:
        raise InvalidInput("the threadloom block in this file is broken (one marker without the other); fix it by hand")
    return existing.rstrip("\n") + ("\n\n" if existing.strip() else "") + block()


def write_instruction_files(repo: Path, targets: list[str]) -> list[dict[str, str]]:
    """Write the chosen files under `repo`; each reports created, updated or unchanged."""
    unknown = [t for t in targets if t not in TARGETS]
    if unknown:
        raise InvalidInput(f"unknown target {unknown[0]!r}; targets are {', '.join(TARGETS)}")
    report = []
    for target in targets or list(TARGETS):
        path = repo / TARGETS[target]
        existing = path.read_text(encoding="utf-8") if path.exists() else None
        text = with_block(existing, target)
        if text == existing:
            report.append({"path": str(TARGETS[target]), "action": "unchanged"})
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
        report.append({"path": str(TARGETS[target]), "action": "created" if existing is None else "updated"})
    return report
