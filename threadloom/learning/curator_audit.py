"""The curator's deterministic audit: one verdict per skill and lesson, from their text, files and usage
alone (no model).

Checks: duplicates (word overlap of the normalised text, or the cosine of the loaded embedder), broken
files and links (a skill without a loadable SKILL.md, a link to a reference or a relative file that is not
there), staleness (no view, use or edit for THREADLOOM_LEARN_STALE_DAYS), and size (a SKILL.md past what
loaders advise, a lesson long enough to be two).

Verdicts: keep, repair, merge (into `into`), split, deprecate, delete (a deprecated entry still unused after
the grace period), human review. A protected entry (pinned, written by a person, edited by hand) is only
ever kept or sent to human review: what a person wrote is theirs to change.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from threadloom.errors import InvalidInput
from threadloom.learning.skills import REFERENCES, SKILL_FILE, files_digest, parse

DAY_MS: Final = 86_400_000
DUPLICATE: Final = 0.8  # word-set overlap (Jaccard) at or above which two entries say the same
DUPLICATE_COSINE: Final = 0.92
MAX_SKILL_LINES: Final = 500  # Claude Code's advice for a SKILL.md; details belong in references
MAX_SKILL_BYTES: Final = 32 * 1024
MAX_LESSON_CHARS: Final = 800
GRACE_DAYS: Final = 14.0  # a deprecated entry still unused this long after is deleted
MAX_FINDINGS: Final = 20  # handed to the spawned reviewer per pass
VERDICTS: Final = ("keep", "repair", "merge", "split", "deprecate", "delete", "human review")
_WORD: Final = re.compile(r"[^\W_]+", re.UNICODE)
_LINK: Final = re.compile(r"\]\(([^)\s]+)\)")
_REF_MENTION: Final = re.compile(r"\breferences/([A-Za-z0-9_.-]+)")


@dataclass
class Verdict:
    kind: str
    name: str
    verdict: str
    reasons: list[str] = field(default_factory=list)
    protected: bool = False
    into: str | None = None  # merge: the entry that stays
    action: str = ""  # what the pass did about it

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "name": self.name, "verdict": self.verdict, "reasons": self.reasons}
        if self.into:
            out["into"] = self.into
        if self.protected:
            out["protected"] = True
        if self.action:
            out["action"] = self.action
        return out


Similarity = Callable[[Sequence[str]], Any]  # the texts' cosine matrix


def audit(
    entries: Sequence[dict[str, Any]],
    states: dict[tuple[str, str], tuple[str, int]],
    now: int,
    stale_days: float,
    similarity: Similarity | None = None,
    cosine_floor: float = DUPLICATE_COSINE,
) -> list[Verdict]:
    """A verdict per entry (`Snapshots._capture`'s shape); `states` the curator's standing marks."""
    texts = [_text(e) for e in entries]
    protected = [_protected(e) for e in entries]
    verdicts = [Verdict(e["kind"], e["name"], "keep", protected=p) for e, p in zip(entries, protected, strict=True)]
    issues: list[dict[str, list[str]]] = [{} for _ in entries]

    def note(i: int, verdict: str, why: str) -> None:
        issues[i].setdefault(verdict, []).append(why)

    for i, e in enumerate(entries):
        if e["kind"] == "skill":
            for why in _broken(e):
                note(i, "repair", why)
            size = len(str(e["files"].get(SKILL_FILE, "")).encode())
            lines = str(e["files"].get(SKILL_FILE, "")).count("\n")
            if lines > MAX_SKILL_LINES or size > MAX_SKILL_BYTES:
                note(i, "split", f"SKILL.md is {lines} lines, {size // 1024} KiB: move details into references")
        elif len(str(e["body"] or "")) > MAX_LESSON_CHARS:
            note(i, "split", f"the lesson is {len(str(e['body']))} characters: likely more than one rule")
        idle = (now - _last_active(e)) / DAY_MS
        if idle >= stale_days:
            state = states.get((e["kind"], e["name"]))
            if state and state[0] == "deprecated" and (now - state[1]) / DAY_MS >= GRACE_DAYS:
                note(i, "delete", f"deprecated {int((now - state[1]) / DAY_MS)} days ago and still unused")
            elif state:
                note(i, "deprecate", f"deprecated {int((now - state[1]) / DAY_MS)} days ago; deleted at {GRACE_DAYS:g}")
            else:
                note(i, "deprecate", f"no view, use or edit for {int(idle)} days")

    for i, j, score in _duplicates(entries, texts, similarity, cosine_floor):
        keep, drop = _survivor(entries, protected, i, j)
        if protected[drop]:
            note(drop, "human review", f"says the same as {entries[keep]['name']} ({score:.2f})")
            continue
        if verdicts[drop].into is None:
            verdicts[drop].into = entries[keep]["name"]
            note(drop, "merge", f"says the same as {entries[keep]['name']} ({score:.2f})")

    order = ("merge", "repair", "split", "delete", "deprecate", "human review")
    for v, found in zip(verdicts, issues, strict=True):
        reasons = [why for key in order for why in found.get(key, [])]
        if not reasons:
            continue
        v.reasons = reasons
        first = next(key for key in order if key in found)
        if v.protected:
            v.verdict, v.into = "human review", None
        else:
            v.verdict = first
            if first != "merge":
                v.into = None
    return verdicts


def findings(verdicts: list[dict[str, Any]]) -> list[str]:
    """What a curator pass hands its reviewer: repair and split verdicts of entries a loop may change."""
    out = []
    for v in verdicts:
        if v["verdict"] in ("repair", "split") and not v.get("protected"):
            out.append(f"{v['kind']} {v['name']}: {v['verdict']} ({'; '.join(v['reasons'])})")
    return out[:MAX_FINDINGS]


def normalised(text: str) -> str:
    """Lower case words, punctuation and spacing dropped: the key two paraphrased writes share."""
    return " ".join(_WORD.findall(text.casefold()))


def _text(e: dict[str, Any]) -> str:
    if e["kind"] == "lesson":
        return normalised(str(e["body"] or ""))
    try:
        skill = parse(str(e["files"].get(SKILL_FILE, "")))
        return normalised(f"{skill.description} {skill.body}")
    except InvalidInput:
        return normalised(str(e["description"]))


def _protected(e: dict[str, Any]) -> bool:
    if e["pinned"] or e["origin"] != "loop":
        return True
    return e["kind"] == "skill" and (not e["files"] or files_digest(e["files"]) != e["digest"])


def _broken(e: dict[str, Any]) -> list[str]:
    files: dict[str, str] = e["files"]
    text = files.get(SKILL_FILE)
    if text is None:
        return ["its SKILL.md is missing from the canonical folder"]
    try:
        parse(text, folder=e["name"])
    except InvalidInput as exc:
        return [f"SKILL.md cannot be loaded: {exc.message}"]
    out: list[str] = []
    targets = {m for m in _LINK.findall(text) if "://" not in m and not m.startswith(("#", "mailto:"))}
    targets |= {f"{REFERENCES}/{m}" for m in _REF_MENTION.findall(text)}
    for target in sorted(targets):
        path = target.split("#", 1)[0].removeprefix("./")
        if path and path not in files:
            out.append(f"links to {path[:80]}, which is not in the skill's folder")
    return out


def _last_active(e: dict[str, Any]) -> int:
    return max(int(e[c] or 0) for c in ("last_used_at", "last_viewed_at", "updated_at", "created_at"))


def _duplicates(
    entries: Sequence[dict[str, Any]], texts: Sequence[str], similarity: Similarity | None, cosine_floor: float
) -> list[tuple[int, int, float]]:
    """Pairs of one kind that say the same, most alike first. Word overlap by prefix filtering (exact: two
    sets with Jaccard >= t share one of the rarest len - ceil(t * len) + 1 words of each), so a library is
    not compared pair by pair; cosine over the embedder's matrix."""
    import numpy as np

    words = [set(t.split()) for t in texts]
    found: dict[tuple[int, int], float] = {}
    for i, j in _candidates(words):
        if entries[i]["kind"] == entries[j]["kind"]:
            jaccard = len(words[i] & words[j]) / len(words[i] | words[j])
            if jaccard >= DUPLICATE:
                found[(i, j)] = jaccard
    if similarity is not None and texts:
        cos = np.asarray(similarity(texts), dtype=np.float32)
        for i, j in np.argwhere(np.triu(cos >= cosine_floor, 1)).tolist():
            if entries[i]["kind"] == entries[j]["kind"] and words[i] and words[j] and (i, j) not in found:
                found[(i, j)] = float(cos[i, j])
    return sorted(((i, j, s) for (i, j), s in found.items()), key=lambda p: -p[2])


def _candidates(words: Sequence[set[str]]) -> set[tuple[int, int]]:
    frequency: dict[str, int] = {}
    for ws in words:
        for w in ws:
            frequency[w] = frequency.get(w, 0) + 1
    postings: dict[str, list[int]] = {}
    pairs: set[tuple[int, int]] = set()
    for k, ws in enumerate(words):
        ordered = sorted(ws, key=lambda w: (frequency[w], w))
        prefix = len(ordered) - math.ceil(DUPLICATE * len(ordered)) + 1
        for w in ordered[:prefix]:
            for other in postings.setdefault(w, []):
                pairs.add((other, k))
            postings[w].append(k)
    return pairs


def _survivor(entries: Sequence[dict[str, Any]], protected: Sequence[bool], i: int, j: int) -> tuple[int, int]:
    """Which of two duplicates stays: a protected one, else the more used, else the older."""

    def rank(k: int) -> tuple[int, int, int]:
        e = entries[k]
        return (int(protected[k]), int(e["used"]) * 3 + int(e["viewed"]), -int(e["created_at"]))

    return (i, j) if rank(i) >= rank(j) else (j, i)
