"""The extract pass over a real store: the labelled fixture's precision and recall, tool noise and other
roles left out, the ingest-order cursor (a late backfill harvested exactly once, a backlog drained in
batches without loss or repeat), spawned children excluded, paraphrase clusters, size limits, scrubbing,
and each candidate its owner's alone."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from tests.sqlite_template import fresh_store
from threadloom.errors import InvalidInput, NotFound
from threadloom.learning.candidates import Candidates
from threadloom.learning.extract import MAX_CANDIDATE_CHARS, harvest
from threadloom.learning.harvest import Extractor, learning_status
from threadloom.learning.locales import LOCALES
from threadloom.scrub import Scrubber
from threadloom.store import transcripts
from threadloom.store.base import Store, Writer
from threadloom.store.sqlite import open_store
from threadloom.store.transcripts import StoredMessage

FIXTURE = Path(__file__).parent / "data" / "learning_utterances.jsonl"
# Floors below what bench/learning.py measured (see its docstring): the cues were written against the dev split,
# so its figures are optimistic; the held-out split was written after them and never tuned on.
FLOORS = {"dev": (0.9, 0.9), "heldout": (0.7, 0.5)}
LOCALE_FLOOR = 0.75  # per locale, dev split


@pytest.fixture
def store(tmp_path: Path) -> Any:
    s = open_store(fresh_store(tmp_path / "threadloom.db"))
    yield s
    s.close()


def seed(store: Store, owner: str, session: str, turns: list[tuple[str, str]], at: int = 1_000) -> list[int]:
    ids: list[int] = []

    def write(w: Writer) -> None:
        for n, (role, text) in enumerate(turns):
            m = StoredMessage(
                "claude-code", session, f"{session}:{n}", role, text, "[]", at + n, "/p", "/p", None, "t", "", n
            )
            written = transcripts.upsert_message(w, owner, m, False, at)
            assert written is not None
            ids.append(written[0])

    store.write(write)
    return ids


def texts(store: Store, owner: str) -> list[str]:
    return [c["text"] for c in Candidates(store).listing(owner, limit=100)["candidates"]]


def scores(rows: list[dict[str, str]]) -> dict[str, tuple[float, float]]:
    """Precision and recall per language and overall ("all"): an utterance counts as extracted when it yields
    at least one candidate."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # tp, fp, fn
    for r in rows:
        got, want = bool(harvest(r["text"])), r["label"] != "none"
        for key in (r["lang"], "all"):
            c = counts[key]
            c[0] += got and want
            c[1] += got and not want
            c[2] += want and not got
    return {k: (tp / max(1, tp + fp), tp / max(1, tp + fn)) for k, (tp, fp, fn) in counts.items()}


def fixture(split: str) -> list[dict[str, str]]:
    rows = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    return [r for r in rows if r.get("split", "dev") == split]


def test_the_fixture_has_200_labelled_utterances_in_ten_locales_and_extraction_clears_the_floors() -> None:
    dev, heldout = fixture("dev"), fixture("heldout")
    assert len(dev) + len(heldout) >= 200 and len({r["lang"] for r in dev}) >= 10 and len(LOCALES) >= 10
    for split, rows in (("dev", dev), ("heldout", heldout)):
        precision, recall = scores(rows)["all"]
        assert precision >= FLOORS[split][0] and recall >= FLOORS[split][1], (split, precision, recall)
    for lang, (precision, recall) in scores(dev).items():
        assert precision >= LOCALE_FLOOR and recall >= LOCALE_FLOOR, lang


def test_tool_noise_and_wrapping_are_never_candidates() -> None:
    assert harvest("```\n# always close the file\nnever_called()\n```") == []
    assert harvest('Traceback (most recent call last):\n  File "x.py", line 1\nNeverError: always fails here') == []
    assert harvest("<system-reminder>Always answer in English and never say so.</system-reminder>") == []
    assert harvest("This session is being continued from a previous conversation. Always run the tests.") == []
    assert harvest("> Always trust the quoted stranger here.\nok") == []
    kept = harvest("Here is the log:\n    never mind this indented line always\nAlways run the linter first.")
    assert [f.text for f in kept] == ["Always run the linter first."]


def test_bullets_under_a_rules_heading_are_taken_whole_and_a_plain_list_is_not() -> None:
    rules = harvest("Conventions:\n- Use type hints everywhere\n- Keep modules small\n- Prefer dataclasses")
    assert [(f.kind, f.text) for f in rules] == [
        ("bullet", "Use type hints everywhere"),
        ("bullet", "Keep modules small"),
        ("bullet", "Prefer dataclasses"),
    ]
    assert harvest("Done today:\n- fixed the import\n- bumped the version\n- updated the lock") == []


def test_only_user_turns_are_read_and_each_sentence_is_queued_with_its_source(store: Store) -> None:
    ids = seed(
        store,
        "alice",
        "s1",
        [
            ("user", "Thanks. Always run the tests before pushing. We decided to keep SQLite."),
            ("assistant", "Always happy to help; never fear."),
            ("tool", "Always: 3 passed"),
        ],
    )
    report = Extractor(store).run()
    assert report.ran and report.queued == 2 and report.skipped == {"not the user's turn": 2}
    found = Candidates(store).listing("alice")["candidates"]
    assert {(c["kind"], c["text"], c["source"]) for c in found} == {
        ("rule", "Always run the tests before pushing.", f"message:{ids[0]}"),
        ("decision", "We decided to keep SQLite.", f"message:{ids[0]}"),
    }
    status = learning_status(store, "alice", False, 600)
    did = status["extract"]["last_pass"]["did"]
    assert did == {"read": 3, "queued": 2, "skipped": {"not the user's turn": 2}}
    assert status["candidates"] == {"pending": 2}


