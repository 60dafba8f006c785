"""The user model's writes and reads: claims about how a user works, evidence for and against them, tier
transitions, supersession, and what was believed at an instant.

Every write is one short transaction (`Store.write`): the evidence row, the claim's running sums and any
tier step commit together, so two processes adding evidence to one claim lose nothing. Everything is
checked before the transaction; text is scrubbed of secrets like every other write path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from threadloom.clock import now_ms
from threadloom.errors import InvalidInput, NotFound
from threadloom.identity import FOREGROUND, Provenance
from threadloom.scrub.policy import Scrubber
from threadloom.search.model import Viewer
from threadloom.sessions import record_event
from threadloom.store.base import Reader, Store, Writer
from threadloom.usermodel import rows
from threadloom.usermodel.confidence import LOW, band, effective_weight, next_tier
from threadloom.usermodel.egress import allowed_vendors, allows, withheld_line
from threadloom.usermodel.model import (
    MAX_EVIDENCE_SHOWN,
    Claim,
    check_domain,
    check_id,
    check_origin,
    check_ref,
    check_text,
    check_weight,
    new_id,
)

WITHHELD = "[withheld by the egress policy]"


def _not_found(claim_id: str) -> NotFound:
    # The same words for a claim that never existed and another user's: an id reveals nothing.
    return NotFound(f"no claim {claim_id} of yours")


@dataclass
class UserModel:
    store: Store
    scrubber: Scrubber = field(default_factory=Scrubber)
    # THREADLOOM_EGRESS: every read hands claims to the caller's model, so each keeps only what the policy
    # lets reach the caller's vendor, and says what it held back (`withheld`).
    egress: str = "all"

    # -- writes ---------------------------------------------------------------------------------------

    def claim(
        self,
        prov: Provenance,
        text: str,
        domain: str | None = None,
        *,
        statement: str | None = None,
        origin: str = "user",
        valid_from: int | None = None,
    ) -> dict[str, Any]:
        """A new claim about the caller's user, optionally backed by their own words (`statement`)."""
        viewer = prov.viewer()
        text, domain = check_text(text), check_domain(domain if domain is not None else "other")
        origin = check_origin(origin)
        seed = check_text(statement, "statement", 2_000) if statement is not None else None
        now = now_ms()
        start = self._valid_from(valid_from, now)
        text, seed = self.scrubber.text(text), self.scrubber.optional(seed)

        def write(w: Writer) -> dict[str, Any]:
            # The journal entry claims the call's idempotency key in this transaction (threadloom/requests.py).
            claim_id = self._insert(w, viewer, prov, text, domain, start, now, None)
            record_event(w, prov, "user.claimed", {"id": claim_id})
            steps = self._seed(w, viewer, prov, claim_id, seed, origin, now)
            return self._written(w, viewer, claim_id, steps)

        return self.store.write(write)

    def supersede(
        self,
        prov: Provenance,
        old_id: str,
        text: str | None = None,
        domain: str | None = None,
        *,
        by: str | None = None,
        statement: str | None = None,
        origin: str = "user",
        valid_from: int | None = None,
    ) -> dict[str, Any]:
        """Replace claim `old_id` with a new claim (`text`) or an existing current one (`by`). The old claim
        and its evidence stay; its validity closes where the new one's starts. A cycle is refused."""
        viewer = prov.viewer()
        old_id, origin = check_id(old_id), check_origin(origin)
        if (text is None) == (by is None):
            raise InvalidInput("supersede with either text (a new claim) or by (an existing claim of yours)")
        if by is not None:
            by = check_id(by)
        new_text = check_text(text) if text is not None else None
        new_domain = check_domain(domain) if domain is not None else None
        seed = check_text(statement, "statement", 2_000) if statement is not None else None
        now = now_ms()
        start = self._valid_from(valid_from, now)
        new_text, seed = self.scrubber.optional(new_text), self.scrubber.optional(seed)

        def write(w: Writer) -> dict[str, Any]:
            old = rows.claim_row(w, viewer, old_id)
            if old is None:
                raise _not_found(old_id)
            new_start = start
            if by is not None:
                new = rows.claim_row(w, viewer, by)
                if new is None:
                    raise _not_found(by)
                if by == old_id or by in rows.lineage(w, old_id) or old_id in rows.lineage(w, by):
                    raise InvalidInput(f"supersede cycle: {by} and {old_id} are already one chain of claims")
                if new["superseded_by"] is not None or new["supersedes"] is not None:
                    raise InvalidInput(f"{by} is not a current claim of its own: supersede with a new text instead")
                new_start = start if valid_from is not None else int(new["valid_from"])
            if old["superseded_by"] is not None:
                raise InvalidInput(f"{old_id} was already superseded by {old['superseded_by']}; supersede that one")
            if new_start < old["valid_from"]:
                raise InvalidInput("valid_from of the new claim is before the old claim's; it cannot close earlier")
            if by is None:
                assert new_text is not None
                new_id_ = self._insert(w, viewer, prov, new_text, new_domain or old["domain"], new_start, now, old_id)
            else:
                new_id_ = by
                w.execute(
                    "UPDATE user_claims SET supersedes = :old, valid_from = :start WHERE id = :id",
                    {"old": old_id, "start": new_start, "id": by},
                )
            w.execute(
                "UPDATE user_claims SET superseded_by = :new, superseded_at = :now, valid_until = :until "
                "WHERE id = :id",
                {"new": new_id_, "now": now, "until": new_start, "id": old_id},
            )
            steps = self._seed(w, viewer, prov, new_id_, seed, origin, now)
            record_event(w, prov, "user.superseded", {"id": new_id_, "old": old_id})
            return self._written(w, viewer, new_id_, steps) | {"superseded": old_id}

        return self._gated(prov, self.store.write(write))

    def add_evidence(
        self,
        prov: Provenance,
        claim_id: str,
        kind: str = "support",
        source: str = "statement",
        ref: str = "",
        weight: float = 1.0,
        origin: str = "user",
    ) -> dict[str, Any]:
        """Evidence for (`support`) or against (`contradict`) a claim of the caller's user. The same source
        counts once per claim and direction: a repeat returns the first, counted=false."""
        viewer = prov.viewer()
        claim_id = check_id(claim_id)
        if kind not in ("support", "contradict"):
            raise InvalidInput(f"kind is support or contradict, not {str(kind)[:40]!r}")
        source, ref = check_ref(source, ref)
        weight, origin = check_weight(weight), check_origin(origin)
        if source == "statement":
            ref = self.scrubber.text(ref)

        def write(w: Writer) -> dict[str, Any]:
            row = rows.claim_row(w, viewer, claim_id)
            if row is None:
                raise _not_found(claim_id)
            if row["superseded_by"] is not None:
                raise InvalidInput(f"{claim_id} was superseded by {row['superseded_by']}: add evidence to that one")
            if not rows.source_exists(w, viewer, source, ref):
                raise NotFound(f"no {source} {ref} of yours to cite")
            found = w.one(
                "SELECT id FROM user_evidence WHERE claim_id = :c AND kind = :k AND source = :s AND ref = :r",
                {"c": claim_id, "k": kind, "s": source, "r": ref},
            )
            if found is not None:
                return self._written(w, viewer, claim_id, []) | {"evidence": found["id"], "counted": False}
            ev, steps = self._evidence(w, prov, claim_id, kind, source, ref, weight, origin, now_ms())
            return self._written(w, viewer, claim_id, steps) | {"evidence": ev, "counted": True}

        return self._gated(prov, self.store.write(write))

    # -- reads ----------------------------------------------------------------------------------------

    def review(self, prov: Provenance, claim_id: str, as_of: int | None = None) -> dict[str, Any]:
        """One claim with its evidence, its tier history and the claims it superseded; with `as_of`, as it
        stood then (evidence and transitions up to then, `held_then` whether it was believed then)."""
        viewer = prov.viewer()
        claim_id = check_id(claim_id)

        def read(r: Reader) -> dict[str, Any]:
            found = rows.claims(r, viewer, ids=[claim_id])
            if not found:
                raise _not_found(claim_id)
            claim = found[0]
            if not allows(self.egress, claim.vendor, prov.vendor):
                return self._withheld(prov, claim_id, claim.vendor)
            then = rows.claims(r, viewer, ids=[claim_id], as_of=as_of) if as_of is not None else [claim]
            shown = then[0] if then else claim
            evidence, total = rows.evidence(r, claim_id, as_of, MAX_EVIDENCE_SHOWN)
            said = rows.evidence_vendors(r, [e.id for e in evidence if e.source == "statement"])
            held = {i for i, vendor in said.items() if not allows(self.egress, vendor, prov.vendor)}
            return {
                "claim": shown.as_dict() | {"band": band(shown.support, shown.contradict)},
                "held_then": bool(then),
                "evidence": [e.as_dict() | ({"ref": WITHHELD} if e.id in held else {}) for e in evidence],
                "evidence_total": total,
                "history": [t.as_dict() for t in rows.history(r, claim_id, as_of)],
                "supersedes_chain": rows.lineage(r, claim_id),
            } | self._line_of(prov, {"statements": len(held)})

        return self.store.read(read)

    def claims(self, prov: Provenance, as_of: int | None = None, domain: str | None = None) -> dict[str, Any]:
        """Every claim of the caller's user current now (or believed at `as_of`), hypotheses and disputed
        ones included, most confident first."""
        viewer = prov.viewer()
        domain = check_domain(domain) if domain is not None else None
        every = self.store.read(lambda r: rows.claims(r, viewer, as_of=as_of, domain=domain))
        found, held = self._reachable(prov, every)
        return {"claims": [self._line(c) for c in found], "as_of": as_of} | self._line_of(prov, {"claims": held})

    def synthesis(
        self, prov: Provenance, as_of: int | None = None, domain: str | None = None, vendors: list[str] | None = None
    ) -> dict[str, Any]:
        """What is known of the user, grouped by domain: observed and validated claims of at least medium
        confidence; hypotheses, low and disputed claims are left out (and counted). `vendors` keeps only
        claims recorded by sessions of those vendors (for the egress policy)."""
        viewer = prov.viewer()
        domain = check_domain(domain) if domain is not None else None
        found = self.store.read(lambda r: rows.claims(r, viewer, as_of=as_of, domain=domain, vendors=vendors))
        kept = [c for c in found if c.tier in ("observed", "validated") and c.confidence >= LOW]
        shown, held = self._reachable(prov, kept)
        groups: dict[str, list[dict[str, Any]]] = {}
        for c in sorted(shown, key=lambda c: (c.domain, c.tier != "validated", -c.confidence)):
            groups.setdefault(c.domain, []).append(self._line(c))
        out = {"domains": groups, "left_out": len(found) - len(kept), "as_of": as_of}
        return out | self._line_of(prov, {"claims": held})

    def validated(self, viewer: Viewer, limit: int | None = None) -> list[Claim]:
        """The user's current validated claims of at least medium confidence, most confident first."""
        found = self.store.read(lambda r: rows.claims(r, viewer, tiers=("validated",), limit=limit))
        return [c for c in found if c.confidence >= LOW]

    def validated_for(
        self, prov: Provenance, limit: int | None = None, containing: Sequence[str] = ()
    ) -> tuple[list[Claim], int]:
        """The validated claims (of at least medium confidence, containing one of `containing` when given) the
        egress policy lets reach `prov`'s model, most confident first, and how many it keeps from it."""
        viewer, vendors = prov.viewer(), allowed_vendors(self.egress, prov.vendor)

        def read(r: Reader) -> tuple[list[Claim], int]:
            found = rows.claims(r, viewer, tiers=("validated",), vendors=vendors, limit=limit, containing=containing)
            held = 0 if vendors is None else rows.count_withheld(r, viewer, vendors, containing)
            return [c for c in found if c.confidence >= LOW], held

        return self.store.read(read)

    # -- the egress policy ----------------------------------------------------------------------------

    def _reachable(self, prov: Provenance, found: list[Claim]) -> tuple[list[Claim], int]:
        kept = [c for c in found if allows(self.egress, c.vendor, prov.vendor)]
        return kept, len(found) - len(kept)

    def _line_of(self, prov: Provenance, counts: dict[str, int]) -> dict[str, Any]:
        line = withheld_line(self.egress, prov.vendor, counts)
        return {"withheld": line} if line else {}

    def _gated(self, prov: Provenance, written: dict[str, Any]) -> dict[str, Any]:
        """A write's answer names the claim it touched: its text too only when the policy lets it reach prov."""
        claim = written["claim"]
        if allows(self.egress, claim["vendor"], prov.vendor):
            return written
        return written | {"claim": claim | {"text": WITHHELD}} | self._line_of(prov, {"claims": 1})

    def _withheld(self, prov: Provenance, claim_id: str, vendor: str) -> dict[str, Any]:
        line = withheld_line(self.egress, prov.vendor, {"claims": 1})
        return {"claim": {"id": claim_id, "text": WITHHELD, "vendor": vendor}, "withheld": line}

    # -- inside a transaction -------------------------------------------------------------------------

    @staticmethod
    def _valid_from(value: int | None, now: int) -> int:
        if value is not None and value > now:
            raise InvalidInput("valid_from is in the future: a claim holds from when it was seen, or earlier")
        return now if value is None else value

    @staticmethod
    def _insert(
        w: Writer, viewer: Viewer, prov: Provenance, text: str, domain: str, start: int, now: int, old: str | None
    ) -> str:
        claim_id = new_id()
        w.insert(
            "INSERT INTO user_claims (id, owner, domain, text, vendor, session_id, created_at, valid_from, supersedes) "
            "VALUES (:id, :owner, :domain, :text, :vendor, :session, :now, :start, :old)",
            {
                "id": claim_id,
                "owner": viewer.user,
                "domain": domain,
                "text": text,
                "vendor": prov.vendor,
                "session": prov.session_id,
                "now": now,
                "start": start,
                "old": old,
            },
        )
        rows.record_tier(w, claim_id, None, "hypothesis", "claimed", None, now)
        return claim_id

    def _seed(
        self, w: Writer, viewer: Viewer, prov: Provenance, claim_id: str, seed: str | None, origin: str, now: int
    ) -> list[dict[str, Any]]:
        if seed is None:
            return []
        return self._evidence(w, prov, claim_id, "support", "statement", seed, 1.0, origin, now)[1]

    @staticmethod
    def _origin(w: Writer, prov: Provenance, asked: str) -> str:
        """`automated` for a background job, a hook, or a child agent threadloom spawned (whatever it says):
        only a foreground session may speak for the user, and a loop must not confirm its own claims."""
        if prov.origin != FOREGROUND:
            return "automated"
        if prov.session_id is not None and w.scalar(
            "SELECT parent_id FROM sessions WHERE id = :id", {"id": prov.session_id}
        ):
            return "automated"
        return asked

    def _evidence(
        self,
        w: Writer,
        prov: Provenance,
        claim_id: str,
        kind: str,
        source: str,
        ref: str,
        weight: float,
        origin: str,
        now: int,
    ) -> tuple[int, list[dict[str, Any]]]:
        """Insert one piece of evidence, add it to the claim's sums, and take the tier step it calls for."""
        origin = self._origin(w, prov, origin)
        effective = effective_weight(weight, origin)
        ev = w.insert(
            "INSERT INTO user_evidence (claim_id, kind, weight, effective, source, ref, origin, vendor, session_id, "
            "at) VALUES (:c, :kind, :weight, :effective, :source, :ref, :origin, :vendor, :session, :at)",
            {
                "c": claim_id,
                "kind": kind,
                "weight": weight,
                "effective": effective,
                "source": source,
                "ref": ref,
                "origin": origin,
                "vendor": prov.vendor,
                "session": prov.session_id,
                "at": now,
            },
        )
        column = "support" if kind == "support" else "contradict"
        last = ", last_contradict_at = :at" if kind == "contradict" else ""
        w.execute(
            f"UPDATE user_claims SET {column} = {column} + :e{last} WHERE id = :c",
            {"e": effective, "at": now, "c": claim_id},
        )
        row = w.one(
            "SELECT tier, support, contradict, last_contradict_at FROM user_claims WHERE id = :c", {"c": claim_id}
        )
        assert row is not None
        step = next_tier(row["tier"], row["support"], row["contradict"], row["last_contradict_at"], now)
        if step is None:
            return ev, []
        rows.record_tier(w, claim_id, row["tier"], step[0], step[1], ev, now)
        return ev, [{"from": row["tier"], "to": step[0], "reason": step[1]}]

    @staticmethod
    def _written(w: Writer, viewer: Viewer, claim_id: str, steps: list[dict[str, Any]]) -> dict[str, Any]:
        claim = rows.claims(w, viewer, ids=[claim_id])[0]
        return {"claim": claim.as_dict() | {"band": band(claim.support, claim.contradict)}, "transitions": steps}

    @staticmethod
    def _line(c: Claim) -> dict[str, Any]:
        return {"id": c.id, "domain": c.domain, "text": c.text, "tier": c.tier, "confidence": round(c.confidence, 3)}
