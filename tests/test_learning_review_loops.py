"""The evolve job's other instances and its single-flight: auto-review of a finished thread with enough notes,
the shadow review's threshold of recent dialog, and two processes racing one loop (one pass, one child)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.spawning import FAKE
from tests.test_learning_extract import seed
from tests.test_learning_review import call, finished
from threadloom.config import Settings
from threadloom.coordination.spawn import SpawnConfig
from threadloom.errors import InvalidInput
from threadloom.learning.candidates import Candidates
from threadloom.learning.evolve import EvolveJob
from threadloom.learning.harvest import Extractor
from threadloom.learning.library import Library
from threadloom.learning.reviewer import (
    AUTO_REVIEW,
    MIN_NOTES,
    REVIEW,
    candidates,
    closed_threads,
    configured,
    decide,
    recent_dialog,
)
from threadloom.runtime import Runtime, open_runtime
from threadloom.sessions import SessionInfo

pytestmark = pytest.mark.slow


@pytest.fixture
def runtime(home: Path) -> Iterator[Runtime]:
    rt = open_runtime(Settings(home=home, embedder="none", ingest=False, user="ana"), "cli")
    yield rt
    rt.close()


def finished_thread(runtime: Runtime, repo: Path, notes: int) -> str:
    """A thread of ana's in `repo`, with `notes` notes, finished."""
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    info = SessionInfo(id="ana-1", vendor="claude", transport="stdio", project=str(repo), cwd=str(repo), pid=1,
                       user="ana")  # fmt: skip
    runtime.sessions.open(info)
    prov = info.provenance()
    runtime.threads.create_project(prov, f"Shop {repo.name}")
    thread = runtime.threads.create(prov, f"Stripe webhooks {repo.name}")
    for n in range(notes):
        runtime.notes.add_note(prov, f"webhook step {n}: pin the API version", "insight", thread.id)
    runtime.threads.set_status(prov, "done", "shipped", thread.id)
    return thread.id


def test_a_finished_thread_with_enough_notes_is_reviewed_once(home: Path, runtime: Runtime, tmp_path: Path) -> None:
    short = finished_thread(runtime, tmp_path / "a", MIN_NOTES - 1)
    gathered = runtime.store.read(lambda r: closed_threads(r, "ana", 0))
    assert gathered.lines == [] and gathered.cursor > 0  # too few notes: passed over, never offered again
    rich = finished_thread(runtime, tmp_path / "b", MIN_NOTES)
    again = runtime.store.read(lambda r: closed_threads(r, "ana", gathered.cursor))
    assert len(again.detail["threads"]) == 1 and again.detail["threads"][0].endswith(rich)
    assert short not in again.detail["threads"][0]
    assert sum(line.startswith("  - insight") for line in again.lines) == MIN_NOTES
    assert runtime.store.read(lambda r: closed_threads(r, "bob", 0)).lines == []  # another user's thread

    lesson = "Always pin the Stripe API version in webhook handlers."
    env = {
        "THREADLOOM_HOME": str(home),
        "THREADLOOM_EMBEDDER": "none",
        "THREADLOOM_INGEST": "false",
        "HOME": str(tmp_path),
        "FAKE_AGENT_SCRIPT": call("learning_accept", {"into": "lesson", "text": lesson}),
    }
    config = SpawnConfig(command=FAKE, grace_s=1.0, extra_env=env)
    job = EvolveJob(runtime.store, home, config, "ana", AUTO_REVIEW, closed_threads, agent="custom")  # fmt: skip
    report = job.run()
    assert report.did == "spawned" and report.task is not None
    log = Path(finished(job, report.task)["log_path"]).read_text()
    assert "tool learning_accept ok" in log, log
    [written] = Library(runtime).listing("ana", "lesson")
    assert written["origin"] == "loop" and written["about"].startswith("Always pin")
    assert job.run(force=True).did == "idle"  # the thread was reviewed once


def test_the_shadow_review_waits_for_enough_of_the_users_own_words(runtime: Runtime) -> None:
    seed(runtime.store, "ana", "s1", [("user", "Use tabs."), ("assistant", "x" * 5_000)])
    first = runtime.store.read(lambda r: recent_dialog(r, "ana", 0))
    assert first.lines == [] and first.cursor == 0  # under the threshold: the cursor stays for the next pass
    rules = [("user", f"Rule {n}: never commit generated files to the repo.") for n in range(12)]
    seed(runtime.store, "ana", "s2", rules, at=9_000)
    second = runtime.store.read(lambda r: recent_dialog(r, "ana", 0))
    assert len(second.lines) == 13 and second.cursor > 0
    assert not any("xxxxx" in line for line in second.lines)  # only the user's turns


