"""Where each session is in a repository (`thread_cursors`): its project and active thread. Machine-
local state, so it lives in the store, not in the repository's files."""

from __future__ import annotations

from pathlib import Path

from threadloom.clock import now_ms
from threadloom.identity import Provenance
from threadloom.store.base import Store


def cursor(store: Store, prov: Provenance, repo: Path) -> tuple[str | None, str | None]:
    """The session's project and thread in `repo`; (None, None) before it chose any."""
    row = store.read(
        lambda r: r.one(
            "SELECT project, thread FROM thread_cursors WHERE session_id = :s AND repo = :r",
            {"s": prov.session_id or "", "r": str(repo)},
        )
    )
    return (row["project"], row["thread"]) if row else (None, None)


def set_cursor(store: Store, prov: Provenance, repo: Path, project: str, thread: str | None) -> None:
    store.write(
        lambda w: w.execute(
            "INSERT INTO thread_cursors (session_id, repo, project, thread, updated_at) "
            "VALUES (:s, :r, :p, :t, :now) ON CONFLICT (session_id, repo) DO UPDATE SET "
            "project = :p, thread = :t, updated_at = :now",
            {"s": prov.session_id or "", "r": str(repo), "p": project, "t": thread, "now": now_ms()},
        )
    )
