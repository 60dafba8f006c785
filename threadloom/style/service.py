"""`StyleMemory`: hints from the host agent, the capsule and its revisions, the score, and the user's controls
(pin, unpin, forget, pause, resume, the profile). Every write is one short transaction that ends by
refreshing the capsule's revision (capsule.refresh), so two processes writing at once lose nothing and the
revision follows the content. Everything is checked before the transaction: a refused hint stores nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from threadloom.clock import now_ms
from threadloom.errors import InvalidInput, NotFound
from threadloom.identity import Provenance
from threadloom.scrub.policy import Scrubber
from threadloom.store.base import Store, Writer
from threadloom.style import capsule, rows
from threadloom.style.guard import refusal, sanitise
from threadloom.style.language import detect
from threadloom.style.model import (
    EXAMPLE_CHARS,
    HABIT_CHARS,
    MAX_HINTS,
    MAX_PROFILE_HINTS,
    PROFILE_CHARS,
    Observation,
    Preference,
    check_habit_id,
    check_kind,
    check_profile_id,
    check_text,
    habit_key,
    profile_id,
)
from threadloom.style.profile import TEXTS, statements
from threadloom.style.score import score
from threadloom.usermodel.egress import allows, withheld_line

HINT_EXAMPLE_CHARS = 200  # what a host may send as the example; it is cut to 60 around the habit
ACTIONS = ("pin", "unpin", "forget", "pause", "resume", "profile_set", "profile_clear")
REFUSED = "style memory keeps how the user writes and likes to work, never who they are"


def _not_found(kind: str, ident: str) -> NotFound:
    # The same words for an id that never existed and another user's: an id reveals nothing.
    return NotFound(f"no {kind} {ident} of yours")


def _refuse(where: str, text: str) -> None:
    what = refusal(text)
    if what is not None:
        raise InvalidInput(f"{where}: refused, it would store {what}; {REFUSED}. Nothing was stored")


def session_of(prov: Provenance) -> str:
    return f"{prov.vendor}:{prov.session_id or 'none'}"


def preference(owner: str, text: str, origin: str, vendor: str, now: int) -> Preference:
    """A known preference is kept by name (the capsule says it in the user's language); other words as given."""
    known = statements(text)
    key = known[0] if len(known) == 1 else "custom:" + hashlib.sha256(habit_key(text).encode()).hexdigest()[:16]
    return Preference(profile_id(owner, key), key, text, origin, vendor, now)


def known_preference(owner: str, key: str, origin: str, vendor: str, now: int) -> Preference:
    return Preference(profile_id(owner, key), key, TEXTS[key]["en"], origin, vendor, now)


@dataclass
class StyleMemory:
    store: Store
    scrubber: Scrubber = field(default_factory=Scrubber)

    # -- writes ---------------------------------------------------------------------------------------

    def hint(
        self, prov: Provenance, hints: Sequence[dict[str, Any]] = (), profile: Sequence[str] = ()
    ) -> dict[str, Any]:
        """What the host agent noticed in the user's latest message: habits the dictionary would miss, and
        collaboration preferences the user stated. Each habit still needs the gate (2 sightings, 2 sessions)."""
        owner = prov.viewer().user
        if len(hints) > MAX_HINTS or len(profile) > MAX_PROFILE_HINTS:
            raise InvalidInput(f"at most {MAX_HINTS} hints and {MAX_PROFILE_HINTS} profile items per call")
        if not hints and not profile:
            raise InvalidInput("give hints (habits in the user's words) or profile (how they like to work)")
        now, session = now_ms(), session_of(prov)
        observations = [self._hint(i, h, session, prov.vendor, now) for i, h in enumerate(hints)]
        prefs = []
        for i, item in enumerate(profile):
            text = check_text(item, f"profile[{i}]", PROFILE_CHARS)
            _refuse(f"profile[{i}]", text)
            prefs.append(preference(owner, self.scrubber.text(text), "hint", prov.vendor, now))
        votes: dict[str, int] = {}
        for o in observations:
            lang = detect(o.example or "")
            if lang:
                votes[lang] = votes.get(lang, 0) + 1

        def write(w: Writer) -> dict[str, Any]:
            if not rows.state(w, owner)["learning"]:
                return {"learning": False, "observed": [], "profile": [], "note": "learning is paused; nothing kept"}
            statuses = [rows.observe(w, owner, o) for o in observations]
            added = [p.id for p in prefs if rows.add_preference(w, owner, p)]
            rows.add_language_votes(w, owner, votes, now)
            rows.cleanup(w, owner, now)
            revision = capsule.refresh(w, owner, now)
            observed = [
                {"kind": o.kind, "text": o.text, "status": s or "not counted (seen before, or forgotten)"}
                for o, s in zip(observations, statuses, strict=True)
            ]
            return {"learning": True, "observed": observed, "profile": added, "revision": revision}

        return self.store.write(write)

    def _hint(self, i: int, hint: dict[str, Any], session: str, vendor: str, now: int) -> Observation:
        if not isinstance(hint, dict):
            raise InvalidInput(f"hints[{i}] is an object: {{kind, text, example?}}")
        kind = check_kind(hint.get("kind"))
        text = check_text(hint.get("text"), f"hints[{i}].text", HABIT_CHARS)
        _refuse(f"hints[{i}].text", text)
        raw = hint.get("example")
        example = None
        if raw is not None:
            raw = check_text(raw, f"hints[{i}].example", HINT_EXAMPLE_CHARS)
            _refuse(f"hints[{i}].example", raw)
            at = raw.casefold().find(text.casefold())
            example = sanitise(raw, at, at + len(text), self.scrubber) if at >= 0 else None
        text = self.scrubber.text(text)
        return Observation(kind, text, "", example[:EXAMPLE_CHARS] if example else None, session, vendor, "hint", now)

    def manage(self, prov: Provenance, action: str, target: str | None = None) -> dict[str, Any]:
        """The user's controls: pin/unpin/forget a habit (`target`: its id), pause/resume learning, set a
        profile item (`target`: its text) or clear one (`target`: its id)."""
        owner, now = prov.viewer().user, now_ms()
        if action not in ACTIONS:
            raise InvalidInput(f"action is one of {', '.join(ACTIONS)}, not {action!r}")
        hid = check_habit_id(target) if action in ("pin", "unpin", "forget") else None
        pid = check_profile_id(target) if action == "profile_clear" else None
        pref = None
        if action == "profile_set":
            clean = check_text(target, "the profile item's text (target)", PROFILE_CHARS)
            _refuse("target", clean)
            pref = preference(owner, self.scrubber.text(clean), "statement", prov.vendor, now)

        def write(w: Writer) -> dict[str, Any]:
            done: dict[str, Any] = {"action": action}
            if hid is not None:
                changed = (
                    rows.forget(w, owner, hid)
                    if action == "forget"
                    else rows.set_pinned(w, owner, hid, action == "pin", now)
                )
                if not changed:
                    raise _not_found("habit", hid)
                done["habit_id"] = hid
            elif action in ("pause", "resume"):
                rows.set_learning(w, owner, action == "resume", now)
            elif pref is not None:
                done["profile_id"] = pref.id
                done["added"] = rows.add_preference(w, owner, pref)
            elif pid is not None:
                if not rows.remove_preference(w, owner, pid):
                    raise _not_found("profile item", pid)
                done["profile_id"] = pid
            rows.cleanup(w, owner, now)
            done["revision"] = capsule.refresh(w, owner, now)
            done["learning"] = rows.state(w, owner)["learning"]
            return done

        return self.store.write(write)

    # -- reads ----------------------------------------------------------------------------------------

    def view(self, prov: Provenance, known: int | None, policy: str) -> dict[str, Any]:
        """The capsule (or ack / delta against `known`) as the egress policy lets the caller's vendor see it,
        with the score."""
        owner = prov.viewer().user
        if known is not None and (isinstance(known, bool) or not 0 <= known < 2**53):
            raise InvalidInput("revision is a whole number >= 0, as a previous style() call returned it")

        def read(r: Any) -> dict[str, Any]:
            found = capsule.answer(r, owner, known, policy, prov.vendor)
            found["learning"] = rows.state(r, owner)["learning"]
            found["score"] = score(r, owner, now_ms())
            return found

        return self.store.read(read)

    def habits(self, prov: Provenance, policy: str, status: str | None = None, limit: int = 100) -> dict[str, Any]:
        """The caller's habits (candidates and archived ones too) for review, pinning and forgetting, as the
        egress policy lets the caller's vendor see them."""
        owner = prov.viewer().user
        statuses = ("candidate", "active", "archived") if status is None else (status,)
        if status is not None and status not in ("candidate", "active", "archived"):
            raise InvalidInput("status is candidate, active or archived")
        if not 1 <= limit <= 500:
            raise InvalidInput("limit is 1-500")
        found = self.store.read(lambda r: rows.habits(r, owner, statuses, limit))
        shown = [h.as_dict() for h in found if allows(policy, h.vendor, prov.vendor)]
        result: dict[str, Any] = {"habits": shown}
        if len(shown) < len(found):
            result["withheld"] = withheld_line(policy, prov.vendor, {"style habits": len(found) - len(shown)})
        return result
