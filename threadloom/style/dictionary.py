"""The built-in dictionary of style habits: catchphrases, slang, dialect markers, emoticons, emoji, register and
punctuation, in English, Spanish and Chinese (Mandarin internet slang and Sichuanese, Cantonese, Dongbei,
Shanghainese and Taiwanese Hokkien markers), each tagged with its locale.

Matching is a few precompiled regular expressions per message (bench/style.py measures it). Words that are
also ordinary vocabulary are left out on purpose ("整", "贼" in Dongbei speech are everyday Mandarin too): a
marker that fires on every message is noise, not a habit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from threadloom.style.model import Kind


@dataclass(frozen=True)
class Hit:
    kind: Kind
    text: str
    locale: str
    start: int
    end: int

    @property
    def key(self) -> str:
        return self.text.casefold()  # dictionary texts have no runs of spaces: habit_key without the regex


def _entries(kind: Kind, locale: str, words: str) -> list[tuple[Kind, str, str]]:
    return [(kind, w, locale) for w in words.split("|")]


# Latin-script phrases, matched case-insensitively on word boundaries.
_LATIN: Final = [
    *_entries(
        "catchphrase",
        "en",
        "ship it|lgtm|lol|lmao|tbh|imo|imho|ngl|no cap|fwiw|btw|sounds good|makes sense|fair enough|let's go"
        "|cool cool|nice one|good stuff|my bad|heads up|gotcha|nvm|idk|omg|yep|yup|nope|awesome|sweet|kinda|sorta"
        "|low-key|lowkey|vibe check|it is what it is|touch grass|slay|rizz",
    ),
    *_entries("dialect", "en", "y'all|gonna|wanna|gotta|ain't|innit|mate|cheers|reckon|wicked|hella"),
    *_entries(
        "catchphrase",
        "es",
        "vale|venga|dale|o sea|a ver|la verdad|mola|guay|porfa|de una|ya está|qué va|jaja|jajaja"
        "|claro que sí|sin más|al toque|buenísimo",
    ),
    *_entries("dialect", "es-ES", "tío|tía|vosotros|flipar|currar|chaval|hostia"),
    *_entries("dialect", "es-MX", "órale|güey|wey|chido|neta|ahorita|qué onda"),
    *_entries("dialect", "es-AR", "che|boludo|re bien|bárbaro|laburo|posta"),
    *_entries("dialect", "es-CO", "parcero|parce|bacano|chimba|chévere"),
    *_entries("register", "es", "usted|ustedes"),
    *_entries("catchphrase", "zh", "yyds|xswl|awsl|nbcs|plmm"),
]

# CJK markers, matched as substrings (Chinese has no spaces between words).
_CJK: Final = [
    *_entries(
        "catchphrase",
        "zh",
        "哈哈哈|哈哈|好的好的|行吧|没问题|搞定|靠谱|绝了|破防|摆烂|内卷|躺平|嗯嗯|哦哦|收到|稳了|离谱|牛啊|666"
        "|笑死|真香|打工人|整活|好家伙|我裂开了|冲鸭|妥妥的",
    ),
    *_entries("dialect", "zh-sichuan", "巴适|要得|安逸|啥子|莫得|晓得不|锤子|瓜娃子"),
    *_entries("dialect", "zh-yue", "唔该|唔好|冇|嘅|咁样|係咪|咩事|佢哋|揾|乜嘢"),
    *_entries("dialect", "zh-dongbei", "嘎哈|老铁|唠嗑|咋整|埋汰|磨叽|得劲"),
    *_entries("dialect", "zh-wu", "侬|阿拉|老灵|伐啦|嗲"),
    *_entries("dialect", "zh-nan", "歹势|古锥|啥米|甲霸|足水"),
    *_entries("register", "zh", "您|请问|麻烦您"),
]

_EMOTICONS: Final = [
    ":)", ":-)", ":D", ":-D", ";)", ";-)", ":P", ":p", ":(", ":-(", ":/", "^_^", "^^", "T_T",
    "o_O", "O_o", "-_-", "<3", "¯\\_(ツ)_/¯", "(╯°□°)╯︵ ┻━┻", ":3", "=)",
]  # fmt: skip

# Punctuation habits: name, the marks that show it (substrings), and a pattern when a substring is not enough.
_PUNCTUATION: Final[list[tuple[str, tuple[str, ...], str | None, str]]] = [
    ("!!", ("!!", "！！"), None, ""),
    ("??", ("??", "？？"), None, ""),
    ("...", ("...", "…", "。。。"), None, ""),
    ("?!", ("?!", "!?", "？！", "！？"), None, ""),
    ("~", ("~", "～"), r"[~～](?=\s|$|[,.!?，。！？])", ""),  # a trailing tilde, not ~/path or ~3
    ("¿¡", ("¿", "¡"), None, "es"),
    ("—", (" — ", " -- "), None, ""),
]

_EMOJI_RE: Final = re.compile(
    "[\U0001f300-\U0001f5ff\U0001f600-\U0001f64f\U0001f680-\U0001f6ff\U0001f900-\U0001faff\u2600-\u26ff\u2700-\u27bf]"
)


def _alternation(words: list[str]) -> str:
    return "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))


# Latin phrases are found by token: a regex alternation of a hundred phrases tries each one at every
# position (about 0.1 ms a message here); a set lookup per token, then the phrase's next tokens, does not.
_TOKEN_RE: Final = re.compile(r"[\w']+")


def _tokens(text: str) -> tuple[str, ...]:
    return tuple(t.casefold() for t in _TOKEN_RE.findall(text))


_PHRASES: Final[dict[str, list[tuple[tuple[str, ...], tuple[Kind, str, str]]]]] = {}
for _kind, _text, _locale in [*_LATIN, *_entries("emoticon", "", "QAQ|TAT|orz|OTZ|xD")]:
    _words = _tokens(_text)
    _PHRASES.setdefault(_words[0], []).append((_words, (_kind, _text, _locale)))
_CJK_WORDS: Final = sorted(((t, (k, t, loc)) for k, t, loc in _CJK if not t.isascii()), key=lambda e: -len(e[0]))
_CJK_ANY_RE: Final = re.compile(r"[\u3400-\u9fff]")
_EMOTICON_RE: Final = re.compile(rf"(?<![\w:;=^<])(?:{_alternation(_EMOTICONS)})(?![\w)(^])")
_EMOTICON_CHARS: Final = frozenset(":;=^<T-_(¯o")
_PUNCT: Final = [
    (name, marks, re.compile(pattern) if pattern else None, locale) for name, marks, pattern, locale in _PUNCTUATION
]
_UPPER_RE: Final = re.compile(r"[A-ZÀ-ÖØ-Þ]")
_WORD_RE: Final = re.compile(r"[A-Za-zÀ-ÿ']+")
_MAX_EMOJI: Final = 5  # distinct emoji taken from one message


def extract(text: str) -> list[Hit]:
    """Every habit the dictionary sees in one message, each (kind, text) once."""
    hits: dict[tuple[str, str], Hit] = {}

    def add(kind: Kind, name: str, locale: str, start: int, end: int) -> None:
        hits.setdefault((kind, name.casefold()), Hit(kind, name, locale, start, end))

    matches = list(_TOKEN_RE.finditer(text))
    words = [m.group(0).casefold() for m in matches]
    for i, word in enumerate(words):
        for phrase, (kind, name, locale) in _PHRASES.get(word, ()):
            if tuple(words[i : i + len(phrase)]) == phrase:
                add(kind, name, locale, matches[i].start(), matches[i + len(phrase) - 1].end())
    if not text.isascii():
        if _CJK_ANY_RE.search(text):
            for word, (kind, name, locale) in _CJK_WORDS:
                at = text.find(word)
                if at >= 0:
                    add(kind, name, locale, at, at + len(word))
        emoji = 0
        for m in _EMOJI_RE.finditer(text):
            if ("emoji", m.group(0)) not in hits:
                emoji += 1
                if emoji > _MAX_EMOJI:
                    break
            add("emoji", m.group(0), "", m.start(), m.end())
    if not _EMOTICON_CHARS.isdisjoint(text):
        for m in _EMOTICON_RE.finditer(text):
            add("emoticon", m.group(0), "", m.start(), m.end())
    for name, marks, pattern, locale in _PUNCT:
        for mark in marks:
            at = text.find(mark)
            if at < 0:
                continue
            if pattern is None:
                add("punctuation", name, locale, at, at + len(mark))
            elif found := pattern.search(text):
                add("punctuation", name, locale, found.start(), found.end())
            break
    latin = _WORD_RE.findall(text)
    if len(latin) >= 4 and sum(len(w) for w in latin) >= 15 and not _UPPER_RE.search(text):
        add("register", "all lowercase", "", 0, min(len(text), 40))
    return list(hits.values())