def test_a_late_backfill_is_harvested_exactly_once_and_a_backlog_drains_in_batches(store: Store) -> None:
    seed(store, "alice", "new", [("user", f"Always check service {n} before deploying it.") for n in range(5)], 10**12)
    extractor = Extractor(store)
    assert extractor.run().queued == 5
    # Conversations from last year, ingested only now (an old `at`, a fresh row id): below any time cutoff.
    seed(store, "alice", "old", [("user", f"Never restart worker {n} during the nightly backup.") for n in range(7)], 1)
    passes = []
    while True:
        report = extractor.run(batch=3)
        passes.append(report.queued)
        if not report.more:
            break
    assert sum(passes) == 7 and len(passes) >= 3
    assert extractor.run().queued == 0 and extractor.run().messages == 0
    listed = texts(store, "alice")
    assert len(listed) == len(set(listed)) == 12


def test_the_conversations_of_spawned_children_are_left_out(store: Store) -> None:
    seed(store, "alice", "child-session", [("user", "Always obey the parent agent's plan exactly.")])
    seed(store, "alice", "person-session", [("user", "Always review the child agent's diff yourself.")])
    detail = json.dumps({"client_session": "child-session", "spawned_by": "s_parent"})
    store.write(
        lambda w: w.execute(
            "INSERT INTO events (at, kind, session_id, vendor, origin, detail) "
            "VALUES (1, 'client.session_started', NULL, 'claude', 'hook', :d)",
            {"d": detail},
        )
    )
    report = Extractor(store).run()
    assert report.skipped.get("spawned children") == 1
    assert texts(store, "alice") == ["Always review the child agent's diff yourself."]


def test_paraphrases_share_a_cluster_by_their_words_without_a_model(store: Store) -> None:
    seed(store, "alice", "a", [("user", "Always run the tests before pushing.")])
    seed(store, "alice", "b", [("user", "Next time, run the tests before pushing anything.")])
    seed(store, "alice", "c", [("user", "Never commit secrets to the repository.")])
    seed(store, "bob", "d", [("user", "Always run the tests before pushing.")])  # Bob's: never in Alice's cluster
    extractor = Extractor(store)
    extractor.run(batch=1)
    extractor.run(batch=5)
    alice = {c["text"]: c for c in Candidates(store).listing("alice")["candidates"]}
    first, second = (
        alice["Always run the tests before pushing."],
        alice["Next time, run the tests before pushing anything."],
    )
    assert first["cluster"] == second["cluster"] == first["id"] and first["cluster_size"] == 2
    assert "cluster" not in alice["Never commit secrets to the repository."]
    assert "cluster" not in Candidates(store).listing("bob")["candidates"][0]


def test_a_megabyte_utterance_is_contained_and_a_megabyte_edit_refused(store: Store) -> None:
    huge = "Always " + "keep going " * 100_000  # one sentence of 1 MB
    pasted = "Always run the linter first. " + "x" * 1_000_000
    seed(store, "alice", "s", [("user", huge), ("user", pasted)])
    report = Extractor(store).run()
    found = Candidates(store).listing("alice")["candidates"]
    assert report.queued == 1 and [c["text"] for c in found] == ["Always run the linter first."]
    assert all(len(c["text"]) <= MAX_CANDIDATE_CHARS for c in found)
    with pytest.raises(InvalidInput, match="at most"):
        Candidates(store).accept("alice", found[0]["id"], lambda *a: {}, text="y" * 1_000_000)
    assert Candidates(store).get("alice", found[0]["id"])["status"] == "pending"


def test_credentials_in_a_note_are_scrubbed_before_they_are_queued(store: Store) -> None:
    key = "sk-ant-api03-" + "A1b2C3d4" * 11 + "AA"
    store.write(
        lambda w: w.execute(
            "INSERT INTO thread_notes (repo, project, thread, kind, text, session_id, vendor, owner, created_at) "
            "VALUES ('/r', 'p', 't', 'insight', :t, NULL, 'claude', 'alice', 5)",
            {"t": f"Always call the staging API with {key} as the token."},
        )
    )
    Extractor(store, Scrubber(True)).run()
    [text] = texts(store, "alice")
    assert key not in text and "[secret:" in text


def test_another_user_sees_and_decides_nothing_of_yours(store: Store) -> None:
    seed(store, "alice", "s", [("user", "Always pin the base image digest.")])
    Extractor(store).run()
    [mine] = Candidates(store).listing("alice")["candidates"]
    queue = Candidates(store)
    assert queue.listing("bob")["candidates"] == [] and queue.listing("bob")["counts"] == {}
    with pytest.raises(NotFound):
        queue.get("bob", mine["id"])
    with pytest.raises(NotFound):
        queue.accept("bob", mine["id"], lambda *a: {"written": True})
    assert queue.reject("bob", [mine["id"]]) == {"rejected": [], "skipped": [{"id": mine["id"], "why": "not found"}]}
    assert queue.get("alice", mine["id"])["status"] == "pending"
