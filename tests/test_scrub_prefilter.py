"""The scrubber's prefilter: a bounded rule's needle is looked for in the text's long runs only. That is sound
only while every bounded rule's match is a run of MIN_RUN or more RUN_CHARS; these tests read each pattern
to hold it to that, and compare the filtered rule choice with the plain one on real-shaped text."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from threadloom.scrub import scrub
from threadloom.scrub.engine import MIN_RUN, RUN_CHARS, _lower, _present
from threadloom.scrub.vendors import VENDOR_RULES, Rule

_parser: Any = getattr(re, "_parser")  # noqa: B009 - the stdlib's own regex parser (sre_parse), to read patterns
_c: Any = getattr(re, "_constants")  # noqa: B009
ALLOWED = frozenset(RUN_CHARS.decode())
CORPUS = Path(__file__).parent / "data" / "secrets"
BOUNDED = [r for r in VENDOR_RULES if r.bounded]


def _chars(items: Any) -> set[str] | None:
    """Every character a parsed pattern can consume (lookarounds skipped); None when a class is open-ended."""
    found: set[str] = set()
    for op, arg in items:
        if op is _c.LITERAL:
            found.add(chr(arg))
        elif op is _c.IN:
            for inner, value in arg:
                if inner is _c.LITERAL:
                    found.add(chr(value))
                elif inner is _c.RANGE:
                    found.update(chr(c) for c in range(value[0], value[1] + 1))
                elif inner is _c.CATEGORY and value is _c.CATEGORY_DIGIT:
                    # \d takes any script's digits too; no vendor writes a token with them (not a secret)
                    found.update("0123456789")
                else:  # a category (\w, \d, \s) or a negation: not a closed set of ASCII characters
                    return None
        elif op in (_c.MAX_REPEAT, _c.MIN_REPEAT, _c.POSSESSIVE_REPEAT):
            inner_chars = _chars(arg[2])
            if inner_chars is None:
                return None
            found |= inner_chars
        elif op is _c.SUBPATTERN:
            inner_chars = _chars(arg[-1])
            if inner_chars is None:
                return None
            found |= inner_chars
        elif op is _c.BRANCH:
            for branch in arg[1]:
                inner_chars = _chars(branch)
                if inner_chars is None:
                    return None
                found |= inner_chars
        elif op in (_c.ASSERT, _c.ASSERT_NOT, _c.AT):
            continue
        else:
            return None
    return found


@pytest.mark.parametrize("rule", BOUNDED, ids=lambda r: f"{r.kind}:{r.needles[0]}")
def test_every_bounded_rule_matches_only_a_long_run_of_run_characters(rule: Rule) -> None:
    parsed = _parser.parse(rule.pattern.pattern)
    assert parsed.getwidth()[0] >= MIN_RUN
    chars = _chars(list(parsed))
    assert chars is not None and chars <= ALLOWED, sorted((chars or set()) - ALLOWED)


def _texts() -> list[str]:
    texts = []
    for name in ("secrets.jsonl", "lookalikes.jsonl"):
        for line in (CORPUS / name).read_text(encoding="utf-8").splitlines():
            if line:
                texts.append(json.loads(line)["text"])
    return texts


def _plain(text: str) -> list[Rule]:
    """The rule choice without the prefilter: every needle looked for in the whole text."""
    lower = _lower(text)
    return [r for r in VENDOR_RULES if any(n in (lower if r.folded else text) for n in r.needles)]


def _matching(text: str, rules: list[Rule]) -> set[int]:
    return {i for i, r in enumerate(VENDOR_RULES) if r in rules and r.pattern.search(text)}


@pytest.mark.parametrize("wrap", ["{}", "é{}é", "({})", "key={}\n", "see https://x.test/{}?a=1", "“{}”"])
def test_the_prefilter_keeps_every_rule_that_can_match_on_the_corpus(wrap: str) -> None:
    for text in _texts():
        wrapped = wrap.format(text)
        chosen = _present(wrapped, _lower(wrapped))
        assert set(chosen) <= set(_plain(wrapped))
        assert _matching(wrapped, chosen) == _matching(wrapped, _plain(wrapped)), wrapped


def test_prose_holds_no_run_and_a_token_in_it_is_still_found() -> None:
    prose = "the parser keeps every record it can read and reports what it skips, " * 20
    assert _present(prose, _lower(prose)) == []
    token = "ghp_" + "a1B2c3D4e5" * 4
    for text in (f"{prose}{token}", f"{prose}\u00e9{token}\u00e9 done", f"{prose}[{token}]"):
        assert token not in scrub(text).text
