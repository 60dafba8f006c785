"""Every statement on the user model's tables (migration m020_user_model), each written with the one rule of
who may see a claim (`claims_sql`): its owner alone."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from threadloom.search.model import Viewer
from threadloom.store.base import Reader, Row, Writer
from threadloom.store.sql import placeholders
from threadloom.store.visibility import claims_sql, visibility_sql
from threadloom.usermodel.confidence import LOW, PRIOR_CONTRADICT, PRIOR_SUPPORT, confidence
from threadloom.usermodel.model import Claim, Evidence, Transition

# A claim as it stood at :as_of (bi-temporal, as memories: store/visibility.py). Recorded by then and valid
# then as known now, or recorded by then and superseded only after: what was believed at that instant.
_BELIEVED_THEN = (
    "c.created_at <= :as_of AND c.valid_from <= :as_of AND (c.valid_until IS NULL OR c.valid_until > :as_of "
    "OR c.superseded_at > :as_of)"
)
# Its support, contradiction and tier at :as_of: the evidence written by then, the last transition by then.
_THEN_COLUMNS = (
    "COALESCE((SELECT sum(e.effective) FROM user_evidence e WHERE e.claim_id = c.id AND e.kind = 'support' "
    "AND e.at <= :as_of), 0) AS support, "
    "COALESCE((SELECT sum(e.effective) FROM user_evidence e WHERE e.claim_id = c.id AND e.kind = 'contradict' "
    "AND e.at <= :as_of), 0) AS contradict, "
    "(SELECT h.to_tier FROM user_claim_tiers h WHERE h.claim_id = c.id AND h.at <= :as_of ORDER BY h.id DESC "
    "LIMIT 1) AS tier"
)


def to_claim(row: Row) -> Claim:
    support, contradict = float(row["support"]), float(row["contradict"])
    return Claim(
        id=row["id"],
        owner=row["owner"],
        domain=row["domain"],
        text=row["text"],
        visibility=row["visibility"],
        vendor=row["vendor"],
        tier=row["tier"],
        support=support,
        contradict=contradict,
        confidence=confidence(support, contradict),
        created_at=row["created_at"],
        valid_from=row["valid_from"],
        valid_until=row["valid_until"],
        superseded_by=row["superseded_by"],
        supersedes=row["supersedes"],
    )


def claims(
    r: Reader,
    viewer: Viewer,
    *,
    as_of: int | None = None,
    ids: Sequence[str] = (),
    domain: str | None = None,
    tiers: Sequence[str] = (),
    vendors: Sequence[str] | None = None,
    limit: int | None = None,
    containing: Sequence[str] = (),
) -> list[Claim]:
    """The viewer's claims: current ones (or those believed at `as_of`, as they stood then), optionally only
    `ids`, of one `domain`, in `tiers`, recorded by sessions of `vendors`, whose text or domain contains one of
    `containing` (lower-case); most confident first."""
    where, params = claims_sql(viewer)
    clauses = [where, *_containing(containing, params)]
    columns = "c.*"
    if as_of is not None:
        clauses.append(_BELIEVED_THEN)
        params["as_of"] = as_of
        columns = "c.id, c.owner, c.domain, c.text, c.visibility, c.vendor, c.created_at, c.valid_from, " + (
            "c.valid_until, c.superseded_by, c.supersedes, " + _THEN_COLUMNS
        )
    elif not ids:
        clauses.append("c.superseded_by IS NULL")
    if ids:
        keys, named = placeholders("c_id", list(ids))
        clauses.append(f"c.id IN ({keys})")
        params.update(named)
    if domain is not None:
        clauses.append("c.domain = :c_domain")
        params["c_domain"] = domain
    if vendors is not None:
        keys, named = placeholders("c_vendor", list(vendors) or [""])
        clauses.append(f"c.vendor IN ({keys})")
        params.update(named)
    tail = ""
    if as_of is None:  # the stored tier and sums are the current ones: filter, order and cut in SQL
        if tiers:
            keys, named = placeholders("c_tier", list(tiers))
            clauses.append(f"c.tier IN ({keys})")
            params.update(named)
        prior = PRIOR_SUPPORT + PRIOR_CONTRADICT  # the order of `confidence()`, in SQL
        tail = f" ORDER BY (c.support + {PRIOR_SUPPORT}) / (c.support + c.contradict + {prior}) DESC"
        tail += ", c.domain, c.created_at"
        if limit is not None:
            tail += f" LIMIT {int(limit)}"
    rows = r.rows(f"SELECT {columns} FROM user_claims c WHERE {' AND '.join(clauses)}{tail}", params)
    found = [to_claim(row) for row in rows]
    if tiers:
        found = [c for c in found if c.tier in tiers]
    found.sort(key=lambda c: (-c.confidence, c.domain, c.created_at))
    return found[:limit] if limit is not None else found


def count_withheld(r: Reader, viewer: Viewer, vendors: Sequence[str], containing: Sequence[str] = ()) -> int:
    """How many current validated claims of at least medium confidence were recorded by sessions of vendors
    other than `vendors` (what the egress policy keeps back), among those containing one of `containing`."""
    where, params = claims_sql(viewer)
    keys, named = placeholders("c_vendor", list(vendors) or [""])
    prior = PRIOR_SUPPORT + PRIOR_CONTRADICT
    clauses = [where, *_containing(containing, params), f"c.vendor NOT IN ({keys})", "c.superseded_by IS NULL"]
    medium = f"(c.support + {PRIOR_SUPPORT}) / (c.support + c.contradict + {prior}) >= :c_low"  # confidence()
    clauses += ["c.tier = 'validated'", medium]
    sql = f"SELECT count(*) FROM user_claims c WHERE {' AND '.join(clauses)}"
    return int(r.scalar(sql, params | named | {"c_low": LOW}))


def _containing(words: Sequence[str], params: dict[str, Any]) -> list[str]:
    if not words:
        return []
    keys, named = placeholders("c_word", list(words))
    params.update(named)
    either = [f"instr(lower(c.text), {k}) > 0 OR instr(c.domain, {k}) = 1" for k in keys.split(", ")]
    return ["(" + " OR ".join(either) + ")"]


def claim_row(r: Reader, viewer: Viewer, claim_id: str) -> Row | None:
    where, params = claims_sql(viewer)
    return r.one(f"SELECT c.* FROM user_claims c WHERE c.id = :c_id AND {where}", params | {"c_id": claim_id})


def evidence(r: Reader, claim_id: str, as_of: int | None = None, limit: int = 50) -> tuple[list[Evidence], int]:
    """A claim's evidence, newest first (at most `limit`), and how many there are in all."""
    then = "" if as_of is None else " AND at <= :as_of"
    params: dict[str, Any] = {"c_id": claim_id, "as_of": as_of, "limit": limit}
    total = int(r.scalar(f"SELECT count(*) FROM user_evidence WHERE claim_id = :c_id{then}", params))
    rows = r.rows(f"SELECT * FROM user_evidence WHERE claim_id = :c_id{then} ORDER BY id DESC LIMIT :limit", params)
    shown = [
        Evidence(
            row["id"],
            row["claim_id"],
            row["kind"],
            row["weight"],
            row["effective"],
            row["source"],
            row["ref"],
            row["origin"],
            row["at"],
        )
        for row in rows
    ]
    return shown, total


