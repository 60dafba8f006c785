"""A spawned task's recorded command is scrubbed: a custom spawn command may carry a key; and what the
child prints (stdout and stderr) reaches its log file scrubbed, a private-key block printed a line at a
time included. Secret shapes come from the scrub corpus (tests/data/secrets)."""

from __future__ import annotations

import json
import secrets
import string
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import wait_for
from tests.spawning import FAKE, parent, spawner
from tests.test_scrub_paths import corpus
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


@pytest.mark.parametrize("enabled", [True, False])
def test_what_a_child_prints_reaches_its_log_scrubbed(store: SqliteStore, tmp_path: Path, enabled: bool) -> None:
    cases = [corpus(name) for name in ("aws-secret-env", "pem-rsa", "github-pat-classic", "jwt", "postgres-url")]
    service = spawner(store, tmp_path)
    service.scrubber = Scrubber(enabled)
    prov = parent(store, tmp_path)
    said = [f"{'warn' if n % 2 else 'say'} {json.dumps(text)}" for n, (text, _) in enumerate(cases)]
    task = service.spawn(prov, "\n".join([*said, "usage 1200 0.25"]))
    done = wait_for(lambda: service.status(task["id"])["status"] not in ("starting", "running") or None)
    assert done is True
    log = Path(service.status(task["id"])["log_path"]).read_bytes()
    tail = service.log_tail(task["id"], prov, 200)
    assert b"finished" in log and b"Here is the key:" in log  # the rest of what it printed is kept
    assert service.status(task["id"])["tokens"] == 1200  # the usage report still reads
    for _, secret in cases:
        assert (secret.encode() in log) is not enabled and (secret in tail) is not enabled
    if enabled:
        assert b"[secret:private-key]" in log and b"-----END RSA PRIVATE KEY-----" not in log


def test_a_tasks_role_is_stored_scrubbed(store: SqliteStore, tmp_path: Path) -> None:
    text, secret = corpus("github-pat-classic")
    service = spawner(store, tmp_path)
    task = service.spawn(parent(store, tmp_path), "sleep 0", role=f"reviewer {text}")
    assert secret not in str(service.status(task["id"])["role"])
    journal = store.read(lambda r: r.scalar("SELECT detail FROM events WHERE kind = 'task.spawned'"))
    assert secret not in journal and "[secret:" in journal
    wait_for(lambda: service.status(task["id"])["status"] not in ("starting", "running") or None)
    database = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("threadloom.db"))
    assert secret.encode() not in database and secret.lower().encode() not in database
