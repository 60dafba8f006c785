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
    *_entries("emoticon", "zh", "QAQ|TAT|orz|OTZ"),
]

_EMOTICONS: Final = [
    ":)", ":-)", ":D", ":-D", ";)", ";-)", ":P", ":p", ":(", ":-(", ":/", "xD", "XD", "^_^", "^^", "T_T",
    "o_O", "O_o", "-_-", "<3", "¯\\_(ツ)_/¯", "(╯°□°)╯︵ ┻━┻", ":3", "=)",
]  # fmt: skip

# Punctuation habits: name -> pattern.
_PUNCTUATION: Final[list[tuple[str, str, str]]] = [
    ("!!", r"[!！]{2,}", ""),
    ("??", r"[?？]{2,}", ""),
    ("...", r"\.{3,}|…|。。。", ""),
    ("?!", r"\?!|!\?|？！|！？", ""),
    ("~", r"[~～](?=\s|$|[,.!?，。！？])", ""),
    ("¿¡", r"[¿¡]", "es"),
    ("—", r"\s—\s|\s--\s", ""),
]

_EMOJI_RE: Final = re.compile(
    "[\U0001f300-\U0001f5ff\U0001f600-\U0001f64f\U0001f680-\U0001f6ff\U0001f900-\U0001faff\u2600-\u26ff\u2700-\u27bf]"
)


def _alternation(words: list[str]) -> str:
    return "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))


_LATIN_BY_WORD: Final = {text.casefold(): (kind, text, locale) for kind, text, locale in _LATIN}
_LATIN_RE: Final = re.compile(rf"(?<![\w'])(?:{_alternation([t for _, t, _ in _LATIN])})(?![\w'])", re.IGNORECASE)
_CJK_BY_WORD: Final = {text.casefold(): (kind, text, locale) for kind, text, locale in _CJK}
_CJK_RE: Final = re.compile(_alternation([t for _, t, _ in _CJK]), re.IGNORECASE)
_EMOTICON_RE: Final = re.compile(rf"(?<![\w:;=^<])(?:{_alternation(_EMOTICONS)})(?![\w)(^])")
_PUNCT_RES: Final = [(name, re.compile(pattern), locale) for name, pattern, locale in _PUNCTUATION]
_UPPER_RE: Final = re.compile(r"[A-ZÀ-ÖØ-Þ]")
_WORD_RE: Final = re.compile(r"[A-Za-zÀ-ÿ']+")
_MAX_EMOJI: Final = 5  # distinct emoji taken from one message


def extract(text: str) -> list[Hit]:
    """Every habit the dictionary sees in one message, each (kind, text) once."""
    hits: dict[tuple[str, str], Hit] = {}

    def add(kind: Kind, name: str, locale: str, start: int, end: int) -> None:
        hits.setdefault((kind, name.casefold()), Hit(kind, name, locale, start, end))

    for m in _LATIN_RE.finditer(text):
        kind, name, locale = _LATIN_BY_WORD[m.group(0).casefold()]
        add(kind, name, locale, m.start(), m.end())
    for m in _CJK_RE.finditer(text):
        kind, name, locale = _CJK_BY_WORD[m.group(0).casefold()]
        add(kind, name, locale, m.start(), m.end())
    for m in _EMOTICON_RE.finditer(text):
        add("emoticon", m.group(0), "", m.start(), m.end())
    emoji = 0
    for m in _EMOJI_RE.finditer(text):
        if ("emoji", m.group(0)) not in hits:
            emoji += 1
            if emoji > _MAX_EMOJI:
                break
        add("emoji", m.group(0), "", m.start(), m.end())
    for name, pattern, locale in _PUNCT_RES:
        found = pattern.search(text)
        if found:
            add("punctuation", name, locale, found.start(), found.end())
    words = _WORD_RE.findall(text)
    if len(words) >= 4 and sum(len(w) for w in words) >= 15 and not _UPPER_RE.search(text):
        add("register", "all lowercase", "", 0, min(len(text), 40))
    return list(hits.values())
