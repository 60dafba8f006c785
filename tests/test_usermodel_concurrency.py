"""Two OS processes writing claims and evidence to one SQLite file at once lose nothing: every claim, every
piece of evidence, and every weight in the claims' running sums is there afterwards.

Run as a module, this file is one of the writers: `python -m tests.test_usermodel_concurrency DB TAG SHARED GO N`.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import PY, wait_for
from threadloom.identity import Provenance
from threadloom.store.sqlite import open_store
from threadloom.usermodel import UserModel

ROOT = Path(__file__).resolve().parent.parent
WRITES = 40  # per process: claims, evidence on the shared claim, evidence on its own claim


def write(db: str, tag: str, shared: str, go: str, n: int) -> None:
    prov = Provenance(session_id=f"writer-{tag}", vendor="claude", project="/repo", user="ana")
    store = open_store(Path(db))
    model = UserModel(store)
    Path(f"{go}.{tag}").touch()  # ready
    deadline = time.monotonic() + 60
    while not Path(go).exists():  # both writers start together
        if time.monotonic() > deadline:
            raise SystemExit("no go signal")
        time.sleep(0.005)
    for i in range(n):
        own = model.claim(prov, f"claim {tag} {i}", "workflow", statement=f"{tag} said {i}")["claim"]["id"]
        kind = "support" if i % 3 else "contradict"
        model.add_evidence(prov, shared, kind, "statement", f"{tag} on the shared claim {i}")
        model.add_evidence(prov, own, "support", "statement", f"{tag} again {i}", origin="automated")
    store.close()


@pytest.mark.slow
def test_two_processes_writing_claims_and_evidence_lose_nothing(tmp_path: Path) -> None:
    db, go = tmp_path / "u.db", tmp_path / "go"
    store = open_store(db)
    ana = Provenance(session_id="s0", vendor="claude", project="/repo", user="ana")
    model = UserModel(store)
    shared = model.claim(ana, "Prefers reviewing plans before code", "workflow")["claim"]["id"]
    writers = [
        subprocess.Popen(
            [PY, "-m", "tests.test_usermodel_concurrency", str(db), tag, shared, str(go), str(WRITES)],
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

    def scalar(sql: str) -> float:
        return float(store.read(lambda r: r.scalar(sql)))

    assert scalar("SELECT count(*) FROM user_claims") == 1 + 2 * WRITES
    assert scalar("SELECT count(*) FROM user_evidence") == 2 * WRITES * 3  # seed, shared, own
    contradicts = sum(1 for i in range(WRITES) if i % 3 == 0) * 2
    row = store.read(lambda r: r.one("SELECT support, contradict FROM user_claims WHERE id = :id", {"id": shared}))
    assert row == {"support": 2 * WRITES - contradicts, "contradict": contradicts}
    # Every claim's running sums equal its evidence rows (no lost update in either process).
    mismatched = scalar(
        "SELECT count(*) FROM user_claims c WHERE abs(c.support - COALESCE((SELECT sum(effective) FROM user_evidence e "
        "WHERE e.claim_id = c.id AND e.kind = 'support'), 0)) > 1e-9"
    )
    assert mismatched == 0
    # Each writer's own claim: 1.0 from the seed statement, 0.5 automated: 1.5, a hypothesis still.
    assert scalar("SELECT count(*) FROM user_claims WHERE support = 1.5 AND tier = 'hypothesis'") == 2 * WRITES
    # Every tier a claim holds is the last step of its recorded history.
    assert (
        scalar(
            "SELECT count(*) FROM user_claims c WHERE c.tier != (SELECT h.to_tier FROM user_claim_tiers h "
            "WHERE h.claim_id = c.id ORDER BY h.id DESC LIMIT 1)"
        )
        == 0
    )
    store.close()


if __name__ == "__main__":
    write(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
