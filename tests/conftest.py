from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import HOMES, new_home, processes_using, stop_everything


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
