"""Hints that a new memory may disagree with a similar older one: a changed number, a negation,
a replaced value. They are heuristics shown to the writer, never stored as edges; the writer
confirms one with a single `amend` call.
"""

from __future__ import annotations

import re
from typing import Final

_WORD: Final = re.compile(r"[^\W_]+(?:[.'][^\W_]+)*", re.UNICODE)
_NUMBER: Final = re.compile(r"^\d+(?:[.,]\d+)*$")
NEGATIONS: Final = frozenset(
    [
        "not",
        "no",
        "never",
        "none",
        "nothing",
        "nobody",
        "neither",
        "nor",
        "cannot",
        "can't",
        "won't",
        "don't",
        "doesn't",
        "didn't",
        "isn't",
        "aren't",
        "wasn't",
        "weren't",
        "shouldn't",
        "wouldn't",
        "couldn't",
        "haven't",
        "hasn't",
        "hadn't",
        "without",
        "stop",
        "stopped",
    ]
)
_FILLER: Final = frozenset("a an the is are was were be to of in on at for and or it this that we our".split())  # noqa: SIM905


def _tokens(text: str) -> list[str]:
    return [t for t in _WORD.findall(text.lower()) if t not in _FILLER]


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def conflict_reason(new: str, old: str) -> str | None:
    """Why `new` may contradict `old`, or None. Both are assumed to be about the same thing."""
    new_tokens, old_tokens = _tokens(new), _tokens(old)
    new_numbers = {t for t in new_tokens if _NUMBER.match(t)}
    old_numbers = {t for t in old_tokens if _NUMBER.match(t)}
    new_words = {t for t in new_tokens if t not in new_numbers and t not in NEGATIONS}
    old_words = {t for t in old_tokens if t not in old_numbers and t not in NEGATIONS}
    overlap = _jaccard(new_words, old_words)
    if new_numbers and old_numbers and new_numbers != old_numbers and overlap >= 0.5:
        before = ", ".join(sorted(old_numbers - new_numbers)) or ", ".join(sorted(old_numbers))
        after = ", ".join(sorted(new_numbers - old_numbers)) or ", ".join(sorted(new_numbers))
        return f"a changed number: {before} -> {after}"
    new_negated = any(t in NEGATIONS for t in new_tokens)
    old_negated = any(t in NEGATIONS for t in old_tokens)
    if new_negated != old_negated and overlap >= 0.6:
        return "a negation: one says not, the other does not"
    gone, came = old_words - new_words, new_words - old_words
    if overlap >= 0.6 and 1 <= len(gone) == len(came) <= 2:  # one value swapped for another, the rest the same
        return f"a replaced value: {' '.join(sorted(gone))} -> {' '.join(sorted(came))}"
    return None
