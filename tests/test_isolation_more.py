"""More of what the isolation matrix (tests/test_isolation_matrix.py) found, each fixed where rows are read.

ana and ben work in one repository; ana holds a claim on a thread.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Backend
from threadloom.errors import InvalidInput
from threadloom.identity import Provenance
from threadloom.search.engine import SearchEngine
from threadloom.sessions import SessionInfo, SessionService
from threadloom.store.sqlite import SqliteStore
from threadloom.threads.hygiene import ThreadHygiene
from threadloom.threads.service import ThreadService


@pytest.fixture
def store(backend: Backend) -> Iterator[SqliteStore]:
    s = backend.open()  # SQLite and PostgreSQL (tests/conftest.py)
    yield s
    s.close()


def session(store: SqliteStore, repo: Path, sid: str, user: str, parent: str | None = None) -> Provenance:
    info = SessionInfo(sid, "claude", "stdio", str(repo), str(repo), 1, parent_id=parent, user=user, author=user)
    SessionService(store).open(info)
    return info.provenance()


def test_naming_another_users_session_as_ones_parent_does_not_release_its_claim(
    store: SqliteStore, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    threads = ThreadService(store, SearchEngine(store))
    hygiene = ThreadHygiene(store, threads)
    ana = session(store, repo, "ana-1", "ana")
    threads.create_project(ana, "Shop")
    threads.create(ana, "Billing")
    hygiene.claim(ana, "billing")
    with pytest.raises(InvalidInput, match="not a session of this user"):  # refused when the session starts
        session(store, repo, "ben-1", "ben", parent="ana-1")
    # and should a row say so anyway (written before that check existed), the claim still holds
    posing = Provenance("ben-1", "claude", str(repo), user="ben")
    store.write(
        lambda w: w.execute(
            "INSERT INTO sessions (id, vendor, transport, project, origin, parent_id, user, started_at, last_seen_at) "
            "VALUES ('ben-1', 'claude', 'stdio', :p, 'foreground', 'ana-1', 'ben', 0, 0)",
            {"p": str(repo)},
        )
    )
    with pytest.raises(InvalidInput, match="not this one or its parent"):
        hygiene.release(posing, "billing")
    assert [c["session_id"] for c in hygiene.claims(ana)] == ["ana-1"]
    child = session(store, repo, "ana-2", "ana", parent="ana-1")
    assert hygiene.release(child, "billing")["released"]
