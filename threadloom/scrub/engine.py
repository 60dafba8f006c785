"""`scrub(text)`: every credential in a text replaced by a typed placeholder, `[secret:<kind>]`.

A pure function: the same text always gives the same result, nothing is stored or logged, and a
scrubbed text scrubs to itself (a placeholder is never taken for a secret). The text around a secret
stays: the name it was assigned to, the quotes, the URL without its password.
"""

from __future__ import annotations

import bisect
import re
import string
from dataclasses import dataclass
from typing import Final

from threadloom.scrub import generic
from threadloom.scrub.generic import Found
from threadloom.scrub.vendors import (
    PRIVATE_KEY_BEGIN,
    PRIVATE_KEY_END,
    TOKEN_CHARS,
    VENDOR_RULES,
    Rule,
    private_key_end,
)

PLACEHOLDER: Final = "[secret:{}]"


@dataclass(frozen=True)
class Scrubbed:
    text: str
    kinds: tuple[str, ...] = ()  # the kinds replaced, each once, in order of first appearance

    @property
    def changed(self) -> bool:
        return bool(self.kinds)


def placeholder(kind: str) -> str:
    return PLACEHOLDER.format(kind)


_ASCII_LOWER: Final = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


_NON_ASCII: Final = re.compile(r"[^\x00-\x7f]")


def _lower(text: str) -> str:
    """ASCII letters in lower case, position for position (`str.lower` lengthens a few non-ASCII letters,
    such as 'İ', and folds others, such as the Kelvin sign to 'k')."""
    if text.isascii():
        return text.lower()
    # `translate` costs a dict lookup per character: `lower` is exact too when it kept the length (each
    # character gave one) and left every non-ASCII character as it was (punctuation such as '…').
    lowered = text.lower()
    if len(lowered) == len(text) and all(lowered[m.start()] == m.group() for m in _NON_ASCII.finditer(text)):
        return lowered
    return text.translate(_ASCII_LOWER)


def _by_needle(folded: bool, bounded: bool) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """Each needle once, with the rules that need it; `bounded`: the needles only bounded rules have."""

    def chosen(r: Rule) -> bool:
        return r.folded == folded

    in_any = {n for r in VENDOR_RULES if chosen(r) and not r.bounded for n in r.needles}
    needles = dict.fromkeys(n for r in VENDOR_RULES if chosen(r) for n in r.needles if (n not in in_any) == bounded)
    return tuple((n, tuple(i for i, r in enumerate(VENDOR_RULES) if chosen(r) and n in r.needles)) for n in needles)


# Each needle once, with the rules that need it: a short text (a transcript message) pays one substring
# search per needle, not a call per rule. A bounded rule's needle is looked for in the text's long runs only.
_CASED: Final = _by_needle(False, bounded=False)
_CASED_RUNS: Final = _by_needle(False, bounded=True)
_FOLDED: Final = _by_needle(True, bounded=False)
_FOLDED_RUNS: Final = _by_needle(True, bounded=True)

# Every bounded rule's match (prefix, body; vendors.py) is a run of at least MIN_RUN of RUN_CHARS, which
# tests/test_scrub_prefilter.py checks against each pattern. Most messages (prose) hold no such run: then
# none of those rules can match, and 3 byte-wide passes replace ~40 substring searches of the text.
RUN_CHARS: Final = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.~+/=-"
MIN_RUN: Final = 15
_KEEP: Final = bytes(c if c in RUN_CHARS else 0x20 for c in range(256))  # a run character stays, others: space
_MASK: Final = bytes(0x78 if c in RUN_CHARS else 0x20 for c in range(256))  # a run character: x, others: space
_LONG: Final = b"x" * MIN_RUN


def _runs(text: str) -> str:
    """The runs of MIN_RUN or more RUN_CHARS in `text`, one a line ('' when it has none)."""
    raw = text.encode("utf-8", "surrogatepass")  # a byte of a non-ASCII character is never a run character
    if _LONG not in raw.translate(_MASK):
        return ""
    return "\n".join(run.decode("ascii") for run in raw.translate(_KEEP).split() if len(run) >= MIN_RUN)


def _present(text: str, lower: str) -> list[Rule]:
    """The rules one of whose needles the text holds, in their order (a bounded rule's, in a long run)."""
    hits = {i for needle, rules in _CASED if needle in text for i in rules}
    hits.update(i for needle, rules in _FOLDED if needle in lower for i in rules)
    runs = _runs(text)
    if runs:
        hits.update(i for needle, rules in _CASED_RUNS if needle in runs for i in rules)
        if _FOLDED_RUNS:
            lowered = _lower(runs)
            hits.update(i for needle, rules in _FOLDED_RUNS if needle in lowered for i in rules)
    return [VENDOR_RULES[i] for i in sorted(hits)]


def _token_matches(rule: Rule, text: str) -> list[Found]:
    """A bounded rule is tried only where its prefix stands at the start of a word: inside a run of
    token characters ("eyJeyJeyJ...") no attempt is made, so a hostile text costs one pass, not one
    scan of the run per position."""
    prefix, found, at = rule.needles[0], [], text.find(rule.needles[0])
    while at != -1:
        m = rule.pattern.match(text, at) if at == 0 or text[at - 1] not in TOKEN_CHARS else None
        if m is not None:
            found.append(Found(m.start(), m.end(), rule.kind))
        at = text.find(prefix, m.end() if m is not None else at + 1)
    return found


def _vendor_matches(rule: Rule, text: str) -> list[Found]:
    if rule.bounded:
        return _token_matches(rule, text)
    has_group = "s" in rule.pattern.groupindex
    return [
        Found(*(m.span("s") if has_group else (m.start() - rule.back, m.end())), rule.kind)
        for m in rule.pattern.finditer(text)
    ]


def _private_keys(text: str) -> list[Found]:
    ends = [m.start() for m in PRIVATE_KEY_END.finditer(text)]
    found: list[Found] = []
    for begin in PRIVATE_KEY_BEGIN.finditer(text):
        if found and begin.start() < found[-1].end:
            continue  # inside the block before
        following = ends[bisect.bisect_left(ends, begin.end()) :][:1]
        found.append(
            Found(begin.start(), private_key_end(text, begin, following[0] if following else -1), "private-key")
        )
    return found


def _apply(text: str, found: list[Found], kinds: list[str]) -> str:
    """Replace the found spans, the earliest first; a span inside one already replaced is skipped."""
    parts, at = [], 0
    for f in sorted(found, key=lambda f: (f.start, -f.end)):
        if f.start < at:
            continue
        parts += [text[at : f.start], placeholder(f.kind)]
        at = f.end
        if f.kind not in kinds:
            kinds.append(f.kind)
    parts.append(text[at:])
    return "".join(parts)


def scrub(text: str) -> Scrubbed:
    """`text` with every credential it holds replaced by `[secret:<kind>]`."""
    if len(text) < 8:
        return Scrubbed(text)
    kinds: list[str] = []
    lower = _lower(text)
    # Shapes first (a token assigned to a name is named by its vendor), then what stands around values.
    found = _private_keys(text) if "PRIVATE KEY" in text else []
    found += [f for rule in _present(text, lower) for f in _vendor_matches(rule, text)]
    if found:
        text = _apply(text, found, kinds)
        lower = _lower(text)
    found = generic.find(text, lower)
    if found:
        text = _apply(text, found, kinds)
    return Scrubbed(text, tuple(kinds))
