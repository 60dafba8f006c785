"""Value objects of the user model: claims about how a user works, the evidence for and against them,
and the tier transitions each claim went through. Everything a caller gives is checked here, before
anything is written."""

from __future__ import annotations

import re
import secrets
import unicodedata
from dataclasses import dataclass
from typing import Any, Final, Literal

from threadloom.errors import InvalidInput

MAX_TEXT_CHARS: Final = 500  # a claim is one sentence about the user, not a document
MAX_STATEMENT_CHARS: Final = 2_000  # an explicit statement quoted as evidence
MAX_REF_CHARS: Final = 200
MAX_EVIDENCE_SHOWN: Final = 50

# The open vocabulary's recommended domains; any other lower-case word of 2-32 characters is accepted.
DOMAINS: Final = ("style", "values", "workflow", "technical", "communication", "context", "skills", "other")
_DOMAIN_RE: Final = re.compile(r"^[a-z][a-z0-9_-]{1,31}$")
_ID_RE: Final = re.compile(r"^uc_[0-9a-f]{16}$")
_NUMBER_RE: Final = re.compile(r"^[0-9]{1,18}$")
_MEMORY_RE: Final = re.compile(r"^m_[0-9a-f]{16}$")

Tier = Literal["hypothesis", "observed", "validated", "disputed"]
TIERS: Final = ("hypothesis", "observed", "validated", "disputed")
EvidenceKind = Literal["support", "contradict"]
Source = Literal["message", "memory", "note", "statement"]
SOURCES: Final = ("message", "memory", "note", "statement")
Origin = Literal["user", "automated"]
# Claims are their owner's alone: `private` is the only visibility. The column is there for the egress
# policy (which vendor's model may receive personal memory), which reads it beside the claim's `vendor`.
VISIBILITIES: Final = ("private",)


def new_id() -> str:
    return "uc_" + secrets.token_hex(8)


def check_id(value: object) -> str:
    if not isinstance(value, str) or not _ID_RE.match(value):
        raise InvalidInput(f"{str(value)[:40]!r} is not a claim id (they look like uc_0123456789abcdef)")
    return value


def check_domain(value: object) -> str:
    if not isinstance(value, str):
        raise InvalidInput("domain is a word such as " + ", ".join(DOMAINS))
    domain = value.strip().lower()
    if not _DOMAIN_RE.match(domain):
        raise InvalidInput(
            f"domain {value[:40]!r} is not 2-32 lower-case letters, digits, _ or -; recommended: " + ", ".join(DOMAINS)
        )
    return domain


def check_text(value: object, name: str = "text", limit: int = MAX_TEXT_CHARS) -> str:
    if not isinstance(value, str):
        raise InvalidInput(f"{name} is a string")
    text = " ".join(value.split())
    if not any(unicodedata.category(c)[0] not in "CZ" for c in text):  # "\u202e" or zero-width spaces say nothing
        raise InvalidInput(f"{name} is empty: a claim says something about the user")
    if len(text) > limit:
        raise InvalidInput(f"{name} is {len(text):,} characters; at most {limit:,}")
    return text


def check_ref(source: object, ref: object) -> tuple[str, str]:
    """A source of evidence and what it points at: a transcript message id, a memory id, a thread note id,
    or the statement's own words."""
    if source not in SOURCES:
        raise InvalidInput(f"source is one of {', '.join(SOURCES)}, not {str(source)[:40]!r}")
    if source == "statement":
        return source, check_text(ref, "ref (the statement)", MAX_STATEMENT_CHARS)
    if not isinstance(ref, str) or len(ref) > MAX_REF_CHARS:
        raise InvalidInput(f"ref names the {source}: a string of at most {MAX_REF_CHARS} characters")
    ref = ref.strip()
    if source == "memory" and not _MEMORY_RE.match(ref):
        raise InvalidInput(f"{ref[:40]!r} is not a memory id (they look like m_0123456789abcdef)")
    if source in ("message", "note") and not _NUMBER_RE.match(ref):
        raise InvalidInput(f"ref of a {source} is its number (as dialog_search or thread_context show it)")
    return str(source), ref


def check_origin(value: object) -> str:
    if value not in ("user", "automated"):
        raise InvalidInput(f"origin is user (their own words) or automated (inferred), not {str(value)[:40]!r}")
    return str(value)


def check_weight(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        raise InvalidInput("weight is a number in (0, 1]: how strongly this source bears on the claim")
    return float(value)


@dataclass(frozen=True)
class Claim:
    id: str
    owner: str
    domain: str
    text: str
    visibility: str
    vendor: str
    tier: str
    support: float
    contradict: float
    confidence: float
    created_at: int
    valid_from: int
    valid_until: int | None
    superseded_by: str | None
    supersedes: str | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "domain": self.domain,
            "text": self.text,
            "tier": self.tier,
            "confidence": round(self.confidence, 3),
            "support": round(self.support, 3),
            "contradict": round(self.contradict, 3),
            "visibility": self.visibility,
            "vendor": self.vendor,
            "created_at": self.created_at,
            "valid_from": self.valid_from,
            "valid_until": self.valid_until,
            "superseded_by": self.superseded_by,
            "supersedes": self.supersedes,
        }


@dataclass(frozen=True)
class Evidence:
    id: int
    claim_id: str
    kind: str
    weight: float
    effective: float
    source: str
    ref: str
    origin: str
    at: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "weight": self.weight,
            "effective": self.effective,
            "source": self.source,
            "ref": self.ref,
            "origin": self.origin,
            "at": self.at,
        }


@dataclass(frozen=True)
class Transition:
    from_tier: str | None
    to_tier: str
    reason: str
    evidence_id: int | None
    at: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "from": self.from_tier,
            "to": self.to_tier,
            "reason": self.reason,
            "evidence": self.evidence_id,
            "at": self.at,
        }
