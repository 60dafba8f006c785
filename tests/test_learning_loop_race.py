"""Two real threadloom processes (`threadloom learn run review`, each its own runtime over the same home, as
the daemon's loop would run it) started together against the same loop: one pass, one child, one record; the
other says busy or not due. Forced, a second pass still finds the first child running or nothing new."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import env_for
from tests.spawning import FAKE
from tests.test_learning_extract import seed
from threadloom.config import Settings
from threadloom.learning.harvest import Extractor
from threadloom.learning.reviewer import REVIEW
from threadloom.runtime import open_runtime

pytestmark = pytest.mark.slow


def start(home: Path, *args: str) -> subprocess.Popen[str]:
    env = env_for(home, THREADLOOM_USER="ana", THREADLOOM_LEARN_AGENT="custom", THREADLOOM_SPAWN_COMMAND=FAKE)
    return subprocess.Popen(
        [sys.executable, "-m", "threadloom", "learn", "run", "review", *args], env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_two_processes_racing_the_review_loop_make_one_pass(home: Path) -> None:
    rt = open_runtime(Settings(home=home, embedder="none", user="ana"), "cli")
    try:
        seed(rt.store, "ana", "s1", [("user", "We decided to always run the linter before pushing.")])
        Extractor(rt.store).run()
    finally:
        rt.close()
    racers = [start(home), start(home)]
    outs = []
    for p in racers:
        stdout, stderr = p.communicate(timeout=120)
        assert p.returncode == 0, stderr
        outs.append(json.loads(stdout))
    did = sorted(o["did"] for o in outs)
    assert did[1] == "spawned" and did[0] in ("busy", "not due"), outs

    rt = open_runtime(Settings(home=home, embedder="none", user="ana"), "cli")
    try:
        counts = rt.store.read(
            lambda r: (
                r.scalar("SELECT COUNT(*) FROM tasks WHERE role = :r", {"r": REVIEW.role}),
                r.scalar("SELECT COUNT(*) FROM job_runs WHERE name = :n", {"n": f"{REVIEW.name}:ana"}),
            )
        )
        assert counts == (1, 1)
        task = next(o["task"] for o in outs if o["did"] == "spawned")
        deadline = time.monotonic() + 90
        while rt.spawner.status(task)["status"] in ("starting", "running") and time.monotonic() < deadline:
            rt.spawner.settle()  # the process that spawned it has exited: any process records how it ended
            time.sleep(0.5)
        assert rt.spawner.status(task)["status"] == "done"
    finally:
        rt.close()
    again = start(home, "--force")
    stdout, _ = again.communicate(timeout=120)
    assert json.loads(stdout)["did"] == "idle"  # the candidate was handed over once

    bad = subprocess.run(
        [sys.executable, "-m", "threadloom", "learn", "run", "everything"], env=env_for(home), capture_output=True,
        text=True, timeout=60,
    )  # fmt: skip
    assert bad.returncode == 2 and "loop is one of" in bad.stderr
