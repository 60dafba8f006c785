"""A parsed transcript message as it is persisted: scrubbed, its project resolved, and its search document."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from threadloom.errors import ThreadloomError
from threadloom.identity import project_root
from threadloom.scrub import Scrubber
from threadloom.search.model import MAX_BODY_CHARS, Document
from threadloom.store.document_batch import Ahead
from threadloom.store.transcripts import DOCUMENT_KIND, StoredMessage
from threadloom.transcripts import Message, ToolUse

_NO_ENV: Mapping[str, str] = {}


class Projects:
    """The repository root of a working directory (identity's rule), remembered per folder: a transcript
    names the same few folders thousands of times. A folder that is gone stands for itself; a relative one
    (`..`, `~`) is not resolved against this process's folder."""

    def __init__(self) -> None:
        self._known: dict[str, str] = {}

    def of(self, cwd: str | None) -> str | None:
        if not cwd or not cwd.startswith("/"):  # a client writes absolute folders: anything else means nothing here
            return None
        found = self._known.get(cwd)
        if found is None:
            try:
                found = str(project_root(_NO_ENV, [], cwd))
            except (ThreadloomError, OSError, ValueError):
                found = cwd
            if len(self._known) < 10_000:
                self._known[cwd] = found
        return found


def _tool(t: ToolUse, scrubber: Scrubber) -> dict[str, object]:
    shown: dict[str, object] = {"name": t.name}
    if t.args:
        shown["args"] = scrubber.text(t.args)
    if t.result is not None:
        shown["result"] = scrubber.text(t.result)
    if t.ok is not None:
        shown["ok"] = t.ok
    return shown


def stored(m: Message, scrubber: Scrubber, project: str | None) -> tuple[StoredMessage, str]:
    """The message as persisted, and its search document's body (built from the tool calls before they are
    encoded, so the write does not decode them again)."""
    tools = [_tool(t, scrubber) for t in m.tools]
    text = scrubber.text(m.text)
    row = StoredMessage(
        source=m.source,
        session_id=m.session_id,
        key=m.key,
        role=m.role,
        text=text,
        tools=json.dumps(tools, ensure_ascii=False, separators=(",", ":")) if tools else "[]",
        at=m.epoch_ms,
        cwd=m.cwd,
        project=project,
        model=m.model,
        format=m.format,
        path=m.path,
        offset=m.offset,
    )
    return row, search_text(text, tools)


def search_text(text: str, tools: list[dict[str, object]]) -> str:
    """The message's text, then one line per tool call."""
    if not tools:
        return text
    lines = []
    for tool in tools:
        line = f"[{tool['name']}] {tool.get('args', '')}".rstrip()
        if "result" in tool:
            line += f" -> {tool['result']}"
        lines.append(line)
    return "\n".join([text, *lines]) if text else "\n".join(lines)


@dataclass(frozen=True, slots=True)
class Prepared:
    """A message ready for its write: the row, whether the client flagged it a revision, and its search
    document's body ("" for none) with what that body alone decides (`Ahead`), all worked out before the
    transaction."""

    row: StoredMessage
    revises: bool
    body: str
    ahead: Ahead | None

    @staticmethod
    def of(m: Message, scrubber: Scrubber, project: str | None) -> Prepared:
        row, body = stored(m, scrubber, project)
        return Prepared.with_body(row, m.revises, body)

    @staticmethod
    def with_body(row: StoredMessage, revises: bool, body: str) -> Prepared:
        body = body[:MAX_BODY_CHARS] if body.strip() else ""
        return Prepared(row, revises, body, Ahead.of("", body) if body else None)


def document(row_id: int, p: Prepared) -> Document | None:
    """The message's search document under its row id; None when it has none."""
    if not p.body:
        return None
    m = p.row
    return Document(
        kind=DOCUMENT_KIND,
        ref=str(row_id),
        body=p.body,
        project=m.project,
        thread=m.session_id,
        source=m.role,
        occurred_at=m.at,
    )