def evidence_vendors(r: Reader, ids: Sequence[int]) -> dict[int, str]:
    """The vendor of the session that recorded each piece of evidence (the egress policy reads it)."""
    if not ids:
        return {}
    keys, named = placeholders("e_id", list(ids))
    return {int(i): str(v) for i, v in r.tuples(f"SELECT id, vendor FROM user_evidence WHERE id IN ({keys})", named)}


def history(r: Reader, claim_id: str, as_of: int | None = None) -> list[Transition]:
    then = "" if as_of is None else " AND at <= :as_of"
    rows = r.rows(
        f"SELECT * FROM user_claim_tiers WHERE claim_id = :c_id{then} ORDER BY id", {"c_id": claim_id, "as_of": as_of}
    )
    return [Transition(row["from_tier"], row["to_tier"], row["reason"], row["evidence_id"], row["at"]) for row in rows]


def lineage(r: Reader, claim_id: str) -> list[str]:
    """The claims `claim_id` superseded, nearest first (each claim supersedes at most one)."""
    found: list[str] = []
    current: str | None = claim_id
    while current is not None and len(found) < 1_000:
        current = r.scalar("SELECT supersedes FROM user_claims WHERE id = :id", {"id": current})
        if current is not None:
            found.append(current)
    return found


def record_tier(
    w: Writer, claim_id: str, from_tier: str | None, to_tier: str, reason: str, ev: int | None, at: int
) -> None:
    w.execute("UPDATE user_claims SET tier = :tier WHERE id = :id", {"tier": to_tier, "id": claim_id})
    w.insert(
        "INSERT INTO user_claim_tiers (claim_id, from_tier, to_tier, reason, evidence_id, at) "
        "VALUES (:id, :from_tier, :to_tier, :reason, :ev, :at)",
        {"id": claim_id, "from_tier": from_tier, "to_tier": to_tier, "reason": reason, "ev": ev, "at": at},
    )


def source_exists(r: Reader, viewer: Viewer, source: str, ref: str) -> bool:
    """Whether the message, memory or note a piece of evidence cites exists and is the viewer's to cite: a
    transcript message or a note of theirs, a memory they may see."""
    if source == "memory":
        where, params = visibility_sql(viewer)
        return r.one(f"SELECT 1 FROM memories m WHERE m.id = :ref AND {where}", params | {"ref": ref}) is not None
    table = {"message": "transcript_messages", "note": "thread_notes"}.get(source)
    if table is None:
        return True  # a statement is its own text
    row = r.one(f"SELECT 1 FROM {table} WHERE id = :ref AND owner = :user", {"ref": int(ref), "user": viewer.user})
    return row is not None
