"""Erasure of the learning loops' rows (m023 candidates, m024 entries, m027 snapshots, trash, curation states,
concepts and insights), the `learning` kind of `forget`, and what forgetting transcripts or notes takes from
them. The files (skill folders, their copies in the CLIs' folders, the lessons file, the insights export) are
erasure/learning.py's, after this transaction commits.

What a selector picks, always among the owner's own (every given condition must hold):
- candidates: by session, project, source (the agent CLI of the message or note it was quoted from), time (the
  message's, else when queued) or text;
- concept observations: by session (and through it the source and project), time or text (the observation's
  text or where it was seen, or the concept's own text); a concept goes when its text matches or no
  observation of it is left, else its confidence is counted again from what is left;
- insights: by session (and through it source and project), time (distilled) or text; their votes go too;
- entries (skills and lessons): the ones erasure/learning.py planned (loop-written, from a picked candidate or
  holding the text), with their curation state; every copy of one in a snapshot or the trash goes too, and so
  does every snapshot or trash copy of any entry holding the text (a snapshot left empty goes whole).
Forgetting transcripts or notes also drops the candidates quoted from the erased messages or notes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from threadloom.store.base import Reader, Writer
from threadloom.store.erasure_learning_entries import (
    EntryKey,
    LearningPlan,
    chunks,
    delete,
    drop_entries,
    entry_rows,
    snapshot_copies,
)
from threadloom.store.sql import placeholders

if TYPE_CHECKING:
    from threadloom.store.erasure import Selector

SAMPLE_CHARS: Final = 80
_SAME_SOURCE: Final = {"claude": "claude-code", "claude-code": "claude"}
# The learning jobs' records of one user in job_runs ("<job>:<user>"): a curator pass's findings quote entry
# names and reasons, a mirroring names skills (learning/curator.py, evolve.py and its loops, entries.MIRROR_JOB).
_JOBS: Final = (
    "learning.curate", "learning.curate.review", "learning.review", "learning.auto_review", "learning.shadow",
    "learning.mirror",
)  # fmt: skip
ERASED_RUN: Final = '{"erased":true}'


def _session_clauses(sel: Selector, column: str, at: str, params: dict[str, Any]) -> list[str]:
    """Session, source, project (the last two through the session row) and time, as conditions."""
    clauses: list[str] = []
    if sel.session is not None:
        clauses.append(f"{column} = :k_session")
        params["k_session"] = sel.session
    if sel.source is not None:
        clauses.append(f"EXISTS (SELECT 1 FROM sessions s WHERE s.id = {column} AND s.vendor IN (:k_source, :k_alias))")
        params |= {"k_source": sel.source, "k_alias": _SAME_SOURCE.get(sel.source, sel.source)}
    if sel.project is not None:
        clauses.append(f"EXISTS (SELECT 1 FROM sessions s WHERE s.id = {column} AND s.project = :k_project)")
        params["k_project"] = sel.project
    if sel.since is not None:
        clauses.append(f"{at} >= :k_since")
        params["k_since"] = sel.since
    if sel.until is not None:
        clauses.append(f"{at} < :k_until")
        params["k_until"] = sel.until
    return clauses


# candidates


def candidate_ids(r: Reader, owner: str, sel: Selector) -> list[int]:
    """The owner's candidates the selector picks."""
    params: dict[str, Any] = {"k_owner": owner}
    clauses = ["c.owner = :k_owner"]
    for column, name, value in (("c.session_id", "session", sel.session), ("c.project", "project", sel.project)):
        if value is not None:
            clauses.append(f"{column} = :k_{name}")
            params[f"k_{name}"] = value
    if sel.since is not None:
        clauses.append("COALESCE(c.at, c.created_at) >= :k_since")
        params["k_since"] = sel.since
    if sel.until is not None:
        clauses.append("COALESCE(c.at, c.created_at) < :k_until")
        params["k_until"] = sel.until
    if sel.text is not None:
        clauses.append("instr(lower(c.text), lower(:k_text)) > 0")
        params["k_text"] = sel.text
    rows = r.tuples(
        f"SELECT c.id, c.source, c.source_ref FROM learning_candidates c WHERE {' AND '.join(clauses)}", params
    )
    if sel.source is None:
        return sorted(int(i) for i, _, _ in rows)
    # The source is the agent CLI of the quoted message (its adapter) or note (its vendor): looked up by id.
    wanted = {sel.source, _SAME_SOURCE.get(sel.source, sel.source)}
    by_ref: dict[tuple[str, int], list[int]] = {}
    for i, source, ref in rows:
        if str(ref).isdigit():
            by_ref.setdefault((str(source), int(ref)), []).append(int(i))
    picked: list[int] = []
    for source, table, column in (("message", "transcript_messages", "source"), ("note", "thread_notes", "vendor")):
        refs = sorted(ref for s, ref in by_ref if s == source)
        for chunk in chunks(refs):
            keys, named = placeholders("k", list(chunk))
            for ref, value in r.tuples(f"SELECT id, {column} FROM {table} WHERE id IN ({keys})", named):
                if value in wanted:
                    picked.extend(by_ref[(source, int(ref))])
    return sorted(picked)


