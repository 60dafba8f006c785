"""Value objects and limits of style memory: how a user writes (habits) and how they like the agent to work
with them (the interaction profile). Everything a caller gives is checked here, before anything is written.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any, Final, Literal

from threadloom.errors import InvalidInput

Kind = Literal["catchphrase", "emoji", "emoticon", "dialect", "idiolect", "register", "punctuation"]
KINDS: Final[tuple[Kind, ...]] = ("catchphrase", "emoji", "emoticon", "dialect", "idiolect", "register", "punctuation")
# Habits an agent should mirror sparingly, if at all: the over-imitation score weighs them.
FLASHY: Final = frozenset({"emoji", "emoticon", "dialect", "idiolect"})
STATUSES: Final = ("candidate", "active", "archived", "forgotten")

# The activation gate: a habit is applied only once the user has shown it twice, in two different sessions,
# so one hallucinated hint or one odd message never shapes replies.
GATE_OBSERVATIONS: Final = 2
GATE_SESSIONS: Final = 2
DAY_MS: Final = 86_400_000
CANDIDATE_TTL_MS: Final = 30 * DAY_MS  # a candidate not seen again goes
ACTIVE_IDLE_MS: Final = 180 * DAY_MS  # an active habit the user stopped showing is archived
ARCHIVED_TTL_MS: Final = 360 * DAY_MS  # and an archived one goes after this, since last seen
STALE_MS: Final = 30 * DAY_MS  # the drift score: active habits not seen for this long

HABIT_CHARS: Final = 40
EXAMPLE_CHARS: Final = 60
PROFILE_CHARS: Final = 200
MAX_HINTS: Final = 8
MAX_PROFILE_HINTS: Final = 6
CAPSULE_HABITS: Final = 8
CAPSULE_PROFILE: Final = 8
KEEP_REVISIONS: Final = 20  # snapshots a delta can be computed from

_HABIT_ID_RE: Final = re.compile(r"^sh_[0-9a-f]{16}$")
_PROFILE_ID_RE: Final = re.compile(r"^sp_[0-9a-f]{16}$")
_SPACE_RE: Final = re.compile(r"\s+")


def collapse(text: str) -> str:
    return _SPACE_RE.sub(" ", text).strip()


def habit_key(text: str) -> str:
    return collapse(text).casefold()


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def habit_id(owner: str, kind: str, key: str) -> str:
    """Derived from the owner too: the same habit of two users has two ids, and neither reveals the other."""
    return "sh_" + _digest(owner, kind, key)


def profile_id(owner: str, key: str) -> str:
    return "sp_" + _digest(owner, "profile", key)


def check_habit_id(value: object) -> str:
    if not isinstance(value, str) or not _HABIT_ID_RE.match(value):
        raise InvalidInput("habit_id is sh_ and 16 hex digits, as `style(view='habits')` lists them")
    return value


def check_profile_id(value: object) -> str:
    if not isinstance(value, str) or not _PROFILE_ID_RE.match(value):
        raise InvalidInput("profile_id is sp_ and 16 hex digits, as `style()` lists them")
    return value


def check_kind(value: object) -> Kind:
    if value not in KINDS:
        raise InvalidInput(f"hint kind is one of {', '.join(KINDS)}, not {value!r}")
    return value


def check_text(value: object, name: str, limit: int) -> str:
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be a string")
    if len(value) > limit * 4:  # refuse a huge value before any work on it
        raise InvalidInput(f"{name} is at most {limit} characters (got {len(value):,})")
    text = collapse(value)
    if not text:
        raise InvalidInput(f"{name} is empty")
    if len(text) > limit:
        raise InvalidInput(f"{name} is at most {limit} characters (got {len(text):,})")
    if not text.isprintable():
        raise InvalidInput(f"{name} holds control characters")
    return text


@dataclass(frozen=True)
class Observation:
    """A sighting of a habit: in which session (`session`: qualified by the agent CLI), with which vendor
    (the egress policy reads the vendor a habit was first seen with)."""

    kind: Kind
    text: str
    locale: str
    example: str | None
    session: str
    vendor: str
    origin: Literal["dictionary", "hint"]
    at: int
    key: str = ""  # habit_key(text), computed once when not given

    def __post_init__(self) -> None:
        if not self.key:
            object.__setattr__(self, "key", habit_key(self.text))


@dataclass(frozen=True)
class Habit:
    id: str
    kind: str
    text: str
    locale: str
    status: str
    pinned: bool
    seen: int
    sessions: int
    example: str | None
    vendor: str
    origin: str
    first_at: int
    last_at: int

    @classmethod
    def of(cls, row: dict[str, Any]) -> Habit:
        return cls(
            row["id"], row["kind"], row["text"], row["locale"], row["status"], bool(row["pinned"]),
            int(row["seen"]), int(row["sessions"]), row["example"], row["vendor"], row["origin"],
            int(row["first_at"]), int(row["last_at"]),
        )  # fmt: skip

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "text": self.text,
            "locale": self.locale,
            "status": self.status,
            "pinned": self.pinned,
            "seen": self.seen,
            "sessions": self.sessions,
            "example": self.example,
            "vendor": self.vendor,
            "last_at": self.last_at,
        }


@dataclass(frozen=True)
class Preference:
    """An item of the interaction profile: `key` is a known preference's name (rendered in the capsule's
    language) or `custom:<digest>` for the user's own words."""

    id: str
    key: str
    text: str
    origin: str
    vendor: str
    created_at: int

    @classmethod
    def of(cls, row: dict[str, Any]) -> Preference:
        return cls(row["id"], row["key"], row["text"], row["origin"], row["vendor"], int(row["created_at"]))
