"""dialog_read: a session's messages around one message, or from its start, a page at a time.

A page ends with cursors (`<message id>:before` / `<message id>:after`) that continue it either way;
an id that is not the caller's reads exactly like one that does not exist.
"""

from __future__ import annotations

from typing import Any

from threadloom.dialog.model import MAX_PAGE, NO_SESSION, NOT_FOUND, READ_CHARS, turn
from threadloom.errors import InvalidInput, NotFound
from threadloom.identity import Provenance
from threadloom.store import dialog
from threadloom.store.base import Reader, Row, Store
from threadloom.transcripts import sources

DIRECTIONS = ("before", "after")


def parse_cursor(cursor: str) -> tuple[int, str]:
    head, _, direction = cursor.strip().partition(":")
    if direction not in DIRECTIONS or not head.isdigit() or len(head) > 18:
        raise InvalidInput("cursor is '<message id>:before' or '<message id>:after', as a page's more_* gives it")
    return int(head), direction


class DialogReader:
    def __init__(self, store: Store) -> None:
        self._store = store

    def read(
        self,
        prov: Provenance,
        message: int | None = None,
        session: str | None = None,
        before: int = 3,
        after: int = 3,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        """With `cursor`: the next `after` (or previous `before`) messages. With `message`: `before` messages,
        it, and `after` more. With `session`: its first `after` + 1 messages."""
        for name, value in (("before", before), ("after", after)):
            if not 0 <= value <= MAX_PAGE:
                raise InvalidInput(f"{name} must be between 0 and {MAX_PAGE}")
        given = [x for x in (message, session, cursor) if x is not None]
        if len(given) != 1:
            raise InvalidInput("give one of message (an id), session, or cursor")
        owner = prov.viewer().user
        return self._store.read(lambda r: self._page(r, owner, message, session, before, after, cursor))

    def _page(
        self,
        r: Reader,
        owner: str,
        message: int | None,
        session: str | None,
        before: int,
        after: int,
        cursor: str | None,
    ) -> dict[str, Any]:
        direction = None
        if cursor is not None:
            message, direction = parse_cursor(cursor)
        if session is not None:
            known = sorted({s.name for s in sources()} | set(dialog.sources(r, owner)))
            anchor = dialog.session_start(r, owner, session, known)
            if anchor is None:
                raise NotFound(NO_SESSION.format(session[:100]))
            before = 0
        else:
            assert message is not None
            anchor = dialog.messages(r, owner, [message]).get(message)
            if anchor is None:
                raise NotFound(NOT_FOUND.format(message))
        args = (owner, anchor["source"], anchor["session_id"], anchor["at"], int(anchor["id"]))
        earlier = dialog.before(r, *args, before + 1) if direction != "after" else []
        later = dialog.after(r, *args, after + 1) if direction != "before" else []
        more_before, more_after = len(earlier) > before, len(later) > after
        earlier, later = earlier[len(earlier) - before :] if before else [], later[:after]
        shown: list[Row] = [*earlier, *([anchor] if direction is None else []), *later]
        out: dict[str, Any] = {
            "session": anchor["session_id"],
            "vendor": anchor["source"],
            "project": anchor["project"],
            "messages": [turn(row, READ_CHARS) for row in shown],
            "total": dialog.session_count(r, owner, anchor["source"], anchor["session_id"]),
        }
        erased = dialog.session_erased(r, owner, anchor["source"], anchor["session_id"])
        if erased:
            out["caveats"] = [f"{erased} turn(s) of this session were erased (forget) and are left out"]
        if direction == "before":
            more_after, more_before = True, more_before
        elif direction == "after":
            more_before = True
        first, last = (shown[0], shown[-1]) if shown else (anchor, anchor)
        out["more_before"] = f"{first['id']}:before" if more_before else None
        out["more_after"] = f"{last['id']}:after" if more_after else None
        return out
