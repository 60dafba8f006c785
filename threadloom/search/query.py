"""Turning a question into search terms: tokens, stopwords, and the limits that keep it cheap."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

MAX_QUERY_CHARS: Final = 4_000
MAX_TERMS: Final = 48
_TOKEN = re.compile(r"[^\W_]+(?:'[^\W_]+)?", re.UNICODE)
# Function words and question words: they carry no topic and only dilute BM25.
STOPWORDS: Final = frozenset(
    """a about above after again against all am an and any are aren't as at be because been before being below
    between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down during each
    few for from further had hadn't has hasn't have haven't having he he'd he'll he's her here here's hers herself
    him himself his how how's i i'd i'll i'm i've if in into is isn't it it's its itself let's me more most
    mustn't my myself no nor not of off on once only or other ought our ours ourselves out over own same shan't
    she she'd she'll she's should shouldn't so some such than that that's the their theirs them themselves then
    there there's these they they'd they'll they're they've this those through to too under until up very was
    wasn't we we'd we'll we're we've were weren't what what's when when's where where's which while who who's
    whom why why's with won't would wouldn't you you'd you'll you're you've your yours yourself yourselves
    also just like get got s t will""".split()  # noqa: SIM905
)


@dataclass(frozen=True)
class AnalysedQuery:
    text: str
    terms: tuple[str, ...]
    truncated: bool


def analyse(text: str) -> AnalysedQuery:
    """Lower-cased content terms of `text`, deduplicated in order; a huge query is cut, never parsed whole."""
    truncated = len(text) > MAX_QUERY_CHARS
    if truncated:
        text = text[:MAX_QUERY_CHARS]
    seen: dict[str, None] = {}
    for match in _TOKEN.finditer(text.lower()):
        token = match.group(0)
        if token in STOPWORDS or token in seen:
            continue
        seen[token] = None
        if len(seen) == MAX_TERMS:
            truncated = True
            break
    return AnalysedQuery(text=text, terms=tuple(seen), truncated=truncated)


def name_forms(terms: tuple[str, ...]) -> tuple[str, ...]:
    """The terms, with possessives also bare ("sam's" -> "sam"), for matching names."""
    bare = [t[:-2] for t in terms if t.endswith("'s") and len(t) > 2]
    return tuple(dict.fromkeys([*terms, *bare]))


def without_names(text: str, names: set[str]) -> str:
    """`text` with the given (lower-case) names and their possessives taken out; `text` itself when
    nothing else would be left."""
    if not names:
        return text
    kept = [m.group(0) for m in _TOKEN.finditer(text) if _bare(m.group(0).lower()) not in names]
    return " ".join(kept) if any(t.lower() not in STOPWORDS for t in kept) else text


def _bare(token: str) -> str:
    return token[:-2] if token.endswith("'s") else token
