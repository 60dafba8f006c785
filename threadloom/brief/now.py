"""The "now" table: the exact values to pass for the days, weeks and months a session talks about.

Models fail at date arithmetic, not at copying (../shared/reference/recall-tool-surface.md, "Time:
copied, never computed"), so the brief hands them every value ready to copy: the ISO date (a date
argument is that day's local midnight, `clock.instant`) and the first and last epoch millisecond of each
period. The table depends only on the local date and zone, so it is the same text all day: a session's
cached prompt prefix stays valid. Times are this machine's local time, the zone `clock.instant` reads
a date or a time without an offset in.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta, tzinfo
from typing import Final

from threadloom.clock import iso

_DAYS: Final = 7


@dataclass(frozen=True)
class Period:
    label: str
    first: date  # its first day
    last: date  # its last day
    start_ms: int  # the first millisecond of `first`
    end_ms: int  # the last millisecond of `last`

    def row(self) -> str:
        when = (
            self.first.isoformat() if self.first == self.last else f"{self.first.isoformat()}..{self.last.isoformat()}"
        )
        return f"{self.label} {when} start_ms={self.start_ms} end_ms={self.end_ms}"


def _midnight_ms(day: date, tz: tzinfo | None) -> int:
    """Epoch ms of `day`'s local midnight (each day's own offset, so a daylight-saving change is right)."""
    naive = datetime(day.year, day.month, day.day)
    aware = naive.replace(tzinfo=tz) if tz is not None else naive.astimezone()
    return int(aware.timestamp() * 1000)


def _period(label: str, first: date, last: date, tz: tzinfo | None) -> Period:
    return Period(label, first, last, _midnight_ms(first, tz), _midnight_ms(last + timedelta(days=1), tz) - 1)


def periods(today: date, tz: tzinfo | None = None) -> list[Period]:
    """Today, yesterday and the five days before (by weekday), this and last week (Monday to Sunday), this
    and last month; `tz` None is this machine's local zone."""
    rows = []
    for back in range(_DAYS):
        day = today - timedelta(days=back)
        name = day.strftime("%a")
        label = f"today({name})" if back == 0 else f"yesterday({name})" if back == 1 else name
        rows.append(_period(label, day, day, tz))
    monday = today - timedelta(days=today.weekday())
    rows.append(_period("this_week", monday, monday + timedelta(days=6), tz))
    rows.append(_period("last_week", monday - timedelta(days=7), monday - timedelta(days=1), tz))
    first = today.replace(day=1)
    following = (first + timedelta(days=32)).replace(day=1)
    rows.append(_period("this_month", first, following - timedelta(days=1), tz))
    previous = (first - timedelta(days=1)).replace(day=1)
    rows.append(_period("last_month", previous, first - timedelta(days=1), tz))
    return rows


def offset_of(today: date, tz: tzinfo | None = None) -> str:
    """The zone's offset at `today`'s midnight, as ISO 8601 writes it (+01:00)."""
    return iso(_midnight_ms(today, tz))[-6:] if tz is None else _aware(today, tz).isoformat()[-6:]


def _aware(day: date, tz: tzinfo) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=tz)


def table(today: date, tz: tzinfo | None = None) -> list[str]:
    """The table's lines: a header naming the zone and where the values go, then one row per period."""
    head = (
        f"local time UTC{offset_of(today, tz)}; copy a row's date or ms into any time argument (as_of, "
        "valid_from, created_since, ...); end_ms is the period's last millisecond"
    )
    return [head, *(p.row() for p in periods(today, tz))]


def today_local(now_ms: int, tz: tzinfo | None = None) -> date:
    moment = datetime.fromtimestamp(now_ms / 1000, tz) if tz is not None else datetime.fromtimestamp(now_ms / 1000)
    return moment.date()


def right_now(now_ms: int) -> str:
    """The one live line of a `now` read (never in the brief, whose table must not change within a day)."""
    return f"right now {iso(now_ms)} ms={now_ms}"
