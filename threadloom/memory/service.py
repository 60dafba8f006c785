"""Writing the memory graph: store, amend, link, pin, core, promote, delete, restore.

Every write validates everything first and then runs as one transaction, so a call either
happens whole or not at all. Similarity work (the model, the search) happens before the
transaction, never while holding the writer.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, replace
from typing import Any

from threadloom.clock import now_ms
from threadloom.errors import InvalidInput, NotFound, StoreBusy, StoreFull
from threadloom.identity import Provenance
from threadloom.memory import scoring
from threadloom.memory.model import (
    ACYCLIC_TYPES,
    MAX_CORE_CHARS,
    VISIBILITIES,
    Conflict,
    Edge,
    Link,
    Memory,
    NewMemory,
    Stored,
    check_core_key,
    check_id,
    content_digest,
    memory_document,
    new_memory_id,
)
from threadloom.memory.similarity import SimilarityFinder
from threadloom.scrub import SCRUB, Scrubber
from threadloom.search.engine import SearchEngine
from threadloom.search.model import Filters, MemoryScope, Viewer
from threadloom.sessions import record_event
from threadloom.store import document_vectors, documents, memories, roles
from threadloom.store.base import Reader, Store, Writer


@dataclass(frozen=True)
class PreparedStore:
    """A store's transaction, its checks and similarity work done (MemoryService.prepare)."""

    write: Callable[[Writer], Stored]
    embedded: bool  # the memory's vector was made before the transaction
    now: int


@dataclass(frozen=True)
class LinkingConfig:
    max_auto_links: int = 3  # per stored memory, so the graph does not become a hairball; 0 turns it off
    conflict_scan: int = 8  # similar memories checked for conflict hints


