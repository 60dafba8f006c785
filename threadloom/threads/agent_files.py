"""Instruction files for agents that do not read MCP server instructions: AGENTS.md (Codex, Cursor,
Copilot and others), a Cursor rule, and a generic file to paste anywhere. threadloom writes only
inside its managed block, so whatever the user wrote around it stays; writing again is a no-op. The
files are read and written through `Repository`: a link out of the repository is refused, never
followed (AGENTS.md pointing at a private key must not be copied into the working tree).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from threadloom.errors import InvalidInput
from threadloom.guide import INSTRUCTIONS
from threadloom.threads.repository import Repository

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
    """Write the chosen files under `repo`; each reports created, updated or unchanged. Every file is
    read and its new text made before the first is written, so a refusal (a link out of the
    repository, a broken block) leaves them all as they were."""
    unknown = [t for t in targets if t not in TARGETS]
    if unknown:
        raise InvalidInput(f"unknown target {unknown[0]!r}; targets are {', '.join(TARGETS)}")
    files = Repository(repo)
    planned = []
    for target in dict.fromkeys(targets or TARGETS):  # a target named twice is written once
        rel = str(TARGETS[target])
        existing = files.read_text(rel)
        try:
            planned.append((rel, existing, with_block(existing, target)))
        except InvalidInput as exc:
            raise InvalidInput(f"{rel}: {exc.message}") from None
        files.check(rel)
    report = []
    for rel, existing, text in planned:
        if text != existing:
            files.write_text(rel, text, keep_mode=True)
        action = "unchanged" if text == existing else "created" if existing is None else "updated"
        report.append({"path": rel, "action": action})
    return report
