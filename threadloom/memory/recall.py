"""Reading the memory graph: recall (hybrid search plus graph activation), search and enumerate,
traverse, explain, stats, core listing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Final

from threadloom.clock import now_ms
from threadloom.errors import InvalidInput, NotFound
from threadloom.identity import Provenance
from threadloom.memory import corrections, scoring
from threadloom.memory.model import EDGE_TYPES, LIFECYCLE, Edge, Memory, check_id, gist
from threadloom.memory.reactivation import Reactivations
from threadloom.search.engine import SearchEngine
from threadloom.search.model import MAX_LIMIT, Filters, Hit, MemoryScope, SearchResult, Viewer
from threadloom.search.query import analyse
from threadloom.store import documents, jobs, memories, memory_upkeep
from threadloom.store.base import Reader, Store
from threadloom.store.sql import placeholders
from threadloom.usermodel.egress import allows, withheld_line

SUPERSEDED_FACTOR: Final = 0.3  # a superseded hit keeps this share of its score: shown for audit, ranked down
CORE_INJECTION: Final = 3  # relevant pinned or core memories added below the hits when they missed the cut
WHY_DEPTH: Final = 3  # caused_by hops shown per hit in full verbosity
MAX_DEPTH: Final = 5
MAX_TRAVERSE_NODES: Final = 200
# What a recall searches: everything an agent is told to write (memories, thread notes, quotes, summaries).
RECALL_KINDS: Final = ("memory", "note", "quote", "thread")
# Ingested conversations, searched only when asked for (kinds=["transcript"]): what was said, not what was
# decided. Beside curated kinds they are searched apart (they cannot crowd the curated candidates out) and
# keep this share of their score, so a curated hit ranks above a message unless the message matches much
# better (measured on LoCoMo dev in bench/locomo.py, path (c) mixed; README "Transcripts").
TRANSCRIPT: Final = "transcript"
TRANSCRIPT_WEIGHT: Final = 0.5


@dataclass(frozen=True)
class RecallFilters:
    categories: tuple[str, ...] = ()
    entity: str | None = None
    statuses: tuple[str, ...] = ()
    created_since: int | None = None
    active_since: int | None = None
    all_projects: bool = False
    kinds: tuple[str, ...] = RECALL_KINDS  # recall only; categories, entity, as_of and activity are memories'

    def __post_init__(self) -> None:
        unknown = [s for s in self.statuses if s not in LIFECYCLE]
        if unknown:
            raise InvalidInput(f"unknown status {unknown[0]!r}; statuses are {', '.join(LIFECYCLE)}")
        strange = [k for k in self.kinds if k not in (*RECALL_KINDS, TRANSCRIPT)]
        if strange or not self.kinds:
            raise InvalidInput(f"kinds are one or more of {', '.join((*RECALL_KINDS, TRANSCRIPT))}")


class MemoryRecall:
    def __init__(
        self,
        store: Store,
        engine: SearchEngine,
        config: scoring.ScoringConfig,
        reactivations: Reactivations | None = None,
    ) -> None:
        self._store = store
        self._engine = engine
        self.scoring = config
        # Without a queue of its own (a serving process passes one, flushed in the background), each
        # recall is journaled at once; the maintenance pass reinforces what was recalled.
        self.reactivations = reactivations or Reactivations(store, deferred=False)
        self.egress = "all"  # THREADLOOM_EGRESS (open_runtime sets it): which models get the user's quotes

    def _scope(self, prov: Provenance, f: RecallFilters, **extra: Any) -> MemoryScope:
        return MemoryScope(
            viewer=prov.viewer(),
            project=None if f.all_projects else prov.project,
            categories=f.categories,
            entity=f.entity,
            created_since=f.created_since,
            active_since=f.active_since,
            **extra,
        )

    def recall(
        self,
        query: str,
        prov: Provenance,
        k: int = 10,
        verbosity: str = "full",
        read_only: bool = False,
        as_of: int | None = None,
        filters: RecallFilters | None = None,
    ) -> dict[str, Any]:
        """Hybrid recall: full-text, dense and graph activation, superseded hits ranked down, relevant
        core memories injected; each returned memory is journaled as recalled unless `read_only` (the maintenance
        pass reinforces it)."""
        if verbosity not in ("concise", "full"):
            raise InvalidInput("verbosity is concise or full")
        if not 1 <= k <= MAX_LIMIT:
            raise InvalidInput(f"k must be between 1 and {MAX_LIMIT}")
        f = filters or RecallFilters()
        scope = self._scope(prov, f, as_of=as_of)
        curated = tuple(kind for kind in dict.fromkeys(f.kinds) if kind != TRANSCRIPT)
        if curated:
            search_filters = Filters(kinds=curated, statuses=f.statuses, memory=scope)
            result = self._engine.search(query, search_filters, min(MAX_LIMIT, k * 3))
        else:
            result = SearchResult([], [], ())
        result, held = self._egress(result, prov)
        others = {hit.ref: hit for hit in result.hits if hit.kind != "memory"}  # notes, quotes, threads
        viewer = prov.viewer()
        ranked = self._ranked(result.hits, as_of, viewer)[:k]
        if TRANSCRIPT in f.kinds:
            heard = self._engine.search(query, Filters(kinds=(TRANSCRIPT,), memory=scope), k)
            others |= {f"t:{hit.ref}": hit for hit in heard.hits}
            weight = TRANSCRIPT_WEIGHT if curated else 1.0
            ranked = sorted(ranked + [(f"t:{h.ref}", h.score * weight) for h in heard.hits], key=lambda x: -x[1])[:k]
            result = SearchResult(result.hits, result.caveats or heard.caveats, result.signals or heard.signals)
        chosen = [ref for ref, _ in ranked]
        scores = dict(ranked)
        injected: list[str] = []
        if "recent" not in result.signals and "memory" in f.kinds:
            for ref in self._relevant_kept(query, scope):
                if ref not in scores and len(injected) < CORE_INJECTION:
                    injected.append(ref)
                    scores[ref] = 0.0
        shown = chosen + injected
        refs = [ref for ref in shown if ref not in others]
        # A full disk must not cost the answer: only the reactivation is lost.
        unrecorded = not read_only and bool(refs) and not self.reactivations.record(refs, prov)
        found = self._store.read(lambda r: memories.get_many(r, refs, viewer))
        why_chains = self._why_chains(refs, viewer) if verbosity == "full" else {}
        out = []
        for ref in shown:
            if ref in others:
                out.append(written(others[ref], verbosity == "concise") | {"score": round(scores[ref], 6)})
                continue
            memory = found.get(ref)
            if memory is None:
                continue
            item = {"kind": "memory"} | memory.as_dict(concise=verbosity == "concise")
            if verbosity == "full":
                item["kind"], item["memory_kind"] = "memory", memory.kind
            item["score"] = round(scores[ref], 6)
            if ref in injected:
                item["injected"] = "core" if memory.is_core else "pinned"
            if verbosity == "full":
                item["why"] = why_chains.get(ref, [])
            out.append(item)
        caveats = list(result.caveats)
        if line := withheld_line(self.egress, prov.vendor, {"quotes": held}):
            caveats.append(line)
        if unrecorded:
            caveats.append("the disk is full: these memories were not marked as recalled")
        elif not read_only and self.reactivations.failing:
            caveats.append(f"recalls are not being recorded for now ({self.reactivations.failing}); they will be")
        if as_of is not None:
            caveats.append(
                "as_of: what held true at that time as known now (a correction recorded later counts from its "
                "valid_from), then what was believed then and corrected since (superseded_by)"
            )
        return {"memories": out, "caveats": caveats, "signals": list(result.signals)} | (
            {"withheld": {"quotes": held}} if held else {}
        )

    def _egress(self, result: SearchResult, prov: Provenance) -> tuple[SearchResult, int]:
        """The hits without the quotes (the user's verbatim words: personal memory) the egress policy keeps
        from prov's model, and how many those were: before ranking, so the rest fill the places."""
        quotes = [int(hit.ref) for hit in result.hits if hit.kind == "quote"]
        if self.egress == "all" or not quotes:
            return result, 0
        keys, named = placeholders("q", quotes)
        said = self._store.read(lambda r: r.tuples(f"SELECT id, vendor FROM thread_notes WHERE id IN ({keys})", named))
        held = {str(i) for i, vendor in said if not allows(self.egress, str(vendor), prov.vendor)}
        hits = [hit for hit in result.hits if hit.kind != "quote" or hit.ref not in held]
        return replace(result, hits=hits), len(held)

    def _relevant_kept(self, query: str, scope: MemoryScope) -> list[str]:
        """Pinned and core memories in scope that share words with the query, best first."""
        terms = analyse(query).terms

        def read(r: Reader) -> list[str]:
            kept = memories.kept_documents(r, replace(scope, include_superseded=False))
            matched = documents.lexical_within(r, terms, list(kept), CORE_INJECTION * 4)
            return [kept[doc_id] for doc_id, _ in matched]

        return self._store.read(read)

    def _ranked(self, hits: list[Hit], as_of: int | None, viewer: Viewer) -> list[tuple[str, float]]:
        """Refs and scores, best first, every superseded memory below the newest of its corrections among
        the hits (which takes the place of the best of them): a correction ranks above what it corrects
        whatever their scores (SUPERSEDED_FACTOR alone could not promise that)."""
        corrected = {hit.ref for hit in hits if hit.status == "superseded"}
        known = self._store.read(lambda r: corrections.chains(r, corrected, viewer)) if corrected else {}
        adjusted = {hit.ref: self._adjusted(hit, known.get(hit.ref), as_of) for hit in hits}
        return corrections.corrections_first(adjusted, known)

    def _adjusted(self, hit: Hit, memory: Memory | None, as_of: int | None) -> float:
        """A superseded hit keeps SUPERSEDED_FACTOR of its score; as of a time, only if it no longer held then
        (it was believed at that time, and corrected later)."""
        superseded = hit.status == "superseded" and (
            as_of is None or memory is None or not corrections.held_at(memory, as_of)
        )
        return hit.score * (SUPERSEDED_FACTOR if superseded else 1.0)

    def _why_chains(self, refs: list[str], viewer: Viewer) -> dict[str, list[dict[str, Any]]]:
        """For each memory, what it was caused by, and what that was caused by, up to WHY_DEPTH hops
        (two queries for all of them)."""

        def read(r: Reader) -> dict[str, list[dict[str, Any]]]:
            links = memories.causes(r, refs, WHY_DEPTH, viewer)
            found = memories.get_many(r, sorted({cause for _, cause, _ in links}), viewer)
            chains: dict[str, list[dict[str, Any]]] = {ref: [] for ref in refs}
            for root, cause, depth in links:
                memory = found.get(cause)
                if memory is not None and cause != root:
                    chains[root].append({"depth": depth, "id": cause, "summary": memory.as_dict(True)["summary"]})
            return chains

        return self._store.read(read)

    def search(self, query: str, prov: Provenance, filters: RecallFilters | None = None, k: int = 20) -> dict[str, Any]:
        """Filtered search without reactivation; an empty query lists by latest activity."""
        if not 1 <= k <= MAX_LIMIT:
            raise InvalidInput(f"k must be between 1 and {MAX_LIMIT}")
        f = filters or RecallFilters()
        scope = self._scope(prov, f)
        if not query.strip():
            listed = self._store.read(lambda r: memories.listing(r, scope, f.statuses, k, "active"))
            return {
                "memories": [m.as_dict() for m in listed],
                "mode": "enumerate",
                "caveats": [] if listed else ["nothing matched these filters"],
            }
        result = self._engine.search(query, Filters(kinds=("memory",), statuses=f.statuses, memory=scope), k)
        found = self._store.read(lambda r: memories.get_many(r, [h.ref for h in result.hits], scope.viewer))
        items = [found[h.ref].as_dict() | {"score": h.score} for h in result.hits if h.ref in found]
        return {"memories": items, "mode": "search", "caveats": result.caveats}

    def traverse(
        self,
        memory_id: str,
        prov: Provenance,
        depth: int = 2,
        edge_types: tuple[str, ...] = (),
        direction: str = "both",
    ) -> dict[str, Any]:
        """The memories reachable from one within `depth` hops through memories the caller may see, and
        every edge among them (a memory the caller may not see is neither shown nor walked through)."""
        check_id(memory_id)
        if not 1 <= depth <= MAX_DEPTH:
            raise InvalidInput(f"depth is 1-{MAX_DEPTH}")
        unknown = [t for t in edge_types if t not in EDGE_TYPES]
        if unknown:
            raise InvalidInput(f"unknown edge type {unknown[0]!r}; edge types are {', '.join(EDGE_TYPES)}")
        if direction not in ("out", "in", "both"):
            raise InvalidInput("direction is out, in or both")

        viewer = prov.viewer()

        def read(r: Any) -> dict[str, Any]:
            if memories.get(r, memory_id, viewer) is None:
                raise NotFound(f"no memory {memory_id}")
            depth_of = {memory_id: 0}
            frontier = [memory_id]
            truncated = False
            found = memories.get_many(r, [memory_id], viewer)
            for hop in range(1, depth + 1):
                reached: list[str] = []
                for edge in memories.edges_touching(r, frontier, edge_types):
                    for here, there, way in ((edge.source, edge.target, "out"), (edge.target, edge.source, "in")):
                        if here in frontier and there not in depth_of and direction in (way, "both"):
                            reached.append(there)
                seen = memories.get_many(r, sorted(set(reached)), viewer)
                nxt: list[str] = []
                for there in dict.fromkeys(reached):
                    if there not in seen or there in depth_of:
                        continue
                    if len(depth_of) >= MAX_TRAVERSE_NODES:
                        truncated = True
                        continue
                    depth_of[there] = hop
                    found[there] = seen[there]
                    nxt.append(there)
                frontier = nxt
                if not frontier:
                    break
            edges = [
                e.as_dict()
                for e in memories.edges_touching(r, list(found), edge_types)
                if e.source in found and e.target in found
            ]
            nodes = [found[mid].as_dict(concise=True) | {"depth": d} for mid, d in depth_of.items() if mid in found]
            caveats = [f"stopped at {MAX_TRAVERSE_NODES} memories; traverse from a farther one to see more"] * truncated
            return {"nodes": nodes, "edges": edges, "caveats": caveats}

        return self._store.read(read)

    def explain(self, memory_id: str, prov: Provenance) -> dict[str, Any]:
        """The score breakdown, the status it implies, and why it would or would not be forgotten now,
        counting only the edges whose other end the caller may see."""
        check_id(memory_id)
        now = now_ms()
        viewer = prov.viewer()

        def read(r: Any) -> dict[str, Any]:
            memory = memories.get(r, memory_id, viewer)
            if memory is None:
                raise NotFound(f"no memory {memory_id}")
            touching = memories.edges_touching(r, [memory_id])
            ends = memories.get_many(r, sorted({e.source for e in touching} | {e.target for e in touching}), viewer)
            edges = [e for e in touching if e.source in ends and e.target in ends]
            return self._explanation(memory, edges, now)

        return self._store.read(read)

    def _explanation(self, memory: Memory, edges: list[Edge], now: int) -> dict[str, Any]:
        b = scoring.breakdown(self.scoring, memory.last_reactivated_at, len(edges), memory.reactivation_count, now)
        kept = scoring.protection(
            self.scoring, b, pinned=memory.pinned, core=memory.is_core, visibility=memory.visibility
        )
        by_type: dict[str, int] = {}
        for e in edges:
            by_type[e.type] = by_type.get(e.type, 0) + 1
        return {
            "id": memory.id,
            "summary": memory.as_dict(True)["summary"],
            "score": b.as_dict(),
            "status": {"stored": memory.status, "by_score_now": scoring.lifecycle_status(self.scoring, b.score)},
            "formula": "decay_score = relevance × connectivity × reactivation",
            "edges_by_type": by_type,
            "superseded_by": memory.superseded_by,
            "would_be_forgotten_now": kept.prunable,
            "kept_because": list(kept.reasons),
            "config": self.scoring.__dict__,
        }

    def stats(self, prov: Provenance) -> dict[str, Any]:
        """Counts of what the caller may see (their memories and those shared with them)."""
        viewer = prov.viewer()

        def read(r: Any) -> dict[str, Any]:
            last = jobs.last_run(r, "memory.maintenance")
            return memory_upkeep.counts(r, viewer) | {"last_maintenance": last and {"at": last.get("finished_at")}}

        return self._store.read(read)

    def core_list(self, prov: Provenance, category: str | None = None) -> dict[str, Any]:
        scope = MemoryScope(viewer=prov.viewer(), project=prov.project)
        found = self._store.read(lambda r: memories.core(r, scope, [category] if category else []))
        prefs = self._store.read(lambda r: memory_upkeep.preferences(r, prov.user, prov.project or ""))
        waiting = self._store.read(
            lambda r: memories.core_candidates(
                r, scope, prov.user, prefs["approval"], self.scoring.core_promotion_score
            )
        )
        return {
            "core": [
                {
                    "key": m.core_key,
                    "priority": m.core_priority,
                    "id": m.id,
                    "content": m.content,
                    "category": m.category,
                }
                for m in found
            ],
            "preferences": prefs,
            "awaiting_approval": [m.as_dict(concise=True) | {"category": m.category} for m in waiting],
        }


def written(hit: Hit, concise: bool) -> dict[str, Any]:
    """A note, quote or thread summary that recall found, with the ids the thread tools take (`thread`,
    `project`); a note's or quote's `id` is its row in thread_notes."""
    text = gist(hit.body) if concise else hit.body
    if hit.kind == TRANSCRIPT:  # dialog_read(message=id) reads around it
        said = {"session": hit.thread, "role": hit.source, "project": hit.project, "text": text}
        return {"kind": TRANSCRIPT, "id": int(hit.ref)} | said | {"at": hit.occurred_at}
    project, _, thread = (hit.ref if hit.kind == "thread" else hit.thread or "").partition("/")
    if hit.kind == "thread":
        return {"kind": "thread", "id": thread, "project": project, "status": hit.status, "summary": text}
    out: dict[str, Any] = {"kind": hit.kind, "id": int(hit.ref)}
    if hit.kind == "note":
        out["note_kind"] = hit.source  # move, failed, insight, open_q or decision
    return out | {"project": project or None, "thread": thread or None, "text": text, "created_at": hit.created_at}
