"""Distill / vote / export: short insights agents write down ("distil"), other sessions vote on, and those
past the vote threshold exported as JSON lines (`<home>/insights/<user>.jsonl`) for whatever consumes them
(a fine-tuning set, a team digest).

- the same words distilled twice are one insight;
- one vote per session and insight (a second is not counted), and never by the session that distilled it;
- an insight is exported when its net votes (up - down) reach THREADLOOM_LEARN_INSIGHT_VOTES, exactly once:
  the file is rewritten whole with the new lines (a temp file renamed into place), then the rows are marked;
  a crash between the two leaves lines the next export finds in the file and marks without writing again.
Everything is per owner: another user's ids are "not found" and their file is another file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final, Literal

from threadloom.clock import now_ms
from threadloom.errors import InvalidInput, NotFound
from threadloom.identity import check_user
from threadloom.learning.concepts import check_text
from threadloom.learning.curator_audit import normalised
from threadloom.learning.library import owner_folder
from threadloom.scrub import SCRUB, Scrubber
from threadloom.store.base import Reader, Store, Writer
from threadloom.threads.repository import Repository

MAX_INSIGHT: Final = 1_000
MAX_SESSION: Final = 200


class Insights:
    def __init__(self, store: Store, folder: Path, threshold: int = 3, scrubber: Scrubber = SCRUB) -> None:
        self.store = store
        self.folder = folder
        self.threshold = threshold
        self.scrubber = scrubber

    def distill(self, owner: str, text: str, session_id: str) -> dict[str, Any]:
        """Keep a short insight; the same words again are the same insight."""
        owner, session_id = check_user(owner, "the owner"), _session(session_id)
        text = self.scrubber.text(check_text(text, MAX_INSIGHT, "an insight"))
        norm = normalised(text)
        now = now_ms()

        def tx(w: Writer) -> dict[str, Any]:
            row = w.one("SELECT id, text FROM insights WHERE owner = :o AND norm = :n", {"o": owner, "n": norm})
            if row is not None:
                return {"id": int(row["id"]), "text": row["text"], "created": False}
            new_id = w.insert(
                "INSERT INTO insights (owner, text, norm, session_id, created_at) VALUES (:o, :t, :n, :s, :now)",
                {"o": owner, "t": text, "n": norm, "s": session_id, "now": now},
            )
            return {"id": new_id, "text": text, "created": True}

        return self.store.write(tx)

    def vote(self, owner: str, insight_id: int, session_id: str, vote: Literal["up", "down"]) -> dict[str, Any]:
        """One session's vote on one insight (its first counts); exports what crosses the threshold."""
        owner, session_id = check_user(owner, "the owner"), _session(session_id)
        if vote not in ("up", "down"):
            raise InvalidInput(f"a vote is up or down, not {str(vote)[:20]!r}")
        now = now_ms()

        def tx(w: Writer) -> dict[str, Any]:
            params = {"i": insight_id, "o": owner}
            row = w.one("SELECT id, session_id FROM insights WHERE id = :i AND owner = :o", params)
            if row is None:
                raise NotFound(f"no insight {insight_id}")
            if row["session_id"] == session_id:
                raise InvalidInput("a session cannot vote on the insight it distilled")
            counted = w.execute(
                "INSERT INTO insight_votes (insight_id, session_id, vote, at) VALUES (:i, :s, :v, :now) "
                "ON CONFLICT (insight_id, session_id) DO NOTHING",
                {"i": insight_id, "s": session_id, "v": 1 if vote == "up" else -1, "now": now},
            )
            if counted:
                w.execute(f"UPDATE insights SET {vote} = {vote} + 1 WHERE id = :i", {"i": insight_id})
            tally = w.one("SELECT up, down, exported_at FROM insights WHERE id = :i", {"i": insight_id})
            assert tally is not None
            return {"id": insight_id, "counted": bool(counted), "up": tally["up"], "down": tally["down"]}

        out = self.store.write(tx)
        out["exported"] = 0
        if out["up"] - out["down"] >= self.threshold:
            try:
                out["exported"] = self.export(owner)["exported"]
            except InvalidInput as exc:  # the vote stands; the export waits for the next one (or --export)
                out["export_error"] = exc.message
        return out

    def export(self, owner: str) -> dict[str, Any]:
        """Write every insight of `owner` past the threshold and not yet exported to the JSONL file, once."""
        owner = check_user(owner, "the owner")
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        repo, name = Repository(self.folder), owner_folder(owner) + ".jsonl"
        with repo.locked(name + ".lock"):
            due = self.store.read(lambda r: _due(r, owner, self.threshold))
            if not due:
                return {"exported": 0, "path": str(self.folder / name)}
            text = repo.read_text(name) or ""
            in_file = _ids(text)
            lines = [_line(row) for row in due if int(row["id"]) not in in_file]
            if lines:
                repo.write_text(name, text + "".join(lines))
            now = now_ms()
            ids = [int(row["id"]) for row in due]
            self.store.write(lambda w: _mark(w, ids, now))
        return {"exported": len(lines), "path": str(self.folder / name)}

    def listing(self, owner: str, limit: int = 20) -> list[dict[str, Any]]:
        owner = check_user(owner, "the owner")
        return self.store.read(
            lambda r: r.rows(
                "SELECT id, text, up, down, created_at, exported_at FROM insights WHERE owner = :o "
                "ORDER BY (up - down) DESC, id DESC LIMIT :n",
                {"o": owner, "n": max(1, min(limit, 200))},
            )
        )


def _session(session_id: object) -> str:
    if not isinstance(session_id, str) or not session_id.strip() or len(session_id) > MAX_SESSION:
        raise InvalidInput("a vote or an insight needs the session's id")
    return session_id


def _due(r: Reader, owner: str, threshold: int) -> list[Any]:
    return r.rows(
        "SELECT id, text, up, down, created_at FROM insights WHERE owner = :o AND exported_at IS NULL "
        "AND up - down >= :t ORDER BY id",
        {"o": owner, "t": threshold},
    )


def _line(row: Any) -> str:
    record = {"id": row["id"], "text": row["text"], "up": row["up"], "down": row["down"], "at": row["created_at"]}
    return json.dumps(record, ensure_ascii=False) + "\n"


def _ids(text: str) -> set[int]:
    """The ids of the insights the file already holds (a line that is not ours is skipped)."""
    out: set[int] = set()
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("id"), int):
            out.add(record["id"])
    return out


def _mark(w: Writer, ids: list[int], now: int) -> None:
    for i in ids:
        w.execute("UPDATE insights SET exported_at = :now WHERE id = :i AND exported_at IS NULL", {"i": i, "now": now})