class MemoryService:
    scrubber: Scrubber = SCRUB  # open_runtime sets THREADLOOM_SCRUB_SECRETS's

    def __init__(
        self,
        store: Store,
        engine: SearchEngine,
        scoring_config: scoring.ScoringConfig | None = None,
        linking: LinkingConfig | None = None,
    ) -> None:
        self._store = store
        self._engine = engine
        self.scoring = scoring_config or scoring.ScoringConfig()
        self.linking = linking or LinkingConfig()
        self._similar = SimilarityFinder(store, engine)

    # store

    def store(
        self,
        new: NewMemory,
        prov: Provenance,
        core_key: str | None = None,
        core_priority: int = 50,
        not_linked_to: tuple[str, ...] = (),
    ) -> Stored:
        """Store a memory (its text scrubbed) with its explicit edges; an exact duplicate or a replayed idempotency
        key returns the one there. `not_linked_to`: never auto-linked (an amend's predecessor gets supersedes)."""
        prepared = self.prepare(new, prov, core_key, core_priority, not_linked_to)
        if isinstance(prepared, Stored):
            return prepared
        stored = self._store.write(prepared.write)
        self.embed_after(prepared, stored)
        return stored

    def prepare(
        self,
        new: NewMemory,
        prov: Provenance,
        core_key: str | None = None,
        core_priority: int = 50,
        not_linked_to: tuple[str, ...] = (),
    ) -> Stored | PreparedStore:
        """A store's work before its transaction (checks, the model, similar memories): the memory already there,
        or the transaction to run, alone (`store`) or inside another write (an amend: memory/amend.py)."""
        new, viewer = self.scrubber.fields(new, "content", "summary", "category", "entities"), prov.viewer()
        if core_key is not None:
            check_core_key(core_key)
            if len(new.content) > MAX_CORE_CHARS:
                raise InvalidInput(
                    f"a core memory is at most {MAX_CORE_CHARS:,} characters: it is shown in every brief"
                )
        targets = tuple(link.target for link in new.related)
        self._require(targets, viewer)
        digest = content_digest(new.content)
        earlier = self._store.read(lambda r: self._earlier(r, new, prov, digest))
        if earlier is not None:
            return earlier
        vector = self._similar.embed(new.content)
        scope = MemoryScope(viewer=viewer, project=prov.project, include_superseded=False)
        candidates = self._similar.similar(
            new.content, vector, Filters(kinds=("memory",), memory=scope), self.linking.conflict_scan
        )
        conflicts = tuple(
            Conflict(c.ref, c.content, reason, c.similarity)
            for c in candidates
            for reason in [self._similar.conflict(new.content, c)]
            if reason is not None
        )
        conflicting = {c.id for c in conflicts}
        link_to = [
            c
            for c in candidates
            if c.similarity >= self._similar.link_floor(c.measure)
            and c.ref not in conflicting
            and c.ref not in not_linked_to
        ][: self.linking.max_auto_links]
        memory_id = new_memory_id()
        now = now_ms()

        def tx(w: Writer) -> Stored:
            again = self._earlier(w, new, prov, digest)  # a racing writer may have stored it meanwhile
            if again is not None:
                return again
            roles.require_write_of(w, viewer.user, self._require_in(w, targets, viewer), "link")
            if core_key is not None and memories.by_core_key(w, viewer.user, prov.project, core_key) is not None:
                raise InvalidInput(f"you already have core key {core_key!r} in this project; amend that memory instead")
            values = self._row(memory_id, new, prov, digest, now, core_key, core_priority)
            roles.require_shared_write(w, viewer.user, new.visibility, prov.project, values["org"], "store")
            memories.insert(w, values)
            memory = memories.get(w, memory_id)
            assert memory is not None
            doc_id = documents.upsert(w, memory_document(memory), now)
            if vector is not None and self._engine.embedder is not None and not document_vectors.follows(w, doc_id):
                document_vectors.put_vector(
                    w,
                    doc_id,
                    self._engine.embedder.fingerprint,
                    documents.content_hash(memory_document(memory)),
                    vector.astype("float32").tobytes(),
                )
            edges = []
            for link in new.related:
                edge = Edge(memory_id, link.target, link.type, 1.0, "explicit", now)
                memories.insert_edge(w, edge, prov.session_id)
                edges.append(edge)
            autos = []
            for c in link_to:
                taken = c.ref in targets or memories.connected(w, memory_id, c.ref)
                if taken or not roles.may_change(w, viewer.user, memories.get(w, c.ref)):  # a reader's: own only
                    continue
                edge = Edge(memory_id, c.ref, "related_to", round(c.similarity, 4), "auto_link", now)
                memories.insert_edge(w, edge, prov.session_id)
                autos.append(edge)
            memory = self._rescore(w, memory_id, now)
            record_event(w, prov, "memory.stored", {"id": memory_id, "edges": len(edges), "auto_links": len(autos)})
            return Stored(memory, True, edges=tuple(edges), auto_links=tuple(autos), possible_conflicts=conflicts)

        return PreparedStore(tx, vector is not None, now)

    def embed_after(self, prepared: PreparedStore, stored: Stored) -> None:
        """After the commit: a memory that follows another in its session is embedded after it."""
        if stored.created and prepared.embedded:
            with suppress(StoreBusy, StoreFull):  # stored all the same: the background job embeds it then
                self._engine.embed_pending(changed_since=prepared.now)

    def _earlier(self, r: Reader, new: NewMemory, prov: Provenance, digest: str) -> Stored | None:
        """What this user already stored under the same idempotency key or with the same content (another
        user's memories never count: they must neither block a write nor reveal that they exist)."""
        if new.idempotency_key is not None:
            seen = memories.by_idempotency_key(r, prov.user, new.idempotency_key)
            if seen is not None:
                return Stored(seen, False, replayed=True)
        same = memories.by_content(r, prov.user, prov.project, digest)
        if same is not None:
            return Stored(same, False, duplicate_of=same.id)
        return None

    def _row(
        self,
        memory_id: str,
        new: NewMemory,
        prov: Provenance,
        digest: str,
        now: int,
        core_key: str | None,
        core_priority: int,
    ) -> dict[str, Any]:
        entities = list(dict.fromkeys(e.strip() for e in new.entities))  # as given: the first may be its source
        return {
            "id": memory_id,
            "content": new.content,
            "summary": new.summary,
            "category": new.category,
            "kind": new.kind,
            "entities": json.dumps(entities),
            "project": prov.project,
            "visibility": new.visibility,
            "owner": prov.user,
            "org": prov.viewer().org,
            "status": "active",
            "pinned": int(new.pinned or core_key is not None),
            "core_key": core_key,
            "core_priority": core_priority if core_key is not None else None,
            "session_id": prov.session_id,
            "vendor": prov.vendor,
            "origin": prov.origin,
            "content_hash": digest,
            "idempotency_key": new.idempotency_key,
            "created_at": now,
            "valid_from": new.valid_from if new.valid_from is not None else now,
            "decay_score": 0.0,
        }

    def amend(
        self,
        memory_id: str,
        prov: Provenance,
        content: str | None = None,
        by: str | None = None,
        reason: str | None = None,
    ) -> dict[str, Any]:
        """Correct a memory: a new one (from `content`, or the existing `by`) supersedes it, in one transaction
        (memory/amend.py). The old one stays for audit, its validity closing where the new one's begins."""
        from threadloom.memory.amend import amend

        return amend(self, self._store, memory_id, prov, content, by, reason)

    def link(self, source: str, target: str, edge_type: str, prov: Provenance, reason: str | None = None) -> Edge:
        """An explicit typed edge between two stored memories: source --type--> target."""
        requested, reason = Link(target, edge_type), self.scrubber.optional(reason)
        check_id(source)
        if source == target:
            raise InvalidInput("an edge needs two different memories")
        self.owned(source, prov, "link from")
        viewer = prov.viewer()
        self._require((target,), viewer)
        now = now_ms()

        def tx(w: Writer) -> Edge:
            roles.require_write_of(w, viewer.user, self._require_in(w, (source, target), viewer), "link")
            edge = Edge(source, target, requested.type, 1.0, "explicit", now, reason)
            if memories.has_edge(w, edge.source, edge.target, edge.type):
                raise InvalidInput(f"{source} --{edge_type}--> {target} already exists")
            if edge_type in ACYCLIC_TYPES and memories.reaches(w, target, source, (edge_type,)):
                raise InvalidInput(
                    f"{target} already leads back to {source} through {edge_type} edges: this one would make a cycle"
                )
            memories.insert_edge(w, edge, prov.session_id)
            for mid in (source, target):
                self._rescore(w, mid, now)
            record_event(w, prov, "memory.linked", {"source": source, "target": target, "type": edge_type})
            return edge

        return self._store.write(tx)

    def pin(self, memory_id: str, pinned: bool, prov: Provenance) -> Memory:
        memory = self.owned(check_id(memory_id), prov, "pin")
        if not pinned and memory.is_core:
            raise InvalidInput(f"{memory_id} is a core memory ({memory.core_key}); remove it from core to unpin it")
        return self.update_flags(memory_id, prov, "memory.pinned" if pinned else "memory.unpinned", pinned=int(pinned))

    def promote(self, memory_id: str, visibility: str, prov: Provenance) -> Memory:
        """Widen who sees a memory (private -> project -> org); only its owner may."""
        memory = self.owned(check_id(memory_id), prov, "promote")
        if visibility not in VISIBILITIES:
            raise InvalidInput(f"visibility must be one of {', '.join(VISIBILITIES)}")
        if VISIBILITIES.index(visibility) <= VISIBILITIES.index(memory.visibility):
            raise InvalidInput(f"{memory_id} is already {memory.visibility}; promotion only widens visibility")
        return self.update_flags(memory_id, prov, "memory.promoted", visibility=visibility)

    def update_flags(self, memory_id: str, prov: Provenance, event: str, **changes: Any) -> Memory:
        now = now_ms()
        viewer = prov.viewer()

        def tx(w: Writer) -> Memory:
            self._require_in(w, (memory_id,), viewer)
            memories.update(w, memory_id, **changes)
            memory = self._rescore(w, memory_id, now)
            roles.require_write_of(w, viewer.user, (memory,), event)  # as it is now: promotions widen
            record_event(w, prov, event, {"id": memory_id} | {k: v for k, v in changes.items() if k != "content"})
            return memory

        return self._store.write(tx)

    def delete(self, memory_id: str, prov: Provenance) -> dict[str, Any]:
        """Delete a memory and its edges for good (no archive); only its owner may."""
        memory = self.owned(check_id(memory_id), prov, "delete")

        def tx(w: Writer) -> dict[str, Any]:
            roles.require_write_of(w, prov.user, (memory,), "delete")
            edges = memories.edges_touching(w, [memory_id])
            neighbours = {e.source for e in edges} | {e.target for e in edges}
            w.execute(
                "UPDATE memories SET superseded_by = NULL, valid_to = NULL WHERE superseded_by = :id", {"id": memory_id}
            )
            documents.remove(w, "memory", memory_id)
            if not memories.delete(w, memory_id):
                raise NotFound(f"no memory {memory_id}")
            now = now_ms()
            for mid in neighbours - {memory_id}:
                m = self._rescore(w, mid, now)
                documents.upsert(w, memory_document(m), now)
            record_event(w, prov, "memory.deleted", {"id": memory_id, "edges": len(edges)})
            return {"deleted": memory_id, "edges_deleted": len(edges)}

        return self._store.write(tx)

    def _rescore(self, w: Writer, memory_id: str, now: int) -> Memory:
        return rescore(w, self.scoring, memory_id, now)

    def _require(self, ids: tuple[str, ...], viewer: Viewer) -> None:
        self._store.read(lambda r: self._require_in(r, ids, viewer))

    def _require_in(self, r: Reader, ids: tuple[str, ...], viewer: Viewer) -> list[Memory]:
        found = memories.get_many(r, list(ids), viewer)
        if missing := [mid for mid in ids if mid not in found]:
            raise NotFound(f"no memory {missing[0]}; nothing was written")
        return [found[mid] for mid in ids]

    def get(self, memory_id: str, prov: Provenance) -> Memory:
        """A memory the caller may see; any other id is "no memory", whether or not it exists."""
        viewer = prov.viewer()
        memory = self._store.read(lambda r: memories.get(r, memory_id, viewer))
        if memory is None:
            raise NotFound(f"no memory {memory_id}")
        return memory

    def owned(self, memory_id: str, prov: Provenance, action: str) -> Memory:
        """A memory the caller owns. Only its owner may change a memory: others who see a shared one
        correct it with a memory of their own, linked to it (`contradicts`)."""
        memory = self.get(check_id(memory_id), prov)
        if memory.owner != prov.user:
            raise InvalidInput(
                f"only the owner of {memory_id} may {action} it; store your own memory and link it "
                "(related: contradicts or refines) instead"
            )
        return memory


def rescore(w: Writer, config: scoring.ScoringConfig, memory_id: str, now: int) -> Memory:
    """Recompute one memory's score and status from its current edges and recalls."""
    if (memory := memories.get(w, memory_id)) is None:
        raise NotFound(f"no memory {memory_id}")
    degree = memories.degree(w, memory_id)
    b = scoring.breakdown(config, memory.last_reactivated_at, degree, memory.reactivation_count, now)
    status = scoring.lifecycle_status(config, b.score)
    memories.update(w, memory_id, decay_score=b.score, status=status, scored_at=now)
    return replace(memory, decay_score=b.score, status=status)
