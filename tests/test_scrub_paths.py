"""Write paths into the store that take text the services did not scrub on the way in: each persists it
scrubbed. Secret shapes come from the scrub corpus (tests/data/secrets); every store is a real SQLite
file whose bytes (with its write-ahead log) are searched for the secret, the lower-cased form the
full-text index keeps included."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.helpers import serve_params, structured
from threadloom.coordination.supervision import HOLD_MAX, _copy_scrubbed, _cut
from threadloom.errors import InvalidInput
from threadloom.identity import Provenance
from threadloom.memory.core import CoreMemory
from threadloom.memory.service import MemoryService
from threadloom.scrub import Scrubber
from threadloom.search.engine import SearchEngine
from threadloom.search.model import Filters
from threadloom.store.sqlite import SqliteStore, open_store
from threadloom.threads.service import ThreadService

CORPUS = Path(__file__).parent / "data" / "secrets" / "secrets.jsonl"
SHAPES = {c["name"]: c for c in map(json.loads, CORPUS.read_text(encoding="utf-8").splitlines())}


def corpus(name: str) -> tuple[str, str]:
    """A corpus case's text and its (first) secret."""
    case: dict[str, Any] = SHAPES[name]
    return case["text"], case["secrets"][0]


def store_bytes(store: SqliteStore) -> bytes:
    path = store.path
    return b"".join(p.read_bytes() for p in path.parent.iterdir() if p.name.startswith(path.name))


def on_disk(store: SqliteStore, secret: str) -> bool:
    data = store_bytes(store)
    return secret.encode() in data or secret.lower().encode() in data


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    for args in (["init", "-q", "-b", "main"], ["config", "user.email", "a@example.com"], ["config", "user.name", "A"]):
        subprocess.run(["git", "-C", str(path), *args], check=True)
    return path


@pytest.mark.parametrize("enabled", [True, False])
def test_a_secret_typed_into_a_thread_file_reaches_the_index_scrubbed(
    tmp_path: Path, repo: Path, enabled: bool
) -> None:
    store = open_store(tmp_path / "threadloom.db")
    engine = SearchEngine(store)
    threads = ThreadService(store, engine)
    threads.scrubber = Scrubber(enabled)
    prov = Provenance(session_id="s1", vendor="claude", project=str(repo), user="ana")
    threads.create_project(prov, "Shop")
    threads.update_summary(prov, "## State\n- api v1")
    text, secret = corpus("aws-secret-env")
    key_text, key = corpus("pem-rsa")
    thread_file = repo / ".threadloom/threads/shop/main.md"
    hand_typed = f"\n## Setup\n- {text}\n- the deploy key:\n{key_text}\n"
    thread_file.write_text(thread_file.read_text() + hand_typed)  # by hand, past every service

    threads.update_summary(prov, "- api v2", section="State")  # a service write indexes the whole thread

    assert secret in thread_file.read_text() and key in thread_file.read_text()  # the user's file
    found = engine.search("AWS_SECRET_ACCESS_KEY api", Filters(kinds=("thread",))).hits
    assert [h.ref for h in found] == ["shop/main"]  # indexed, with the hand-typed section
    if enabled:
        assert not engine.search(secret, Filters(kinds=("thread",))).hits
        assert not on_disk(store, secret) and not on_disk(store, key)
        body = store.read(lambda r: r.scalar("SELECT body FROM documents WHERE kind = 'thread'"))
        assert "[secret:" in body and "api v2" in body
    else:
        assert on_disk(store, secret)  # the check above can fail: off, the index keeps it verbatim
    store.close()


