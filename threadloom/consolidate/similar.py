"""Which texts say the same thing: candidates found by their words (MinHash bands, so a store of 100k is not
compared pair by pair), then judged by word overlap, by the model's cosine, and by the conflict cues of
memory/conflicts.py (a changed value, a negation, a change marker make a correction, never a duplicate).

Two texts whose literal values differ (numbers, versions, paths: `conflicts.values`) are never duplicates,
so candidates are only sought among texts with the same literal values: a cheap exact block that also keeps
"the timeout is 30 s" and "the timeout is 60 s" apart before any similarity is computed.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from threadloom.memory.conflicts import conflict_reason, reworded_conflict
from threadloom.memory.similarity import words
from threadloom.search.query import STOPWORDS

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

BANDS: Final = 32  # MinHash bands of ROWS hashes: a pair of word overlap 0.5 meets in one with p 0.986,
ROWS: Final = 3  # one of 0.3 with p 0.58 and one of 0.1 with p 0.03 (then dropped by the exact overlap)
WINDOW: Final = 48  # a band bucket larger than this pairs each member with its next WINDOW-1 only
SMALL: Final = 48  # a block this small is compared pair by pair
_SEED: Final = 20
_TOKEN: Final = re.compile(r"[^\W_]+", re.UNICODE)
_REPLACED: Final = "a replaced value: "
_LITERAL: Final = re.compile(r"[\w~/.:+-]*[\d/~][\w~/.:+-]*")
_NUMBER_WORDS: Final = {
    w: str(n)
    for n, w in enumerate("one two three four five six seven eight nine ten eleven twelve".split(), 1)  # noqa: SIM905
} | {"once": "1", "twice": "2", "thrice": "3", "half": "0.5", "double": "2x"}


@dataclass(frozen=True)
class Floors:
    """What a duplicate needs besides the same content words (`words_verdict`). `words`: their overlap (a
    word and its inflection count apart here) with a model's cosine beside it; `alone`: without one;
    `cosine`: four fifths of the way from the model's recall floor to 1 (0.95 for the local e5, past
    auto-linking's 0.94: a link says related, a merge says the same)."""

    words: float = 0.5
    alone: float = 0.6
    cosine_fraction: float = 0.8

    def cosine(self, recall_floor: float) -> float:
        return recall_floor + (1.0 - recall_floor) * self.cosine_fraction


MEMORY_FLOORS: Final = Floors()
# A quote is a person's own words: only a near-verbatim repeat is the same quote.
QUOTE_FLOORS: Final = Floors(words=0.9, alone=0.9, cosine_fraction=0.9)


def literal_values(text: str) -> frozenset[str]:
    """Numbers (also spelled out), versions, ports and paths of a text, lower-cased (names are left to the
    name check: a name's case depends on where in a sentence it stands)."""
    found = {m.group().rstrip(".:").lower() for m in _LITERAL.finditer(text)}
    return frozenset(found | {_NUMBER_WORDS[w] for w in _TOKEN.findall(text.lower()) if w in _NUMBER_WORDS})


