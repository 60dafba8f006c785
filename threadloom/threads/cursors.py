"""Where each session is in a repository (`thread_cursors`): its project and active thread. Machine-
local state, so it lives in the store, not in the repository's files."""

from __future__ import annotations

from pathlib import Path

from threadloom.clock import now_ms
from threadloom.identity import Provenance
from threadloom.store.base import Store, Writer


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
    store.write(lambda w: write_cursor(w, prov, repo, project, thread))


def write_cursor(w: Writer, prov: Provenance, repo: Path, project: str, thread: str | None) -> None:
    """`set_cursor` inside the caller's transaction (a new thread's: with its index entry, see Changes.create)."""
    w.execute(
        "INSERT INTO thread_cursors (session_id, repo, project, thread, updated_at) "
        "VALUES (:s, :r, :p, :t, :now) ON CONFLICT (session_id, repo) DO UPDATE SET "
        "project = :p, thread = :t, updated_at = :now",
        {"s": prov.session_id or "", "r": str(repo), "p": project, "t": thread, "now": now_ms()},
    )


def cwd_of(store: Store, prov: Provenance) -> str | None:
    """The working directory the session was started in (None before it is recorded)."""
    found = store.read(lambda r: r.scalar("SELECT cwd FROM sessions WHERE id = :s", {"s": prov.session_id or ""}))
    return str(found) if found else None


def recent_of_user(
    store: Store, prov: Provenance, repo: Path, project: str | None = None, limit: int = 20
) -> list[tuple[str, str | None, int]]:
    """The projects and threads this user's other sessions were last on in `repo` (of `project` and
    on a thread, when given): those started in this session's working directory first, then the
    most recent. Only sessions recorded as this user's count, so another user's never does."""
    if not prov.user:
        return []
    where = "AND c.project = :p AND c.thread IS NOT NULL" if project else "AND c.project IS NOT NULL"
    cwd = cwd_of(store, prov) or ""
    rows = store.read(
        lambda r: r.tuples(
            "SELECT c.project, c.thread, c.updated_at FROM thread_cursors c JOIN sessions s ON s.id = c.session_id "
            f"WHERE c.repo = :r AND c.session_id != :me AND s.user = :u {where} "
            "ORDER BY CASE WHEN s.cwd = :cwd THEN 0 ELSE 1 END, c.updated_at DESC LIMIT :n",
            {
                "r": str(repo),
                "me": prov.session_id or "",
                "u": prov.user,
                "p": project,
                "cwd": cwd,
                "n": limit,
            },
        )
    )
    return [(str(p), t if t is None else str(t), int(at)) for p, t, at in rows]
