"""A session's agent pid names a process on one machine: with several machines on one database (a team's
PostgreSQL), a hook links to a session by the pids of its ancestors only among the sessions of its own machine,
so a hook's session-end never ends another machine's session whose agent has the same pid. Both backends."""

from __future__ import annotations

from tests.conftest import Backend
from threadloom.daemon.hook_op import linked_session
from threadloom.sessions import SessionInfo, SessionService
from threadloom.store import jobs


def test_a_hook_links_by_pid_only_to_sessions_of_its_own_machine(backend: Backend) -> None:
    store = backend.open()
    try:
        sessions = SessionService(store)
        for sid in ("here", "elsewhere", "before-machines"):
            sessions.open(SessionInfo(sid, "claude", "stdio", "/repo", "/repo", 4242, user="ana"))
        assert store.read(lambda r: r.scalar("SELECT machine FROM sessions WHERE id = 'here'")) == jobs.node_id()
        store.write(lambda w: w.execute("UPDATE sessions SET machine = '0badf00d' WHERE id = 'elsewhere'"))
        store.write(lambda w: w.execute("UPDATE sessions SET machine = NULL WHERE id = 'before-machines'"))

        def linked() -> str | None:
            row = store.read(lambda r: linked_session(r, "ana", "claude", None, [4242], None))
            return None if row is None else str(row["id"])

        def end(sid: str) -> None:
            store.write(lambda w: w.execute("UPDATE sessions SET ended_at = 1 WHERE id = :id", {"id": sid}))

        assert linked() in ("here", "before-machines")
        end("here")
        assert linked() == "before-machines"  # a row from before machines were recorded: linked as before
        end("before-machines")
        assert linked() is None  # another machine's pid 4242 is not this machine's
    finally:
        store.close()