@pytest.mark.anyio
async def test_an_error_that_quotes_an_argument_is_journaled_scrubbed(home: Path, tmp_path: Path) -> None:
    """The server journals each failed call's error; errors quote what was wrong with an argument."""
    _, key_id = corpus("aws-access-key-id")
    _, pat = corpus("github-pat-classic")
    params = serve_params(home, "--in-process", THREADLOOM_SESSION_ID="s-err", THREADLOOM_TOOLSET="full")
    async with Client(params, mode="legacy") as client:
        pinned = await client.call_tool("memory_pin", {"memory_id": key_id, "pinned": True})
        sent = await client.call_tool("signal_send", {"to": pat, "text": "hello"})
    assert pinned.is_error and key_id in str(structured(pinned)["error"])  # the error did quote it
    assert sent.is_error and pat in str(structured(sent)["error"])
    database = b"".join(p.read_bytes() for p in home.iterdir() if p.name.startswith("threadloom.db"))
    assert b"memory_pin" in database and b"[secret:aws-access-key-id]" in database
    for secret in (key_id, pat):
        assert secret.encode() not in database and secret.lower().encode() not in database


def test_core_preferences_are_stored_scrubbed_and_a_credential_is_no_core_key(tmp_path: Path) -> None:
    store = open_store(tmp_path / "threadloom.db")
    core = CoreMemory(store, MemoryService(store, SearchEngine(store)))
    prov = Provenance(session_id="s1", vendor="claude", project="/repo/shop", user="ana")
    text, secret = corpus("npm-token")
    prefs = core.set_preferences(prov, auto=["preference", text], approval=[], excluded=[])
    assert secret not in json.dumps(prefs) and "preference" in prefs["auto"]
    assert not on_disk(store, secret)  # neither the preferences' row nor the journal's event
    _, key_id = corpus("aws-access-key-id")
    with pytest.raises(InvalidInput, match="looks like a credential"):
        core.set_core(key_id, "the build runs with make", prov)
    assert not on_disk(store, key_id)
    store.close()


def test_a_threads_watched_paths_are_written_scrubbed(tmp_path: Path, repo: Path) -> None:
    store = open_store(tmp_path / "threadloom.db")
    threads = ThreadService(store, SearchEngine(store))
    prov = Provenance(session_id="s1", vendor="claude", project=str(repo), user="ana")
    threads.create_project(prov, "Shop")
    _, key_id = corpus("aws-access-key-id")
    threads.update_summary(prov, "- watch the api", section="State", paths=["src/api", f"keys/{key_id}"])
    thread_file = (repo / ".threadloom/threads/shop/main.md").read_text()
    assert key_id not in thread_file and "src/api" in thread_file and "[secret:aws-access-key-id]" in thread_file
    assert not on_disk(store, key_id)
    store.close()


def test_the_supervisors_copy_scrubs_across_writes_and_keeps_other_bytes(tmp_path: Path) -> None:
    """The pipe a spawned child writes to, copied to its log (coordination/supervision.py): a key block
    arriving a few bytes at a time, a line longer than what is held back, and bytes that are not UTF-8."""
    key_text, key = corpus("pem-rsa")
    text, secret = corpus("stripe-secret-key")
    long_line = b"y" * (HOLD_MAX + 10) + b" " + b"z" * 100  # no line end: flushed once past HOLD_MAX
    read_end, write_end = os.pipe()
    log = tmp_path / "task.log"
    with open(log, "wb") as sink:
        copier = threading.Thread(target=_copy_scrubbed, args=(read_end, sink.fileno()))
        copier.start()
        data = key_text.encode() + b"\n" + text.encode() + b"\nraw \xff\xfe bytes\n"
        for at in range(0, len(data), 7):  # a few bytes per write, as a slow child prints
            os.write(write_end, data[at : at + 7])
            time.sleep(0.001)  # so that the copy sees them a few at a time
        os.write(write_end, long_line)
        os.close(write_end)
        copier.join(30)
    out = log.read_bytes()
    assert not copier.is_alive()
    assert key.encode() not in out and secret.encode() not in out
    assert b"[secret:private-key]" in out and b"[secret:stripe-key]" in out
    assert b"raw \xff\xfe bytes\n" in out and out.endswith(long_line)
    begun = b"the key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n"
    assert _cut(begun) == len(b"the key:\n")  # held from the block's first line until its end comes
    assert _cut(begun + b"-----END RSA PRIVATE KEY-----\nmore") == len(begun) + 30
