"""Time as threadloom stores it: epoch milliseconds; and the one reader of times callers give."""

from __future__ import annotations

import time
from datetime import datetime

from threadloom.errors import InvalidInput

# Epoch ms of 1973-03-03 and 2200-01-01: below, a number is seconds (or nonsense); above, nonsense.
EARLIEST_MS = 100_000_000_000
LATEST_MS = 7_258_118_400_000


def now_ms() -> int:
    return int(time.time() * 1000)


def instant(value: int | str | None, name: str) -> int | None:
    """A time a caller gave, as epoch ms: epoch milliseconds, or an ISO 8601 date or date-time (a date or a
    time without an offset is local time). Anything else is refused, naming the argument."""
    if value is None:
        return None
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value.strip())
    if isinstance(value, bool):
        raise InvalidInput(f"{name}: a time is epoch milliseconds or an ISO 8601 date, not a boolean")
    if isinstance(value, int):
        if EARLIEST_MS <= value <= LATEST_MS:
            return value
        hint = f" ({value} looks like seconds: pass {value * 1000})" if 0 < value < EARLIEST_MS // 10 else ""
        raise InvalidInput(
            f"{name}: {value} is not a time between 1973 and 2200 in epoch milliseconds{hint}, "
            "or give an ISO 8601 date such as 2026-11-30"
        )
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(
            f"{name}: {value[:40]!r} is neither an ISO 8601 date or date-time (2026-05-01, 2026-05-01T09:00+02:00) "
            "nor epoch milliseconds"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.astimezone()  # a naive time is local time
    return instant(int(parsed.timestamp() * 1000), name)


def iso(ms: int) -> str:
    """Epoch ms as an ISO 8601 local time with its offset, to the second."""
    return datetime.fromtimestamp(ms / 1000).astimezone().isoformat(timespec="seconds")
