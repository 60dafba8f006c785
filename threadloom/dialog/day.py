"""What happened on a day or a range: sessions, projects, threads touched, notes and memories written,
and what the user asked, as one text measured against a token budget.

Two densities. `detail` gives each session its first requests and each note its text; `outline` gives
every item one short line. The whole span is rendered at `detail`, and if that does not fit the budget,
the whole span at `outline` (so an afternoon is never dropped to keep a morning's detail); only if the
outline does not fit either is it cut at the end, with the time to resume from. The caveats say what
the text does not: nothing captured, a range outside what was, a cut.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from threadloom import tokens
from threadloom.clock import iso, now_ms
from threadloom.dialog.model import trimmed
from threadloom.errors import InvalidInput
from threadloom.identity import Provenance
from threadloom.store import dialog
from threadloom.store.base import Reader, Store
from threadloom.usermodel.egress import allows, withheld_line

DEFAULT_BUDGET: Final = 1_500
MIN_BUDGET: Final = 200
MAX_BUDGET: Final = 8_000
DAY_MS: Final = 24 * 3600 * 1000
MAX_SPAN_MS: Final = 31 * DAY_MS
ASKS_PER_SESSION: Final = 4
DENSITIES: Final = ("detail", "outline")


@dataclass(frozen=True)
class Item:
    at: int
    detail: str
    outline: str
    vendor: str | None = None  # a verbatim quote's recorder (the egress policy reads it); None: not personal


def _clock(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000).astimezone().strftime("%H:%M")


def _day_of(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000).astimezone().strftime("%Y-%m-%d %a (UTC%z)")


def _next_midnight(ms: int) -> int:
    local = datetime.fromtimestamp(ms / 1000).astimezone()
    midnight = (local + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    return int(midnight.astimezone().timestamp() * 1000)


def _midnight(ms: int) -> int:
    local = datetime.fromtimestamp(ms / 1000).astimezone().replace(hour=0, minute=0, second=0, microsecond=0)
    return int(local.timestamp() * 1000)


def _short(path: str | None) -> str:
    return (path or "no project").rstrip("/").rsplit("/", 1)[-1] or "/"


def _one_line(text: str, limit: int) -> str:
    return trimmed(" ".join(text.split()), limit)[0]


class DaySummary:
    def __init__(self, store: Store, egress: str = "all") -> None:
        self._store = store
        self._egress = egress  # THREADLOOM_EGRESS: the user's verbatim quotes among the notes are personal memory

    def summary(
        self,
        prov: Provenance,
        day: int | None = None,
        until: int | None = None,
        project: str | None = None,
        budget: int = DEFAULT_BUDGET,
    ) -> dict[str, Any]:
        if not MIN_BUDGET <= budget <= MAX_BUDGET:
            raise InvalidInput(f"budget_tokens must be between {MIN_BUDGET:,} and {MAX_BUDGET:,}")
        if day is None:  # the day before `until`, else today
            day = until - DAY_MS if until is not None else _midnight(now_ms())
        end = until if until is not None else _next_midnight(day)
        if end <= day:
            raise InvalidInput("until must be after day")
        if end - day > MAX_SPAN_MS:
            raise InvalidInput("a summary covers at most 31 days; ask for a shorter range")
        owner = prov.viewer().user
        items, span = self._store.read(lambda r: (_items(r, owner, day, end, project), dialog.span(r, owner)))
        kept = [i for i in items if i.vendor is None or allows(self._egress, i.vendor, prov.vendor)]
        out = _render(kept, day, end, budget, span)
        if line := withheld_line(self._egress, prov.vendor, {"quotes": len(items) - len(kept)}):
            out["caveats"].append(line)
        return out


def _items(r: Reader, owner: str, since: int, until: int, project: str | None) -> list[Item]:
    items = []
    for s in dialog.sessions_between(r, owner, since, until, project):
        asks = dialog.said_between(r, owner, s["source"], s["session_id"], since, until, ASKS_PER_SESSION)
        head = (
            f"{_clock(s['first_at'])}-{_clock(s['last_at'])} {s['source']} in {_short(s['project'])}: "
            f"{s['messages']} messages (session {s['session_id']})"
        )
        lines = [f"{head}"] + [f"  - [{a['id']}] asked: {_one_line(a['text'], 160)}" for a in asks]
        first = f": {_one_line(asks[0]['text'], 60)}" if asks else ""
        outline = f"{_clock(s['first_at'])}-{_clock(s['last_at'])} {s['source']} {_short(s['project'])}{first}"
        items.append(Item(int(s["first_at"]), "\n".join(lines), outline))
    for n in dialog.notes_between(r, owner, since, until, project):
        where = f"{n['project']}/{n['thread'] or 'main'}"
        items.append(
            Item(
                int(n["at"]),
                f"{_clock(n['at'])} {n['kind']} in {where}: {_one_line(n['text'], 300)}",
                f"{_clock(n['at'])} {n['kind']} {where}: {_one_line(n['text'], 60)}",
                str(n["vendor"]) if n["kind"] == "quote" else None,
            )
        )
    for m in dialog.memories_between(r, owner, since, until, project):
        items.append(
            Item(
                int(m["at"]),
                f"{_clock(m['at'])} memory stored ({m['kind']}, {m['id']}): {_one_line(m['text'], 300)}",
                f"{_clock(m['at'])} memory {m['kind']}: {_one_line(m['text'], 60)}",
            )
        )
    return sorted(items, key=lambda i: i.at)


def _lines(items: list[Item], density: str) -> list[tuple[int, str]]:
    """(time, line) in order, a day header before each day's first item."""
    out: list[tuple[int, str]] = []
    day = None
    for item in items:
        this = _day_of(item.at)
        if this != day:
            out.append((item.at, f"## {this}"))
            day = this
        out.append((item.at, item.detail if density == "detail" else item.outline))
    return out


