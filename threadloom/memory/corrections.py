"""Corrections in recall: the supersession chains among the hits, and the order they impose.

Amending a memory makes a new one that supersedes it (`superseded_by`, a `supersedes` edge). Recall ranks
every superseded hit below the newest of its corrections among the hits, following chains through
corrections that did not match (v1 -> v2 -> v3 with v1 and v3 found: v3 first). The correction takes the
place of the best-scored of the memories it corrects: the question was about that fact, and the fact now
reads as the correction says. Within a chain the order is newest first.

Time (bi-temporal, see `held_at` and store/visibility.py): a memory holds over [valid_from, valid_to),
valid_to being where its correction begins, as known now; it was believed from when it was stored until
it was corrected. Recall as of T returns what held at T as known now, including a correction recorded
after T whose validity begins before T, and, below it, what was believed at T and corrected since.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from threadloom.memory.model import Memory
from threadloom.search.model import Viewer
from threadloom.store import memories
from threadloom.store.base import Reader

MAX_CHAIN: Final = 16  # corrections followed from one memory (amend refuses cycles; this bounds the walk anyway)


def held_at(memory: Memory, at: int) -> bool:
    """Whether the memory held at `at`, as known now (its validity, closed where its correction begins)."""
    return memory.valid_from <= at and (memory.valid_to is None or memory.valid_to > at)


def chains(r: Reader, refs: Iterable[str], viewer: Viewer | None) -> dict[str, Memory]:
    """The given memories and every correction their `superseded_by` leads to, that `viewer` may see."""
    found: dict[str, Memory] = {}
    frontier = set(refs)
    for _ in range(MAX_CHAIN):
        got = memories.get_many(r, sorted(frontier - found.keys()), viewer)
        found.update(got)
        frontier = {m.superseded_by for m in got.values() if m.superseded_by and m.superseded_by not in found}
        if not frontier:
            break
    return found


def corrections_first(scores: Mapping[str, float], known: Mapping[str, Memory]) -> list[tuple[str, float]]:
    """`scores` best first, each superseded memory below the nearest of its corrections among them (a tree:
    one correction per memory, several memories per correction). A correction scores the best of what it
    corrects, what it corrects no more than it, and a tie goes to the newer, so the scores shown fall as
    the list goes down."""
    parent: dict[str, str] = {}
    for ref in scores:
        seen: set[str] = set()
        memory = known.get(ref)
        while memory is not None and memory.superseded_by and memory.superseded_by not in seen:
            above = memory.superseded_by
            seen.add(above)
            if above in scores and above != ref:
                parent[ref] = above
                break
            memory = known.get(above)
    best = dict(scores)
    depth = {ref: _depth(ref, parent) for ref in scores}
    for ref in sorted(parent, key=lambda r: -depth[r]):  # the deepest first: what they correct lifts them
        best[parent[ref]] = max(best[parent[ref]], best[ref])
    for ref in sorted(parent, key=lambda r: depth[r]):  # the shallowest first: their correction is final
        best[ref] = min(best[ref], best[parent[ref]])
    return sorted(best.items(), key=lambda pair: (-pair[1], depth[pair[0]], pair[0]))


def _depth(ref: str, parent: Mapping[str, str]) -> int:
    """How many corrections above `ref` there are among the hits (a cycle, which amend refuses, stops it)."""
    seen = {ref}
    while ref in parent and parent[ref] not in seen:
        ref = parent[ref]
        seen.add(ref)
    return len(seen) - 1
