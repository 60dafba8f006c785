from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import postgres_server
from tests.helpers import HOMES, MODES, RawSession, new_home, processes_using, stop_everything
from tests.sqlite_template import fresh_store
from threadloom.store.base import Store
from threadloom.store.sqlite import open_store

# Hundreds of tests start `python -m threadloom`: with PYTHONDONTWRITEBYTECODE set (this machine's environment
# sets it) each child compiles threadloom from source again; tests/test_daemon.py took 65 s with it, 40-48 s without.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh threadloom home, set as THREADLOOM_HOME; whatever ran in it is stopped afterwards."""
    path = new_home()
    for key in [k for k in os.environ if k.startswith("THREADLOOM_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("THREADLOOM_HOME", str(path))
    monkeypatch.setenv("THREADLOOM_EMBEDDER", "none")
    yield path
    stop_everything(path)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that runs threadloom as a process needs a home: it belongs to the slow tier
    (`pytest -m "not slow"` runs the rest in well under a minute; CI runs both)."""
    for item in items:
        if "home" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(params=sorted(MODES))
def raw(request: pytest.FixtureRequest, home: Path) -> Iterator[RawSession]:
    """An initialized raw JSON-RPC session with the real server, bridged to the daemon or in-process."""
    session = RawSession(home, *MODES[request.param])
    session.initialize()
    yield session
    session.close()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The suite must leave no process behind: a leaked daemon fails the run."""
    leaked = {str(h): processes_using(h) for h in HOMES}
    leaked = {h: pids for h, pids in leaked.items() if pids}
    for h in leaked:
        stop_everything(Path(h))
    if leaked:
        print(f"\nLEAKED PROCESSES after the test run: {leaked}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


# PostgreSQL (tests/postgres_server.py): one cluster a run, a scratch database a test.


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[str]:
    yield from postgres_server.cluster()


@pytest.fixture
def postgres_url(postgres_cluster: str) -> Iterator[str]:
    """A migrated scratch database of its own for one test."""
    yield from postgres_server.scratch_database(postgres_cluster)


class Backend:
    """Opens the store of one backend for a test: SQLite in the test's folder, or its PostgreSQL database."""

    def __init__(self, name: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
        self.name = name
        self._tmp_path = tmp_path
        self._request = request
        self.url: str | None = None

    def open(self, **options: int) -> Store:
        if self.name == "sqlite":
            path = self._tmp_path / "threadloom.db"
            if not path.exists():
                fresh_store(path)  # a copy of one migrated a run, as PostgreSQL's is (tests/sqlite_template.py)
            return open_store(path, **options)
        if self.url is None:
            self.url = self._request.getfixturevalue("postgres_url")
        from threadloom.store.postgres import open_postgres

        return open_postgres(self.url, **options)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.slow)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """Each store-level and service test that takes it runs on both backends (PostgreSQL in the slow tier)."""
    return Backend(str(request.param), tmp_path, request)


@pytest.fixture
def laptop(tmp_path: Path) -> Iterator[Path]:
    """A laptop's home for `serve --remote` tests; the daemon its local bridge started is stopped after."""
    yield tmp_path / "laptop-home"
    stop_everything(tmp_path / "laptop-home")


@pytest.fixture
def team_env() -> dict[str, str]:
    """The environment `team`'s server gets beyond its home's; a module overrides it with its own."""
    return {}


@pytest.fixture
def team(home: Path, tmp_path: Path, team_env: dict[str, str]) -> Iterator[Any]:
    """A running `serve --http --accounts` team server (tests/team_server.py `Team`) with its accounts' tokens."""
    from tests.team_server import make_team, team_server  # it imports this module's neighbours

    tokens = make_team(home)
    with team_server(home, tmp_path, **team_env) as served:
        served.tokens = tokens
        yield served


@pytest.fixture
def oauth_options() -> Callable[[str], tuple[str, ...]]:
    """The server options `issued`'s team server gets beside its issuer and resource URL, given the issuer's URL.
    A module overrides it with its own."""
    return lambda issuer_url: ()


@pytest.fixture
def issued(home: Path, tmp_path: Path, oauth_options: Callable[[str], tuple[str, ...]]) -> Iterator[tuple[Any, Any]]:
    """A team server (tests/team_server.py `Team`, its accounts' tokens set) that takes the access tokens of a local
    OAuth issuer (tests/oauth_issuer.py `Issuer`), and that issuer."""
    from tests.http_server import free_port
    from tests.oauth_issuer import local_issuer
    from tests.team_server import make_team, team_server  # it imports this module's neighbours

    tokens = make_team(home)
    port = free_port()
    with local_issuer(free_port()) as issuer:
        resource = f"http://127.0.0.1:{port}/mcp"
        args = ("--oauth-issuer", issuer.url, "--resource-url", resource, *oauth_options(issuer.url))
        with team_server(home, tmp_path, *args, port=port) as team:
            team.tokens = tokens
            yield team, issuer
