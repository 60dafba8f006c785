"""What would merge into what: items grouped into blocks that may never be merged across (owner, who sees
them, where they live, their literal values), candidates found and judged in each (similar.py), and each
group of duplicates given one survivor.

A survivor is the group's protected item (pinned or core: never merged away), else the best connected, most
recalled, oldest. An item merges only when it is itself a duplicate of the survivor (not merely of another
member: A~B and B~C do not make A~C); the rest stay and are reported.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from threadloom.consolidate.similar import (
    MEMORY_FLOORS,
    QUOTE_FLOORS,
    Floors,
    Verdict,
    candidate_pairs,
    judge,
    literal_values,
    overlap,
    word_sets,
    words_verdict,
)
from threadloom.memory.model import gist

if TYPE_CHECKING:
    from threadloom.search.embedder import Matrix

EMBED_BATCH: Final = 32
MAX_SHOWN: Final = 200  # near-misses kept in a report (the count is whole)


@dataclass(frozen=True)
class Item:
    kind: str  # memory, note or quote
    ref: str
    text: str
    owner: str
    scope: tuple[str, ...]  # who sees it and where it lives: never merged across
    protected: str | None = None  # why it is never merged away
    rank: tuple[int, ...] = ()  # survivor preference, higher first


@dataclass(frozen=True)
class Merge:
    kind: str
    survivor: str
    merged: str
    owner: str
    verdict: Verdict
    survivor_text: str
    merged_text: str  # as planned: a text changed since is not merged

    def as_dict(self) -> dict[str, Any]:
        v = self.verdict
        return {
            "kind": self.kind,
            "survivor": self.survivor,
            "merged": self.merged,
            "cosine": None if v.cosine is None else round(v.cosine, 4),
            "words": round(v.words, 3),
            "why": v.why,
            "survivor_text": gist(self.survivor_text, 120),
            "merged_text": gist(self.merged_text, 120),
        }


@dataclass
class Plan:
    merges: list[Merge] = field(default_factory=list)
    near_misses: list[dict[str, Any]] = field(default_factory=list)
    near_miss_count: int = 0
    kept: list[dict[str, Any]] = field(default_factory=list)  # duplicates left where they are, and why
    items: int = 0
    blocks: int = 0
    candidates: int = 0
    judged: int = 0
    embedded: int = 0
    with_model: bool = False


Embed = Callable[[Sequence[str]], "Matrix"]


def plan(items: Sequence[Item], embed: Embed | None, recall_floor: float) -> Plan:
    """The merges for `items`; `embed` (a model's embed_documents, or None) gives the cosines."""
    report = Plan(items=len(items), with_model=embed is not None)
    blocks: dict[tuple[Any, ...], list[Item]] = {}
    for item in items:
        blocks.setdefault((item.kind, item.scope, literal_values(item.text)), []).append(item)
    report.blocks = len(blocks)
    pending: list[tuple[Item, Item, frozenset[str], frozenset[str]]] = []
    for (kind, _, _), members in blocks.items():
        sets = word_sets([m.text for m in members])
        floors = _floors(kind)
        floor = floors.words if embed is not None else floors.alone  # without a model, words alone decide
        for i, j in candidate_pairs(sets, floor):
            report.candidates += 1
            if overlap(sets[i], sets[j]) < floor:
                continue
            refused = words_verdict(members[i].text, members[j].text, sets[i], sets[j], floors)
            if refused is None:  # only pairs the words allow cost the model a vector
                pending.append((members[i], members[j], sets[i], sets[j]))
            else:
                _missed(report, members[i], members[j], refused)
    vectors = _vectors({x.text for a, b, *_ in pending for x in (a, b)}, embed) if embed else {}
    report.embedded = len(vectors)
    same: dict[tuple[str, str], Verdict] = {}
    for a, b, wa, wb in pending:
        cosine = float(vectors[a.text] @ vectors[b.text]) if a.text in vectors and b.text in vectors else None
        verdict = judge(a.text, b.text, wa, wb, cosine, recall_floor, _floors(a.kind))
        report.judged += 1
        if verdict.same:
            same[(a.ref, b.ref)] = same[(b.ref, a.ref)] = verdict
        else:
            _missed(report, a, b, verdict)
    by_ref = {(a.kind, a.ref): a for a, b, *_ in pending} | {(b.kind, b.ref): b for a, b, *_ in pending}
    for group in _groups(same, by_ref):
        _choose(group, same, report)
    return report


def _missed(report: Plan, a: Item, b: Item, verdict: Verdict) -> None:
    report.near_miss_count += 1
    if len(report.near_misses) < MAX_SHOWN:
        report.near_misses.append(_miss(a, b, verdict))


def _floors(kind: str) -> Floors:
    return QUOTE_FLOORS if kind == "quote" else MEMORY_FLOORS


def _vectors(texts: set[str], embed: Embed) -> dict[str, Matrix]:
    """Each text's own vector (stored vectors of threaded documents carry their predecessor's words, which a
    duplicate in another session does not share)."""
    ordered = sorted(texts)
    found: dict[str, Matrix] = {}
    for start in range(0, len(ordered), EMBED_BATCH):
        batch = ordered[start : start + EMBED_BATCH]
        found.update(zip(batch, embed(batch), strict=True))
    return found


def _groups(same: dict[tuple[str, str], Verdict], by_ref: dict[tuple[str, str], Item]) -> list[list[Item]]:
    """Connected duplicates (union-find over the pairs judged the same), within one kind."""
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in same:
        parent[root(a)] = root(b)
    groups: dict[str, list[Item]] = {}
    for (_, ref), item in by_ref.items():
        if ref in parent:
            groups.setdefault(root(ref), []).append(item)
    return [sorted(g, key=lambda i: i.ref) for g in groups.values() if len(g) > 1]


def _choose(group: list[Item], same: dict[tuple[str, str], Verdict], report: Plan) -> None:
    survivor = max(group, key=lambda i: (i.protected is not None, *i.rank))
    for item in group:
        if item is survivor:
            continue
        verdict = same.get((survivor.ref, item.ref))
        if item.protected is not None:
            report.kept.append(_kept(item, survivor, f"{item.protected}: never merged away"))
        elif verdict is None:
            report.kept.append(_kept(item, survivor, "a duplicate of another member, not of the survivor"))
        else:
            report.merges.append(
                Merge(item.kind, survivor.ref, item.ref, item.owner, verdict, survivor.text, item.text)
            )


def _kept(item: Item, survivor: Item, why: str) -> dict[str, Any]:
    return {"kind": item.kind, "ref": item.ref, "survivor": survivor.ref, "why": why}


def _miss(a: Item, b: Item, v: Verdict) -> dict[str, Any]:
    return {
        "kind": a.kind,
        "a": a.ref,
        "b": b.ref,
        "cosine": None if v.cosine is None else round(v.cosine, 4),
        "words": round(v.words, 3),
        "why": v.why,
    }
