"""Consolidation applied while eight sessions write to the same store, each on its own connection: nothing
written is lost, nothing is deleted, every merge holds (its survivor current, its record kept); and the
settings that schedule it refuse bad values with a clear error."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.fakes import HashingEmbedder
from threadloom.config import load_settings
from threadloom.consolidate.service import Consolidator, Options
from threadloom.coordination.presence import PresenceService
from threadloom.coordination.spawn import SpawnService
from threadloom.errors import ConfigError
from threadloom.identity import Provenance
from threadloom.memory.model import NewMemory
from threadloom.memory.scoring import ScoringConfig
from threadloom.memory.service import MemoryService
from threadloom.search.engine import SearchEngine
from threadloom.store.sqlite import open_store
from threadloom.threads.hygiene import ThreadHygiene
from threadloom.threads.service import ThreadService

WRITERS = 8
EACH = 20
FACTS = [
    "The billing service retries failed webhooks three times with exponential backoff",
    "The API is deployed with GitHub Actions on every merge to main",
    "Customer exports are written as CSV files to the reports bucket",
    "Feature flags are stored in the settings table and cached for a minute",
]


@pytest.mark.slow  # a bounded load test: eight writers beside the pass
def test_consolidation_while_eight_sessions_write_loses_nothing(tmp_path: Path) -> None:
    db = tmp_path / "busy.db"
    first = open_store(db)
    written: list[str] = []
    lock = threading.Lock()
    failures: list[BaseException] = []

    # Opened one after the other: each connection is its own, the writing is concurrent.
    stores = [open_store(db, busy_timeout_ms=200, write_attempts=50) for _ in range(WRITERS)]

    def writer(n: int) -> None:
        store = stores[n]
        service = MemoryService(store, SearchEngine(store, HashingEmbedder()), ScoringConfig())
        prov = Provenance(session_id=f"w{n}", vendor="claude", project="/repo", user="ana")
        try:
            for i in range(EACH):
                fact = FACTS[(n + i) % len(FACTS)]
                text = (
                    f"{fact}, as session {n} noted in entry {i}"
                    if i % 2
                    else f"Session {n} note {i}: {fact.lower()} (ok)"
                )
                stored = service.store(NewMemory(content=text), prov)
                with lock:
                    written.append(stored.memory.id)
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)
        finally:
            store.close()

    threads = ThreadService(first, SearchEngine(first))
    consolidator = Consolidator(first, HashingEmbedder, ScoringConfig(), ThreadHygiene(first, threads),
                                PresenceService(first), SpawnService(first, tmp_path))  # fmt: skip
    workers = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
    for w in workers:
        w.start()
    merged = 0
    while any(w.is_alive() for w in workers):
        merged += consolidator.run(Options(apply=True))["merged"]["memory"]
    for w in workers:
        w.join()
    merged += consolidator.run(Options(apply=True))["merged"]["memory"]
    assert not failures, failures
    assert len(written) == len(set(written)) == WRITERS * EACH

    def check(r):  # type: ignore[no-untyped-def]
        ids = {row["id"] for row in r.rows("SELECT id FROM memories")}
        broken = r.scalar(
            "SELECT count(*) FROM memories m LEFT JOIN memories s ON s.id = m.superseded_by "
            "WHERE m.superseded_by IS NOT NULL AND (s.id IS NULL OR s.superseded_by IS NOT NULL)"
        )
        recorded = r.scalar("SELECT count(*) FROM consolidation_merges WHERE kind = 'memory'")
        superseded = r.scalar("SELECT count(*) FROM memories WHERE superseded_by IS NOT NULL")
        return ids, broken, recorded, superseded

    ids, broken, recorded, superseded = first.read(check)
    assert set(written) <= ids  # nothing lost, nothing deleted
    assert broken == 0  # every merged memory points at a current survivor
    assert merged > 0 and recorded == superseded == merged
    print(f"{WRITERS} writers x {EACH} memories while consolidating: {merged} merged, none lost")
    first.close()


@pytest.mark.parametrize(
    ("name", "value", "said"),
    [
        (
            "THREADLOOM_CONSOLIDATE_INTERVAL",
            "-5",
            "THREADLOOM_CONSOLIDATE_INTERVAL: Input should be greater than or equal to 0",
        ),
        ("THREADLOOM_CONSOLIDATE_INTERVAL", "daily", "THREADLOOM_CONSOLIDATE_INTERVAL: Input should be a valid number"),
        ("THREADLOOM_CONSOLIDATE_APPLY", "perhaps", "THREADLOOM_CONSOLIDATE_APPLY: Input should be a valid boolean"),
    ],
)
def test_bad_settings_are_refused_clearly(monkeypatch: pytest.MonkeyPatch, name: str, value: str, said: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=said):
        load_settings()


@pytest.mark.anyio
async def test_the_daemons_pass_reports_a_dry_run_unless_told_to_apply(tmp_path: Path) -> None:
    import anyio

    from threadloom.config import Settings
    from threadloom.daemon.consolidate_job import keep_consolidating
    from threadloom.runtime import open_runtime
    from threadloom.store import jobs

    for apply in (False, True):
        home = tmp_path / f"home-{apply}"
        settings = Settings(home=home, embedder="none", consolidate_interval=0.2, consolidate_apply=apply, user="ana")
        runtime = open_runtime(settings, "daemon")
        try:
            for text in FACTS[0], FACTS[0] + ".":
                runtime.memory.store(NewMemory(content=text), Provenance("s", "claude", "/repo", user="ana"))
            with anyio.move_on_after(20):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(keep_consolidating, runtime)
                    while runtime.store.read(lambda r: jobs.last_run(r, "consolidate")) is None:
                        await anyio.sleep(0.1)
                    tg.cancel_scope.cancel()
            last = runtime.store.read(lambda r: jobs.last_run(r, "consolidate"))
            assert last is not None and last["dry_run"] is not apply
            assert last["outcome"]["merged" if apply else "would_merge"]["memory"] == 1
        finally:
            runtime.close()
