"""Where a new session starts, over a real store and a real git repository: the user's last thread,
their sessions in the same working directory first; a feature branch's own thread before that; and
`resume`, what the brief shows, saying which and why."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Backend
from threadloom.identity import Provenance
from threadloom.search.engine import SearchEngine
from threadloom.sessions import SessionInfo, SessionService
from threadloom.store.sqlite import SqliteStore
from threadloom.threads.service import ThreadService


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    return path


@pytest.fixture
def store(backend: Backend) -> Iterator[SqliteStore]:
    s = backend.open()  # SQLite and PostgreSQL (tests/conftest.py)
    yield s
    s.close()


def opened(store: SqliteStore, repo: Path, sid: str, cwd: Path, user: str = "ana") -> Provenance:
    """A recorded session of `user`, started in `cwd`."""
    info = SessionInfo(id=sid, vendor="claude", transport="stdio", project=str(repo), cwd=str(cwd), pid=1, user=user)
    SessionService(store).open(info)
    return info.provenance()


def test_a_new_session_resumes_the_thread_of_its_working_directory_before_a_more_recent_one(
    repo: Path, store: SqliteStore
) -> None:
    threads = ThreadService(store, SearchEngine(store))
    api, web = repo / "api", repo / "web"
    api.mkdir()
    web.mkdir()
    first = opened(store, repo, "ana-api", api)
    threads.create_project(first, "Shop")
    threads.create(first, "Rate limits")
    second = opened(store, repo, "ana-web", web)
    threads.create(second, "Dark mode", parent="main")  # the most recent
    theirs = opened(store, repo, "ben-api", api, user="ben")
    threads.create(theirs, "Ben's spike", parent="main")  # more recent still, and in api: not ana's

    in_api = threads.resume(opened(store, repo, "ana-api-2", api))
    elsewhere = threads.resume(opened(store, repo, "ana-root", repo))
    ben_new = threads.resume(opened(store, repo, "ben-web", web, user="ben"))
    nobody = threads.resume(opened(store, repo, "cy-1", api, user="cy"))

    assert in_api | {"last_active": None} == {
        "project": "shop",
        "thread": "rate-limits",
        "title": "Rate limits",
        "why": "resumed",
        "last_active": None,
        "note": in_api["note"],
    }
    assert in_api["last_active"].endswith("+00:00")
    assert in_api["note"].startswith("resumed thread rate-limits, last active 20")
    assert in_api["note"].endswith(" by you")
    assert elsewhere["thread"] == "dark-mode"  # no session of ana's here: her most recent
    assert ben_new["thread"] == "ben-s-spike"
    assert nobody["thread"] == "main" and nobody["why"] == "root" and nobody["last_active"] is None
    assert threads.context(opened(store, repo, "ana-api-3", api)).text.startswith("_resumed thread rate-limits")


def test_reading_where_a_session_is_writes_no_cursor_and_its_first_write_takes_the_thread(
    repo: Path, store: SqliteStore
) -> None:
    threads = ThreadService(store, SearchEngine(store))
    ana = opened(store, repo, "ana-1", repo)
    threads.create_project(ana, "Shop")
    threads.create(ana, "Checkout")
    later = opened(store, repo, "ana-2", repo)
    threads.context(later)
    threads.outline(later)
    assert store.read(lambda r: r.scalar("SELECT count(*) FROM thread_cursors WHERE session_id = 'ana-2'")) == 0
    threads.update_summary(later, "- cart done", "State")
    row = store.read(lambda r: r.one("SELECT project, thread FROM thread_cursors WHERE session_id = 'ana-2'"))
    assert row is not None and (row["project"], row["thread"]) == ("shop", "checkout")
    assert threads.resume(later)["why"] == "session"