RACER = """
import json, sys, time
from pathlib import Path
from threadloom.coordination.spawn import SpawnConfig
from threadloom.home import HomeLayout
from threadloom.errors import InvalidInput
from threadloom.learning.candidates import Candidates
from threadloom.learning.evolve import EvolveJob
from threadloom.learning.reviewer import REVIEW, candidates
from threadloom.store.sqlite import open_store

home, go, fake = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
store = open_store(HomeLayout(home).database)
env = {"THREADLOOM_HOME": str(home), "THREADLOOM_EMBEDDER": "none", "THREADLOOM_INGEST": "false"}
job = EvolveJob(store, home, SpawnConfig(command=fake, grace_s=1.0, extra_env=env), "ana", REVIEW, candidates,
                agent="custom")
print("ready", flush=True)
while not go.exists():
    time.sleep(0.002)
print(json.dumps(job.run().as_dict()))
store.close()
"""


def test_two_processes_racing_one_loop_make_one_pass_and_one_child(home: Path, runtime: Runtime) -> None:
    seed(runtime.store, "ana", "s1", [("user", "We decided to always run the linter before pushing.")])
    Extractor(runtime.store).run()
    go = home / "go"
    racers = [
        subprocess.Popen([sys.executable, "-c", RACER, str(home), str(go), FAKE], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    for p in racers:  # both started and waiting at the line (at load 7 their imports alone took 1.6 s of a fixed 2)
        assert p.stdout is not None and p.stdout.readline() == "ready\n"
    go.touch()
    outs = [json.loads(p.communicate(timeout=120)[0].strip().splitlines()[-1]) for p in racers]
    did = sorted(o["did"] for o in outs)
    assert did[1] == "spawned" and did[0] in ("busy", "not due"), outs
    count = runtime.store.read(
        lambda r: (
            r.scalar("SELECT COUNT(*) FROM tasks WHERE role = :r", {"r": REVIEW.role}),
            r.scalar("SELECT COUNT(*) FROM job_runs WHERE name = :n", {"n": f"{REVIEW.name}:ana"}),
        )
    )
    assert count == (1, 1)
    task = next(o["task"] for o in outs if o["did"] == "spawned")
    job = EvolveJob(runtime.store, home, SpawnConfig(command=FAKE), "ana", REVIEW, candidates, agent="custom")
    deadline = time.monotonic() + 90
    while job.spawner.status(task)["status"] in ("starting", "running") and time.monotonic() < deadline:
        job.spawner.settle()  # its spawning process has exited: any process records how it ended
        time.sleep(0.5)
    assert job.spawner.status(task)["status"] == "done"


def test_a_candidate_from_a_note_becomes_a_quote_or_a_note_on_its_thread(runtime: Runtime, tmp_path: Path) -> None:
    repo = tmp_path / "r"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    info = SessionInfo(id="ana-2", vendor="claude", transport="stdio", project=str(repo), cwd=str(repo), pid=1,
                       user="ana")  # fmt: skip
    runtime.sessions.open(info)
    prov = info.provenance()
    runtime.threads.create_project(prov, "Shop")
    thread = runtime.threads.create(prov, "Webhooks")
    runtime.notes.add_note(prov, "We decided to always pin the Stripe API version.", "decision", thread.id)
    runtime.notes.add_note(prov, "Next time, never retry a webhook by hand.", "insight", thread.id)
    Extractor(runtime.store).run()
    found = {c["text"]: c["id"] for c in Candidates(runtime.store).listing("ana")["candidates"]}
    pin = found["We decided to always pin the Stripe API version."]
    retry = found["Next time, never retry a webhook by hand."]

    done = decide(runtime, info, pin, "note", None, None, None, None, None, True)
    assert done["written"]["kind"] == "note" and done["written"]["note"]["thread"] == thread.id
    runtime.threads.set_status(prov, "done", "shipped", thread.id)
    with pytest.raises(InvalidInput, match="would reopen it"):  # a finished thread is not reopened by a review
        decide(runtime, info, retry, "note", None, None, None, None, None, True)
    quoted = decide(runtime, info, retry, "quote", None, None, None, None, None, True)
    assert quoted["written"]["kind"] == "quote"
    assert runtime.threads.thread(prov, thread.id).status == "done"
    with pytest.raises(InvalidInput, match="candidate id"):  # a person's session writes only from a candidate
        decide(runtime, info, None, "lesson", None, None, "Always x.", None, None, True)


def test_the_settings_turn_each_loop_on_and_set_its_schedule_and_budget(tmp_path: Path) -> None:
    off = {loop.name: on for loop, _, on in configured(Settings(home=tmp_path, embedder="none"))}
    assert off == {"learning.review": False, "learning.auto_review": False, "learning.shadow": False}
    s = Settings(home=tmp_path, embedder="none", learn_review=True, learn_review_interval=120, learn_shadow=True,
                 learn_shadow_interval=60, learn_daily_tokens=5_000)  # fmt: skip
    loops = {loop.name: (loop, gather, on) for loop, gather, on in configured(s)}
    review, gather, on = loops["learning.review"]
    assert on and review.interval_s == 120 and review.daily_tokens == 5_000 and gather is candidates
    assert loops["learning.shadow"][0].interval_s == 60 and loops["learning.shadow"][2]
    assert not loops["learning.auto_review"][2]
