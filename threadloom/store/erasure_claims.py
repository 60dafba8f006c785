"""Erasure of the user model (m020: `user_claims`, `user_evidence`, `user_claim_tiers`), the `claims` kind of
`forget` (store/erasure.py dispatches to `CLAIMS`; a kind of another module plugs in the same way).

What a selector picks, always among the owner's own:
- claims recorded in the session, by the source (the agent vendor), in the time range (when recorded), or
  whose text contains the text; a project names no claim (a claim is
  about the user, in every project). A picked claim goes with all its evidence and tier history. A claim it
  had superseded holds again (as an erased memory's predecessor does); one that superseded it no longer
  names it.
- evidence on the claims that stay, recorded in the session, by the source, in the time range, or a
  statement containing the text: those rows go, the claim's sums are counted again from what is left, and a
  tier step that cited one keeps the step without the citation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from threadloom.store.base import Reader, Writer
from threadloom.store.sql import placeholders

if TYPE_CHECKING:
    from threadloom.store.erasure import Selector

SAMPLE_CHARS: Final = 80
_SAME_SOURCE: Final = {"claude": "claude-code", "claude-code": "claude"}


@dataclass(frozen=True)
class Erasable:
    """A kind `forget` covers beyond the tables store/erasure.py knows: how it counts (dry run) and erases
    what a selector picks of an owner's rows. `erase` returns its counts and the texts and ids that replay
    records and journal details may still carry (store/erasure.py clears those)."""

    name: str
    matching: Callable[[Reader, str, Selector, int], dict[str, Any]]
    erase: Callable[[Writer, str, Selector], tuple[dict[str, int], list[str]]]


def conditions(sel: Selector, session: str, vendor: str, at: str, text: str) -> tuple[list[str], dict[str, Any]]:
    """The selector as SQL conditions: `session` and `text` are whole conditions on :k_session and :k_text
    (a kind without sessions passes "0 = 1"), `vendor` and `at` the columns of the source and the time."""
    clauses: list[str] = []
    params: dict[str, Any] = {}
    if sel.project is not None:
        clauses.append("0 = 1")
    if sel.session is not None:
        clauses.append(session)
        params["k_session"] = sel.session
    if sel.source is not None:
        clauses.append(f"{vendor} IN (:k_source, :k_alias)")
        params |= {"k_source": sel.source, "k_alias": _SAME_SOURCE.get(sel.source, sel.source)}
    if sel.since is not None:
        clauses.append(f"{at} >= :k_since")
        params["k_since"] = sel.since
    if sel.until is not None:
        clauses.append(f"{at} < :k_until")
        params["k_until"] = sel.until
    if sel.text is not None:  # a plain substring, ASCII letters case-blind, as the other kinds match
        clauses.append(text)
        params["k_text"] = sel.text
    return clauses, params


def _claims_where(owner: str, sel: Selector) -> tuple[str, dict[str, Any]]:
    said = "instr(lower(c.text), lower(:k_text)) > 0"
    clauses, params = conditions(sel, "c.session_id = :k_session", "c.vendor", "c.created_at", said)
    return " AND ".join(["c.owner = :k_owner", *clauses]), params | {"k_owner": owner}


def _evidence_where(owner: str, sel: Selector) -> tuple[str, dict[str, Any]]:
    """Evidence the selector picks on the owner's claims the selector does not pick."""
    said = "(e.source = 'statement' AND instr(lower(e.ref), lower(:k_text)) > 0)"
    clauses, params = conditions(sel, "e.session_id = :k_session", "e.vendor", "e.at", said)
    claims, claim_params = _claims_where(owner, sel)
    owned = f"e.claim_id IN (SELECT c.id FROM user_claims c WHERE c.owner = :k_owner AND NOT ({claims}))"
    return " AND ".join([owned, *clauses]), params | claim_params


def matching(r: Reader, owner: str, sel: Selector, sample: int) -> dict[str, Any]:
    where, params = _claims_where(owner, sel)
    picked = f"SELECT c.id FROM user_claims c WHERE {where}"
    count = int(r.scalar(f"SELECT COUNT(*) FROM ({picked})", params))
    rows = r.rows(
        f"SELECT c.id, c.session_id AS session, c.created_at AS at, substr(c.text, 1, {SAMPLE_CHARS}) AS text, "
        "c.vendor AS vendor "
        f"FROM user_claims c WHERE {where} ORDER BY c.created_at, c.id LIMIT :k_n",
        params | {"k_n": sample},
    )
    theirs = int(r.scalar(f"SELECT COUNT(*) FROM user_evidence WHERE claim_id IN ({picked})", params))
    alone, alone_params = _evidence_where(owner, sel)
    apart = int(r.scalar(f"SELECT COUNT(*) FROM user_evidence e WHERE {alone}", alone_params))
    return {"count": count, "sample": rows, "evidence": theirs + apart}


