"""Erasure of style memory (m022: `style_habits`, `style_observations`, `style_profile`, `style_revisions`),
the `style` kind of `forget` (store/erasure.py lists it in `OTHER_KINDS`).

What a selector picks, always among the owner's own: habits first seen by the source (the agent vendor) or
in the time range, sighted in the session, or whose text, example or key contains the text; profile entries
by source, time (when recorded) or text (a profile entry records no session). A project names neither (style
is about the user, in every project). A picked habit goes whole, its key too (unlike style's own forget,
which keeps the key so learning skips it: erasure leaves no byte of it). Every stored capsule snapshot of the
owner goes (a snapshot may quote what was erased) and the capsule is built again from what is left, as a new
revision.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from threadloom.clock import now_ms
from threadloom.store.base import Reader, Writer
from threadloom.store.erasure_claims import SAMPLE_CHARS, Erasable, conditions
from threadloom.store.sql import placeholders
from threadloom.style import capsule

if TYPE_CHECKING:
    from threadloom.store.erasure import Selector


def _habits_where(owner: str, sel: Selector) -> tuple[str, dict[str, Any]]:
    said = (
        "(instr(lower(h.text), lower(:k_text)) > 0 OR instr(lower(h.key), lower(:k_text)) > 0 "
        "OR instr(lower(COALESCE(h.example, '')), lower(:k_text)) > 0)"
    )
    # A sighting names its session as "<vendor>:<session id>" (style/service.session_of): either form matches.
    sighted = (
        "EXISTS (SELECT 1 FROM style_observations o WHERE o.habit_id = h.id AND (o.session = :k_session "
        "OR substr(o.session, instr(o.session, ':') + 1) = :k_session))"
    )
    clauses, params = conditions(sel, sighted, "h.vendor", "h.first_at", said)
    return " AND ".join(["h.owner = :k_owner", *clauses]), params | {"k_owner": owner}


def _profile_where(owner: str, sel: Selector) -> tuple[str, dict[str, Any]]:
    clauses, params = conditions(sel, "0 = 1", "p.vendor", "p.created_at", "instr(lower(p.text), lower(:k_text)) > 0")
    return " AND ".join(["p.owner = :k_owner", *clauses]), params | {"k_owner": owner}


def matching(r: Reader, owner: str, sel: Selector, sample: int) -> dict[str, Any]:
    habits, h_params = _habits_where(owner, sel)
    profile, p_params = _profile_where(owner, sel)
    rows = r.rows(
        f"SELECT h.id, NULL AS session, h.first_at AS at, substr(h.text, 1, {SAMPLE_CHARS}) AS text, "
        "h.vendor AS vendor "
        f"FROM style_habits h WHERE {habits} ORDER BY h.first_at, h.id LIMIT :k_n",
        h_params | {"k_n": sample},
    )
    return {
        "count": int(r.scalar(f"SELECT COUNT(*) FROM style_habits h WHERE {habits}", h_params)),
        "sample": rows,
        "profile": int(r.scalar(f"SELECT COUNT(*) FROM style_profile p WHERE {profile}", p_params)),
    }


def erase(w: Writer, owner: str, sel: Selector) -> tuple[dict[str, int], list[str]]:
    habits, h_params = _habits_where(owner, sel)
    profile, p_params = _profile_where(owner, sel)
    picked = w.tuples(f"SELECT h.id, h.text, COALESCE(h.example, '') FROM style_habits h WHERE {habits}", h_params)
    prefs = w.tuples(f"SELECT p.id, p.text FROM style_profile p WHERE {profile}", p_params)
    sightings = 0
    for chunk in [picked[i : i + 500] for i in range(0, len(picked), 500)]:
        keys, named = placeholders("k", [h[0] for h in chunk])
        sightings += w.execute(f"DELETE FROM style_observations WHERE habit_id IN ({keys})", named)
        w.execute(f"DELETE FROM style_habits WHERE id IN ({keys})", named)
    for chunk in [prefs[i : i + 500] for i in range(0, len(prefs), 500)]:
        keys, named = placeholders("k", [p[0] for p in chunk])
        w.execute(f"DELETE FROM style_profile WHERE id IN ({keys})", named)
    if picked or prefs:
        w.execute("DELETE FROM style_revisions WHERE owner = :o", {"o": owner})
        # A digest no content has: refresh always writes a new revision, so a reader holding an old one is not
        # told "nothing changed" (even when what is left is empty).
        w.execute("UPDATE style_state SET digest = 'erased' WHERE owner = :o", {"o": owner})
        capsule.refresh(w, owner, now_ms())
    traces = [t[:100] for h in picked for t in h[1:] if t] + [p[1][:100] for p in prefs if p[1]]
    return {"style_habits": len(picked), "style_sightings": sightings, "style_profile": len(prefs)}, traces


def drop_examples(w: Writer, owner: str, sessions: set[str]) -> list[str]:
    """Forgetting transcripts takes the user's words out of style memory too: the example of every habit
    sighted in `sessions` ("<source>:<session id>", as learning names them) may be cut from an erased
    message, so it goes (a later sighting brings a new one), and with it every capsule snapshot quoting it.
    The habits stay. The examples dropped, for the replay and event records."""
    dropped: list[str] = []
    ordered = sorted(sessions)
    for chunk in [ordered[i : i + 500] for i in range(0, len(ordered), 500)]:
        keys, named = placeholders("k", chunk)
        sighted = f"SELECT habit_id FROM style_observations WHERE owner = :o AND session IN ({keys})"
        where = f"owner = :o AND example IS NOT NULL AND id IN ({sighted})"
        dropped += [e for (e,) in w.tuples(f"SELECT example FROM style_habits WHERE {where}", named | {"o": owner})]
        w.execute(f"UPDATE style_habits SET example = NULL WHERE {where}", named | {"o": owner})
    if dropped:
        w.execute("DELETE FROM style_revisions WHERE owner = :o", {"o": owner})
        w.execute("UPDATE style_state SET digest = 'erased' WHERE owner = :o", {"o": owner})
        capsule.refresh(w, owner, now_ms())
    return dropped


STYLE: Final = Erasable("style", matching, erase)
