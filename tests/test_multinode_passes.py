"""Background passes are single-flight across nodes on one PostgreSQL database: two processes racing for a
job's lease never both hold it, and a lease held by a process on another machine is never judged by this
machine's pids (it is waited out). Real PostgreSQL (tests/postgres_server.py)."""

from __future__ import annotations

import itertools
import subprocess

import pytest

from tests.helpers import PY
from threadloom.clock import now_ms
from threadloom.memory.maintenance import JOB, LEASE_MS, Maintenance
from threadloom.memory.scoring import ScoringConfig
from threadloom.store import jobs
from threadloom.store.postgres import open_postgres

pytestmark = pytest.mark.slow

# One node's loop: take the lease, record the pass as it starts, hold it a moment, record its end, release.
NODE = """
import sys, time
from threadloom.clock import now_ms
from threadloom.store import jobs
from threadloom.store.postgres import open_postgres
store = open_postgres(sys.argv[1])
holder, ran = jobs.holder_id(), 0
deadline = time.monotonic() + 8
while time.monotonic() < deadline and ran < 15:
    if not store.write(lambda w: jobs.acquire(w, "test.pass", holder, now_ms(), 60_000)):
        time.sleep(0.005)
        continue
    started = now_ms()
    time.sleep(0.03)
    def done(w):
        jobs.record_run(w, "test.pass", started, now_ms(), False, {"holder": holder})
        jobs.release(w, "test.pass", holder)
    store.write(done)
    ran += 1
print(ran)
store.close()
"""


def test_two_nodes_racing_for_a_pass_never_run_it_at_once(postgres_url: str) -> None:
    nodes = [subprocess.Popen([PY, "-c", NODE, postgres_url], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    counts = [int(node.communicate(timeout=60)[0]) for node in nodes]
    assert all(node.returncode == 0 for node in nodes)
    assert all(count >= 1 for count in counts), counts  # both nodes got turns
    store = open_postgres(postgres_url)
    try:
        runs = store.read(
            lambda r: r.rows(
                "SELECT started_at, finished_at, outcome FROM job_runs WHERE name = 'test.pass' ORDER BY started_at"
            )
        )
    finally:
        store.close()
    assert len(runs) == sum(counts) and len({run["outcome"] for run in runs}) == 2
    for before, after in itertools.pairwise(runs):
        assert before["finished_at"] <= after["started_at"], (before, after)  # never two at once


def test_a_lease_held_on_another_machine_is_waited_out_not_judged_by_local_pids(postgres_url: str) -> None:
    store = open_postgres(postgres_url)
    try:
        remote = "1.1@0badf00d:cafe"  # pid 1 of another machine: not this machine's init
        assert store.write(lambda w: jobs.acquire(w, JOB, remote, now_ms(), LEASE_MS))
        assert not jobs.holder_gone(remote)
        report = Maintenance(store, ScoringConfig()).run()
        assert report.ran is False and "another process" in (report.skipped_reason or "")
        # once its lease expires (the node died), this node's pass runs
        store.write(lambda w: w.execute("UPDATE job_leases SET expires_at = 0 WHERE name = :n", {"n": JOB}))
        assert Maintenance(store, ScoringConfig()).run().ran is True
    finally:
        store.close()