def derived_candidate_ids(r: Reader, owner: str, source: str, refs: Sequence[Any]) -> list[int]:
    """The owner's candidates quoted from messages (`source` "message") or notes ("note") `refs`."""
    found: list[int] = []
    for chunk in chunks([str(x) for x in refs]):
        keys, named = placeholders("k", list(chunk))
        found += [
            int(i)
            for (i,) in r.tuples(
                f"SELECT id FROM learning_candidates WHERE owner = :o AND source = :s AND source_ref IN ({keys})",
                named | {"o": owner, "s": source},
            )
        ]
    return sorted(found)


def candidate_entries(r: Reader, owner: str, ids: Sequence[int]) -> set[EntryKey]:
    """The skills and lessons the candidates `ids` were written into: the entry a decision names (a patch of
    an existing skill included) and every entry whose provenance is one of them."""
    found: set[EntryKey] = set()
    for chunk in chunks(list(ids)):
        keys, named = placeholders("k", list(chunk))
        for (decision,) in r.tuples(
            f"SELECT decision FROM learning_candidates WHERE owner = :o AND status = 'accepted' AND id IN ({keys})",
            named | {"o": owner},
        ):
            written = _written(decision)
            if written is not None:
                found.add(written)
        sources, source_named = placeholders("s", [f"candidate:{i}" for i in chunk])
        found.update(
            (str(k), str(n))
            for k, n in r.tuples(
                f"SELECT kind, name FROM learning_entries WHERE owner = :o AND source IN ({sources})",
                source_named | {"o": owner},
            )
        )
    return found


def _written(decision: str | None) -> EntryKey | None:
    try:
        written = json.loads(decision or "{}").get("written")
    except (ValueError, AttributeError):
        return None
    if (
        isinstance(written, dict)
        and written.get("kind") in ("skill", "lesson")
        and isinstance(written.get("name"), str)
    ):
        return str(written["kind"]), str(written["name"])
    return None


def _texts(r: Reader, table: str, column: str, ids: Sequence[int]) -> list[str]:
    out: list[str] = []
    for chunk in chunks(list(ids)):
        keys, named = placeholders("k", list(chunk))
        out += [str(t)[:100] for (t,) in r.tuples(f"SELECT {column} FROM {table} WHERE id IN ({keys})", named)]
    return out


# concepts and insights


def _observations(r: Reader, owner: str, sel: Selector) -> list[tuple[int, str]]:
    """(concept id, source) of the owner's concept observations the selector picks."""
    params: dict[str, Any] = {"k_owner": owner}
    clauses = ["c.owner = :k_owner", *_session_clauses(sel, "o.session_id", "o.observed_at", params)]
    if sel.text is not None:
        clauses.append(
            "(instr(lower(o.text), lower(:k_text)) > 0 OR instr(lower(o.source), lower(:k_text)) > 0 "
            "OR instr(lower(c.text), lower(:k_text)) > 0)"
        )
        params["k_text"] = sel.text
    sql = (
        "SELECT o.concept_id, o.source FROM concept_observations o JOIN concepts c ON c.id = o.concept_id "
        f"WHERE {' AND '.join(clauses)}"
    )
    return [(int(c), str(s)) for c, s in r.tuples(sql, params)]


def _concepts_named(r: Reader, owner: str, sel: Selector) -> list[int]:
    """The owner's concepts whose own text holds the text (with no other condition, or every other one held
    by an observation of it: see `_observations`)."""
    if sel.text is None or any(v is not None for v in (sel.session, sel.source, sel.project, sel.since, sel.until)):
        return []
    return [
        int(i)
        for (i,) in r.tuples(
            "SELECT id FROM concepts WHERE owner = :o AND instr(lower(text), lower(:t)) > 0",
            {"o": owner, "t": sel.text},
        )
    ]


def insight_ids(r: Reader, owner: str, sel: Selector) -> list[int]:
    params: dict[str, Any] = {"k_owner": owner}
    clauses = ["i.owner = :k_owner", *_session_clauses(sel, "i.session_id", "i.created_at", params)]
    if sel.text is not None:
        clauses.append("instr(lower(i.text), lower(:k_text)) > 0")
        params["k_text"] = sel.text
    return [int(i) for (i,) in r.tuples(f"SELECT i.id FROM insights i WHERE {' AND '.join(clauses)}", params)]


