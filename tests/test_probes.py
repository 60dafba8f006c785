"""The self-test: passes through the real tools on a healthy build, fails (naming what broke) when a subsystem
is broken on purpose, never touches the user's store but to record its outcome, and reads back as
reliability over time."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from threadloom.config import Settings
from threadloom.coordination.signals import SignalService
from threadloom.daemon import probe_job
from threadloom.errors import StoreError
from threadloom.health import reliability
from threadloom.health.probes import CATEGORIES, Outcome
from threadloom.health.stats import HealthService
from threadloom.runtime import open_runtime
from threadloom.server.probe_driver import ProbeRun, _ToolSession, run_probe
from threadloom.store import documents
from threadloom.store.base import Store
from threadloom.store.sqlite import open_store


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path / "home", embedder="none", ingest=False, user="alice")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = open_store(tmp_path / "real.db")
    yield opened
    opened.close()


def probe(settings: Settings) -> ProbeRun:
    return anyio.run(run_probe, settings)


def by_category(run: ProbeRun) -> dict[str, Outcome]:
    return {o.category: o for o in run.outcomes}


def test_every_category_passes_on_a_healthy_build_and_the_users_home_stays_untouched(settings: Settings) -> None:
    run = probe(settings)
    assert [o.category for o in run.outcomes] == list(CATEGORIES)
    assert run.ok, run.as_dict()
    assert all(o.ms > 0 and o.error is None for o in run.outcomes)
    assert not settings.home.exists()  # the scratch home was a temporary folder, now gone


def test_a_search_index_that_stores_nothing_fails_recall_and_amend(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(documents, "upsert", lambda w, doc, now: 0)  # the index takes nothing in
    found = by_category(probe(settings))
    assert not found["memory.recall"].ok and "memory_recall did not find" in str(found["memory.recall"].error)
    assert not found["memory.amend"].ok
    assert found["signal.delivery"].ok and found["thread.context"].ok  # the rest still says what works


def test_a_tool_that_raises_fails_its_category_with_the_tools_error(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: SignalService, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the wire is cut")

    monkeypatch.setattr(SignalService, "whisper", broken)
    found = by_category(probe(settings))
    assert not found["signal.delivery"].ok
    assert "signal_send" in str(found["signal.delivery"].error) and "RuntimeError" in str(
        found["signal.delivery"].error
    )
    assert found["memory.recall"].ok and found["thread.context"].ok


def test_a_store_error_in_one_service_is_reported_not_raised(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    def busy(*args: Any, **kwargs: Any) -> Any:
        raise StoreError("the store is full")

    monkeypatch.setattr("threadloom.threads.service.ThreadService.create_project", busy)
    found = by_category(probe(settings))
    assert not found["thread.context"].ok and "the store is full" in str(found["thread.context"].error)


def test_a_scratch_store_that_cannot_open_fails_every_category(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise OSError("no space left on device")

    monkeypatch.setattr("threadloom.server.probe_driver.open_runtime", refuse)
    run = probe(settings)
    assert not run.ok and [o.category for o in run.outcomes] == list(CATEGORIES)
    assert all("no space left" in str(o.error) for o in run.outcomes)


def test_results_read_back_as_reliability_per_category(
    settings: Settings, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = probe(settings)
    reliability.record(store, good.run_id, good.outcomes, "cli")
    monkeypatch.setattr(documents, "upsert", lambda w, doc, now: 0)
    bad = probe(settings)
    reliability.record(store, bad.run_id, bad.outcomes, "daemon")
    probes = HealthService(store).report("anyone")["probes"]
    recall = probes["categories"]["memory.recall"]
    assert recall["runs"] == {"1d": 2, "7d": 2, "30d": 2} and recall["passed"] == {"1d": 1, "7d": 1, "30d": 1}
    assert recall["pass_rate_30d"] == 0.5 and "memory_recall" in recall["last_failure"]["error"]
    assert recall["p50_ms"] == pytest.approx(by_category(good)["memory.recall"].ms, abs=0.1)
    signal = probes["categories"]["signal.delivery"]
    assert signal["pass_rate_30d"] == 1.0 and signal["last_failure"] is None
    assert probes["last_run"]["run_id"] == bad.run_id
    assert reliability.last_run_at(store) == probes["last_run"]["at"]
    triggers = store.read(lambda r: r.rows("SELECT DISTINCT trigger FROM probe_results ORDER BY trigger"))
    assert [t["trigger"] for t in triggers] == ["cli", "daemon"]


def test_a_huge_error_is_cut_before_it_is_stored(store: Store) -> None:
    reliability.record(store, "r1", [Outcome("memory.recall", False, 1.0, "x" * 100_000)], "cli")
    kept = store.read(lambda r: r.scalar("SELECT LENGTH(error) FROM probe_results"))
    assert kept == 300


def test_the_daemon_schedule_follows_the_last_recorded_run() -> None:
    hour = 3600.0
    assert probe_job.seconds_until_due(None, hour, 10_000_000) == 0.0
    assert probe_job.seconds_until_due(10_000_000, hour, 10_000_000 + 600_000) == pytest.approx(3000.0)
    assert probe_job.seconds_until_due(10_000_000, hour, 10_000_000 + 7_200_000) == 0.0


def test_an_interval_of_zero_turns_the_scheduled_probe_off(tmp_path: Path) -> None:
    runtime = open_runtime(Settings(home=tmp_path / "h", embedder="none", ingest=False, probe_interval=0), "cli")
    try:

        async def bounded() -> None:
            with anyio.fail_after(5):
                await probe_job.keep_probing(runtime)  # returns at once instead of looping

        anyio.run(bounded)
        assert reliability.last_run_at(runtime.store) is None
    finally:
        runtime.close()


@pytest.mark.slow  # waits out the probe's timeout
def test_a_tool_that_never_answers_times_out_and_the_categories_done_before_keep_their_outcome(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    answer = _ToolSession.call

    async def never_for_signals(self: _ToolSession, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if tool == "signal_send":
            await anyio.sleep_forever()
        return await answer(self, tool, arguments)

    monkeypatch.setattr(_ToolSession, "call", never_for_signals)
    run = anyio.run(run_probe, settings, 10.0)
    found = by_category(run)
    assert [o.category for o in run.outcomes][:2] == ["memory.recall", "memory.amend"]
    assert found["memory.recall"].ok and found["memory.amend"].ok
    assert not found["signal.delivery"].ok and found["signal.delivery"].error == "timed out after 10 s"
    assert not found["thread.context"].ok and len(run.outcomes) == len(CATEGORIES)
