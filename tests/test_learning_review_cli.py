"""`threadloom learn review` as a process, answered on its standard input: a candidate accepted as a skill
with an edit (written under the home and mirrored into the user's CLI skills folder), one rejected with a
reason, its paraphrase decided with it, a bad skill name refused and asked again, quit leaving the rest."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import env_for
from tests.test_learning_extract import seed
from threadloom.config import Settings
from threadloom.learning.candidates import Candidates
from threadloom.learning.harvest import Extractor
from threadloom.learning.library import Library
from threadloom.runtime import open_runtime

pytestmark = pytest.mark.slow
TURNS = [
    ("user", "Next time, ask before you delete a branch."),
    ("user", "We decided to always run the linter before pushing."),
    ("user", "So we decided: always run the linter before pushing!"),  # a paraphrase: one cluster
    ("user", "Always write the changelog entry in the same commit."),
]


def review(home: Path, user_home: Path, answers: str) -> subprocess.CompletedProcess[str]:
    env = env_for(home, THREADLOOM_USER="ana", HOME=str(user_home))
    return subprocess.run(
        [sys.executable, "-m", "threadloom", "learn", "review"], input=answers, env=env, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip


def test_review_accepts_with_an_edit_rejects_and_quits(home: Path, tmp_path: Path) -> None:
    user_home = tmp_path / "user"
    (user_home / ".claude").mkdir(parents=True)
    rt = open_runtime(Settings(home=home, embedder="none", user="ana"), "cli")
    try:
        seed(rt.store, "ana", "s1", TURNS)
        assert Extractor(rt.store).run().queued == 4
        ids = {c["text"]: c["id"] for c in Candidates(rt.store).listing("ana")["candidates"]}
    finally:
        rt.close()
    # Newest first: the changelog rule, then the linter pair (one decision for both), then the branch rule.
    edit = "Write the changelog entry in the commit that makes the change."
    answers = "\n".join([
        "e", edit, "s", "../../etc", "Where the changelog entry goes.",  # refused: the decision is asked again
        "e", edit, "s", "changelog-with-change", "Where the changelog entry goes.",
        "r", "a paraphrase pair, not a rule we keep",
        "q",
    ]) + "\n"  # fmt: skip
    done = review(home, user_home, answers)
    assert done.returncode == 0, done.stderr
    assert "not accepted" in done.stderr and "skill name" in done.stderr  # the bad name
    assert "accepted 1, rejected 1, passed 0" in done.stdout, done.stdout

    rt = open_runtime(Settings(home=home, embedder="none", user="ana"), "cli")
    try:
        queue = Candidates(rt.store)
        rejected = {c["id"] for c in queue.listing("ana", "rejected")["candidates"]}
        assert rejected == {i for t, i in ids.items() if "linter" in t}
        pending = [c["text"] for c in queue.listing("ana")["candidates"]]
        assert pending == [TURNS[0][1]]
        skill = Library(rt).show("ana", "changelog-with-change", mark=False)
        assert skill["origin"] == "person" and "in the commit that makes the change" in skill["text"]
    finally:
        rt.close()
    mirrored = user_home / ".claude" / "skills" / "changelog-with-change" / "SKILL.md"
    assert "in the commit that makes the change" in mirrored.read_text()
    assert not (tmp_path / "etc").exists()

    nothing = review(home, user_home, "q\n")
    assert nothing.returncode == 0 and "passed 0" in nothing.stdout
