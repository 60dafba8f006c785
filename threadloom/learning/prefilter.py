"""The literals a regular expression cannot match without: what the extractor's prefilter searches for before
any cue's expression runs (learning/locales.py builds its keyword patterns from them).

`required(pattern)` is a set of strings such that every match of `pattern` contains at least one of them, or
None when the pattern promises none. It reads the pattern's parse tree (the standard library's own parser):
a run of literal characters is required as a whole; a group requires what its content requires; an
alternation requires one of what each branch requires (when every branch requires something); a repeat of
at least one requires what its item requires; anything else (a class, a look-around, an optional part)
requires nothing. Of a sequence's requirements the one whose shortest string is longest is kept: the
rarer the literal, the fewer sentences get past it.
"""

from __future__ import annotations

from importlib import import_module
from re import escape
from typing import Any, Final

# The standard library's own regex parser (typeshed does not describe these private modules).
P: Final[Any] = import_module("re._parser")
C: Final[Any] = import_module("re._constants")


def required(pattern: str) -> set[str] | None:
    """Lowered literals one of which every match of `pattern` (matched case-insensitively) contains."""
    found = _need(P.parse(pattern))
    return {s.lower() for s in found} if found else None


def _need(items: Any) -> set[str] | None:
    best: set[str] | None = None
    run = ""

    def keep(candidate: set[str] | None) -> None:
        nonlocal best
        if candidate and (best is None or min(map(len, candidate)) > min(map(len, best))):
            best = candidate

    for op, av in items:
        if op is C.LITERAL:
            run += chr(av)
            continue
        keep({run} if run else None)
        run = ""
        if op is C.SUBPATTERN:
            keep(_need(av[3]))
        elif op is C.BRANCH:
            branches = [_need(b) for b in av[1]]
            if all(branches):
                keep(set().union(*(b for b in branches if b)))
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT) and av[0] >= 1:
            keep(_need(av[2]))
    keep({run} if run else None)
    return best


def any_of(words: set[str]) -> str:
    """A pattern that finds any of `words`, as a trie: the engine branches on one character at each step
    instead of trying every word at every position (218 plain alternatives cost about 2 µs a character). A
    word that another begins with stands for both (finding the shorter is enough)."""
    trie: dict[str, Any] = {}
    for word in sorted(words, key=len):
        node = trie
        for ch in word:
            if node.get("") is True:
                break
            node = node.setdefault(ch, {})
        else:
            node.clear()
            node[""] = True
    return _pattern(trie)


def _pattern(node: dict[str, Any]) -> str:
    if node.get("") is True:
        return ""
    parts = [escape(ch) + _pattern(child) for ch, child in sorted(node.items())]
    return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"
