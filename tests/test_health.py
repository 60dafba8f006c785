"""The health report on a real store with known contents: exact counts and growth per kind, tool-call
latency and errors from the journal, background jobs, store size, and one user never seeing another's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Backend
from tests.sqlite_template import fresh_home
from threadloom.clock import now_ms
from threadloom.config import Settings
from threadloom.health.journal import changes
from threadloom.health.reliability import percentile
from threadloom.health.render import render
from threadloom.health.stats import HealthOptions, HealthService
from threadloom.identity import Provenance
from threadloom.memory.model import NewMemory
from threadloom.runtime import Runtime, open_runtime
from threadloom.sessions import SessionInfo
from threadloom.store import jobs
from threadloom.store.base import Writer

DAY = 86_400_000


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[Runtime]:
    rt = open_runtime(Settings(home=fresh_home(tmp_path / "home"), embedder="none", ingest=False, user="alice"), "cli")
    yield rt
    rt.close()


def session(rt: Runtime, user: str, repo: Path) -> Provenance:
    info = SessionInfo(id=f"s-{user}", vendor="claude", transport="stdio", project=str(repo), cwd=str(repo), pid=None)
    info = SessionInfo(**{**info.__dict__, "user": user, "author": user, "org": user})
    rt.sessions.open(info)
    return info.provenance()


def age(rt: Runtime, sql: str, days: int, **params: object) -> None:
    rt.store.write(lambda w: w.execute(sql, {"t": now_ms() - days * DAY, **params}))


def call(rt: Runtime, prov: Provenance, tool: str, ms: float, error: str | None = None) -> None:
    """A tool call journaled as the server journals one (server/app.py `_journal`)."""
    detail: dict[str, object] = {"tool": tool, "ok": error is None, "ms": ms}
    rt.sessions.record(prov, "tool.call", detail | ({"error": error} if error else {}))


@pytest.fixture
def filled(runtime: Runtime, tmp_path: Path) -> tuple[Runtime, Provenance, Provenance]:
    """alice: 3 memories (one amended, one stored 10 days ago), 2 notes, 1 quote, 1 whisper, 5 tool calls;
    bob: 1 memory and 1 tool call; the maintenance job ran twice, once 10 days ago."""
    repo = tmp_path / "repo"
    repo.mkdir()
    rt = runtime
    alice, bob = session(rt, "alice", repo), session(rt, "bob", repo)
    ids = [
        rt.memory.store(NewMemory(content=f"alice fact number {n} about rockets"), alice).memory.id for n in range(3)
    ]
    rt.memory.amend(ids[0], alice, content="alice fact number 0 about rockets, corrected", reason="typo")
    age(rt, "UPDATE memories SET created_at = :t WHERE id = :id", 10, id=ids[2])
    rt.memory.store(NewMemory(content="bob's own fact about boats"), bob)
    rt.threads.create_project(alice, "Rockets", "", "solo")
    rt.notes.add_note(alice, "tried the long fuse", "failed")
    rt.notes.add_note(alice, "short fuse works", "insight")
    rt.notes.add_quote(alice, "I want it to fly by Friday")
    rt.signals.whisper(alice, bob.session_id, "launch at noon")
    for ms in (10, 20, 30, 40):
        call(rt, alice, "memory_recall", ms)
    call(rt, alice, "memory_store", 5, error="boom")
    call(rt, bob, "memory_recall", 1000)
    started = now_ms()

    def runs(w: Writer) -> None:
        outcome = {"scored": 4, "transitions": {"dormant": 2, "fading": 1}, "pruned": 1, "ran": True}
        jobs.record_run(w, "memory.maintenance", started - 10 * DAY, started - 10 * DAY + 50, False, outcome)
        jobs.record_run(w, "memory.maintenance", started, started + 120, False, outcome)
        jobs.record_run(w, "usermodel.mine:alice", started, started + 30, False, {"claims": 2, "sample": ["x"]})

    rt.store.write(runs)
    return rt, alice, bob


def test_a_users_counts_and_growth_are_exact(filled: tuple[Runtime, Provenance, Provenance]) -> None:
    rt, _, _ = filled
    counts = HealthService(rt.store).report("alice")["counts"]
    assert counts["memories"] == {"total": 4, "1d": 3, "7d": 3, "30d": 4, "current": 3}
    assert counts["notes"] == {"total": 2, "1d": 2, "7d": 2, "30d": 2}
    assert counts["quotes"] == {"total": 1, "1d": 1, "7d": 1, "30d": 1}
    assert counts["signals_sent"]["total"] == 1 and counts["sessions"]["total"] == 1
    assert counts["claims"]["total"] == 0 and counts["transcript_messages"]["total"] == 0


def test_tool_latency_percentiles_and_error_rates_come_from_the_journal(
    filled: tuple[Runtime, Provenance, Provenance],
) -> None:
    rt, _, _ = filled
    calls = HealthService(rt.store).report("alice", HealthOptions(window_days=7))["tool_calls"]
    assert calls["calls"] == 5 and calls["errors"] == 1
    assert calls["tools"]["memory_recall"] == {"calls": 4, "errors": 0, "error_rate": 0.0, "p50_ms": 20, "p95_ms": 40}
    assert calls["tools"]["memory_store"] | {"last_error": "boom"} == calls["tools"]["memory_store"]
    assert calls["tools"]["memory_store"]["error_rate"] == 1.0
    assert list(calls["tools"]) == ["memory_recall", "memory_store"]  # busiest first


def test_a_second_user_sees_only_their_own_counts_and_calls(filled: tuple[Runtime, Provenance, Provenance]) -> None:
    rt, _, _ = filled
    service = HealthService(rt.store)
    alice, bob = service.report("alice"), service.report("bob")
    assert bob["counts"]["memories"] == {"total": 1, "1d": 1, "7d": 1, "30d": 1, "current": 1}
    assert bob["counts"]["notes"]["total"] == bob["counts"]["quotes"]["total"] == 0
    assert bob["counts"]["signals_sent"]["total"] == 0
    assert bob["tool_calls"]["calls"] == 1 and list(bob["tool_calls"]["tools"]) == ["memory_recall"]
    assert bob["tool_calls"]["tools"]["memory_recall"]["p50_ms"] == 1000
    assert "alice" not in render(bob) and "boom" not in str(bob)
    # A job run per user is that user's; what describes the store, not anyone's items, is the same for both.
    assert alice["jobs"]["usermodel.mine:alice"]["last"]["changed"] == {"claims": 2}
    assert "usermodel.mine:alice" not in bob["jobs"]
    assert alice["jobs"]["memory.maintenance"] == bob["jobs"]["memory.maintenance"]
    for part in ("index", "probes"):
        assert alice[part] == bob[part]
    assert alice["store"]["path"] == bob["store"]["path"]
    assert service.report("carol")["counts"]["memories"]["total"] == 0


def test_jobs_report_the_last_run_and_how_often_they_fired_against_what_they_changed(
    filled: tuple[Runtime, Provenance, Provenance],
) -> None:
    rt, _, _ = filled
    job = HealthService(rt.store).report("alice")["jobs"]["memory.maintenance"]
    assert job["last"]["duration_ms"] == 120 and job["last"]["dry_run"] is False
    assert job["last"]["changed"] == {"scored": 4, "transitions": 3, "pruned": 1}
    assert job["fired"] == {"1d": 1, "7d": 1, "30d": 2}
    assert job["produced"]["30d"] == {"pruned": 2, "scored": 8, "transitions": 6}
    assert job["produced"]["1d"] == {"pruned": 1, "scored": 4, "transitions": 3}


def test_store_size_and_index_freshness(filled: tuple[Runtime, Provenance, Provenance]) -> None:
    rt, _, _ = filled
    report = HealthService(rt.store).report("alice")
    size = report["store"]["bytes"]
    assert size["file"] > 0 and size["total"] == size["file"] + size["wal"] + size["shm"]
    index = report["index"]
    documents = rt.store.read(lambda r: r.scalar("SELECT COUNT(*) FROM documents"))
    assert index == {"documents": documents, "fingerprint": None, "with_vectors": 0, "without_vectors": documents}
    assert documents >= 8  # 5 memories, 2 notes, 1 quote


def test_the_store_size_is_the_database_s_own_on_either_backend(backend: Backend) -> None:
    """On PostgreSQL there is no file: `stats` said "0 B (file 0 B, wal 0 B, shm 0 B)" for a store in use."""
    store = backend.open()
    try:
        report = HealthService(store).report("alice")
    finally:
        store.close()
    size = report["store"]["bytes"]
    assert size["total"] > 0, size
    header = render(report).splitlines()[1]
    assert header.startswith(f"store {store.location}: ") and " 0 B" not in header, header
    assert ("shm" in header) == (backend.name == "sqlite"), header


def test_index_freshness_counts_documents_whose_vector_is_missing_or_stale(runtime: Runtime, tmp_path: Path) -> None:
    rt = runtime
    repo = tmp_path / "r"
    repo.mkdir()
    alice = session(rt, "alice", repo)
    for n in range(3):
        rt.memory.store(NewMemory(content=f"vector test {n}"), alice)

    def vectors(w: Writer) -> None:
        for row in w.rows("SELECT id, content_hash FROM documents ORDER BY id LIMIT 2"):
            w.execute(
                "INSERT INTO document_vectors (doc_id, fingerprint, content_hash, vector) "
                "VALUES (:d, 'fp1', :h, x'00')",
                {"d": row["id"], "h": row["content_hash"]},
            )
        w.execute(
            "UPDATE document_vectors SET content_hash = 'old' WHERE doc_id = (SELECT MIN(doc_id) FROM document_vectors)"
        )

    rt.store.write(vectors)
    index = HealthService(rt.store).report("alice")["index"]
    assert index | {"with_vectors": 1, "without_vectors": 2, "fingerprint": "fp1"} == index
    other = HealthService(rt.store).report("alice", HealthOptions(fingerprint="fp2"))["index"]
    assert other["with_vectors"] == 0 and other["without_vectors"] == 3 and other["other_fingerprints"] == {"fp1": 1}


def test_the_window_is_bounded_and_old_calls_drop_out(filled: tuple[Runtime, Provenance, Provenance]) -> None:
    rt, _, _ = filled
    age(rt, "UPDATE events SET at = :t WHERE kind = 'tool.call'", 3)
    service = HealthService(rt.store)
    assert service.report("alice", HealthOptions(window_days=1))["tool_calls"]["calls"] == 0
    assert service.report("alice", HealthOptions(window_days=7))["tool_calls"]["calls"] == 5
    assert service.report("alice", HealthOptions(window_days=10_000))["tool_calls"]["window_days"] == 30
    assert service.report("alice", HealthOptions(window_days=-5))["tool_calls"]["window_days"] == 1


def test_percentiles_by_nearest_rank_and_outcome_numbers() -> None:
    assert percentile([], 0.5) is None
    assert percentile([7.0], 0.95) == 7.0
    assert percentile([float(n) for n in range(1, 101)], 0.95) == 95.0
    assert percentile([10.0, 20.0, 30.0, 40.0], 0.5) == 20.0
    assert changes({"a": 1, "b": True, "c": {"x": 2, "y": 3}, "d": ["m1"], "e": {"x": "y"}, "f": 0.5}) == {
        "a": 1,
        "c": 5,
        "f": 0.5,
    }


def test_the_text_report_names_every_section(filled: tuple[Runtime, Provenance, Provenance]) -> None:
    rt, _, _ = filled
    text = render(HealthService(rt.store).report("alice"))
    for words in ("yours, and new", "memories", "search index", "tool calls", "memory.maintenance", "self-test"):
        assert words in text
    assert "memory_recall" in text and "boom" not in text  # errors are counted, their text is for --json


def test_journal_rows_not_written_by_the_server_are_skipped(filled: tuple[Runtime, Provenance, Provenance]) -> None:
    rt, alice, _ = filled
    for odd in ({"tool": "x", "ms": "slow"}, {"tool": "x", "ms": [1]}):
        rt.sessions.record(alice, "tool.call", odd)
    rt.store.write(lambda w: w.execute("UPDATE events SET detail = '[1, 2]' WHERE id = (SELECT MAX(id) FROM events)"))
    calls = HealthService(rt.store).report("alice")["tool_calls"]
    assert calls["calls"] == 7 and calls["sampled"] == 5 and "x" not in calls["tools"]