def erase(w: Writer, owner: str, sel: Selector) -> tuple[dict[str, int], list[str]]:
    where, params = _claims_where(owner, sel)
    ids = [str(i) for (i,) in w.tuples(f"SELECT c.id FROM user_claims c WHERE {where}", params)]
    alone, alone_params = _evidence_where(owner, sel)
    apart = [int(i) for (i,) in w.tuples(f"SELECT e.id FROM user_evidence e WHERE {alone}", alone_params)]
    traces = _texts(w, ids, apart)
    evidence = 0
    touched: set[str] = set()
    for chunk in _chunks(apart):
        keys, named = placeholders("k", list(chunk))
        touched.update(str(c) for (c,) in w.tuples(f"SELECT claim_id FROM user_evidence WHERE id IN ({keys})", named))
        w.execute(f"UPDATE user_claim_tiers SET evidence_id = NULL WHERE evidence_id IN ({keys})", named)
        evidence += w.execute(f"DELETE FROM user_evidence WHERE id IN ({keys})", named)
    with_claims, tiers = _erase_claims(w, ids)
    for claim_id in sorted(touched - set(ids)):
        _recount(w, claim_id)
    return {"claims": len(ids), "claim_evidence": evidence + with_claims, "claim_tiers": tiers}, ids + traces


def drop_derived(w: Writer, owner: str, message_ids: Sequence[Any]) -> tuple[int, list[str]]:
    """What the user model took from erased transcript messages: evidence citing them goes, and a claim a
    background job made (no session) left with no evidence goes too (its text was the message's words).
    A claim someone stated in a session stays, recounted. How many claims went, and their texts."""
    refs = [str(i) for i in message_ids]
    touched: set[str] = set()
    for chunk in _chunks(refs):
        keys, named = placeholders("m", list(chunk))
        cited = (
            "SELECT e.id FROM user_evidence e JOIN user_claims c ON c.id = e.claim_id WHERE c.owner = :o "
            f"AND e.source = 'message' AND e.ref IN ({keys})"
        )
        params = named | {"o": owner}
        touched.update(str(c) for (c,) in w.tuples(f"SELECT claim_id FROM user_evidence WHERE id IN ({cited})", params))
        w.execute(f"UPDATE user_claim_tiers SET evidence_id = NULL WHERE evidence_id IN ({cited})", params)
        w.execute(f"DELETE FROM user_evidence WHERE id IN ({cited})", params)
    bare = [
        c
        for c in sorted(touched)
        if w.scalar(
            "SELECT COUNT(*) FROM user_claims c WHERE c.id = :c AND c.session_id IS NULL "
            "AND NOT EXISTS (SELECT 1 FROM user_evidence e WHERE e.claim_id = c.id)",
            {"c": c},
        )
    ]
    for claim_id in sorted(touched - set(bare)):
        _recount(w, claim_id)
    traces = _texts(w, bare, [])
    _erase_claims(w, bare)
    return len(bare), bare + traces


def _erase_claims(w: Writer, ids: list[str]) -> tuple[int, int]:
    """Claims by id with their evidence and tiers, the links of others to them kept valid; (evidence, tiers)."""
    evidence = tiers = 0
    for chunk in _chunks(ids):
        keys, named = placeholders("k", list(chunk))
        w.execute(
            "UPDATE user_claims SET superseded_by = NULL, superseded_at = NULL, valid_until = NULL "
            f"WHERE superseded_by IN ({keys})",
            named,
        )
        w.execute(f"UPDATE user_claims SET supersedes = NULL WHERE supersedes IN ({keys})", named)
        tiers += w.execute(f"DELETE FROM user_claim_tiers WHERE claim_id IN ({keys})", named)
        evidence += w.execute(f"DELETE FROM user_evidence WHERE claim_id IN ({keys})", named)
        w.execute(f"DELETE FROM user_claims WHERE id IN ({keys})", named)
    return evidence, tiers


def _recount(w: Writer, claim_id: str) -> None:
    """A claim's sums from the evidence it has left."""
    w.execute(
        "UPDATE user_claims SET "
        "support = COALESCE((SELECT sum(effective) FROM user_evidence WHERE claim_id = :c AND kind = 'support'), 0), "
        "contradict = COALESCE((SELECT sum(effective) FROM user_evidence WHERE claim_id = :c "
        "AND kind = 'contradict'), 0), "
        "last_contradict_at = (SELECT max(at) FROM user_evidence WHERE claim_id = :c AND kind = 'contradict') "
        "WHERE id = :c",
        {"c": claim_id},
    )


def _texts(r: Reader, ids: Sequence[str], evidence: Sequence[int]) -> list[str]:
    """The claims' texts and the statements that go, as far as a replay record or an event could hold them."""
    found: list[str] = []
    for chunk in _chunks(ids):
        keys, named = placeholders("k", list(chunk))
        found += [t for (t,) in r.tuples(f"SELECT text FROM user_claims WHERE id IN ({keys})", named)]
        found += [
            t
            for (t,) in r.tuples(
                f"SELECT ref FROM user_evidence WHERE claim_id IN ({keys}) AND source = 'statement'", named
            )
        ]
    for chunk in _chunks(evidence):
        keys, named = placeholders("k", list(chunk))
        found += [
            t
            for (t,) in r.tuples(f"SELECT ref FROM user_evidence WHERE id IN ({keys}) AND source = 'statement'", named)
        ]
    return [t[:100] for t in found]


def _chunks(items: Sequence[Any], size: int = 500) -> list[Sequence[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


CLAIMS: Final = Erasable("claims", matching, erase)
