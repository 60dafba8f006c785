"""Which language a user writes in, one message at a time: scripts first (Han, kana, hangul), then the
function words that tell Latin-script languages apart. The capsule is written in the language most of the
user's messages were in, never in one they did not use.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

LANGUAGES: Final = ("en", "es", "zh", "ja", "fr", "pt", "de")
DEFAULT: Final = "en"

_HAN_RE: Final = re.compile(r"[\u4e00-\u9fff]")
_KANA_RE: Final = re.compile(r"[\u3040-\u30ff]")
_WORD_RE: Final = re.compile(r"[a-zà-öø-ÿ']+")
# Frequent words that belong to one language only (ones shared by two, like "de" or "que", are left out).
_FUNCTION_WORDS: Final = {
    "en": "the and is are was this that with you it's don't what have for not can please should would could "
    "there here just my your we they but how why when which will",
    "es": "el los las es está están pero porque qué cómo cuando también muy por favor esto esta eso hay "
    "tengo puedes quiero necesito hacer ya sí gracias para con una del al",
    "fr": "le les est et je tu vous nous pas avec pour c'est une des dans sur mais très merci ça qui",
    "pt": "não você vocês é está obrigado então também isso essa fazer tenho quero com uma muito mas",
    "de": "der die das und ist nicht ich du sie wir mit bitte danke auch ein eine aber sehr noch",
}
_BY_WORD: Final = {w: lang for lang, words in _FUNCTION_WORDS.items() for w in words.split()}
_MIN_WORDS: Final = 2  # fewer telling words than this: no vote


def detect(text: str) -> str | None:
    """The message's language, or None when it says too little to tell (code, a single word)."""
    han = len(_HAN_RE.findall(text))
    if han >= 2 or _KANA_RE.search(text):
        return "ja" if len(_KANA_RE.findall(text)) >= 2 else "zh"
    counts: dict[str, int] = {}
    for word in _WORD_RE.findall(text.lower()):
        lang = _BY_WORD.get(word)
        if lang is not None:
            counts[lang] = counts.get(lang, 0) + 1
    if "ñ" in text or "¿" in text or "¡" in text:
        counts["es"] = counts.get("es", 0) + 2
    if not counts:
        return None
    ranked = sorted(counts.items(), key=lambda kv: kv[1], reverse=True)
    best, n = ranked[0]
    if n < _MIN_WORDS or (len(ranked) > 1 and ranked[1][1] == n):
        return None
    return best


def dominant(votes: Mapping[str, int]) -> str:
    """The language of most votes (ties go to the earlier in LANGUAGES); English before any vote."""
    known = [(n, -LANGUAGES.index(lang), lang) for lang, n in votes.items() if lang in LANGUAGES and n > 0]
    return max(known)[2] if known else DEFAULT