def _runs(r: Reader, owner: str, text: str | None) -> list[int]:
    """The owner's learning job records whose outcome holds the text."""
    if text is None:
        return []
    names, named = placeholders("j", [f"{j}:{owner}" for j in _JOBS])
    fragment = json.dumps(text)[1:-1]  # as the outcome's JSON holds it
    return [
        int(i)
        for (i,) in r.tuples(
            f"SELECT id FROM job_runs WHERE name IN ({names}) AND instr(lower(outcome), lower(:t)) > 0",
            named | {"t": fragment},
        )
    ]


# the kind


def matching(r: Reader, owner: str, sel: Selector, sample: int, plan: LearningPlan) -> dict[str, Any]:
    """What the `learning` kind would erase: candidates (`count`, `sample`), concepts and their observations,
    insights, the planned entries' rows, and the snapshot and trash copies."""
    candidates = list(plan.candidates)
    rows: list[dict[str, Any]] = []
    for chunk in chunks(candidates[:sample]):
        keys, named = placeholders("k", list(chunk))
        rows += r.rows(
            f"SELECT id, session_id AS session, COALESCE(at, created_at) AS at, substr(text, 1, {SAMPLE_CHARS}) "
            f"AS text FROM learning_candidates WHERE id IN ({keys}) ORDER BY id",
            named,
        )
    observations = _observations(r, owner, sel)
    concepts = _gone_concepts(r, owner, sel, observations)
    _, trash, copies = snapshot_copies(r, owner, plan)
    entries = entry_rows(r, owner, plan.entries)
    return {
        "count": len(candidates),
        "sample": rows,
        "concepts": len(concepts),
        "concept_observations": len(observations),
        "insights": len(insight_ids(r, owner, sel)),
        "skills": sum(k == "skill" for k, _ in entries),
        "lessons": sum(k == "lesson" for k, _ in entries),
        "snapshot_copies": copies,
        "trash": len(trash),
        "job_records": len(_runs(r, owner, plan.text)),
    }


def _gone_concepts(r: Reader, owner: str, sel: Selector, observations: list[tuple[int, str]]) -> list[int]:
    """Concepts named by the text, or left with no observation once `observations` go."""
    gone = set(_concepts_named(r, owner, sel))
    picked: dict[int, int] = {}
    for concept, _ in observations:
        picked[concept] = picked.get(concept, 0) + 1
    for concept, n in picked.items():
        left = int(r.scalar("SELECT COUNT(*) FROM concept_observations WHERE concept_id = :c", {"c": concept}))
        if left <= n:
            gone.add(concept)
    return sorted(gone)


def erase(w: Writer, owner: str, sel: Selector, plan: LearningPlan) -> tuple[dict[str, int], list[str]]:
    """Remove what `matching` counts; the counts and the texts replay records and events may still carry."""
    traces = _texts(w, "learning_candidates", "text", plan.candidates)
    candidates = delete(w, "learning_candidates", plan.candidates)
    observations = _observations(w, owner, sel)
    concepts = _gone_concepts(w, owner, sel, observations)
    traces += _texts(w, "concepts", "text", concepts)
    for concept, source in observations:
        if concept not in concepts:
            w.execute(
                "DELETE FROM concept_observations WHERE concept_id = :c AND source = :s", {"c": concept, "s": source}
            )
            _recount(w, concept)
    delete(w, "concept_observations", concepts, "concept_id")
    delete(w, "concepts", concepts)
    insights = insight_ids(w, owner, sel)
    traces += _texts(w, "insights", "text", insights)
    delete(w, "insight_votes", insights, "insight_id")
    delete(w, "insights", insights)
    runs = _runs(w, owner, plan.text)
    for chunk in chunks(runs):
        keys, named = placeholders("k", list(chunk))
        w.execute(f"UPDATE job_runs SET outcome = :e WHERE id IN ({keys})", named | {"e": ERASED_RUN})
    counts = {
        "job_records": len(runs),
        "learning": candidates,
        "concepts": len(concepts),
        "concept_observations": len(observations),
        "insights": len(insights),
    }
    return counts | drop_entries(w, owner, plan), traces


def drop_derived(w: Writer, owner: str, source: str, refs: Sequence[Any]) -> tuple[int, list[str]]:
    """Forgetting transcripts (`source` "message") or notes ("note"): the candidates quoted from the erased
    ones go (the entries written from them are in the plan); how many, and their texts."""
    ids = derived_candidate_ids(w, owner, source, refs)
    traces = _texts(w, "learning_candidates", "text", ids)
    return delete(w, "learning_candidates", ids), traces


def _recount(w: Writer, concept: int) -> None:
    n = int(w.scalar("SELECT COUNT(*) FROM concept_observations WHERE concept_id = :c", {"c": concept}))
    confidence = round(1.0 - 0.7**n, 4)  # learning/concepts.confidence (BASE 0.3): the store imports no service
    w.execute(
        "UPDATE concepts SET observations = :n, confidence = :c WHERE id = :i", {"n": n, "c": confidence, "i": concept}
    )