def overlap(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


@dataclass(frozen=True)
class Verdict:
    same: bool
    words: float
    cosine: float | None
    why: str


def words_verdict(a: str, b: str, wa: frozenset[str], wb: frozenset[str], floors: Floors) -> Verdict | None:
    """Why two texts of one block (same literal values) are not the same by their words, or None when their
    words allow it: enough overlap, every content word of each found in the other in some form, the same
    names. A content word one has and the other lacks is another fact in the same sentence ("deadlock" for
    "timeouts", "webhook-proxy" for "webhook-cron"); the local e5 gave such pairs 0.988-0.992, above any
    cosine floor, so no cosine overrules it."""
    w = overlap(wa, wb)
    if w < floors.words:
        return Verdict(False, w, None, f"words {w:.2f} < {floors.words}")
    differ = unmatched(wa, wb)
    if differ:
        return Verdict(False, w, None, f"words differ: {', '.join(sorted(differ)[:4])}")
    names = other_names(a, b)
    if names:
        return Verdict(False, w, None, f"names differ: {', '.join(sorted(names)[:4])}")
    return None


def judge(a: str, b: str, wa: frozenset[str], wb: frozenset[str], cosine: float | None, recall_floor: float,
          floors: Floors) -> Verdict:  # fmt: skip
    """Whether two texts of one block say the same thing, and why: their words (`words_verdict`), then the
    model's cosine when there is one (else a higher word overlap), then the conflict cues."""
    refused = words_verdict(a, b, wa, wb, floors)
    if refused is not None:
        return Verdict(False, refused.words, cosine, refused.why)
    w = overlap(wa, wb)
    if cosine is None and w < floors.alone:
        return Verdict(False, w, cosine, f"no vectors, and words {w:.2f} < {floors.alone}")
    if cosine is not None and cosine < floors.cosine(recall_floor):
        return Verdict(False, w, cosine, f"cosine {cosine:.3f} < {floors.cosine(recall_floor):.3f}")
    for new, old in ((a, b), (b, a)):  # either may be the later one
        hint = (reworded_conflict(new, old, cosine, recall_floor) if cosine is not None else None) or conflict_reason(
            new, old
        )
        if hint and not _inflected(hint):
            return Verdict(False, w, cosine, f"may be a correction ({hint})")
    said = f"cosine {cosine:.3f}, " if cosine is not None else ""
    return Verdict(True, w, cosine, f"{said}words {w:.2f}, same words, names and values, no change cue")


def _names(a: str, b: str) -> tuple[set[str], set[str]]:
    """Each text's capitalised words (a person, a product, a place), lower-cased, leaving out stopwords and
    any word either text also writes in lower case or that starts another lower-case word ("Use" beside
    "used"): a sentence's first word is no name."""
    ta, tb = _TOKEN.findall(a), _TOKEN.findall(b)
    lower = {t for t in (*ta, *tb) if t.islower()}

    def names(tokens: list[str]) -> set[str]:
        caps = {t.lower() for t in tokens if t[0].isupper()} - STOPWORDS
        return {t for t in caps if not any(w.startswith(t[:4]) for w in lower)}

    return names(ta), names(tb)


def other_names(a: str, b: str) -> set[str]:
    """Names one text has and the other lacks: a fact about Ana is not a fact about Ben."""
    na, nb = _names(a, b)
    return na ^ nb


def unmatched(wa: frozenset[str], wb: frozenset[str]) -> set[str]:
    """Content words of either text that the other has in no form (a word and its inflections share their
    first four letters: deploy, deployed, deploys)."""
    stems_a, stems_b = {x[:4] for x in wa}, {x[:4] for x in wb}
    return {x for x in wa - wb if x[:4] not in stems_b} | {x for x in wb - wa if x[:4] not in stems_a}


def _inflected(hint: str) -> bool:
    """A "replaced value" that is a word for a form of itself ("deploy -> deployed"): no change."""
    if not hint.startswith(_REPLACED):
        return False
    gone, _, came = hint[len(_REPLACED) :].partition(" -> ")
    return all(any(g[:4] == c[:4] for c in came.split()) for g in gone.split())


def word_sets(texts: Sequence[str]) -> list[frozenset[str]]:
    return [frozenset(words(t)) for t in texts]


def candidate_pairs(sets: Sequence[frozenset[str]], floor: float) -> list[tuple[int, int]]:
    """Pairs (i < j) of one block worth judging: every pair of a small block, else those meeting in a MinHash
    band with an estimated overlap within 0.15 of `floor` (3 standard errors of the estimate at 0.5)."""
    n = len(sets)
    if n < 2:
        return []
    if n <= SMALL:
        return [(i, j) for i in range(n) for j in range(i + 1, n) if sets[i] & sets[j]]
    import numpy as np

    present = [i for i in range(n) if sets[i]]
    if len(present) < 2:
        return []
    flat: list[int] = []
    starts: list[int] = []
    for i in present:
        starts.append(len(flat))
        flat.extend(zlib.crc32(w.encode()) for w in sets[i])
    hashed = np.asarray(flat, dtype=np.uint64)
    rng = np.random.default_rng(_SEED)
    k = BANDS * ROWS
    mul = rng.integers(1, 2**62, size=k, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    add = rng.integers(0, 2**62, size=k, dtype=np.uint64)
    sig = np.empty((len(present), k), dtype=np.uint64)
    offsets = np.asarray(starts, dtype=np.intp)
    for h in range(k):  # multiply-shift hashing: the high 32 bits of a*x + b (mod 2^64)
        sig[:, h] = np.minimum.reduceat((hashed * mul[h] + add[h]) >> np.uint64(32), offsets)
    ids = np.asarray(present, dtype=np.int64)
    codes: list[npt.NDArray[np.int64]] = []
    for band in range(BANDS):
        cols = sig[:, band * ROWS : (band + 1) * ROWS]
        key = cols[:, 0] << np.uint64(32) ^ cols[:, 1] * np.uint64(0x9E3779B97F4A7C15) ^ cols[:, 2]
        order = np.argsort(key, kind="stable")
        keys, members = key[order], ids[order]
        for d in range(1, WINDOW):
            same = np.flatnonzero(keys[:-d] == keys[d:])
            if len(same) == 0:
                break
            lo = np.minimum(members[same], members[same + d])
            hi = np.maximum(members[same], members[same + d])
            codes.append(lo * n + hi)
    if not codes:
        return []
    pairs = np.unique(np.concatenate(codes))
    row_of = np.full(n, -1, dtype=np.int64)
    row_of[ids] = np.arange(len(ids))
    found: list[tuple[int, int]] = []
    for start in range(0, len(pairs), 100_000):  # the signatures of 100k pairs at a time: 77 MB
        chunk = pairs[start : start + 100_000]
        agree = (sig[row_of[chunk // n]] == sig[row_of[chunk % n]]).mean(axis=1)
        found.extend((int(c // n), int(c % n)) for c in chunk[agree >= floor - 0.15])
    return found
