"""A second THREADLOOM_USER attacking alice's learning data through every CLI command that takes a name, an id
or a text (the MCP tools are attacked in the isolation matrix, tests/isolation_battery.py): bob lists, accepts,
rejects, reviews, runs the curator, restores alice's snapshot and trash ids, reads, pins, removes her skill,
forgets her words, exports insights. Each answers as for something that does not exist, and afterwards
every row and file of alice's learning data is as it was."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import env_for
from tests.isolation_probe import dump_rows
from tests.learning_fixtures import tree
from threadloom.config import Settings
from threadloom.learning import candidates as queue
from threadloom.learning.concepts import Concepts
from threadloom.learning.insights import Insights
from threadloom.learning.library import Library
from threadloom.learning.snapshots import Snapshots
from threadloom.runtime import open_runtime

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # 16 CLI processes, ~5 s each at load
CANARY = "quillwhistle"


def bob(home: Path, user_home: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = env_for(home, THREADLOOM_USER="bob", HOME=str(user_home))
    return subprocess.run(
        [sys.executable, "-m", "threadloom", *args], input=stdin, env=env, capture_output=True, text=True, timeout=120
    )


def plant(home: Path, user_home: Path) -> dict[str, Any]:
    rt = open_runtime(Settings(home=home, embedder="none", user="alice"), "cli")
    try:
        found = queue.NewCandidate("alice", "rule", "en", f"always {CANARY} first", "message", "1", 0, "s", None, None)
        candidate = rt.store.write(lambda w: queue.insert(w, found, None, None, 1))
        lib = Library(rt, client_home=user_home)
        lib.write_skill(
            "alice", "alice-deploy", "Alice deploys.", f"Deploy {CANARY}.", "loop", f"candidate:{candidate}"
        )
        lib.write_skill("alice", "alice-old", "Old.", f"Old {CANARY}.", "loop", "task:t")
        lib.add_lesson("alice", f"Lesson {CANARY}.", "person", "cli")
        snaps = Snapshots(lib)
        snapshot = snaps.take("alice", "planted")
        trash = snaps.trash("alice", "skill", "alice-old", "planted", None)["trash"]
        Concepts(rt.store).observe("alice", f"{CANARY} is flaky", "session:s", "s")
        insights = Insights(rt.store, home / "insights", threshold=1)
        insight = insights.distill("alice", f"{CANARY} insight", "s")["id"]
        insights.vote("alice", insight, "s2", "up")
        return {"candidate": candidate, "snapshot": f"s{snapshot}", "trash": trash}
    finally:
        rt.close()


def test_a_second_user_cannot_see_or_change_alices_learning_data_from_the_command_line(
    home: Path, tmp_path: Path
) -> None:
    user_home = tmp_path / "user"
    (user_home / ".claude").mkdir(parents=True)
    (user_home / ".codex").mkdir()
    ids = plant(home, user_home)
    rows, files = dump_rows(home / "threadloom.db", "alice"), tree(home, user_home)
    assert CANARY.encode() in b"".join(files.values())  # the attack has something to find

    outs: list[subprocess.CompletedProcess[str]] = []
    for args, stdin in (
        (("learn", "candidates", "--json"), ""),
        (("learn", "candidates", "--status", "accepted", "--json"), ""),
        (("learn", "accept", str(ids["candidate"]), "--as", "skill", "--name", "alice-deploy", "--text", "x"), ""),
        (("learn", "reject", str(ids["candidate"])), ""),
        (("learn", "review"), "l\nq\n"),
        (("learn", "restore", ids["snapshot"]), ""),
        (("learn", "restore", ids["trash"]), ""),
        (("learn", "snapshots", "--json"), ""),
        (("learn", "curate"), ""),
        (("learn", "insights", "--export"), ""),
        (("skills", "list"), ""),
        (("skills", "show", "alice-deploy"), ""),
        (("skills", "pin", "alice-deploy"), ""),
        (("skills", "rm", "alice-deploy", "--yes"), ""),
        (("skills", "mirror"), ""),
        (("forget", "--text", CANARY, "--kind", "learning", "--yes", "--json"), ""),
    ):
        done = bob(home, user_home, *args, stdin=stdin)
        outs.append(done)
        assert CANARY not in done.stdout + done.stderr, (args, done.stdout, done.stderr)
    said = {" ".join(o.args[3:5]): (o.returncode, o.stdout + o.stderr) for o in outs}
    assert "no candidate" in said["learn accept"][1] and said["learn accept"][0] != 0
    assert "not found" in said["learn reject"][1]
    assert "no pending candidates" in said["learn review"][1]
    restored = [o for o in outs if o.args[3:4] == ["learn"] and o.args[4:5] == ["restore"]]
    assert [o.returncode for o in restored] == [2, 2] and all("no snapshot" in o.stderr for o in restored)
    assert "no skill named" in said["skills show"][1] and "no skill named" in said["skills rm"][1]
    assert '"total": 0' in said["forget --text"][1]

    assert dump_rows(home / "threadloom.db", "alice") == rows
    after = {path: data for path, data in tree(home, user_home).items() if "/curator/bob/" not in path}
    assert after == files  # alice's skill folders, copies, lessons file, export: unchanged (bob's report is new)
