"""Two OS processes writing style observations to one SQLite file at once lose nothing: every sighting is
there, each habit's counters equal its sightings, and the revision moved once per content change (the
anchor lost 10 of 20 writes this way). Both also run the transcript learner; the lease lets one at a time.

Run as a module, this file is one of the writers: `python -m tests.test_style_concurrency DB TAG GO N`.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import PY, wait_for
from tests.test_style_gate import add_message
from threadloom.clock import now_ms
from threadloom.identity import Provenance
from threadloom.store.sqlite import open_store
from threadloom.style import Learner, StyleMemory

ROOT = Path(__file__).resolve().parent.parent
WRITES = 30  # per process: hints in a session of their own, each one shared habit and one habit of its own


def write(db: str, tag: str, go: str, n: int) -> None:
    store = open_store(Path(db))
    memory, learner = StyleMemory(store), Learner(store)
    Path(f"{go}.{tag}").touch()  # ready
    deadline = time.monotonic() + 60
    while not Path(go).exists():  # both writers start together
        if time.monotonic() > deadline:
            raise SystemExit("no go signal")
        time.sleep(0.005)
    for i in range(n):
        prov = Provenance(session_id=f"{tag}-{i}", vendor="claude", project="/repo", user="ana")
        shared = {"kind": "idiolect", "text": "tiny but mighty", "example": f"tiny but mighty {tag}{i}"}
        own = {"kind": "catchphrase", "text": f"phrase {tag} {i % 5}"}
        memory.hint(prov, [shared, own])
        if i % 10 == 0:
            learner.run(f"writer-{tag}")
    store.close()


@pytest.mark.slow
def test_two_processes_writing_observations_lose_nothing(tmp_path: Path) -> None:
    db, go = tmp_path / "s.db", tmp_path / "go"
    store = open_store(db)
    at = now_ms() - 1000
    for i in range(40):  # transcripts both learners race to read
        add_message(store, "ana", "codex", f"t{i % 4}", f"k{i}", f"lgtm, message {i}", at + i)
    writers = [
        subprocess.Popen(
            [PY, "-m", "tests.test_style_concurrency", str(db), tag, str(go), str(WRITES)],
            cwd=ROOT,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("a", "b")
    ]
    wait_for(lambda: all(Path(f"{go}.{tag}").exists() for tag in ("a", "b")), 120, "both writers ready")
    go.touch()
    for writer in writers:
        _, err = writer.communicate(timeout=240)
        assert writer.returncode == 0, err
    Learner(store).run("final")

    def scalar(sql: str) -> int:
        return int(store.read(lambda r: r.scalar(sql)))

    shared = store.read(
        lambda r: r.one("SELECT seen, sessions, status FROM style_habits WHERE key = 'tiny but mighty'")
    )
    assert shared == {"seen": 2 * WRITES, "sessions": 2 * WRITES, "status": "active"}
    lgtm = store.read(lambda r: r.one("SELECT seen, sessions FROM style_habits WHERE key = 'lgtm'"))
    assert lgtm == {"seen": 40, "sessions": 4}  # each message read once, whichever learner read it
    assert scalar("SELECT sum(seen) FROM style_habits WHERE key LIKE 'phrase %'") == 2 * WRITES
    # Every habit's counters equal its per-session rows: no update lost between the processes.
    assert (
        scalar(
            "SELECT count(*) FROM style_habits h WHERE h.seen != (SELECT sum(s.seen) FROM style_observations s "
            "WHERE s.habit_id = h.id) OR h.sessions != (SELECT count(*) FROM style_observations s "
            "WHERE s.habit_id = h.id)"
        )
        == 0
    )
    assert scalar("SELECT count(*) FROM style_habits WHERE kind = 'catchphrase' AND key LIKE 'phrase %'") == 10
    # The revision counts content changes: one stored snapshot per revision, the newest the current one.
    revision = scalar("SELECT revision FROM style_state WHERE owner = 'ana'")
    assert scalar("SELECT max(revision) FROM style_revisions") == revision
    assert scalar("SELECT count(*) FROM style_revisions") == min(revision, 20)
    store.close()


if __name__ == "__main__":
    write(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
