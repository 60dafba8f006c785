"""The activation gate on a labelled fixture of conversations (tests/data/style_gate.jsonl): three users
writing in English, Spanish and Chinese over several sessions, with the habits that should become active
(shown in two sessions or more) and those that should not (one session only, a burst in one session, words
inside code, a quoted phrase). Every habit the learner activates must be one labelled to activate."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from threadloom.clock import now_ms
from threadloom.store import transcripts
from threadloom.store.base import Store
from threadloom.store.sqlite import SqliteStore, open_store
from threadloom.style import Learner
from threadloom.style.model import habit_key

FIXTURE = Path(__file__).parent / "data" / "style_gate.jsonl"


def add_message(
    store: Store, owner: str, source: str, session: str, key: str, text: str, at: int, role: str = "user"
) -> None:
    m = transcripts.StoredMessage(source, session, key, role, text, "[]", at, None, None, None, "test", "/t", 0)
    store.write(lambda w: transcripts.upsert_message(w, owner, m, False, at))


def load_fixture(store: Store, path: Path = FIXTURE) -> dict[tuple[str, str, str], bool]:
    """Writes the fixture's messages as ingested transcripts; returns its labels: (user, kind, key) -> active."""
    labels: dict[tuple[str, str, str], bool] = {}
    at = now_ms() - 3_600_000
    for n, line in enumerate(path.read_text().splitlines()):
        row: dict[str, Any] = json.loads(line)
        if "label" in row:
            labels[(row["user"], row["label"]["kind"], habit_key(row["label"]["text"]))] = bool(row["active"])
        else:
            add_message(store, row["user"], row["source"], row["session"], f"k{n}", row["text"], at + n)
    return labels


def gate_outcome(store: Store, labels: dict[tuple[str, str, str], bool]) -> dict[str, Any]:
    active = {
        (str(o), str(k), str(key))
        for o, k, key in store.read(
            lambda r: r.tuples("SELECT owner, kind, key FROM style_habits WHERE status = 'active'")
        )
    }
    should = {h for h, on in labels.items() if on}
    tp = len(active & should)
    return {
        "precision": tp / len(active) if active else 1.0,
        "recall": tp / len(should) if should else 1.0,
        "false_active": sorted(active - should),
        "missed": sorted(should - active),
    }


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    s = open_store(tmp_path / "gate.db")
    yield s
    s.close()


def test_the_gate_activates_exactly_the_habits_labelled_to_activate(store: SqliteStore) -> None:
    labels = load_fixture(store)
    report = Learner(store).run("test")
    assert report.messages == sum(1 for line in FIXTURE.read_text().splitlines() if '"label"' not in line)
    outcome = gate_outcome(store, labels)
    assert outcome["false_active"] == [] and outcome["missed"] == []
    assert outcome["precision"] == 1.0 and outcome["recall"] == 1.0
    # The labelled negatives were seen (candidates) yet kept out, except words that only appeared in code.
    candidates = {
        (str(o), str(k), str(key))
        for o, k, key in store.read(
            lambda r: r.tuples("SELECT owner, kind, key FROM style_habits WHERE status = 'candidate'")
        )
    }
    assert ("en_dev", "catchphrase", "omg") in candidates and ("zh_dev", "dialect", "巴适") in candidates
    assert ("en_dev", "catchphrase", "lol") not in candidates  # only inside code: not the user's voice


def test_a_second_pass_over_the_same_messages_counts_nothing_again(store: SqliteStore) -> None:
    load_fixture(store)
    first = Learner(store).run("test")
    seen = store.read(lambda r: r.scalar("SELECT SUM(seen) FROM style_habits"))
    again = Learner(store).run("test")
    assert first.observations > 0 and again.messages == 0 and again.observations == 0
    assert store.read(lambda r: r.scalar("SELECT SUM(seen) FROM style_habits")) == seen
