"""Concepts (dedup on write, confidence by distinct sources) and insights (distill, one vote per session,
export above the threshold exactly once): a real store and a real export folder in a temp dir."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes import HashingEmbedder
from tests.sqlite_template import fresh_home
from threadloom.config import Settings
from threadloom.errors import InvalidInput, NotFound
from threadloom.learning.concepts import Concepts, confidence
from threadloom.learning.insights import Insights
from threadloom.runtime import Runtime, open_runtime


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[Runtime]:
    rt = open_runtime(Settings(home=fresh_home(tmp_path / "home"), embedder="none"), "cli")
    yield rt
    rt.close()


def insights(runtime: Runtime, threshold: int = 2) -> Insights:
    return Insights(runtime.store, runtime.settings.layout.home / "insights", threshold)


def test_a_concept_deduplicates_on_write_and_gains_confidence_per_distinct_source(runtime: Runtime) -> None:
    c = Concepts(runtime.store)
    first = c.observe("alice", "Flaky tests are the ones that read the clock.", "session:a")
    again = c.observe("alice", "  flaky TESTS are the ones that read the clock!! ", "session:b")
    same_source = c.observe("alice", "Flaky tests are the ones that read the clock", "session:b")
    assert first["created"] is True and again["created"] is False and again["id"] == first["id"]
    assert (first["confidence"], again["confidence"]) == (confidence(1), confidence(2))
    assert confidence(1) < confidence(2) < confidence(3) < 1.0
    assert same_source["new_source"] is False and same_source["confidence"] == confidence(2)
    c.observe("alice", "Migrations must be reversible.", "note:7")
    listed = c.listing("alice")
    assert [x["text"] for x in listed] == [
        "Flaky tests are the ones that read the clock.",
        "Migrations must be reversible.",
    ]
    assert listed[0]["observations"] == 2 and set(listed[0]["sources"]) == {"session:a", "session:b"}


def test_with_an_embedder_a_restatement_is_the_same_concept(runtime: Runtime) -> None:
    embedder = HashingEmbedder()
    c = Concepts(runtime.store, embedder=lambda: embedder)
    first = c.observe("alice", "The automobile build breaks on Mondays", "session:a")
    restated = c.observe("alice", "The car build breaks on Mondays", "session:b")
    other = c.observe("alice", "Reviews wait for the lead developer", "session:b")
    assert restated["id"] == first["id"] and restated["similarity"] >= 0.75 and restated["sources"] == 2
    assert other["created"] is True


def test_concepts_and_insights_are_per_owner(runtime: Runtime) -> None:
    c = Concepts(runtime.store)
    a = c.observe("alice", "Deploys fail when the cache is cold.", "session:a")
    b = c.observe("bob", "Deploys fail when the cache is cold.", "session:b")
    assert b["created"] is True and b["id"] != a["id"] and b["confidence"] == confidence(1)
    assert [x["id"] for x in c.listing("bob")] == [b["id"]]
    ins = insights(runtime)
    mine = ins.distill("alice", "Pin the toolchain.", "s-a")
    with pytest.raises(NotFound):
        ins.vote("bob", mine["id"], "s-b", "up")
    assert ins.listing("bob") == []


@pytest.mark.parametrize("text", ["x" * 1_000_000, "", "   ", "!!! ???", 42])
def test_bad_concepts_and_insights_are_refused_before_anything_is_written(runtime: Runtime, text: object) -> None:
    with pytest.raises(InvalidInput):
        Concepts(runtime.store).observe("alice", text, "session:a")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        insights(runtime).distill("alice", text, "s-a")  # type: ignore[arg-type]
    assert (
        runtime.store.read(
            lambda r: r.scalar("SELECT count(*) FROM concepts") + r.scalar("SELECT count(*) FROM insights")
        )
        == 0
    )


def test_one_vote_per_session_and_never_the_author(runtime: Runtime) -> None:
    ins = insights(runtime, threshold=5)
    made = ins.distill("alice", "Run the linter before the tests.", "s-author")
    assert ins.distill("alice", "run the linter before the tests", "s-x")["id"] == made["id"]
    with pytest.raises(InvalidInput, match="cannot vote"):
        ins.vote("alice", made["id"], "s-author", "up")
    assert ins.vote("alice", made["id"], "s-1", "up")["counted"] is True
    repeat = ins.vote("alice", made["id"], "s-1", "up")
    assert repeat["counted"] is False and repeat["up"] == 1
    assert ins.vote("alice", made["id"], "s-2", "down")["down"] == 1


def test_an_insight_past_the_threshold_is_exported_exactly_once(runtime: Runtime) -> None:
    ins = insights(runtime, threshold=2)
    a = ins.distill("alice", "Small commits review faster.", "s-0")
    b = ins.distill("alice", "Name tests after the behaviour.", "s-0")
    assert ins.vote("alice", a["id"], "s-1", "up")["exported"] == 0
    assert ins.vote("alice", a["id"], "s-2", "up")["exported"] == 1
    assert ins.vote("alice", a["id"], "s-3", "up")["exported"] == 0  # already out
    assert ins.export("alice")["exported"] == 0
    ins.vote("alice", b["id"], "s-1", "up")
    ins.vote("alice", b["id"], "s-2", "up")
    path = runtime.settings.layout.home / "insights" / "alice.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["id"] for r in records] == [a["id"], b["id"]] and records[0]["text"] == "Small commits review faster."
    assert not (runtime.settings.layout.home / "insights" / "bob.jsonl").exists()


def test_a_crash_between_the_file_and_the_mark_does_not_export_twice(runtime: Runtime) -> None:
    ins = insights(runtime, threshold=1)
    a = ins.distill("alice", "Measure before optimising.", "s-0")
    ins.vote("alice", a["id"], "s-1", "up")
    runtime.store.write(lambda w: w.execute("UPDATE insights SET exported_at = NULL"))  # the mark never landed
    assert ins.export("alice")["exported"] == 0
    path = runtime.settings.layout.home / "insights" / "alice.jsonl"
    assert len(path.read_text().splitlines()) == 1
    assert runtime.store.read(lambda r: r.scalar("SELECT exported_at FROM insights")) is not None


def test_an_export_file_linked_out_of_the_folder_is_refused_and_the_vote_stands(
    runtime: Runtime, tmp_path: Path
) -> None:
    ins = insights(runtime, threshold=1)
    made = ins.distill("alice", "Keep it small.", "s-0")
    folder = runtime.settings.layout.home / "insights"
    folder.mkdir(parents=True, exist_ok=True)
    outside = tmp_path / "outside.txt"
    outside.write_text("outside\n")
    (folder / "alice.jsonl").symlink_to(outside)
    out = ins.vote("alice", made["id"], "s-1", "up")
    assert out["counted"] is True and out["exported"] == 0 and "symlink" in out["export_error"]
    assert outside.read_text() == "outside\n"
    (folder / "alice.jsonl").unlink()
    assert ins.export("alice")["exported"] == 1  # exported once the file is ours again


def test_credentials_in_a_concept_are_scrubbed_before_they_are_stored(runtime: Runtime) -> None:
    made = Concepts(runtime.store, runtime.scrubber).observe("alice", "Deploy key ghp_" + "a1" * 18 + " works", "s")
    assert "ghp_" not in made["text"] and "[secret:" in made["text"]