def _render(
    items: list[Item], since: int, until: int, budget: int, span: tuple[int | None, int | None]
) -> dict[str, Any]:
    caveats = []
    first, last = span
    covered = f"your transcripts cover {iso(first)} to {iso(last)}" if first and last else ""
    if first is None or last is None:
        caveats.append("no transcripts of yours are ingested yet ('threadloom ingest' reads the agent CLIs' files)")
    elif until <= first or since > last:
        caveats.append(f"the range asked is outside what was captured: {covered}")
    out: dict[str, Any] = {"from_at": since, "until_at": until, "items": len(items)}
    if not items:
        hint = f" ({covered})" if covered else ""
        caveats.append(
            f"nothing was recorded in this range; try a wider range, dialog_search for a topic, or memory_recall{hint}"
        )
        return out | {"density": "outline", "text": "", "tokens": 0, "caveats": caveats}
    for density in DENSITIES:
        text = "\n".join(line for _, line in _lines(items, density))
        used = tokens.count(text)
        if used <= budget:
            if density == "outline":
                caveats.append(
                    "outline: one line per item to fit the budget; a narrower range, a larger budget_tokens or "
                    "dialog_read(session=...) gives the detail"
                )
            return out | {"density": density, "text": text, "tokens": used, "caveats": caveats}
    kept, used, resume = [], 0, None
    for at, line in _lines(items, "outline"):
        cost = tokens.count(line) + 1
        if used + cost > budget - 60:  # room for the caveat the cut needs
            resume = at
            break
        kept.append(line)
        used += cost
    assert resume is not None
    caveats.append(
        f"cut for size at {iso(resume)}: call dialog_day again with day={iso(resume)} and until={iso(until)} "
        "to read on (or a larger budget_tokens)"
    )
    text = "\n".join(kept)
    return out | {
        "density": "outline",
        "text": text,
        "tokens": tokens.count(text),
        "resume_from_at": resume,
        "caveats": caveats,
    }
