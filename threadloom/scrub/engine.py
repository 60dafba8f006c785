"""`scrub(text)`: every credential in a text replaced by a typed placeholder, `[secret:<kind>]`.

A pure function: the same text always gives the same result, nothing is stored or logged, and a
scrubbed text scrubs to itself (a placeholder is never taken for a secret). The text around a secret
stays: the name it was assigned to, the quotes, the URL without its password.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Final

from threadloom.scrub import generic
from threadloom.scrub.generic import Found
from threadloom.scrub.vendors import PRIVATE_KEY_BEGIN, TOKEN_CHARS, VENDOR_RULES, Rule, private_key_end

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


def _lower(text: str) -> str:
    """Lower case, position for position (`str.lower` lengthens a few non-ASCII letters, such as 'İ')."""
    return text.lower() if text.isascii() else text.translate(_ASCII_LOWER)


def _present(rule: Rule, text: str, lower: str) -> bool:
    haystack = lower if rule.folded else text
    return any(needle in haystack for needle in rule.needles)


def _vendor_matches(rule: Rule, text: str) -> list[Found]:
    has_group = "s" in rule.pattern.groupindex
    found = []
    for m in rule.pattern.finditer(text):
        start, end = m.span("s") if has_group else (m.start() - rule.back, m.end())
        if not (rule.bounded and start > 0 and text[start - 1] in TOKEN_CHARS):
            found.append(Found(start, end, rule.kind))
    return found


def _private_keys(text: str) -> list[Found]:
    found: list[Found] = []
    for begin in PRIVATE_KEY_BEGIN.finditer(text):
        if found and begin.start() < found[-1].end:
            continue  # inside the block before
        found.append(Found(begin.start(), private_key_end(text, begin), "private-key"))
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
    found += [f for rule in VENDOR_RULES if _present(rule, text, lower) for f in _vendor_matches(rule, text)]
    if found:
        text = _apply(text, found, kinds)
        lower = _lower(text)
    found = generic.find(text, lower)
    if found:
        text = _apply(text, found, kinds)
    return Scrubbed(text, tuple(kinds))
