"""Heuristic extraction, no model: the decision- and rule-shaped sentences of one text (a user's turn or
a thread note), and bullet lists that read as rules.

Pure: text in, findings out. The pass that feeds it rows and queues what it finds is `harvest.py`.

Tool noise never reaches the cues: fenced and indented code, stack traces and log lines, quoted text
(`> ...`), markup blocks a client injects (`<system-reminder>...</system-reminder>`), and whole
messages that are a client's own wrapping (a compaction summary, a slash command's output).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from threadloom.learning.locales import Compiled, any_keyword, any_veto, compiled, cue_locales, leading_fillers

MAX_CANDIDATE_CHARS: Final = 1_000  # a longer "sentence" is a paste, not a rule
MAX_SCANNED_CHARS: Final = 64_000  # of one message: a pasted log past this is not read for rules
MIN_WORDS: Final = 3
MIN_CJK_CHARS: Final = 6

NOISE_OPENERS: Final = (
    "this session is being continued from a previous conversation",  # Claude Code's compaction summary
    "caveat: the messages below were generated",
    "<command-name>",
    "<local-command-stdout>",
    "[request interrupted",
    "---\nname:",  # a SKILL.md pasted or injected whole
)
_FENCED = re.compile(r"```.*?(?:```|\Z)|~~~.*?(?:~~~|\Z)", re.DOTALL)
_MARKUP = re.compile(r"<([a-z][\w-]{0,40})(?:\s[^>]*)?>.*?(?:</\1>|\Z)", re.DOTALL | re.IGNORECASE)
_NOISE_LINE = re.compile(
    r"^(?:\s{4,}|\t)"  # indented code
    r"|^\s*>"  # quoted text: someone else's words
    r"|^\s*(?:\$|>>>|#!|PS [A-Z]:)\s"  # a shell or REPL line
    r"|^\s*(?:Traceback \(most recent call last\)|File \".*\", line \d+|at [\w$.]+\(.*\)|\w+(?:Error|Exception):)"
    r"|^\s*(?:\d{4}-\d\d-\d\d[ T]\d\d:\d\d|\[?(?:DEBUG|INFO|WARN(?:ING)?|ERROR|FATAL)\]?[: ])",
)
_BULLET = re.compile(r"^\s*(?:[-*•+]|\d{1,3}[.)])\s+(.+)$")
_ANY_BULLET = re.compile(r"^\s*(?:[-*•+]|\d{1,3}[.)])\s+\S", re.MULTILINE)
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|(?<=[。！？；])")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")
_WORD = re.compile(r"[^\W_]+")
_NEGATION_FIRST: Final = frozenset({"ne", "non", "nie", "не", "no", "não", "nicht"})


@dataclass(frozen=True)
class Found:
    kind: str  # decision | rule | bullet
    locale: str
    text: str
    span: int  # character offset in the source text: with the source, the candidate's identity


def is_noise(text: str) -> bool:
    """Whether a whole message is a client's wrapping rather than a person's words."""
    head = text.lstrip()[:200].lower()
    return head.startswith(NOISE_OPENERS)


def classify(sentence: str) -> tuple[str, str] | None:
    """(kind, locale) when `sentence` is decision- or rule-shaped, else None."""
    s = sentence.strip()
    if not s or s.endswith(("?", "？")) or not _long_enough(s):
        return None
    near = cue_locales(s)
    if not near:  # most sentences: one search
        return None
    shape = _shape(s, near)
    veto = any_veto()  # any locale's: "nie wiem" is no German "nie"; searched only for a sentence with a shape
    if shape is None or (veto is not None and veto.search(s)):
        return None
    return shape


def _shape(s: str, near: set[str]) -> tuple[str, str] | None:
    for c in compiled():
        if c.locale not in near:
            continue
        if c.decision.search(s):
            return "decision", c.locale
        if c.rule.search(s) or (c.starts is not None and c.starts.match(s)) or _always(c, s):
            return "rule", c.locale
    return None


def harvest(text: str) -> list[Found]:
    """Every decision- or rule-shaped sentence of `text`, and every item of a rule-like bullet list."""
    if is_noise(text):
        return []
    text = text[:MAX_SCANNED_CHARS]
    # The prefilter (most messages stop here): without a cue word anywhere no sentence is rule-shaped, and
    # without a bullet line no list can be taken whole under a rules heading.
    if not any_keyword().search(text.lower()) and not _ANY_BULLET.search(text):
        return []
    found: list[Found] = []
    run: list[tuple[int, str]] = []  # the bullet list being read: (offset, item)
    heading = ""
    for offset, line in _lines(text):
        bullet = _BULLET.match(line)
        if bullet:
            run.append((offset + bullet.start(1), bullet.group(1)))
            continue
        found.extend(_bullets(run, heading))
        run = []
        heading = line
        for start, sentence in _sentences(line):
            shape = classify(sentence)
            if shape is not None and len(sentence) <= MAX_CANDIDATE_CHARS:
                found.append(Found(shape[0], shape[1], sentence.strip(), offset + start))
    found.extend(_bullets(run, heading))
    return found


def _bullets(run: list[tuple[int, str]], heading: str) -> list[Found]:
    """A list under a rules heading, or one whose items are mostly rule-shaped, is taken whole (the
    regularity carries the items without a cue); otherwise only its rule-shaped items."""
    if not run:
        return []
    shapes = [classify(item) for _, item in run]
    header_locale = _header(heading)
    shaped = [s for s in shapes if s is not None]
    regular = header_locale is not None or (len(run) >= 2 and len(shaped) * 2 >= len(run) and len(shaped) >= 2)
    out: list[Found] = []
    for (offset, item), shape in zip(run, shapes, strict=True):
        text = item.strip()
        if len(text) > MAX_CANDIDATE_CHARS or not _long_enough(text, 2) or text.endswith(("?", "？")):
            continue
        if regular:
            locale = shape[1] if shape else (header_locale or shaped[0][1])
            out.append(Found("bullet", locale, text, offset))
        elif shape is not None:
            out.append(Found(shape[0], shape[1], text, offset))
    return out


def _header(line: str) -> str | None:
    text = line.strip().strip("#*_ ").rstrip(":：").strip("*_ ")
    if not text or len(text) > 80:
        return None
    for c in compiled():
        if c.header is not None and c.header.search(text):
            return c.locale
    return None


def _always(c: Compiled, s: str) -> bool:
    """An always/never word as an instruction, not a description (see locales.py)."""
    if c.always is None:
        return False
    m = c.always.search(s)
    if m is None:
        return False
    if c.imperative is not None:  # CJK: the sentence must ask for something
        return bool(c.imperative.search(s, m.end()))
    if c.descriptive is not None and c.descriptive.search(s):
        return False
    if c.modal_before is not None and c.modal_before.search(s):
        return True
    if c.subject_start is not None and c.subject_start.match(s):
        return False
    before = _WORD.findall(leading_fillers().sub("", s[: m.start()]))
    if len(before) == 2 and before[0].lower() in _NEGATION_FIRST:
        before = before[1:]
    return len(before) <= 1


def _long_enough(s: str, words: int = MIN_WORDS) -> bool:
    if len(_CJK.findall(s)) >= MIN_CJK_CHARS:
        return True
    return len(_WORD.findall(s)) >= words


def _lines(text: str) -> Iterator[tuple[int, str]]:
    """The text's lines with their offsets, code, markup and noise lines left out (blanked, so offsets hold)."""
    blank = text
    if "```" in blank or "~~~" in blank:
        blank = _FENCED.sub(lambda m: " " * len(m.group(0)), blank)
    if "<" in blank:
        blank = _MARKUP.sub(lambda m: " " * len(m.group(0)), blank)
    offset = 0
    for line in blank.split("\n"):
        if line.strip() and not _NOISE_LINE.match(line):
            yield offset, line
        offset += len(line) + 1


def _sentences(line: str) -> Iterator[tuple[int, str]]:
    start = 0
    for m in _SENTENCE_END.finditer(line):
        if line[start : m.start()].strip():
            yield start, line[start : m.start()]
        start = m.end()
    if line[start:].strip():
        yield start, line[start:]
