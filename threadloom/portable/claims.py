"""The user model (m020): claims about the user, each with its evidence and tier history: `claims.jsonl`,
one claim a line. Only the caller's claims exist for the caller (`visibility.claims_sql`), so all of them
leave. On import a claim the importer already has (domain, text, when it was made) is merged into that one,
its evidence and history left as they are here; an evidence ref naming a memory follows the memory's id.
A ref to a transcript message or a note is a row number of this machine, so it leaves as that row's stable
key (`ref_key`: the message's source and key; the note's place, kind, time and text) and comes back as the
importer's row with that key (imported in the same run, or already here); evidence whose row the importer
does not have is left out and counted (`evidence_unresolved`): it would point at an unrelated row.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from threadloom.errors import InvalidInput
from threadloom.portable import format as f
from threadloom.portable.registry import Context
from threadloom.store.base import Reader, Row, Writer
from threadloom.usermodel.model import MAX_REF_CHARS, MAX_STATEMENT_CHARS, MAX_TEXT_CHARS, TIERS, check_domain

_CLAIM = (
    "id", "domain", "text", "visibility", "vendor", "session_id", "tier", "support", "contradict",
    "last_contradict_at", "created_at", "valid_from", "valid_until", "superseded_at", "superseded_by", "supersedes",
)  # fmt: skip
_EVIDENCE = ("kind", "weight", "effective", "source", "ref", "origin", "vendor", "session_id", "at")
_MAX_EVIDENCE = 10_000


class Claims:
    name = "claims"

    def export(self, r: Reader, user: str) -> Iterator[dict[str, Any]]:
        for row in r.rows("SELECT * FROM user_claims c WHERE c.owner = :u ORDER BY c.id", {"u": user}):
            exported = [(e["id"], _evidence(r, user, e)) for e in r.rows(_EVIDENCE_SQL, {"c": row["id"]})]
            exported.sort(key=lambda pair: f.dump(pair[1]))  # by what leaves: row numbers differ between stores
            position = {evidence_id: n for n, (evidence_id, _) in enumerate(exported)}
            tiers = r.rows("SELECT * FROM user_claim_tiers WHERE claim_id = :c ORDER BY id", {"c": row["id"]})
            yield {
                **{c: row[c] for c in _CLAIM},
                "evidence": [record for _, record in exported],
                "tiers": [
                    {
                        "from_tier": t["from_tier"],
                        "to_tier": t["to_tier"],
                        "reason": t["reason"],
                        "evidence": position.get(t["evidence_id"]),
                        "at": t["at"],
                    }
                    for t in tiers
                ],
            }

    def markdown(self, record: dict[str, Any]) -> str:
        state = "superseded" if record["superseded_by"] else record["tier"]
        text = " ".join(record["text"].split()).replace("<", "&lt;")
        return f"- **{record['domain']}** ({state}, {len(record['evidence'])} evidence): {text}\n"

    def parse(self, line: f.Line) -> f.Line:
        rec, where = line.record, line.where
        f.text(rec, "id", where, 64)
        f.checked(check_domain, f.text(rec, "domain", where, 32), where)
        f.text(rec, "text", where, MAX_TEXT_CHARS)
        f.choice(rec, "visibility", where, ("private",))
        f.text(rec, "vendor", where, 64)
        f.text(rec, "session_id", where, 200, optional=True)
        f.choice(rec, "tier", where, TIERS)
        for key in ("support", "contradict"):
            f.number(rec, key, where, 0.0, 1e9)
        for key in ("last_contradict_at", "valid_until", "superseded_at"):
            f.integer(rec, key, where, optional=True)
        for key in ("created_at", "valid_from"):
            f.integer(rec, key, where)
        for key in ("superseded_by", "supersedes"):
            f.text(rec, key, where, 64, optional=True)
        evidence = f.records(rec, "evidence", where, _MAX_EVIDENCE)
        for n, e in enumerate(evidence):
            at = f"{where} evidence {n}"
            f.choice(e, "kind", at, ("support", "contradict"))
            f.number(e, "weight", at, 0.0, 1e6)
            f.number(e, "effective", at, 0.0, 1e6)
            source = f.choice(e, "source", at, ("message", "memory", "note", "statement"))
            if source in _KEYED:
                _check_key(e, source, at)
            else:
                f.text(e, "ref", at, MAX_STATEMENT_CHARS if source == "statement" else MAX_REF_CHARS)
                if e.get("ref_key") is not None:
                    raise InvalidInput(f"{at}: ref_key is for a message or a note")
            f.choice(e, "origin", at, ("user", "automated"))
            f.text(e, "vendor", at, 64)
            f.text(e, "session_id", at, 200, optional=True)
            f.integer(e, "at", at)
        for n, t in enumerate(f.records(rec, "tiers", where, _MAX_EVIDENCE)):
            at = f"{where} tier {n}"
            if t.get("from_tier") is not None:
                f.choice(t, "from_tier", at, TIERS)
            f.choice(t, "to_tier", at, TIERS)
            f.text(t, "reason", at, 2000)
            f.integer(t, "evidence", at, optional=True, high=max(len(evidence) - 1, 0))
            f.integer(t, "at", at)
        return line

    def merge(self, r: Reader, w: Writer | None, ctx: Context, items: list[f.Line]) -> dict[str, int]:
        counts = {"claims_added": 0, "claims_merged": 0, "evidence_added": 0, "evidence_unresolved": 0}
        added: list[tuple[str, f.Line]] = []
        planned: dict[tuple[str, str, int], str] = {}
        for item in items:
            rec = item.record
            if rec["id"] in ctx.ids:
                raise InvalidInput(f"{item.where}: claim id {rec['id']} appears twice in the file")
            text = ctx.scrubber.text(rec["text"])
            key = (rec["domain"], text, rec["created_at"])
            local = planned.get(key) or r.scalar(
                "SELECT id FROM user_claims WHERE owner = :o AND domain = :d AND text = :t AND created_at = :at",
                {"o": ctx.user, "d": key[0], "t": text, "at": key[2]},
            )
            if local is not None:
                ctx.ids[rec["id"]] = str(local)
                counts["claims_merged"] += 1
                continue
            claim_id = rec["id"]
            if not claim_id.startswith("uc_") or r.scalar("SELECT 1 FROM user_claims WHERE id = :i", {"i": claim_id}):
                claim_id = ctx.local_id("uc_", rec["id"], f"{key[0]}\0{text}\0{key[2]}")
            planned[key] = ctx.ids[rec["id"]] = claim_id
            added.append((claim_id, item))
            counts["claims_added"] += 1
            evidence = [_resolved(r, ctx, e) for e in rec["evidence"]]
            counts["evidence_added"] += sum(e is not None for e in evidence)
            counts["evidence_unresolved"] += sum(e is None for e in evidence)
            if w is not None:
                self._insert(w, ctx, claim_id, dict(rec, text=text, evidence=evidence))
        for claim_id, item in added:  # links between claims, once every claim of the file has its id
            links = {k: item.record[k] for k in ("superseded_by", "supersedes") if item.record[k]}
            if w is not None and links:
                sets = ", ".join(f"{k} = :{k}" for k in links)
                mapped = {k: ctx.ids.get(v, v) for k, v in links.items()}
                for k, v in mapped.items():
                    if not r.scalar("SELECT 1 FROM user_claims WHERE id = :i AND owner = :o", {"i": v, "o": ctx.user}):
                        raise InvalidInput(f"{item.where}: {k} names claim {v!r}, in neither the file nor your store")
                w.execute(f"UPDATE user_claims SET {sets} WHERE id = :id", mapped | {"id": claim_id})
        return counts

    def _insert(self, w: Writer, ctx: Context, claim_id: str, rec: dict[str, Any]) -> None:
        values = {c: rec[c] for c in _CLAIM} | {"id": claim_id, "owner": ctx.user, "superseded_by": None}
        values["supersedes"] = None
        w.execute(
            f"INSERT INTO user_claims (owner, {', '.join(_CLAIM)}) "
            f"VALUES (:owner, {', '.join(':' + c for c in _CLAIM)})",
            values,
        )
        evidence_ids: list[int | None] = []
        for e in rec["evidence"]:
            if e is None:
                evidence_ids.append(None)
                continue
            evidence_ids.append(
                w.insert(
                    f"INSERT INTO user_evidence (claim_id, {', '.join(_EVIDENCE)}) "
                    f"VALUES (:claim, {', '.join(':' + c for c in _EVIDENCE)}) ON CONFLICT DO NOTHING",
                    {**{c: e[c] for c in _EVIDENCE}, "claim": claim_id},
                )
            )
        for t in rec["tiers"]:
            w.execute(
                "INSERT INTO user_claim_tiers (claim_id, from_tier, to_tier, reason, evidence_id, at) "
                "VALUES (:c, :f, :t, :reason, :e, :at)",
                {
                    "c": claim_id,
                    "f": t["from_tier"],
                    "t": t["to_tier"],
                    "reason": t["reason"],
                    "e": evidence_ids[t["evidence"]] if t["evidence"] is not None else None,
                    "at": t["at"],
                },
            )


_EVIDENCE_SQL = "SELECT * FROM user_evidence WHERE claim_id = :c"
_KEYED = ("message", "note")
_NOTE_KEY = ("repo", "project", "thread", "kind", "created_at", "text")


def _evidence(r: Reader, user: str, e: Row) -> dict[str, Any]:
    record = {c: e[c] for c in _EVIDENCE} | {"ref_key": None}
    if e["source"] not in _KEYED:
        return record
    if e["source"] == "message":
        row = r.one(
            "SELECT source, key FROM transcript_messages WHERE id = :i AND owner = :o", {"i": int(e["ref"]), "o": user}
        )
        key = [row["source"], row["key"]] if row else None
    else:
        row = r.one(
            f"SELECT {', '.join(_NOTE_KEY)} FROM thread_notes WHERE id = :i AND owner = :o",
            {"i": int(e["ref"]), "o": user},
        )
        key = [row[c] for c in _NOTE_KEY] if row else None
    return record | {"ref": None, "ref_key": key}


def _check_key(e: dict[str, Any], source: str, at: str) -> None:
    if e.get("ref") is not None:
        raise InvalidInput(f"{at}: a {source} is named by ref_key, not ref (a row number means nothing elsewhere)")
    key = e.get("ref_key")
    if key is None:
        return
    shape: tuple[type | tuple[type, ...], ...] = (
        (str, str) if source == "message" else (str, str, (str, type(None)), str, int, str)
    )
    if (
        not isinstance(key, list)
        or len(key) != len(shape)
        or not all(isinstance(v, t) and not isinstance(v, bool) for v, t in zip(key, shape, strict=True))
    ):
        what = "source and key" if source == "message" else "place, kind, time and text"
        raise InvalidInput(f"{at}: ref_key of a {source} is a list of its {what}")
    if any(isinstance(v, str) and (len(v) > 10_000 or "\x00" in v) for v in key):
        raise InvalidInput(f"{at}: ref_key holds an oversized string or a NUL")


def _resolved(r: Reader, ctx: Context, e: dict[str, Any]) -> dict[str, Any] | None:
    """The evidence as it is stored here, its ref this store's; None when it names a row the importer lacks."""
    source, ref = e["source"], e["ref"]
    if source == "statement":
        return dict(e, ref=ctx.scrubber.text(ref))
    if source == "memory":
        return dict(e, ref=ctx.ids.get(ref, ref))
    key = e["ref_key"]
    if key is None:
        return None
    if source == "message":
        local = r.scalar(
            "SELECT id FROM transcript_messages WHERE owner = :o AND source = :s AND key = :k",
            {"o": ctx.user, "s": key[0], "k": key[1]},
        )
    else:
        local = r.scalar(
            "SELECT id FROM thread_notes WHERE owner = :o AND repo = :repo AND project = :project "
            "AND COALESCE(thread, '') = COALESCE(:thread, '') AND kind = :kind AND created_at = :created_at "
            "AND text = :text",
            {"o": ctx.user, **dict(zip(_NOTE_KEY, key, strict=True))},
        )
    return None if local is None else dict(e, ref=str(local))


CLAIMS = Claims()
