"""The extractor's prefilter (learning/prefilter.py, locales.any_keyword): the literals it takes from each cue
are ones every match contains, so skipping a text without any of them loses nothing. Checked against every
labelled utterance and a set of constructed matches, per cue pattern, and on hand-made patterns."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from threadloom.learning.extract import harvest
from threadloom.learning.locales import LOCALES, any_keyword
from threadloom.learning.prefilter import any_of, required

FIXTURE = Path(__file__).parent / "data" / "learning_utterances.jsonl"
PATTERNS = [(name, p) for name, c in LOCALES.items() for p in (*c.decision, *c.rule, *c.always, *c.starts)]


@pytest.mark.parametrize(
    ("pattern", "needs"),
    [
        ("the decision (?:is|was)", {"the decision "}),
        ("(?:we|i)(?:'ve| have)? (?:decided|agreed)", {"decided", "agreed"}),
        ("make sure(?: to)?", {"make sure"}),
        ("x?", None),
        ("(?:a|b*)", None),
        ("Always", {"always"}),
        ("no+ way", {" way"}),
    ],
)
def test_required_literals_of_hand_made_patterns(pattern: str, needs: set[str] | None) -> None:
    assert required(pattern) == needs


def test_every_cue_match_in_the_fixture_holds_one_of_its_required_literals() -> None:
    texts = [json.loads(line)["text"] for line in FIXTURE.read_text().splitlines() if line.strip()]
    checked = 0
    for _, pattern in PATTERNS:
        needs = required(pattern)
        assert needs, pattern  # every cue promises a literal: no locale goes unfiltered
        compiled = re.compile(pattern, re.IGNORECASE)
        for text in texts:
            for m in compiled.finditer(text):
                checked += 1
                assert any(n in m.group(0).lower() for n in needs), (pattern, m.group(0))
    assert checked >= 200


def test_any_of_finds_exactly_the_texts_holding_a_word() -> None:
    words = {"nie", "niemals", "next time", "a.b", "常に"}
    pattern = re.compile(any_of(words))
    for text, hit in (("nie wieder", True), ("niemals", True), ("the next time", True), ("axb", False),
                      ("a.b", True), ("常に", True), ("next", False), ("", False)):  # fmt: skip
        assert bool(pattern.search(text)) is hit, text
    assert re.compile(any_of({""})).search("anything")


def test_a_text_the_prefilter_skips_yields_nothing_and_one_it_keeps_is_read_whole() -> None:
    assert any_keyword().search("can you look at why the login test fails on ci?") is None
    assert harvest("can you look at why the login test fails on ci?") == []
    said = harvest("ok thanks.\nWe decided to keep the queue in Redis.")
    assert [(f.kind, f.span) for f in said] == [("decision", 11)]
    listed = harvest("Conventions:\n- tabs for Makefiles\n- one commit per change")
    assert [f.kind for f in listed] == ["bullet", "bullet"]  # no cue word, kept for the bullets
