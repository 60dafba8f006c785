"""What style memory refuses to keep, and the sanitising of usage examples.

Style memory keeps how a user writes and how they like to work, nothing about who they are: names, contact
details, addresses, dates of birth, health and diagnoses, religion, sexuality, politics, and personality
labels ("introvert", "anxious", MBTI types) are refused with the reason, in English, Spanish and Chinese.
A usage example is a window of at most 60 characters around the habit, with credentials scrubbed and
emails, links, paths, handles, numbers and capitalised names replaced by an ellipsis.
"""

from __future__ import annotations

import re
from typing import Final

from threadloom.scrub.policy import Scrubber
from threadloom.style.model import EXAMPLE_CHARS, collapse

_W = r"(?<![\w])"
_E = r"(?![\w])"
_REFUSED: Final[list[tuple[str, re.Pattern[str]]]] = [
    (
        "a name",
        re.compile(
            r"\bmy name(?:'s| is)\b|\bi'?m called\b|\bme llamo\b|\bmi nombre es\b|我叫|我的名字|本人姓",
            re.IGNORECASE,
        ),
    ),
    (  # a self-introduction then a capitalised word ("soy Juan", "I'm Ana"): case matters, so apart
        "a name",
        re.compile(
            r"\b(?:[Ii] am|[Ii]'m|[Ss]oy|[Jj]e m'appelle|[Ii]ch hei(?:ß|ss)e|[Mm]i chiamo) "
            r"[A-ZÁÉÍÓÚÑ][a-záéíóúñ]+\b"
        ),
    ),
    ("an email address", re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+")),
    ("a phone number", re.compile(r"\+\d[\d ()-]{7,}\d|\b\d{3}[ .-]\d{3}[ .-]\d{4}\b|\b\d{9,}\b")),
    (
        "an address",
        re.compile(
            r"\bi live (?:at|in|on)\b|\bmy (?:home )?address\b|\bvivo en\b|\bmi direcci[oó]n\b"
            r"|我住在|我家在|住址|地址是"
            r"|\b\d{1,5} [A-Za-z]+ (?:street|st|avenue|ave|road|rd|lane|blvd)\b|\bcalle [A-ZÁÉÍÓÚ]\w+,? \d+",
            re.IGNORECASE,
        ),
    ),
    ("a date of birth", re.compile(r"\bborn (?:on|in)\b|\bmy birthday\b|\bnac[ií] (?:el|en)\b|我的生日|出生于", re.I)),
    (
        "health or a diagnosis",
        re.compile(
            rf"{_W}(?:diagnos\w*|adhd|autis\w*|asperger\w*|depress\w*|bipolar|ocd|ptsd|dyslexi\w*|schizo\w*"
            rf"|anxiety disorder|medication|therapist|therapy|tdah|ansiedad|depresi[oó]n|autismo|diagn[oó]stic\w*"
            rf"|terapia|medicaci[oó]n|enfermedad){_E}|诊断|抑郁|焦虑症|多动症|自闭症|精神病|吃药",
            re.IGNORECASE,
        ),
    ),
    (
        "religion, sexuality or politics",
        re.compile(
            rf"{_W}(?:religio\w*|christian|catholic|muslim|jewish|hindu|buddhist|atheist|cat[oó]lic[oa]|musulm[aá]n"
            rf"|jud[ií]o|ateo|gay|lesbian|bisexual|transgender|republican|democrat)\w*{_E}"
            r"|宗教|信佛|基督徒|穆斯林|同性恋|党员",
            re.IGNORECASE,
        ),
    ),
    (
        "a personality label",
        re.compile(
            rf"{_W}(?:introvert\w*|extrovert\w*|anxious|neurotic|narcissis\w*|personality"
            rf"|[ie][ns][tf][jp]|introvertid[oa]|extrovertid[oa]|ansios[oa]|personalidad|perezos[oa]){_E}"
            r"|内向|外向|性格|人格|焦虑的人",
            re.IGNORECASE,
        ),
    ),
]


def refusal(text: str) -> str | None:
    """What `text` would store that style memory refuses (a phrase for the error), or None."""
    for what, pattern in _REFUSED:
        if pattern.search(text):
            return what
    return None


_MASKS: Final = re.compile(
    r"https?://\S+|[\w.+-]+@[\w-]+\.[\w.]+|(?:~|\.{1,2})?/[\w.~-]+(?:/[\w.~-]*)+|[A-Za-z]:\\\S+|@\w+|\d{3,}"
    r"|(?<=[\w,;:] )[A-ZÀ-Þ][a-zà-ÿ]{2,}"
)
_MARGIN: Final = 100


def sanitise(message: str, start: int, end: int, scrubber: Scrubber) -> str | None:
    """The example for a habit found at [start, end) of `message`: at most 60 characters around it, or None
    when what is left would say something the refusals cover or no longer shows the habit."""
    habit = message[start:end]
    region = scrubber.text(message[max(0, start - _MARGIN) : end + _MARGIN])
    region = collapse(_MASKS.sub("…", region))
    if refusal(region) is not None:
        return None
    at = region.casefold().find(collapse(habit).casefold())
    if at < 0:
        return None  # the habit itself was masked: nothing safe to show
    span = len(collapse(habit))
    if span >= EXAMPLE_CHARS:
        return region[at : at + EXAMPLE_CHARS]
    left = max(0, min(at - (EXAMPLE_CHARS - span) // 2, len(region) - EXAMPLE_CHARS))
    window = region[left : left + EXAMPLE_CHARS]
    if left > 0:
        window = "…" + window[1:]
    if left + EXAMPLE_CHARS < len(region):
        window = window[:-1] + "…"
    return window.strip() or None
