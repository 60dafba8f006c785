"""Dates and relative times in a question, as time windows to match against stored times.

"in May 2023", "on 8 May", "last May", "2022", "yesterday", "last week", "two weeks ago":
each becomes a window [start, end) in epoch ms, relative to `now` where needed. Windows
only boost documents that fall inside them; they never filter.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Final

_MONTHS: Final = {m.lower(): i for i, m in enumerate(calendar.month_name) if m} | {
    m.lower(): i for i, m in enumerate(calendar.month_abbr) if m
}
_MONTH = (
    r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_NUMBERS: Final = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "couple": 2, "few": 3,
}  # fmt: skip
_UNIT_DAYS: Final = {"day": 1, "week": 7, "month": 30, "year": 365}

_DAY_MONTH_YEAR = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}\.?,?\s+(\d{{4}})\b", re.I)
_MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH}\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.I)
_MONTH_YEAR = re.compile(rf"\b{_MONTH}\.?,?\s+(\d{{4}})\b", re.I)
_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_YEAR = re.compile(r"\b(?:in|during|of|since)\s+(19\d{2}|20\d{2})\b", re.I)
_LAST_MONTH_NAME = re.compile(rf"\blast\s+{_MONTH}\b", re.I)
_IN_MONTH = re.compile(rf"\b(?:in|during)\s+{_MONTH}\b(?!\s*\d)", re.I)
_AGO = re.compile(
    r"\b(\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|couple|few)\s+(?:of\s+)?(day|week|month|year)s?\s+ago\b",
    re.I,
)
_LAST_UNIT = re.compile(r"\b(?:last|past|previous)\s+(day|week|month|year)\b", re.I)


@dataclass(frozen=True)
class Window:
    start: int
    end: int
    phrase: str


def _ms(d: date) -> int:
    return int(datetime(d.year, d.month, d.day, tzinfo=UTC).timestamp() * 1000)


def _month_window(year: int, month: int, phrase: str) -> Window | None:
    try:  # a month of year 9999 ends past what `date` holds
        last = calendar.monthrange(year, month)[1]
        return Window(_ms(date(year, month, 1)), _ms(date(year, month, last) + timedelta(days=1)), phrase)
    except (ValueError, OverflowError):
        return None


def _day_window(d: date, phrase: str, slack_days: int = 1) -> Window:
    return Window(_ms(d - timedelta(days=slack_days)), _ms(d + timedelta(days=1 + slack_days)), phrase)


def _month(name: str) -> int:
    return _MONTHS[name.lower()[:3] if name.lower()[:3] in _MONTHS else name.lower()]


def windows(text: str, now: datetime) -> list[Window]:
    """The time windows a question refers to, most specific first."""
    found: list[Window] = []
    taken: list[tuple[int, int]] = []

    def free(m: re.Match[str]) -> bool:
        return all(m.end() <= a or m.start() >= b for a, b in taken)

    def add(m: re.Match[str], window: Window | None) -> None:
        if window is not None:
            found.append(window)
            taken.append((m.start(), m.end()))

    for m in _DAY_MONTH_YEAR.finditer(text):
        add(m, _safe_day(int(m.group(3)), _month(m.group(2)), int(m.group(1)), m.group(0)))
    for m in _MONTH_DAY_YEAR.finditer(text):
        if free(m):
            add(m, _safe_day(int(m.group(3)), _month(m.group(1)), int(m.group(2)), m.group(0)))
    for m in _ISO_DATE.finditer(text):
        if free(m):
            add(m, _safe_day(int(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(0)))
    for m in _MONTH_YEAR.finditer(text):
        if free(m):
            add(m, _month_window(int(m.group(2)), _month(m.group(1)), m.group(0)))
    for m in _LAST_MONTH_NAME.finditer(text):
        month = _month(m.group(1))
        year = now.year if month < now.month else now.year - 1
        add(m, _month_window(year, month, m.group(0)))
    for m in _IN_MONTH.finditer(text):
        if free(m):
            month = _month(m.group(1))
            year = now.year if month <= now.month else now.year - 1
            add(m, _month_window(year, month, m.group(0)))
    for m in _YEAR.finditer(text):
        if free(m):
            year = int(m.group(1))
            add(m, Window(_ms(date(year, 1, 1)), _ms(date(year + 1, 1, 1)), m.group(0)))
    for m in _AGO.finditer(text):
        amount = int(m.group(1)) if m.group(1).isdigit() else _NUMBERS[m.group(1).lower()]
        days = amount * _UNIT_DAYS[m.group(2).lower()]
        try:  # "5000 years ago" is before year 1
            add(m, _day_window(now.date() - timedelta(days=days), m.group(0), slack_days=max(1, days // 4)))
        except OverflowError:
            continue
    for m in _LAST_UNIT.finditer(text):
        days = _UNIT_DAYS[m.group(1).lower()]
        add(m, Window(_ms(now.date() - timedelta(days=2 * days)), _ms(now.date() + timedelta(days=1)), m.group(0)))
    if re.search(r"\byesterday\b", text, re.I):
        found.append(_day_window(now.date() - timedelta(days=1), "yesterday", slack_days=0))
    if re.search(r"\btoday\b", text, re.I):
        found.append(_day_window(now.date(), "today", slack_days=0))
    return found


def _safe_day(year: int, month: int, day: int, phrase: str) -> Window | None:
    try:
        return _day_window(date(year, month, day), phrase)
    except (ValueError, OverflowError):  # no such day, or its window's slack is past year 1 or 9999
        return None
