"""Hints that a new memory may disagree with a similar older one. They are heuristics shown to the
writer, never stored as edges; the writer confirms one with a single `amend` call.

Two detectors, one per measure of similarity (`similarity.py`):
- `conflict_reason` (no model): near-verbatim edits only: a changed number, a negation, a swapped
  word, on a large overlap of words. It misses rewordings ("We run PostgreSQL 13 for the event store"
  / "The event store moved to Postgres 16 last week" share two words).
- `reworded_conflict` (a model): the cosine of the two vectors says whether they speak of the same
  thing, and a cheap cue says whether the new one changes it: a value on one side that the other
  lacks, both ways (a version, port, path, name or amount), a change marker ("now", "instead", "no
  longer", "switched", "moved to", ...) that the older text lacks, or a negation on one side only.
  Each cue needs its own cosine: a changed value is common among merely related facts ("the API is on
  8080" / "metrics are on 9090"), so it needs more closeness than a marker does. The floors were tuned
  on half of `tests/data/conflicts.jsonl` and measured on the other half (`bench/conflicts.py`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from threadloom.search.query import STOPWORDS

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


# With a model. Tokens keep the punctuation inside values: python:3.12-slim, ~/.config/x.toml, 1.29.
_VALUE_TOKEN: Final = re.compile(r"[~/]?[^\W_](?:[\w~/.:+-]*[^\W_])?", re.UNICODE)
_SENTENCE_BREAK: Final = re.compile(r"[.!?:;]\s+")
_NUMBER_WORDS: Final = {
    word: str(n)
    for n, word in enumerate("one two three four five six seven eight nine ten eleven twelve".split(), 1)  # noqa: SIM905
}
# Lower-case words that are values in coding memories (tools and branch names people write in lower case).
_LOWER_VALUES: Final = frozenset("uv npm pnpm yarn pip ruff mypy tabs spaces master main".split())  # noqa: SIM905
# Phrases that announce a change of what was true. Matched on whole words, lower-cased.
CHANGE_MARKERS: Final = (
    "no longer",
    "not anymore",
    "anymore",
    "any more",
    "instead",
    "from now on",
    "now",
    "these days",
    "switched",
    "moved",
    "migrated",
    "replaced",
    "changed",
    "renamed",
    "upgraded",
    "downgraded",
    "bumped",
    "raised",
    "lowered",
    "cut",
    "dropped",
    "removed",
    "is gone",
    "deprecated",
    "rescheduled",
    "decided against",
    "took over",
    "new owner",
    "banned",
    "reverted",
)
MAX_VALUES: Final = 64
MAX_VALUE_CHARS: Final = 80
# Words too common in coding memories to show that two speak of the same subject.
_GENERIC: Final = frozenset("now new old run runs use uses used using instead since every last week".split())  # noqa: SIM905
_MARKER: Final = re.compile(r"\b(" + "|".join(re.escape(m) for m in CHANGE_MARKERS) + r")\b")


@dataclass(frozen=True)
class ConflictFloors:
    """Cosine each cue needs, as a fraction of the way from the model's recall floor to 1, so they
    follow the model's calibration (for the local e5, floor 0.75: marker 0.8125, negation 0.853,
    value 0.979). Each is the middle of the range that kept the best F1 on the tuning half with the
    others fixed (`bench/conflicts.py --tune`): marker 0.20-0.30 (above, a correction loses its hint;
    a marker also needs a shared subject word or value, or any correction would be hinted against
    every other note), negation 0.36-0.46, changed value 0.85-0.98 (below, a related "the production
    database is at ..." beside the staging one): a changed value alone is as common among related
    facts as among corrections, so it counts only in close edits."""

    marker: float = 0.25
    negation: float = 0.41
    value: float = 0.915

    def cosine(self, fraction: float, recall_floor: float) -> float:
        return recall_floor + (1.0 - recall_floor) * fraction


FLOORS: Final = ConflictFloors()
WORDS_FLOOR: Final = 0.3  # word overlap (Jaccard of content words) a hint needs without a model


@dataclass(frozen=True)
class Cues:
    gone: tuple[str, ...]  # values of the old text the new one lacks
    came: tuple[str, ...]  # values of the new text the old one lacks
    marker: str | None  # a change marker of the new text that the old one lacks
    negation: bool  # one negates, the other does not
    shared: bool  # they share a subject word or a value

    @property
    def changed_value(self) -> bool:
        return bool(self.gone) and bool(self.came)


def values(text: str) -> list[str]:
    """What a fact's value may be: numbers (also spelled out), versions, ports, paths, hosts, and names
    (a capital letter not at a sentence's start), lower-cased, in order: the first MAX_VALUES of at most
    MAX_VALUE_CHARS each (a hint is about a fact, and a long memory must not cost a pairwise match)."""
    starts = {0} | {m.end() for m in _SENTENCE_BREAK.finditer(text)}
    found: list[str] = []
    for m in _VALUE_TOKEN.finditer(text):
        token = m.group().rstrip(".:")
        if len(found) >= MAX_VALUES:
            break
        if len(token) > MAX_VALUE_CHARS:
            continue
        lower = token.lower()
        named = (m.start() not in starts and token[0].isupper()) or (token.isupper() and len(token) > 1)
        if lower in _NUMBER_WORDS:
            found.append(_NUMBER_WORDS[lower])
        elif named or lower in _LOWER_VALUES or any(c.isdigit() or c in "/.:~" for c in token):
            found.append(lower)
    return found


def _same_value(a: str, b: str) -> bool:
    """One value named two ways: postgres / postgresql, node / node.js (a prefix of 3+ letters)."""
    short, long = sorted((a, b), key=len)
    return short == long or (len(short) >= 3 and not short.isdigit() and long.startswith(short))


def _unmatched(these: list[str], others: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(v for v in these if not any(_same_value(v, o) for o in others)))


def _subject(text: str) -> set[str]:
    """Its subject words as stems: a word, or its first 5 letters (deploy, deployed; service is not server)."""
    words = {w for w in _WORD.findall(text.lower()) if len(w) >= 3 and w not in STOPWORDS and w not in _GENERIC}
    return {w[:5] for w in words - set(_MARKER.findall(text.lower()))}


def _listed(found: tuple[str, ...], shown: int = 4) -> str:
    return ", ".join(found[:shown]) + (f" and {len(found) - shown} more" if len(found) > shown else "")


def _negated(text: str) -> bool:
    return any(t in NEGATIONS or t.endswith("n't") for t in _WORD.findall(text.lower()))


def cues(new: str, old: str) -> Cues:
    new_values, old_values = values(new), values(old)
    old_markers = set(_MARKER.findall(old.lower()))
    marker = next((m for m in _MARKER.findall(new.lower()) if m not in old_markers), None)
    shared = bool(_subject(new) & _subject(old))
    gone, came = _unmatched(old_values, new_values), _unmatched(new_values, old_values)
    return Cues(
        gone=gone,
        came=came,
        marker=None if old_markers else marker,
        negation=_negated(new) != _negated(old),
        shared=shared or len(gone) < len(set(old_values)),
    )


def reworded_conflict(
    new: str, old: str, cosine: float, recall_floor: float, floors: ConflictFloors = FLOORS
) -> str | None:
    """Why `new` may correct or contradict `old`, given the cosine of their vectors, or None."""
    if cosine < recall_floor:
        return None
    found = cues(new, old)
    change = f": {_listed(found.gone)} -> {_listed(found.came)}" if found.changed_value else ""
    if cosine >= floors.cosine(floors.value, recall_floor):
        if found.changed_value:
            return f"a changed value{change}" + (f" (says {found.marker!r})" if found.marker else "")
        verbatim = conflict_reason(new, old)  # a near-verbatim edit of words that are no value: frankfurt -> dublin
        if verbatim is not None:
            return verbatim
    if not found.shared:  # a correction of something else: close only as two coding notes are
        return None
    if found.marker is not None and cosine >= floors.cosine(floors.marker, recall_floor):
        return f"a change: says {found.marker!r}{change}"
    if found.negation and cosine >= floors.cosine(floors.negation, recall_floor):
        return "a negation: one says not, the other does not"
    return None


def conflict_hint(new: str, old: str, similarity: float, measure: str, recall_floor: float) -> str | None:
    """The hint for a similar memory: `measure` is "cosine" (a model's vectors, `recall_floor` its
    calibrated floor) or "words" (their overlap, when either has no vector)."""
    if measure == "cosine":
        return reworded_conflict(new, old, similarity, recall_floor)
    return conflict_reason(new, old) if similarity >= WORDS_FLOOR else None
