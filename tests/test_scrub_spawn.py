"""A spawned task's recorded command is scrubbed: a custom spawn command may carry a key."""

from __future__ import annotations

import secrets
import string
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import wait_for
from tests.spawning import FAKE, parent
from threadloom.coordination.spawn import SpawnConfig, SpawnService
from threadloom.scrub import Scrubber
from threadloom.store.sqlite import SqliteStore, open_store

pytestmark = pytest.mark.slow  # a real child process


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    s = open_store(tmp_path / "threadloom.db")
    yield s
    s.close()


@pytest.mark.parametrize("enabled", [True, False])
def test_the_command_a_task_ran_is_stored_scrubbed(store: SqliteStore, tmp_path: Path, enabled: bool) -> None:
    key = "sk-ant-api03-" + "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(60))
    service = SpawnService(store, tmp_path, SpawnConfig(command=f"{FAKE} --api-key {key}", grace_s=1.0))
    service.scrubber = Scrubber(enabled)
    prov = parent(store, tmp_path)
    task = service.spawn(prov, "sleep 0.1")
    done = wait_for(lambda: service.status(task["id"])["status"] not in ("starting", "running") or None)
    assert done is True
    command = str(service.status(task["id"])["command"])
    database = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("threadloom.db"))
    if enabled:
        assert key not in command and "[secret:anthropic-key]" in command
        assert key.encode() not in database
    else:
        assert key in command
