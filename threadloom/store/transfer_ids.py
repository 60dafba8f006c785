"""Integer ids of a store moved into a team database that already holds another's (store/transfer.py).

Text ids (memories, edges' ends, sessions, claims, tasks) are kept as they are. Each table keyed by an integer
id (documents, events, signals, notes, transcript messages, ...) is shifted past what the target held when
this source first began to move in: `offset` per table, recorded in `job_cursors` (`migrate.offset:<source>:
<table>`) so a resumed or repeated run puts every row on the same id again. The first store moved into an
empty database has offsets of 0: its ids are kept exactly. Every column that holds such an id moves with it:
the foreign keys SQLite declares, and the references below that it does not.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Final

from threadloom.store.base import Reader

OFFSET: Final = "migrate.offset:"

# (table, column) -> the identity table its integer id points into (undeclared references).
IMPLIED: Final = {
    ("signals", "reply_to"): "signals",
    ("thread_notes", "superseded_by"): "thread_notes",
    ("learning_trash", "snapshot_id"): "learning_snapshots",
    ("user_claim_tiers", "evidence_id"): "user_evidence",
    ("session_cursors", "event_id"): "events",
    ("learning_candidates", "cluster"): "learning_candidates",
}
# A text column holding an integer id, the table depending on another column's value.
TEXT_REFS: Final = {
    ("documents", "ref"): (
        "kind",
        {"note": "thread_notes", "quote": "thread_notes", "transcript": "transcript_messages"},
    ),
    ("learning_candidates", "source_ref"): ("source", {"note": "thread_notes", "message": "transcript_messages"}),
    ("consolidation_merges", "survivor"): ("kind", {"note": "thread_notes", "quote": "thread_notes"}),
    ("consolidation_merges", "merged"): ("kind", {"note": "thread_notes", "quote": "thread_notes"}),
}
# The journal's details that quote an integer id (every `record_event` whose detail names one; memories,
# claims, tasks and threads have text ids, kept): event kind -> {detail key: the table it points into}.
EVENT_IDS: Final = {
    "thread.note": {"id": "thread_notes"},
    "thread.quote": {"id": "thread_notes"},
    "thread.note_merged": {"survivor": "thread_notes", "merged": "thread_notes"},
    "thread.quote_merged": {"survivor": "thread_notes", "merged": "thread_notes"},
}
SIGNAL_EVENTS: Final = "signal."  # signal.<kind>: {"id": <signal>}
# `brief.sent` lists what a session was sent as `<kind>:<id>` keys (brief/model.py); these kinds' ids are integers.
BRIEF_KEYS: Final = {"signal": "signals", "note": "thread_notes", "quote": "thread_notes",
                     "transcript": "transcript_messages"}  # fmt: skip


def identity_tables(r: Reader) -> list[str]:
    """The source's tables keyed by an integer `id` alone (SQLite's rowid alias; PostgreSQL's identity)."""
    found = []
    for (name,) in r.tuples("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"):
        info = r.rows(f'PRAGMA table_info("{name}")')
        key = [c for c in info if int(c["pk"])]
        if len(key) == 1 and key[0]["name"] == "id" and str(key[0]["type"]).upper() == "INTEGER":
            found.append(str(name))
    return found


def declared(r: Reader, table: str) -> dict[str, tuple[str, str]]:
    """Columns of `table` that SQLite declares as references: column -> (parent table, its column)."""
    fks = r.rows(f'PRAGMA foreign_key_list("{table}")')
    return {str(fk["from"]): (str(fk["table"]), str(fk["to"] or "id")) for fk in fks if fk["table"] != table}


def shifter(
    table: str, columns: Sequence[str], refs: dict[str, str], offsets: dict[str, int]
) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    """A row of `table` with every integer id it holds moved by its table's offset."""
    at = {c: i for i, c in enumerate(columns)}
    moves = [(at[c], offsets.get(t, 0)) for c, t in refs.items() if c in at]
    moves += [(at[c], offsets.get(t, 0)) for (tb, c), t in IMPLIED.items() if tb == table and c in at]
    if "id" in at and table in offsets:
        moves.append((at["id"], offsets[table]))
    moves = [(i, o) for i, o in moves if o]
    texts = [(at[c], at[by], {k: offsets.get(t, 0) for k, t in targets.items()})
             for (tb, c), (by, targets) in TEXT_REFS.items() if tb == table and c in at and by in at]  # fmt: skip

    details = (at["kind"], at["detail"]) if table == "events" and {"kind", "detail"} <= at.keys() else None

    def shift(row: tuple[Any, ...]) -> tuple[Any, ...]:
        values = list(row)
        if details is not None:
            kind, detail = details
            values[detail] = event_detail(str(values[kind]), values[detail], offsets)
        for i, offset in moves:
            if values[i] is not None:
                values[i] = int(values[i]) + offset
        for i, by, by_value in texts:
            offset = by_value.get(values[by], 0)
            if offset and values[i] is not None and str(values[i]).isdigit():
                values[i] = str(int(values[i]) + offset)
        return tuple(values)

    return shift


def event_detail(kind: str, detail: Any, offsets: dict[str, int]) -> Any:
    """An event's detail with the integer ids it quotes moved by their tables' offsets; unchanged text when it
    quotes none (or is not a JSON object)."""
    keys = {"id": "signals"} if kind.startswith(SIGNAL_EVENTS) else EVENT_IDS.get(kind, {})
    if not (keys or kind == "brief.sent") or not isinstance(detail, str):
        return detail
    try:
        found = json.loads(detail)
    except ValueError:
        return detail
    if not isinstance(found, dict):
        return detail
    changed = False
    for key, table in keys.items():
        value, offset = found.get(key), offsets.get(table, 0)
        if offset and isinstance(value, int) and not isinstance(value, bool):
            found[key], changed = value + offset, True
    sent = found.get("keys") if kind == "brief.sent" else None
    if isinstance(sent, list):
        moved = [_brief_key(k, offsets) for k in sent]
        if moved != sent:
            found["keys"], changed = sorted(moved), True
    return json.dumps(found, separators=(",", ":"), sort_keys=True) if changed else detail


def _brief_key(key: Any, offsets: dict[str, int]) -> Any:
    if not isinstance(key, str) or ":" not in key:
        return key
    kind, _, ident = key.partition(":")
    offset = offsets.get(BRIEF_KEYS.get(kind, ""), 0)
    return f"{kind}:{int(ident) + offset}" if offset and ident.isdigit() else key
